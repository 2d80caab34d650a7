"""The harness's cost per turn in figures a busy machine does not move (issue 37, point 6): Python function calls
per turn (the quick figure, for CI), and machine instructions per turn under valgrind's callgrind (deterministic).

The session is overhead.py's (benchmarks/overhead.py: the real session loop on a job of large state, 2,000 messages
at its start, 100 completed tasks in memory, 20 todos; the model answers at once with one call of a no-op tool;
no real time in the model call, so nothing of the turn waits). A turn is counted from one model call to the next
(the model's own few lines included, the same every turn); the first ``SKIPPED`` turns (the first compaction of the
2,000 messages, caches filling) are left out, and the p50, p90 and mean over the others are printed.

- calls (the default; a few seconds): every Python function call in every thread of the process
  (``sys.setprofile`` and ``threading.setprofile``), the harness's background threads (the state files, the
  views) included;
- instructions (``--callgrind``): the session run under ``valgrind --tool=callgrind`` in a process of its own,
  which dumps its counts at each model call (``--dump-before=getppid``: the benchmark's model calls
  ``os.getppid()`` first, nothing else in the process does), so each turn's instruction count is read from its
  own dump, every thread included; slow (the interpreter runs some 50 times slower there: a few minutes), and
  needs valgrind (Debian's ``valgrind``). ``--keep DIR`` keeps the dumps, made readable by
  ``callgrind_annotate`` (:func:`readable`): ``callgrind_annotate DIR/callgrind.out.30`` is where turn 29 went.

Goal (issue 37): instructions per turn p50 at most 1.5 M. Prints figures, then one JSON line. Not a timed test.

    python benchmarks/turn_cost.py [--turns 60] [--callgrind [--keep DIR]]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import overhead  # (a sibling script: its session, its state)

GOAL_INSTRUCTIONS = 1_500_000
SKIPPED = 5  # the first turns: the 2,000 messages compacted, the caches and the journal filling


def on_each_turn(hook: Callable[[], None]) -> Callable[[], None]:
    """``hook`` called at the start of each model call of overhead.py's sessions; returns the undo."""
    stream = overhead.InstantModel.stream

    def hooked(self: overhead.InstantModel, request: Any) -> Iterator[Any]:
        hook()
        return stream(self, request)

    overhead.InstantModel.stream = hooked  # type: ignore[method-assign]

    def undo() -> None:
        overhead.InstantModel.stream = stream  # type: ignore[method-assign]

    return undo


def figures(per_turn: list[int]) -> dict[str, Any]:
    kept = sorted(per_turn[SKIPPED:]) or [0]
    return {"p50": round(statistics.median(kept)), "p90": kept[int(0.9 * (len(kept) - 1))],
            "mean": round(statistics.fmean(kept)), "turns": len(kept)}


def calls_per_turn(turns: int, messages: int) -> dict[str, Any]:
    """Python function calls in every thread, per turn of one overhead.py session of ``turns`` turns."""
    count = 0
    marks: list[int] = []
    lock = threading.Lock()

    def profile(_frame: Any, event: str, _arg: Any) -> None:
        nonlocal count
        if event == "call":
            with lock:
                count += 1

    undo = on_each_turn(lambda: marks.append(count))
    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        overhead.measure(turns, messages, None, 3.0, 0.0)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        undo()
    return figures([b - a for a, b in itertools.pairwise(marks)])


SUMMARY = re.compile(r"^summary:\s*(\d+)", re.MULTILINE)
PART = re.compile(r"\.(\d+)$")


