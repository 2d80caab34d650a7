"""Harness overhead per turn at large state (seed 003's budget: < 10 ms per prompt).

Runs the real session loop (run_agent_session) on a job whose state is large:
2,000 messages in the conversation at its start, 100 completed tasks in working
memory and 20 todos in the active list. The model answers with one call to a
no-op tool; each call takes --model-seconds on the run's clock (3 s: what the
harness does every few seconds, such as refreshing the state files, happens
every turn, as in a real run) and --model-wall-ms of real time (20 ms, during
which what the harness does in the background is done, as during a real call).
What is left of each turn is the harness: applying operator commands,
assembling the five layers, the events, pressure evaluation and the journal
commits of a turn (the reply; the tool call with its result and the
bookkeeping, one step since the call is the turn's last), each an append of one
record with its events, which are then relayed to events.jsonl, and the journal
rewrites. The runner's story (its runner.log) is written as a runner writes it:
on the views' thread, while the model is asked. Model, tool and fsync time are measured separately and subtracted
(the tool's own function only: parsing its arguments and the policies' gate
are the harness's); fsync time is reported as its own figure (os.fsync is
timed for that). The loop thread's CPU time is reported too: what the machine
gave other processes meanwhile is not in it.

Three sessions per configuration, their turns pooled, each as a runner process's
first. The conversation starts at 2,000 messages; the context policy compacts it
in place at the first turn (what masking cannot free is past COMPACT_AT), so the
measured turns run at the ~100-250 messages a long session keeps. The machine's
own spread is sampled inside every model call, in the turn's conditions (a
fixed workload of about a turn's length, woken from a sleep): on a loaded
machine p99 moves with it, so the turns' p99/p50 is printed over the machine's,
with the p99 of the WINDOW turns in a row the machine was quietest in.

A turn woken from its model call runs on cold caches: on a shared machine, what ran meanwhile (another
tenant's work on the same core, this run's state-file thread) has evicted the interpreter's working set, and
the turn pays for loading it again. The same turns back to back (no real time in the model call) are
measured once too and printed as "warm": the harness's own work with the machine's cold-cache penalty left
out. It is context, not the goal: a real model call lasts seconds, so a real turn starts cold.

It runs twice: with the default guardrails (the plan checker and the stuck
detector), then with a heavy [guardrails] table: 5 policies, 5 feedback
providers (one of them fires every 3 calls), a composite completion checker, a
deadline and a token budget. Every tool call then passes 5 policies, every turn
runs 5 triggers and renders a status.

    python benchmarks/overhead.py [--turns 400] [--messages 2000] [--repeats 3]

The floor: the default sessions once more with what a turn records knocked out (the journal's writes, the
event log's, the state files, the guardrails' status and the feedback after each call; see records_knocked_out).
That is no harness anyone could run (a kill -9 would lose the run); it is what this machine gives a turn that keeps
the loop, the prompt, the events' models and the tool's gate but records nothing: a goal below it cannot be met by
recording less.

The table before the last line gives each figure with its goal and their ratio (ok or MISS); the last
line is a JSON summary.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from console.engine import events as ev
from console.engine import session as session_module
from console.engine.clock import SystemClock
from console.engine.guardrails import GuardrailsConfig, build_guardrails
from console.engine.job import JobPaths
from console.engine.journal import Checkpoint, Conversation, Journal
from console.engine.loop import SessionDeps, run_agent_session
from console.engine.messages import Message, ModelRequest, ToolCall
from console.engine.model import Stop, StreamEvent, TextDelta, ToolCallEvent, Usage
from console.engine.operator import OperatorState
from console.engine.run_settings import RunSettings
from console.engine.runtime import Runtime
from console.engine.tools import default_registry
from console.engine.tools.registry import Tool, ToolArgs
from console.engine.turn_steps import TurnSteps
from console.headless import HeadlessLog

PLAN = "# Execution Plan\n\n## Overview\nBenchmark.\n\n" + "".join(
    f"## Phase {p}: Part {p}{' ← CURRENT' if p == 2 else ''}\n" + "".join(f"- [ ] step {p}.{s}\n" for s in range(10))
    + "\n" for p in range(1, 5))


class InstantModel:
    """Answers every turn with a short text and one no-op call; records its own time."""

    name, model = "bench", "instant"
    # In-process and instant, like the scripted model: read inline. A network provider's stream is read on a
    # worker thread instead (so a stop can abandon it); that handoff is measured apart (handoff_us).
    runs_inline = True

    def __init__(self, clock: ModelClock, seconds: float, wall_ms: float) -> None:
        self.n = 0
        self.spent = 0.0
        self.spent_cpu = 0.0
        self.clock = clock
        self.seconds = seconds
        self.wall = wall_ms / 1000
        self.reference: list[float] = []  # the machine's reference workload, once per call (ms)
        self.background: Callable[[], None] | None = None

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        t, c = time.perf_counter(), time.thread_time()
        self.n += 1
        self.clock.offset += self.seconds
        # A real call takes seconds, during which what the harness does in the background (writing the state
        # files) is done; this much real time stands for it (and is subtracted with the model's time). Half way
        # through it the machine's own spread is sampled: a fixed workload woken from a sleep as the turn is,
        # at the same moment of the run.
        if self.wall > 0:
            time.sleep(self.wall / 2)
            self.reference.append(reference_once())
            time.sleep(self.wall / 2)
        elif self.background is not None:
            # Turns back to back (warm_turns): what the state-file thread writes and the story the views' thread
            # tells during a real call are waited for here, in the model's time, not left to take the GIL in the
            # next turn.
            self.background()
        events: list[StreamEvent] = [
            TextDelta("Working on "), TextDelta("the current task."),
            # A different argument each turn: an agent at work, not one repeating itself (which the stuck
            # detector would rightly report every few turns).
            ToolCallEvent(ToolCall(id=f"b{self.n}", name="noop", arguments=json.dumps({"n": self.n}))),
            Usage(input_tokens=120_000, output_tokens=30, cached_input_tokens=110_000),
            Stop("tool_use"),
        ]
        self.spent += time.perf_counter() - t
        self.spent_cpu += time.thread_time() - c
        yield from events


class NoopArgs(ToolArgs):
    n: int = 0


GUARDRAILS = {"default": "the plan checker and the stuck detector",
              "heavy": "5 policies, 5 feedback providers, a composite checker, a deadline, a token budget",
              "floor": "the default, with the records knocked out (the machine's floor, not a harness)"}
# Issue 20: the harness's own time per turn, fsyncs apart.
GOAL_P99_MS = 1.0
WINDOW = 200  # turns in a row: the quietest such stretch of the machine is reported too
BUDGET_MS = 10.0  # seed 003: < 10 ms per prompt, whatever the guardrails

HEAVY = GuardrailsConfig.model_validate({
    "deadline": "30d", "budget_tokens": 10**12, "max_completion_blocks": 5, "stuck_escalate_after": 0,
    "policies": [
        {"type": "read_before_write"},
        {"type": "read_before_write", "name": "read_before_append", "write_tools": ["append_file"]},
        {"type": "sequential", "dependencies": {"publish": ["test", "build"], "build": ["lint"]}},
        {"type": "sequential", "name": "noop_after_list", "dependencies": {"deploy": ["noop"]}},
        {"type": "sequential", "name": "review_first", "dependencies": {"release": ["review"]}},
    ],
    "feedback": [
        {"type": "static", "name": "Every3", "feedback": "Keep going.", "every_n_calls": 3},
        {"type": "static", "name": "Hourly", "feedback": "An hour passed.", "every_n_seconds": 3600},
        {"type": "static", "name": "Changelog", "feedback": "Follow its format.", "on_file_created": "CHANGELOG.md"},
        {"type": "deadline", "every_n_seconds": 600, "warning_threshold_seconds": 120},
        {"type": "stuck"},
    ],
    "completion": {"type": "composite", "all_must_pass": True,
                   "checkers": [{"type": "plan"}, {"type": "files", "paths": ["report.md", "main_plan.md"]}]},
})


def build_state(root: Path, messages: int, guardrails: GuardrailsConfig | None = None,
                clock: SystemClock | None = None) -> tuple[Runtime, Conversation]:
    paths = JobPaths(root)
    root.mkdir(parents=True, exist_ok=True)
    paths.instructions.write_text("# Benchmark job\n")
    paths.main_plan.write_text(PLAN)
    paths.state.mkdir(parents=True, exist_ok=True)
    clock = clock or SystemClock()
    rt = Runtime(paths, clock, ev.EventStream(paths.events, clock), journal=Journal(paths),
                 # No todo is completed in the measured turns: the stuck detector's idle nudges must not pause
                 # the run to ask an operator nobody plays here (what is measured is the harness per turn).
                 guardrails=build_guardrails(guardrails or GuardrailsConfig(stuck_escalate_after=0)))
    rt.todos.install([f"Task {i}: process part {i} of the input" for i in range(20)], kind="phase",
                     phase_name="Part 2", phase_number=2, total_phases=4, done=[i < 7 for i in range(20)])
    now = datetime.now(UTC)
    for i in range(100):
        rt.memory.record(f"Completed step {i} of the extraction. It took a while.", now)
    conv = Conversation([Message.user("PREVIOUS SUMMARY\n" + "- an accomplishment\n" * 30, kind="summary")])
    turns = (messages - 1) // 2
    for i in range(turns):
        call = ToolCall(id=f"c{i}", name="read_file", arguments=json.dumps({"path": f"docs/part{i % 40}.md"}))
        conv.append(Message.assistant("Reading the next part.", [call]))
        # A long session: old observations are masked placeholders, the recent ones are whole.
        body = ("lorem ipsum dolor sit amet " * 60) if i >= turns - 40 else f"[masked: the result of read_file(path=\"docs/part{i % 40}.md\"), ~400 tokens, was removed to free context. Call read_file(path=\"docs/part{i % 40}.md\") again if you need it.]"  # noqa: E501
        conv.append(Message.tool(call, body, ok=True, masked=i < turns - 40))
    return rt, conv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=400)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3, help="sessions per configuration; their turns are pooled")
    ap.add_argument("--model-seconds", type=float, default=3.0,
                    help="how long each model call takes on the run's clock (that time is not waited for)")
    ap.add_argument("--model-wall-ms", type=float, default=20.0,
                    help="the real time each model call takes (subtracted, like the model's own time)")
    args = ap.parse_args()

    figures = {}
    for label, table in (("default", None), ("heavy", HEAVY)):
        figures[label] = pooled(args, table, label)
    base, heavy = figures["default"], figures["heavy"]
    with records_knocked_out():
        floor = pooled(args, None, "floor")
    warm = warm_turns(args)
    handoff = measure_handoff()
    print(f"a network provider's stream read on a worker thread (abandonable): +{handoff:.0f} us per turn "
          "(8 stream events)")
    print(f"machine: a fixed reference workload, sampled in every model call as a turn runs (woken from a "
          f"{args.model_wall_ms / 2:g} ms sleep), has p50 {base['machine_p50_ms']:.3f} ms, p99/p50 "
          f"{base['machine_spread']:.2f} (about 1.1-1.5 on a quiet machine; more: other processes took the CPU, "
          "which the harness's p99 shows too)")
    rows = [
        ("harness per turn p50, default guardrails", base["p50_ms"], None, "ms"),
        ("harness per turn p99, default guardrails", base["p99_ms"], GOAL_P99_MS, "ms"),
        (f"  p99 in the machine's quietest {WINDOW} turns", base["quiet_p99_ms"], GOAL_P99_MS, "ms"),
        ("  its p99/p50 over the machine's p99/p50", base["spread_ratio"], 1.0, "x"),
        ("  its CPU time p99 (no other process's time)", base["cpu_p99_ms"], GOAL_P99_MS, "ms"),
        ("  floor (recording nothing: the machine's) p50", floor["p50_ms"], None, "ms"),
        ("  floor p99", floor["p99_ms"], GOAL_P99_MS, "ms"),
        ("  warm (turns back to back, no cold caches) p50", warm["p50_ms"], None, "ms"),
        ("  warm p99", warm["p99_ms"], None, "ms"),
        ("harness per turn p50, heavy guardrails", heavy["p50_ms"], None, "ms"),
        ("harness per turn p99, heavy guardrails", heavy["p99_ms"], BUDGET_MS, "ms"),
        ("  its p99/p50 over the machine's p99/p50", heavy["spread_ratio"], 1.0, "x"),
        ("fsync per turn p50 (counted apart)", base["fsync_p50_ms"], None, "ms"),
        ("fsync per turn p99 (counted apart)", base["fsync_p99_ms"], None, "ms"),
        ("fsync per turn mean (counted apart)", base["fsync_mean_ms"], None, "ms"),
        ("machine: reference workload p99/p50", base["machine_spread"], None, "x"),
    ]
    print()
    print(f"{'figure':<48} {'measured':>10} {'goal':>8} {'ratio':>6}  ok/MISS")
    for name, value, goal, unit in rows:
        if goal is None:
            print(f"{name:<48} {value:>7.3f} {unit:<2} {'-':>8} {'-':>6}  -")
        else:
            ratio = value / goal
            print(f"{name:<48} {value:>7.3f} {unit:<2} {goal:>5g} {unit:<2} {ratio:>6.2f}  "
                  f"{'ok' if ratio <= 1 else 'MISS'}")
    print("(p99/p50 over the machine's: 1 or less means the harness's tail is the machine's spread, not a turn "
          "of its own that is slow; the goal of the heavy table's p99 is seed 003's budget)")
    print("(floor: the same cold turns with the journal's and the event log's writes, the state files, the status and "
          "the feedback knocked out; when it misses the goal too, what a turn records is not what keeps it from the "
          "goal: the rest of the turn, on this machine's cold caches, takes longer already)")
    print(f"(warm: the same turns back to back, {warm['turns']} of them; what a turn woken from its model call "
          f"pays over them is the machine's cold caches: p50 {base['p50_ms'] / warm['p50_ms']:.1f}x here)")
    print(json.dumps({"default": base, "floor": floor, "warm": warm, "heavy_guardrails": heavy,
                      "handoff_us": round(handoff, 1), "goal_p99_ms": GOAL_P99_MS, "budget_ms": BUDGET_MS,
                      "machine_jitter": base["machine_spread"]}))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


@dataclass
class Turns:
    """Per measured turn: the harness's wall and CPU milliseconds, the fsyncs', the machine's reference."""

    harness: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    fsync: list[float] = field(default_factory=list)
    machine: list[float] = field(default_factory=list)

    def __iadd__(self, other: Turns) -> Turns:
        for name in ("harness", "cpu", "fsync", "machine"):
            getattr(self, name).extend(getattr(other, name))
        return self


