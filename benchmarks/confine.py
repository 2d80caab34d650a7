"""The cost of confinement per command call: a trivial command (``true``) run as a job-declared command.

Each mode runs the whole tool call the agent makes (environment, the program's check, the sandbox's options,
the intent, the bounded run, the folder's measure, the result), interleaved so the machine's load hits every
mode alike:

- ``unconfined``:    ``run --unconfined`` (no sandbox; the same bounds: rlimits, the folder watch, a cgroup if any)
- ``confined``:      the default: bubblewrap with the full world (toolchain, /etc subset, private /tmp, /dev/shm,
                     HOME, read-only root) and the bounds, a cgroup where this process may make one
- ``confined, no cgroup``: the same with rlimits only (an ordinary user on a systemd host)
- ``bwrap alone``:   bubblewrap run directly by subprocess with the same options (what bubblewrap itself costs)
- ``bare``:          ``true`` run directly by subprocess (what starting a process costs)

The modes take turns in blocks of 10 calls, the first call of each block not counted (it pays for the previous
mode's sandbox teardown, which the kernel finishes after bwrap exits).

    python benchmarks/confine.py [--calls 200]

Prints p50 and p99 per mode and the confined - unconfined difference; the last line is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from console.engine import events as ev
from console.engine.clock import SystemClock
from console.engine.job import JobPaths
from console.engine.messages import ToolCall
from console.engine.runtime import Runtime
from console.engine.tools import cgroups
from console.engine.tools.commands import CommandToolConfig, build_command_tools, command_env
from console.engine.tools.confine import Bwrap, bwrap_options, find_bwrap, protected_binds, remove_stand_ins
from console.engine.tools.limits import CommandWorld
from console.engine.tools.registry import ToolRegistry

BLOCK = 10


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per mode (default 200)")
    args = parser.parse_args()
    bwrap = find_bwrap()
    if not isinstance(bwrap, Bwrap):
        print(f"no bubblewrap works here: {bwrap}", file=sys.stderr)
        return 1
    found_cg = cgroups.find_cgroups()
    with tempfile.TemporaryDirectory(prefix="bench-confine-") as tmp:
        root = Path(tmp) / "job"
        root.mkdir()
        (root / "instructions.md").write_text("# bench\n")
        for i in range(20):  # a small project: the folder is measured after every call
            (root / f"file{i}.txt").write_text("x" * 1000)
        clock = SystemClock()
        paths = JobPaths(root)
        rt = Runtime(paths, clock, ev.EventStream(paths.events, clock))
        config = CommandToolConfig(name="noop", description="bench", command=["true"])

        def tool_call(world: CommandWorld) -> Callable[[], None]:
            reg = ToolRegistry(build_command_tools([config], world))
            parsed = reg.parse(ToolCall(id="c1", name="noop", arguments="{}"))
            assert not isinstance(parsed, type(None)) and not hasattr(parsed, "ok")

            def run() -> None:
                rt.current_call = None  # no journal: intents are not recorded, as in a bare Runtime
                out = reg.run(rt, *parsed)  # type: ignore[misc]
                assert out.ok, out.content
            return run

        def no_cgroup(fn: Callable[[], None]) -> Callable[[], None]:
            def run() -> None:
                saved = cgroups._found[:]
                cgroups._found[:] = [None]
                try:
                    fn()
                finally:
                    cgroups._found[:] = saved
            return run

        real = str(root.resolve())
        world = CommandWorld()
        env = command_env(config, real, world)
        binds, created = protected_binds(real)
        argv = [bwrap.path, *bwrap_options(real, env, binds, world, bwrap.extra), "--", "/usr/bin/true"]
        modes: dict[str, Callable[[], None]] = {
            "bare": lambda: subprocess.run(["/usr/bin/true"], check=True),
            "bwrap alone": lambda: subprocess.run(argv, check=True, env=env),
            "unconfined": tool_call(CommandWorld(unconfined=True)),
            "confined": tool_call(world),
        }
        if found_cg is not None:
            modes["confined, no cgroup"] = no_cgroup(tool_call(world))
        times: dict[str, list[float]] = {m: [] for m in modes}
        for fn in modes.values():  # warm up: the probe, the first cgroup
            fn()
        try:
            # Modes in turn, in blocks of BLOCK calls (the machine's load falls on every mode alike); the first
            # call of a block is not counted: a sandbox's teardown (its mount and pid namespaces) goes on in the
            # kernel after bwrap exits and slows whatever runs next, which is the previous mode's cost.
            for _ in range(max(1, args.calls // BLOCK)):
                for mode, fn in modes.items():
                    for i in range(BLOCK + 1):
                        started = time.perf_counter()
                        fn()
                        if i:
                            times[mode].append((time.perf_counter() - started) * 1000)
        finally:
            remove_stand_ins(created)
    print(f"confinement per command call: {len(times['bare'])} calls of `true` per mode, in blocks of {BLOCK}")
    print(f"bubblewrap: {bwrap.label}; bounds: {found_cg.label if found_cg else 'rlimits (no cgroup here)'}")
    summary: dict[str, float | str] = {}
    for mode, values in times.items():
        p50, p99 = percentile(values, 50), percentile(values, 99)
        summary[f"{mode.replace(', ', '_').replace(' ', '_')}_p50_ms"] = round(p50, 2)
        summary[f"{mode.replace(', ', '_').replace(' ', '_')}_p99_ms"] = round(p99, 2)
        print(f"  {mode:22} p50 {p50:6.2f} ms   p99 {p99:6.2f} ms   mean {statistics.fmean(values):6.2f} ms")
    added50 = percentile(times["confined"], 50) - percentile(times["unconfined"], 50)
    added99 = percentile(times["confined"], 99) - percentile(times["unconfined"], 99)
    print(f"confinement adds p50 {added50:.2f} ms, p99 {added99:.2f} ms a call "
          f"(bubblewrap alone over a bare process: p50 "
          f"{percentile(times['bwrap alone'], 50) - percentile(times['bare'], 50):.2f} ms)")
    summary.update(added_p50_ms=round(added50, 2), added_p99_ms=round(added99, 2), bwrap=bwrap.label,
                   bounds=found_cg.label if found_cg else "rlimits")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
