"""The harness's cost per turn in figures a busy machine does not move (issue 37, point 6): Python function calls
per turn (the quick figure), and machine instructions per turn under valgrind's callgrind (deterministic).

The session is overhead.py's (benchmarks/overhead.py: the real session loop on a job of large state, 2,000 messages
at its start, 100 completed tasks in memory, 20 todos; the model answers at once with one call of a no-op tool;
no real time in the model call, so nothing of the turn waits). Each figure is a difference: a session of
``--turns`` turns minus one of ``--base`` turns, divided by the turns between, so what a session costs once (its
start, the first compaction, the interpreter's own start under valgrind) cancels out.

- calls: every Python function call in every thread of the process (``sys.setprofile`` and
  ``threading.setprofile``), the harness's background threads (the state files, the views) included;
- instructions (``--callgrind``): the whole process run under ``valgrind --tool=callgrind`` twice, its
  "Collected" instruction count read from each; slow (the interpreter runs some 50 times slower there: a few
  minutes), and needs valgrind (Debian's ``valgrind``).

Goal (issue 37): instructions per turn p50 at most 1.5 M. Prints figures, then one JSON line. Not a timed test.

    python benchmarks/turn_cost.py [--turns 120] [--base 40] [--callgrind]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import overhead  # (a sibling script: its session, its state)

GOAL_INSTRUCTIONS = 1_500_000


def session_calls(turns: int, messages: int) -> tuple[int, int]:
    """(Python function calls in every thread, turns run) of one overhead.py session of ``turns`` turns."""
    count = 0
    lock = threading.Lock()

    def profile(_frame: Any, event: str, _arg: Any) -> None:
        nonlocal count
        if event == "call":
            with lock:
                count += 1

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        _turns, info = overhead.measure(turns, messages, None, 3.0, 0.0)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return count, int(info["session_turns"])


def calls_per_turn(turns: int, base: int, messages: int) -> dict[str, Any]:
    small, small_turns = session_calls(base, messages)
    big, big_turns = session_calls(turns, messages)
    per = (big - small) / max(1, big_turns - small_turns)
    return {"calls_per_turn": round(per), "turns": [small_turns, big_turns]}


COLLECTED = re.compile(rb"Collected\s*:\s*(\d+)")


def instructions(turns: int, messages: int, work: Path) -> int:
    """The instructions callgrind counts for a whole process that runs one session of ``turns`` turns."""
    out = work / f"callgrind.{turns}"
    done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
                           str(Path(__file__).resolve()), "--one-session", str(turns), "--messages", str(messages)],
                          capture_output=True, timeout=3600, check=False)
    found = COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"callgrind: exit {done.returncode}: {done.stderr[-600:].decode('utf-8', 'replace')}")
    return int(found.group(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=120)
    ap.add_argument("--base", type=int, default=40)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--callgrind", action="store_true", help="instructions per turn too (valgrind, minutes)")
    ap.add_argument("--one-session", type=int, metavar="TURNS", help=argparse.SUPPRESS)  # callgrind's child
    args = ap.parse_args()
    if args.one_session is not None:
        overhead.measure(args.one_session, args.messages, None, 3.0, 0.0)
        return 0
    out: dict[str, Any] = calls_per_turn(args.turns, args.base, args.messages)
    print(f"Python function calls per turn: {out['calls_per_turn']:,} (sessions of {out['turns'][0]} and "
          f"{out['turns'][1]} turns, every thread)")
    if args.callgrind:
        if shutil.which("valgrind") is None:
            raise SystemExit("--callgrind needs valgrind (Debian: apt install valgrind)")
        with tempfile.TemporaryDirectory() as tmp:
            os.environ.setdefault("PYTHONMALLOC", "malloc")  # valgrind's view of memory, not pymalloc's arenas
            small = instructions(args.base, args.messages, Path(tmp))
            big = instructions(args.turns, args.messages, Path(tmp))
        per = (big - small) / max(1, args.turns - args.base)
        out |= {"instructions_per_turn": round(per), "goal": GOAL_INSTRUCTIONS}
        print(f"instructions per turn (callgrind): {per / 1e6:.2f} M (goal <= {GOAL_INSTRUCTIONS / 1e6:.1f} M; "
              f"ratio {per / GOAL_INSTRUCTIONS:.2f})")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
