"""What a bounded parse of a store's body costs per event (console.engine.bounded_json.loads), against Python's own
json.loads and against the alternative it was chosen over: a pre-scan of bracket depth in Python before json.loads.

The events are a real run's: the quickstart sample run by the scripted model (in a temporary data dir), its
``events.jsonl`` read back. CPU time of this process (``time.process_time``), per event, the best of ``--rounds``
rounds of all the events: a figure that moves little with the machine's load. Then the cost of refusing one
body 5,000 levels deep (the attack), and the same for the pre-scan. Prints the figures, then one JSON line.
Not a timed test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from console.engine.bounded_json import BoundsError, loads  # noqa: E402
from console.engine.events import parse_event  # noqa: E402

PRESCAN_DEPTH = 64
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]")
_PAIR = re.compile(r"\[\]|\{\}")


def prescan(text: str, depth: int = PRESCAN_DEPTH) -> bool:
    """The alternative: True if ``text``'s brackets (outside strings) nest at most ``depth`` deep. Cheap when a
    text has few brackets; otherwise one regex pass per level."""
    if text.count("[") + text.count("{") <= depth:
        return True
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    for _ in range(depth):
        if not brackets:
            return True
        inner = _PAIR.sub("", brackets)
        if inner == brackets:
            return False
        brackets = inner
    return not brackets


def real_events() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text("")
        env = {**os.environ, "AGENT_CONSOLE_DATA_DIR": f"{tmp}/data", "AGENT_CONSOLE_CONFIG": str(config),
               "HOME": tmp}
        done = subprocess.run([sys.executable, "-m", "console.cli", "run", str(REPO / "sample_jobs" / "quickstart"),
                               "--headless", "--speed", "0"], env=env, capture_output=True, text=True, cwd=REPO)
        folder = Path(done.stdout.splitlines()[0].split(": ", 1)[1])
        return [line for line in (folder / ".console" / "events.jsonl").read_text().splitlines() if line.strip()]


def per_event(fn: Callable[[str], Any], lines: list[str], rounds: int) -> float:
    """Microseconds of CPU per event, the best of ``rounds``."""
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for line in lines:
            fn(line)
        best = min(best, time.process_time() - started)
    return best / len(lines) * 1e6


def refuse(fn: Callable[[str], Any], text: str, times: int = 50) -> float:
    started = time.process_time()
    for _ in range(times):
        with contextlib.suppress(BoundsError, ValueError, RecursionError):
            fn(text)
    return (time.process_time() - started) / times * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    lines = real_events()
    size = sum(map(len, lines)) / len(lines)
    figures = {
        "events": len(lines), "average_bytes": round(size),
        "json_loads_us": per_event(json.loads, lines, args.rounds),
        "bounded_loads_us": per_event(loads, lines, args.rounds),
        "prescan_us": per_event(prescan, lines, args.rounds),
        "prescan_then_json_loads_us": per_event(lambda t: (prescan(t), json.loads(t)), lines, args.rounds),
        "parse_event_us": per_event(parse_event, lines, args.rounds),
    }
    deep = '{"type":"x","a":' + "[" * 5000 + "]" * 5000 + "}"
    figures["refuse_5000_levels_bounded_us"] = refuse(loads, deep)
    figures["refuse_5000_levels_prescan_us"] = refuse(lambda t: prescan(t) or (_ for _ in ()).throw(ValueError()),
                                                      deep)
    print(f"{len(lines)} events of a real run, {size:.0f} bytes on average; CPU per event:")
    for name in ("json_loads_us", "bounded_loads_us", "prescan_us", "prescan_then_json_loads_us", "parse_event_us"):
        print(f"  {name.removesuffix('_us'):28s} {figures[name]:7.2f} us")
    print(f"refusing one body 5,000 levels deep: bounded {figures['refuse_5000_levels_bounded_us']:.1f} us, "
          f"pre-scan {figures['refuse_5000_levels_prescan_us']:.1f} us")
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}))


if __name__ == "__main__":
    main()