def spread(values: list[float]) -> float:
    return percentile(values, 0.99) / statistics.median(values)


def pooled(args: argparse.Namespace, table: GuardrailsConfig | None, label: str) -> dict[str, Any]:
    """The turns of ``--repeats`` sessions, pooled: one noisy second of the machine weighs less. The machine's
    own spread is sampled at every turn (InstantModel.stream), so the p99 can be read against it."""
    turns = Turns()
    windows: list[tuple[float, float]] = []  # (machine p99/p50, harness p99) of each WINDOW turns in a row
    extra: dict[str, float] = {}
    for _ in range(args.repeats):
        session, info = measure(args.turns, args.messages, table, args.model_seconds, args.model_wall_ms)
        turns += session
        for a in range(0, max(1, len(session.harness) - WINDOW // 2), WINDOW):
            windows.append((spread(session.machine[a:a + WINDOW]), percentile(session.harness[a:a + WINDOW], 0.99)))
        extra = info
    h, f, m = turns.harness, turns.fsync, turns.machine
    fsync_turns = sum(1 for x in f if x > 0)
    p50, p99 = statistics.median(h), percentile(h, 0.99)
    quiet = min(windows)
    out = {"p50_ms": round(p50, 3), "p90_ms": round(percentile(h, 0.9), 3), "p99_ms": round(p99, 3),
           "max_ms": round(max(h), 3), "cpu_p50_ms": round(statistics.median(turns.cpu), 3),
           "cpu_p99_ms": round(percentile(turns.cpu, 0.99), 3),
           "fsync_p50_ms": round(statistics.median(f), 3), "fsync_p99_ms": round(percentile(f, 0.99), 3),
           "fsync_mean_ms": round(statistics.fmean(f), 3), "fsync_turns": fsync_turns,
           "machine_p50_ms": round(statistics.median(m), 3), "machine_p99_ms": round(percentile(m, 0.99), 3),
           "machine_spread": round(spread(m), 2), "spread": round(p99 / p50, 2),
           "spread_ratio": round((p99 / p50) / spread(m), 2),
           "quiet_p99_ms": round(quiet[1], 3), "quiet_machine_spread": round(quiet[0], 2),
           "turns": len(h), **extra}
    print(f"[{label} guardrails: {GUARDRAILS[label]}]")
    print(f"turns: {len(h)} measured over {args.repeats} sessions; conversation at end: "
          f"{extra['messages']:.0f} messages; feedback blocks delivered per session: {extra['feedback']:.0f}; "
          f"journal rewrites per session: {extra['rewrites']:.0f}")
    print(f"harness per turn (model, tools and fsync time taken out): p50 {out['p50_ms']:.3f} ms, "
          f"p90 {out['p90_ms']:.3f} ms, p99 {out['p99_ms']:.3f} ms, max {out['max_ms']:.3f} ms")
    print(f"  its CPU time (the loop's thread; not the time the machine gave other processes): "
          f"p50 {out['cpu_p50_ms']:.3f} ms, p99 {out['cpu_p99_ms']:.3f} ms")
    print(f"  the machine's reference at each turn: p50 {out['machine_p50_ms']:.3f} ms, p99/p50 "
          f"{out['machine_spread']:.2f}; in the quietest {WINDOW} turns in a row (machine p99/p50 "
          f"{out['quiet_machine_spread']:.2f}) the harness's p99 was {out['quiet_p99_ms']:.3f} ms")
    print(f"fsync per turn, apart: {fsync_turns} of {len(f)} turns had one; p99 {out['fsync_p99_ms']:.3f} ms, "
          f"mean {out['fsync_mean_ms']:.3f} ms")
    return out


@contextlib.contextmanager
def records_knocked_out() -> Iterator[None]:
    """What a turn records, knocked out for the floor: the journal's appends (their size still counted, so it is
    rewritten as often), the event log's appends, the state files (never due), the guardrails' status and the
    feedback after each call. Everything else of the turn runs as it does: the loop, the operator's commands,
    the prompt, the events' models (built and serialised), pressure, the tool's gate and its result."""
    from console.engine import runtime as runtime_module
    from console.engine.enforcement import status as status_module
    from console.engine.events import stream as stream_module

    def append(self: Journal, text: str | bytes, what: str, durable: bool = False) -> None:
        self.size += len(text)

    knocked: list[tuple[Any, str, Any]] = [
        (Journal, "_write", append),
        (stream_module.EventStream, "_write", lambda self, lines: None),
        (runtime_module, "PROJECTION_INTERVAL", 10.0**9),
        (status_module.StatusReport, "emit", lambda self, force=False: None),
        (TurnSteps, "feedback", lambda self, call, result, *, collect: None),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in knocked]
    for owner, name, value in knocked:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


def warm_turns(args: argparse.Namespace) -> dict[str, Any]:
    """One session with the default guardrails and no real time in its model calls: each turn starts on the
    caches the last one left (the harness's own work, without the cold-cache penalty of a real turn)."""
    turns, _ = measure(args.turns, args.messages, None, args.model_seconds, 0.0)
    return {"p50_ms": round(statistics.median(turns.harness), 3), "p99_ms": round(percentile(turns.harness, 0.99), 3),
            "cpu_p50_ms": round(statistics.median(turns.cpu), 3), "turns": len(turns.harness)}


REFERENCE_PAYLOAD = {"messages": [{"role": "tool", "content": "lorem ipsum " * 40, "n": i} for i in range(60)]}


def reference_once() -> float:
    """Milliseconds of a fixed piece of work about as long as a turn."""
    t = time.perf_counter()
    for _ in range(5):
        json.loads(json.dumps(REFERENCE_PAYLOAD))
    return (time.perf_counter() - t) * 1000


def measure_handoff(calls: int = 3000) -> float:
    """Microseconds a turn's stream costs on the worker thread, over reading it inline (median of 5 runs)."""
    from console.engine.model_call import CallLimits, stream_abandonably

    class Network:
        name, model = "net", "m"

        def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
            yield from [TextDelta("x")] * 6 + [Usage(1, 1), Stop("end_turn")]

    provider, limits = Network(), CallLimits()
    samples = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(calls):
            list(provider.stream(None))  # type: ignore[arg-type]
        inline = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(calls):
            list(stream_abandonably(provider, None, limits, lambda: None))  # type: ignore[arg-type]
        samples.append((time.perf_counter() - t - inline) / calls * 1e6)
    return statistics.median(samples)


class ModelClock(SystemClock):
    """The system clock, plus the time the model calls would have taken: a turn lasts seconds as in a real run
    (what the harness does every few seconds, e.g. refreshing the state files, then happens every turn, as it
    does in a real run), while the benchmark does not wait for it."""

    def __init__(self) -> None:
        self.offset = 0.0

    @property
    def offset(self) -> float:
        return self._offset

    @offset.setter
    def offset(self, seconds: float) -> None:
        # Made a timedelta when the model call moves it, not at each of the dozen reads of a turn: the harness's
        # clock reads cost what the system clock's do in a real run.
        self._offset = seconds
        self._delta = timedelta(seconds=seconds)

    def now(self) -> datetime:
        return super().now() + self._delta

    def monotonic(self) -> float:
        return super().monotonic() + self.offset


class FsyncTimer:
    """os.fsync timed (the journal's and the atomic writes'): fsync time is counted apart from the harness. Only
    the loop's thread's: an fsync on another thread (none today) takes nothing from the turn."""

    def __init__(self) -> None:
        self.spent = 0.0
        self.spent_cpu = 0.0  # the kernel's CPU time inside fsync, which thread_time counts
        self.real = os.fsync
        self.loop = threading.get_ident()

    def __enter__(self) -> FsyncTimer:
        def timed(fd: int) -> None:
            if threading.get_ident() != self.loop:
                self.real(fd)
                return
            t, c = time.perf_counter(), time.thread_time()
            try:
                self.real(fd)
            finally:
                self.spent += time.perf_counter() - t
                self.spent_cpu += time.thread_time() - c

        os.fsync = timed
        return self

    def __exit__(self, *exc: object) -> None:
        os.fsync = self.real


def measure(turns: int, messages: int, table: GuardrailsConfig | None, model_seconds: float = 3.0,
            model_wall_ms: float = 20.0) -> tuple[Turns, dict[str, float]]:
    """One session: per measured turn, the harness's milliseconds (wall and CPU), the fsyncs', the machine's."""
    # Each session measured as a runner process's first (a resumed long session is one): the previous sessions'
    # garbage collected, the heap frozen anew when the session starts (console.engine.session.freeze_heap).
    gc.unfreeze()
    gc.collect()
    session_module._frozen = False
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        clock = ModelClock()
        rt, conv = build_state(Path(tmp) / "job", messages, table, clock)
        registry = default_registry()
        tool_ms: dict[int, float] = {}

        def noop(rt: Runtime, a: NoopArgs) -> str:
            # The tool's own time only: the parse of its arguments, the policies' gate and the result's event
            # around it are the harness's (tool_result.duration_ms counts them too).
            t = time.perf_counter()
            out = f"ok {a.n}"
            tool_ms[a.n] = tool_ms.get(a.n, 0.0) + (time.perf_counter() - t) * 1000
            return out

        registry.register(Tool("noop", "Does nothing.", NoopArgs, noop))
        provider = InstantModel(clock, model_seconds, model_wall_ms)
        def background() -> None:
            rt.projections.flush()
            rt.events.settle_views()

        provider.background = background
        settings = RunSettings(provider="scripted", model="instant", base_url=None, speed=0, context_window=1_000_000,
                               soft_threshold=0.7, hard_threshold=0.85, max_turns=turns, max_restarts=0,
                               auto_restart=True)
        deps = SessionDeps(rt, provider, registry, settings, OperatorState())

        # Per-turn wall time from the loop's own events; tool time from the tool itself (turn n calls noop(n)).
        marks: list[tuple[float, float]] = []  # wall, the loop thread's CPU
        provider_at: list[tuple[float, float]] = []
        fsync_at: list[tuple[float, float]] = []
        feedback = 0
        assert rt.journal is not None
        journal = rt.journal

        with FsyncTimer() as fsync:
            def on_event(e: ev.EventBase) -> None:
                nonlocal feedback
                if isinstance(e, ev.TurnStarted):
                    marks.append((time.perf_counter(), time.thread_time()))
                    provider_at.append((provider.spent, provider.spent_cpu))
                    fsync_at.append((fsync.spent, fsync.spent_cpu))
                elif isinstance(e, ev.Feedback):
                    feedback += 1

            # As a runner's subscribers (its log, its notifier, the jobs table's): none takes the streamed text.
            rt.events.subscribe(on_event, text=False)
            # As in a runner: the story written to its runner.log, on the views' thread (console.cli.lifecycle).
            story = open(Path(tmp) / "runner.log", "w", encoding="utf-8")  # noqa: SIM115 (closed below)
            rt.events.subscribe(HeadlessLog(story, run_id="bench", provider="bench"), deferred=True, text=False)
            rt.events.holding = True  # as in a run: events go through the journal's outbox
            rt.guards.start()
            result = run_agent_session(deps, 1, conv, Checkpoint(session=1))
            marks.append((time.perf_counter(), time.thread_time()))
            provider_at.append((provider.spent, provider.spent_cpu))
            fsync_at.append((fsync.spent, fsync.spent_cpu))
        rt.refresh_projections()  # as at a run's end: the state files written in the background are written
        journal.close()
        rt.events.close()
        story.close()

        out = Turns()
        for i in range(len(marks) - 1):
            wall = (marks[i + 1][0] - marks[i][0]) * 1000
            cpu = (marks[i + 1][1] - marks[i][1]) * 1000
            model = (provider_at[i + 1][0] - provider_at[i][0]) * 1000
            model_cpu = (provider_at[i + 1][1] - provider_at[i][1]) * 1000
            synced = (fsync_at[i + 1][0] - fsync_at[i][0]) * 1000
            synced_cpu = (fsync_at[i + 1][1] - fsync_at[i][1]) * 1000
            tool = tool_ms.get(i + 1, 0.0)
            out.harness.append(wall - model - synced - tool)
            out.cpu.append(cpu - model_cpu - synced_cpu - tool)
            out.fsync.append(synced)
        out.machine = provider.reference[: len(marks) - 1]  # sampled inside each turn's model call
        # The first turns warm caches and the journal.
        out = Turns(out.harness[5:], out.cpu[5:], out.fsync[5:], out.machine[5:])
        info = {"messages": len(conv), "feedback": feedback, "rewrites": getattr(journal, "rewrites", -1),
                "session_turns": result.turns}
        return out, info


if __name__ == "__main__":
    main()
