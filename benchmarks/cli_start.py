"""How fast the command line starts: whole processes, imports included, as an operator types them.

Times ``agent-console jobs`` (a jobs store with a few runs in it), one operator command (``pause RUN --wait 0``
on a run no process holds: the command is queued in its inbox and the process returns) and ``--help``, each
``--runs`` times in turn (the three interleaved, so a noisy machine slows all of them alike), and prints the
median of each next to its goal (0.3 s, issue 20) and the ratio median/goal (at most 1.0 meets it). Also the
time of a bare ``python -c pass`` for scale: no command can start faster than the interpreter.

``--against DIR`` times another checkout of the project too (e.g. the main branch), interleaved with this one in
the same run, and prints this one's median as a ratio of that one's: on a loaded machine the ratio holds where
the seconds do not. Both run as ``python -c 'from console.entry import main'`` with PYTHONPATH set to their tree
(the installed ``agent-console`` script does the same), with their byte-compiled files in a folder of the
benchmark's own (written by a first, untimed run of each command).

Prints figures, then one JSON line. Not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL = 0.3  # seconds, from the command to its exit
# CPU seconds of the whole process (user + system: holds on a busy machine where wall time does not), issue 37.
CPU_GOALS = {"agent-console jobs": 0.15}


ENTRY = "import sys; from console.entry import main; sys.exit(main())"


def prepare(root: Path, bytecode: bool = True) -> tuple[dict[str, str], Path]:
    """A private data dir and config, and a run folder that has run (its .console/ exists) but is not running."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_CONSOLE_")
           and k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    if bytecode:
        # Byte-compiled files, as an installed command has them: kept under the benchmark's own folder, never
        # written into a checkout.
        env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    else:  # as a shell with PYTHONDONTWRITEBYTECODE=1 runs it: the project's modules compiled at every start
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(AGENT_CONSOLE_DATA_DIR=str(root / "data"), AGENT_CONSOLE_CONFIG=str(root / "config.toml"),
               COLUMNS="120")
    (root / "config.toml").write_text("# the benchmark's own: no [keys], no [notify]\n")
    run = root / "data" / "runs" / "bench-run"
    (run / ".console").mkdir(parents=True)
    (run / "instructions.md").write_text("Benchmark job: never run.\n")
    (run / ".console" / "events.jsonl").write_text("")
    sys.path.insert(0, str(REPO))
    from console.engine.store import JobStore

    store = JobStore(root / "data" / "jobs.db")
    from console.engine.job import JobPaths
    from console.engine.launch import Launch, write_launch
    from console.engine.seal import Seal

    seal = Seal.of(root / "data")
    # Finished runs (each with its sealed launch record, which `jobs` reads for its --unconfined mark), stopped
    # ones, one whose folder is gone, and one the store says runs that no process holds (its lock asked): every
    # kind of row.
    for n in range(7):
        folder = root / "data" / "runs" / f"job-{n}"
        (folder / ".console").mkdir(parents=True)
        now = datetime(2026, 11, n + 1, 9, 0, tzinfo=UTC)
        store.started(folder, f"job-{n}", "scripted", "scripted-demo", now)
        write_launch(JobPaths(folder), Launch(provider="scripted", model="scripted-demo", unconfined=n == 0), seal)
        if n == 6:
            continue  # "running": its process died without writing its end
        if n % 3 == 0:
            store.completed(folder, now, 0.9, "the plan's todos all done, verified by the completion checker")
        elif n % 3 == 1:
            store.ended(folder, "stopped", now, "stopped by the operator")
        else:
            shutil.rmtree(folder)
    return env, run


