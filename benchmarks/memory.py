"""Seed 003's quality gates for working memory (console.engine.memory), measured apart:

* state load: the memory component read back (100 records at the cap, 3 blockers) and the WorkingMemory made
  from it; also a legacy state of 100 records without intents, which are backfilled (goal: < 5 ms);
* prompt build: the request of one turn (build_request: layer 2 with the todo list, the plan, and working
  memory) with requires_context on and off, the memory block rendered anew (after a task) or as cached (every
  other turn); the difference is the block's cost (goal: < 5 ms overhead);
* task finalisation: recording one completed task at the cap (intent, deterministic summary, pruning, the event),
  and the memory component's serialisation that the step's journal commit then carries (goal: < 10 ms);
* prompt size: the working-memory block's share of every prompt of real runs (the scripted model on the sample
  jobs, in a 128k window), and of a heavy case (5 tasks of 500 characters, the most a todo may be, and 3
  blockers); goal < 5% of a typical prompt. Tokens are estimated as the engine does (4 chars/token).

    python benchmarks/memory.py [--n 2000]

The last line printed is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from console.engine import events as ev
from console.engine.clock import FakeClock, SystemClock
from console.engine.context.tokens import estimate_request, estimate_text
from console.engine.job import JobPaths
from console.engine.loop import SessionDeps, build_request
from console.engine.memory import MemoryState, WorkingMemory
from console.engine.messages import Message
from console.engine.operator import OperatorState
from console.engine.run_settings import RunSettings
from console.engine.runtime import Runtime
from console.engine.supervisor import Supervisor
from console.engine.tools import default_registry
from console.providers.scripted import ScriptedProvider

REPO = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)
PLAN = "# Execution Plan\n\n## Overview\nBenchmark.\n\n" + "".join(
    f"## Phase {p}: Part {p}{' ← CURRENT' if p == 2 else ''}\n" + "".join(f"- [ ] step {p}.{s}\n" for s in range(10))
    + "\n" for p in range(1, 5))


def settings(**kw: object) -> RunSettings:
    base = dict(provider="scripted", model="scripted-agent", base_url=None, speed=0.0, context_window=128_000,
                soft_threshold=0.7, hard_threshold=0.85, max_turns=2000, max_restarts=10, auto_restart=True)
    base.update(kw)
    return RunSettings(**base)  # type: ignore[arg-type]


def pct(samples: list[float], p: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * p))]


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def full_memory(legacy: bool = False) -> MemoryState:
    mem = WorkingMemory()
    for i in range(100):
        mem.record(f"Extract the requirements of section {i} of docs/specification.md. Keep their ids.", NOW)
    for i in range(3):
        mem.block(f"Reconcile part {i}", "the source contradicts itself", NOW)
    if legacy:
        for t in mem.state.completed_tasks:
            t.intent = t.summary = None
    return mem.state


def measure_load(n: int) -> dict[str, float]:
    data = full_memory().model_dump_json(indent=1).encode()
    legacy = full_memory(legacy=True).model_dump_json(indent=1).encode()
    load = timed(lambda: WorkingMemory(MemoryState.model_validate_json(data)), n)
    backfill = timed(lambda: WorkingMemory(MemoryState.model_validate_json(legacy)), n)
    fig = {"load_p50_ms": pct(load, 0.5), "load_p99_ms": pct(load, 0.99), "legacy_load_p50_ms": pct(backfill, 0.5)}
    print(f"state load (100 records, 3 blockers, {len(data):,} bytes): p50 {fig['load_p50_ms']:.3f} ms, "
          f"p99 {fig['load_p99_ms']:.3f} ms; a legacy state backfilled: p50 {fig['legacy_load_p50_ms']:.3f} ms "
          "(goal < 5 ms)")
    return fig


def runtime(root: Path) -> Runtime:
    paths = JobPaths(root)
    root.mkdir(parents=True)
    paths.instructions.write_text("# Benchmark job\n")
    paths.main_plan.write_text(PLAN)
    clock = SystemClock()
    rt = Runtime(paths, clock, ev.EventStream(paths.events, clock))
    rt.todos.install([f"Task {i}: process part {i} of the input" for i in range(20)], kind="phase",
                     phase_name="Part 2", phase_number=2, total_phases=4, done=[i < 7 for i in range(20)])
    rt.memory.state = full_memory()
    rt.memory.save()
    return rt


def measure_build(n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        rt = runtime(Path(tmp) / "job")
        registry = default_registry()
        conv = [Message.user("PREVIOUS SUMMARY\n" + "- an accomplishment\n" * 30, kind="summary")]
        figures: dict[str, float] = {}
        for on in (True, False):
            deps = SessionDeps(rt, ScriptedProvider(clock=FakeClock()), registry, settings(requires_context=on),
                               OperatorState())
            build_request(deps, "system", conv)  # the plan read once (then cached by its mtime), as in a run
            cached = timed(lambda deps=deps: build_request(deps, "system", conv), n)

            def cold(deps: SessionDeps = deps) -> None:
                rt.memory._rendered = None  # as after a task was recorded: the block is rendered anew
                build_request(deps, "system", conv)

            anew = timed(cold, n)
            key = "on" if on else "off"
            figures[f"build_{key}_p50_ms"] = pct(cached, 0.5)
            figures[f"build_{key}_anew_p50_ms"] = pct(anew, 0.5)
            figures[f"build_{key}_p99_ms"] = pct(anew, 0.99)
        over = figures["build_on_anew_p50_ms"] - figures["build_off_anew_p50_ms"]
        figures["build_overhead_ms"] = over
        print(f"prompt build: requires_context on p50 {figures['build_on_p50_ms']:.3f} ms "
              f"({figures['build_on_anew_p50_ms']:.3f} ms with the block rendered anew, p99 "
              f"{figures['build_on_p99_ms']:.3f} ms); off p50 {figures['build_off_p50_ms']:.3f} ms; "
              f"working memory adds {over * 1000:.0f} us at most (goal < 5 ms)")
        return figures


def measure_finalise(n: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        clock = SystemClock()
        events = ev.EventStream(Path(tmp) / "events.jsonl", clock)
        events.holding = True  # as in a run: held, then written with the step's journal commit
        mem = WorkingMemory(full_memory(), events)

        def record() -> None:
            mem.record("Extract the requirements of section 7 of docs/specification.md. Keep their ids.", NOW)
            events.discard_held()

        rec = timed(record, n)
        dump = timed(lambda: mem.state.model_dump_json(), n)
    fig = {"finalise_p50_ms": pct(rec, 0.5), "finalise_p99_ms": pct(rec, 0.99), "serialise_p50_ms": pct(dump, 0.5)}
    print(f"task finalisation at the cap (record, summary, prune, event): p50 {fig['finalise_p50_ms']:.3f} ms, "
          f"p99 {fig['finalise_p99_ms']:.3f} ms; the memory state in the step's commit: "
          f"p50 {fig['serialise_p50_ms']:.3f} ms (goal < 10 ms)")
    return fig


def block_of(protected: str) -> str:
    start = protected.find("WORKING MEMORY")
    if start < 0:
        return ""
    end = protected.find("\n\n", start)  # the block has no blank line; the next block follows one
    return protected[start:] if end < 0 else protected[start:end]


class Recording(ScriptedProvider):
    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.requests = []

    def stream(self, request):
        self.requests.append(request)
        return super().stream(request)


def measure_size() -> dict[str, float]:
    shares, prompts = [], []
    for sample in ("quickstart", "requirements-extraction"):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / sample
            shutil.copytree(REPO / "sample_jobs" / sample, root, ignore=shutil.ignore_patterns(".console"))
            clock = FakeClock(step=0.001)
            provider = Recording(clock=clock)
            result = Supervisor(JobPaths(root), settings(), provider, clock=clock).run()
            assert result.ok, result.detail
            for r in provider.requests:
                total = estimate_request(r)
                prompts.append(total)
                block = estimate_text(block_of(r.protected))
                shares.append(block / (total - block))  # the increase over the same prompt without the block
    with_block = [s for s in shares if s > 0]
    typical = statistics.median(prompts)
    heavy = WorkingMemory()
    for i in range(5):
        heavy.record(f"Task {i}: " + "extract and cross-check the requirements " * 12, NOW)
    for i in range(3):
        heavy.block(f"Reconcile part {i} " + "of the specification " * 5, "the source contradicts itself " * 5, NOW)
    heavy_tokens = estimate_text(heavy.render())
    fig = {"prompts": len(shares), "increase_median": statistics.median(with_block), "increase_max": max(shares),
           "typical_prompt_tokens": typical, "heavy_block_tokens": heavy_tokens,
           "heavy_increase_of_typical": heavy_tokens / typical, "prompt_tokens_for_heavy_under_5pct": heavy_tokens * 20}
    print(f"prompt size: the block is in {len(with_block)} of {len(shares)} prompts of two sample runs; the increase "
          f"it makes: median {fig['increase_median']:.1%}, max {fig['increase_max']:.1%} (the median prompt "
          f"~{typical:,.0f} tokens); a heavy block (5 tasks of 500 chars, 3 blockers): ~{heavy_tokens} tokens, "
          f"+{fig['heavy_increase_of_typical']:.1%} on that median prompt, under 5% from "
          f"{heavy_tokens * 20:,} tokens on (goal < 5%)")
    return fig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="repetitions of each timed operation")
    args = ap.parse_args()
    figures = {**measure_load(args.n), **measure_build(args.n), **measure_finalise(args.n), **measure_size()}
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}))


if __name__ == "__main__":
    main()
