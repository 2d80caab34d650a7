"""Harness overhead per turn at large state (seed 003's budget: < 10 ms per prompt).

Runs the real session loop (run_agent_session) on a job whose state is large:
2,000 messages in the conversation, 100 completed tasks in working memory and
20 todos in the active list. The model answers instantly with one call to a
no-op tool, so what is left of each turn is the harness: applying operator
commands, assembling the five layers, the events, pressure evaluation and the
three journal commits of a turn (the reply, the tool call with its result, the
bookkeeping), each an append of one record with its events, which are then
relayed to events.jsonl. Provider and tool time are measured separately and
subtracted.

It runs twice: with the default guardrails (the plan checker and the stuck
detector), then with a heavy [guardrails] table: 5 policies, 5 feedback
providers (one of them fires every 3 calls), a composite completion checker, a
deadline and a token budget. Every tool call then passes 5 policies, every turn
runs 5 triggers and renders a status.

    python benchmarks/overhead.py [--turns 400] [--messages 2000]

The last line printed is a JSON summary with p50_ms and p99_ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from console.engine import events as ev
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

PLAN = "# Execution Plan\n\n## Overview\nBenchmark.\n\n" + "".join(
    f"## Phase {p}: Part {p}{' ← CURRENT' if p == 2 else ''}\n" + "".join(f"- [ ] step {p}.{s}\n" for s in range(10))
    + "\n" for p in range(1, 5))


class InstantModel:
    """Answers every turn with a short text and one no-op call; records its own time."""

    name, model = "bench", "instant"
    # In-process and instant, like the scripted model: read inline. A network provider's stream is read on a
    # worker thread instead (so a stop can abandon it); that handoff is measured apart (handoff_us).
    runs_inline = True

    def __init__(self) -> None:
        self.n = 0
        self.spent = 0.0

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        t = time.perf_counter()
        self.n += 1
        events: list[StreamEvent] = [
            TextDelta("Working on "), TextDelta("the current task."),
            # A different argument each turn: an agent at work, not one repeating itself (which the stuck
            # detector would rightly report every few turns).
            ToolCallEvent(ToolCall(id=f"b{self.n}", name="noop", arguments=json.dumps({"n": self.n}))),
            Usage(input_tokens=120_000, output_tokens=30, cached_input_tokens=110_000),
            Stop("tool_use"),
        ]
        self.spent += time.perf_counter() - t
        yield from events


class NoopArgs(ToolArgs):
    n: int = 0


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


def build_state(root: Path, messages: int, guardrails: GuardrailsConfig | None = None
                ) -> tuple[Runtime, Conversation]:
    paths = JobPaths(root)
    root.mkdir(parents=True, exist_ok=True)
    paths.instructions.write_text("# Benchmark job\n")
    paths.main_plan.write_text(PLAN)
    paths.state.mkdir(parents=True, exist_ok=True)
    rt = Runtime(paths, SystemClock(), ev.EventStream(paths.events, SystemClock()), journal=Journal(paths),
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
    args = ap.parse_args()

    figures = {}
    for label, table in (("default guardrails", None), ("5 policies, 5 feedback providers, composite checker",
                                                        HEAVY)):
        figures[label] = measure(args.turns, args.messages, table, label)
    base, heavy = figures.values()
    print(f"with the heavy guardrails: p50 x{heavy['p50_ms'] / base['p50_ms']:.2f}, "
          f"p99 x{heavy['p99_ms'] / base['p99_ms']:.2f} of the default")
    handoff = measure_handoff()
    print(f"a network provider's stream read on a worker thread (abandonable): +{handoff:.0f} us per turn "
          "(8 stream events)")
    print(json.dumps({"default": base, "heavy_guardrails": heavy, "handoff_us": round(handoff, 1),
                      "budget_ms": 10}))


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


def measure(turns: int, messages: int, table: GuardrailsConfig | None, label: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        rt, conv = build_state(Path(tmp) / "job", messages, table)
        registry = default_registry()
        registry.register(Tool("noop", "Does nothing.", NoopArgs, lambda rt, a: f"ok {a.n}"))
        provider = InstantModel()
        settings = RunSettings(provider="scripted", model="instant", base_url=None, speed=0, context_window=1_000_000,
                               soft_threshold=0.7, hard_threshold=0.85, max_turns=turns, max_restarts=0,
                               auto_restart=True)
        deps = SessionDeps(rt, provider, registry, settings, OperatorState())

        # Per-turn wall time from the loop's own events; tool time from tool_result.duration_ms.
        marks: list[float] = []
        tool_ms: dict[int, float] = {}
        provider_at: list[float] = []
        feedback = 0

        def on_event(e: ev.EventBase) -> None:
            nonlocal feedback
            if isinstance(e, ev.TurnStarted):
                marks.append(time.perf_counter())
                provider_at.append(provider.spent)
            elif isinstance(e, ev.ToolResult):
                tool_ms[e.turn] = tool_ms.get(e.turn, 0.0) + e.duration_ms
            elif isinstance(e, ev.Feedback):
                feedback += 1

        rt.events.subscribe(on_event)
        rt.events.holding = True  # as in a run: events go through the journal's outbox
        rt.guards.start()
        t0 = time.perf_counter()
        result = run_agent_session(deps, 1, conv, Checkpoint(session=1))
        marks.append(time.perf_counter())
        provider_at.append(provider.spent)
        total = time.perf_counter() - t0

        per_turn = []
        for i in range(len(marks) - 1):
            wall = (marks[i + 1] - marks[i]) * 1000
            model = (provider_at[i + 1] - provider_at[i]) * 1000
            per_turn.append(wall - model - tool_ms.get(i + 1, 0.0))
        per_turn = per_turn[5:]  # first turns warm caches and the journal
        per_turn.sort()
        p50 = statistics.median(per_turn)
        p99 = per_turn[min(len(per_turn) - 1, int(len(per_turn) * 0.99))]
        print(f"[{label}]")
        print(f"turns: {len(per_turn)} measured ({result.reason.value} after {result.turns}); "
              f"conversation at end: {len(conv)} messages; memory: {len(rt.memory.state.completed_tasks)} tasks; "
              f"todos: {len(rt.todos.state.items)}; feedback blocks delivered: {feedback}")
        print(f"harness per turn: p50 {p50:.3f} ms, p90 {per_turn[int(len(per_turn) * 0.9)]:.3f} ms, "
              f"p99 {p99:.3f} ms, max {per_turn[-1]:.3f} ms; budget 10 ms (seed 003): p99 is {10 / p99:.0f}x under")
        print(f"whole run: {total:.2f} s for {result.turns} turns; journal {rt.paths.checkpoint.stat().st_size} bytes")
        return {"p50_ms": round(p50, 3), "p99_ms": round(p99, 3), "turns": len(per_turn), "feedback": feedback}


if __name__ == "__main__":
    main()