def once(argv: list[str], env: dict[str, str], tree: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one whole process. CPU time (user + system, from the kernel's accounting of
    the finished child) holds on a loaded machine where wall time does not: it is what the imports cost."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # Started outside every checkout: `python -c` puts its working directory first on sys.path, before PYTHONPATH.
    proc = subprocess.run(argv, env={**env, "PYTHONPATH": str(tree)}, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=env["AGENT_CONSOLE_DATA_DIR"])
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[-3:])}: exit {proc.returncode}: {proc.stderr.decode()[-400:]}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="processes per command (the median is reported)")
    parser.add_argument("--against", type=Path, metavar="DIR", help="another checkout to time alongside this one")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="start as with PYTHONDONTWRITEBYTECODE=1: the project's modules compiled every time")
    a = parser.parse_args()
    trees = {"this": REPO, **({"against": a.against.resolve()} if a.against else {})}
    root = Path(tempfile.mkdtemp(prefix="cli-start-"))
    try:
        env, run = prepare(root, bytecode=not a.no_bytecode)
        base = [sys.executable, "-c", ENTRY]
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "agent-console --help": [*base, "--help"],
            "agent-console jobs": [*base, "jobs"],
            "agent-console pause RUN --wait 0": [*base, "pause", str(run), "--wait", "0"],
        }
        times: dict[tuple[str, str], list[float]] = {(t, name): [] for t in trees for name in cases}
        cpu: dict[tuple[str, str], list[float]] = {(t, name): [] for t in trees for name in cases}
        for t, tree in trees.items():  # the tree each label times is the one its processes import
            where = subprocess.run([sys.executable, "-c", "import console; print(console.__file__)"],
                                   env={**env, "PYTHONPATH": str(tree)}, cwd=env["AGENT_CONSOLE_DATA_DIR"],
                                   capture_output=True, text=True).stdout.strip()
            if not where.startswith(str(tree) + os.sep):
                raise SystemExit(f"{t}: imports {where}, not the checkout {tree}")
        for tree in trees.values():  # once each first: byte-compiled files written, disk caches warm
            for argv in cases.values():
                once(argv, env, tree)
        for _ in range(a.runs):
            for (t, name) in times:
                wall, used = once(cases[name], env, trees[t])
                times[t, name].append(wall)
                cpu[t, name].append(used)
                for f in (run / ".console" / "inbox").glob("*.json"):  # the queued pauses: never a full inbox
                    f.unlink()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out: dict[str, dict[str, float]] = {}
    how = "no byte-compiled files of the project" if a.no_bytecode else "byte-compiled files cached"
    print(f"start-up, whole process, median of {a.runs}, {how} (goal {GOAL:.1f} s; ratio = median / goal, "
          "<= 1 meets it)")
    for name in cases:
        med = statistics.median(times["this", name])
        samples = times["this", name]
        used = statistics.median(cpu["this", name])
        out[name] = {"median_s": round(med, 4), "min_s": round(min(samples), 4), "max_s": round(max(samples), 4),
                     "cpu_median_s": round(used, 4)}
        vs = f"   cpu {used:5.3f} s"
        if "against" in trees:
            before = statistics.median(times["against", name])
            cpu_before = statistics.median(cpu["against", name])
            out[name] |= {"against_median_s": round(before, 4), "vs_against": round(med / before, 3),
                          "against_cpu_median_s": round(cpu_before, 4), "cpu_vs_against": round(used / cpu_before, 3)}
            vs += f"   against: {before:5.3f} s, cpu {cpu_before:5.3f} s (wall {med / before:4.2f}x, cpu " \
                  f"{used / cpu_before:4.2f}x)"
        if name.startswith("python"):
            print(f"  {name:34} {med:6.3f} s   (the interpreter alone, for scale){vs}")
            continue
        out[name] |= {"goal_s": GOAL, "ratio": round(med / GOAL, 3)}
        verdict = "meets" if med <= GOAL else "MISSES"
        if (cpu_goal := CPU_GOALS.get(name)) is not None:
            out[name] |= {"cpu_goal_s": cpu_goal, "cpu_ratio": round(used / cpu_goal, 3)}
            met = "meets" if used <= cpu_goal else "MISSES"
            vs += f" (cpu goal {cpu_goal:.2f} s: ratio {used / cpu_goal:4.2f} {met})"
        print(f"  {name:34} {med:6.3f} s   goal {GOAL:.1f} s   ratio {med / GOAL:4.2f}  {verdict}{vs}")
    print(json.dumps({"benchmark": "cli_start", "runs": a.runs, "bytecode": not a.no_bytecode,
                      "against": str(a.against or ""), "results": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