def instructions(turns: int, messages: int, work: Path) -> list[int]:
    """Each turn's instructions, as callgrind counts them (every thread) in a process that runs one session of
    ``turns`` turns and dumps its counts at each model call."""
    out = work / "callgrind.out"
    env = os.environ | {"PYTHONMALLOC": "malloc"}  # valgrind's view of memory, not pymalloc's arenas
    done = subprocess.run(["valgrind", "--tool=callgrind", "--dump-before=getppid", "--compress-strings=no",
                           f"--callgrind-out-file={out}",
                           sys.executable, str(Path(__file__).resolve()), "--one-session", str(turns),
                           "--messages", str(messages)],
                          capture_output=True, timeout=3600, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"callgrind: exit {done.returncode}: {done.stderr[-600:].decode('utf-8', 'replace')}")
    # out.1 is the process's start up to the first model call; out.N+1 is turn N (from its model call to the
    # next); ``out`` itself, the last turn's end and the process's exit, is not a whole turn.
    parts = sorted((int(m.group(1)), f) for f in work.glob("callgrind.out.*") if (m := PART.search(f.name)))
    counts = []
    for _, f in parts[1:]:
        found = SUMMARY.search(f.read_text(encoding="utf-8", errors="replace"))
        if found is None:
            raise SystemExit(f"callgrind: no summary in {f}")
        counts.append(int(found.group(1)))
    if len(counts) < turns - 1:
        raise SystemExit(f"callgrind: {len(counts)} turns dumped of {turns}")
    return counts


CALL_IN_PROGRESS = re.compile(r"^calls=0 .*\n(\S+) .*$", re.MULTILINE)


def readable(dump: Path) -> None:
    """Make a turn's dump read right in ``callgrind_annotate``. A dump taken in the middle of the process
    (``--dump-before``) ends each call still on the stack (the thread's start, the interpreter's frames, ...) with a
    ``calls=0`` line and that call's cost in this part; callgrind_annotate reads a call cost only after a count above
    0, so it counts those as the caller's own instructions: the stack's first function gets the whole turn (100%,
    shown as ``???``: the threshold of 99% lists nothing after it). Each such pair becomes its position with no cost
    (a later line's position may be relative to it): what each function ran itself is then the dump's, and sums
    to its total; the calls still on the stack are left out of the inclusive figures (``--inclusive=yes``)."""
    text = dump.read_text(encoding="utf-8", errors="surrogateescape")
    dump.write_text(CALL_IN_PROGRESS.sub(r"\1 0", text), encoding="utf-8", errors="surrogateescape")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=60)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--callgrind", action="store_true", help="instructions per turn too (valgrind, minutes)")
    ap.add_argument("--keep", type=Path, metavar="DIR", help="with --callgrind: keep each turn's dump in DIR")
    ap.add_argument("--one-session", type=int, metavar="TURNS", help=argparse.SUPPRESS)  # callgrind's child
    args = ap.parse_args()
    if args.one_session is not None:
        undo = on_each_turn(os.getppid)  # callgrind dumps before each getppid: one dump a turn
        try:
            overhead.measure(args.one_session, args.messages, None, 3.0, 0.0)
        finally:
            undo()
        return 0
    calls = calls_per_turn(args.turns, args.messages)
    out: dict[str, Any] = {"calls_per_turn": calls["p50"], "calls": calls}
    print(f"Python function calls per turn: p50 {calls['p50']:,}, p90 {calls['p90']:,}, mean {calls['mean']:,} "
          f"({calls['turns']} turns of a session of {args.turns}, every thread)")
    if args.callgrind:
        if shutil.which("valgrind") is None:
            raise SystemExit("--callgrind needs valgrind (Debian: apt install valgrind)")
        with tempfile.TemporaryDirectory() as tmp:
            work = args.keep or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            per = figures(instructions(args.turns, args.messages, work))
            if args.keep:
                for dump in work.glob("callgrind.out*"):
                    readable(dump)
        out |= {"instructions_per_turn": per["p50"], "instructions": per, "goal": GOAL_INSTRUCTIONS}
        print(f"instructions per turn (callgrind): p50 {per['p50'] / 1e6:.2f} M, p90 {per['p90'] / 1e6:.2f} M, "
              f"mean {per['mean'] / 1e6:.2f} M ({per['turns']} turns; goal p50 <= {GOAL_INSTRUCTIONS / 1e6:.1f} M, "
              f"ratio {per['p50'] / GOAL_INSTRUCTIONS:.2f})")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
