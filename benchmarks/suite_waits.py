"""Where the test suite waits rather than computes: per test, its wall time against the CPU it used, ranked by what
is left (the idle: sleeps, polls, timeouts waited out, a server or a child process waited for), per test and per
module, and how long the workers' ends lie apart (the tail: one worker still running while the others are done).

Opt-in, never part of the README's command. It records as a pytest plugin, then ranks what it recorded:

    .venv/bin/python -m pytest -p benchmarks.suite_waits -n 2 tests/store tests/web   # SUITE_WAITS_OUT=/tmp/...
    .venv/bin/python benchmarks/suite_waits.py [--top 40] [--out /tmp/suite-waits]

Each test's figures are taken around its whole protocol (setup, call, teardown) in the process that ran it (an
xdist worker writes a file of its own): wall (time.monotonic), the process's own CPU (getrusage RUSAGE_SELF, every
thread) and its children's (RUSAGE_CHILDREN: only the children it reaped within the test; a detached process, a
server started by a module's fixture or one still running at the test's end is not counted, so its CPU shows as
idle). On a loaded machine the time spent waiting for a core shows as idle too: run a group of modules on a quiet
machine (-n 2 or -n 0), and compare figures taken the same way."""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

OUT_ENV = "SUITE_WAITS_OUT"
DEFAULT_OUT = "/tmp/suite-waits"

_file: Any = None


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _out() -> Path:
    return Path(os.environ.get(OUT_ENV, DEFAULT_OUT))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    global _file
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    if _file is None:
        _out().mkdir(parents=True, exist_ok=True)
        _file = (_out() / f"{worker}-{os.getpid()}.jsonl").open("a", buffering=1)
    started, began = time.time(), time.monotonic()
    own0, children0 = _cpu()
    yield
    wall = time.monotonic() - began
    own1, children1 = _cpu()
    _file.write(json.dumps({"id": item.nodeid, "worker": worker, "start": started, "wall": wall,
                            "own": own1 - own0, "children": children1 - children0}) + "\n")


def load(out: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted(out.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                row["idle"] = row["wall"] - row["own"] - row["children"]
                rows.append(row)
    return rows


def report(rows: list[dict[str, Any]], top: int) -> list[str]:
    lines = [f"{len(rows)} tests; seconds: idle = wall - own CPU - reaped children's CPU", "", "tests by idle:"]
    for r in sorted(rows, key=lambda r: -r["idle"])[:top]:
        lines.append(f"{r['idle']:7.2f} idle {r['wall']:7.2f} wall {r['own']:6.2f} own {r['children']:6.2f} "
                     f"children  {r['id']}")
    modules: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0.0])
    for r in rows:
        m = modules[r["id"].split("::")[0]]
        for i, key in enumerate(("idle", "wall", "own", "children")):
            m[i] += r[key]
        m[4] += 1
    lines += ["", "modules by idle:"]
    for name, (idle, wall, own, children, n) in sorted(modules.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"{idle:7.1f} idle {wall:7.1f} wall {own:6.1f} own {children:6.1f} children {int(n):5d} tests  "
                     f"{name}")
    total = [sum(r[k] for r in rows) for k in ("idle", "wall", "own", "children")]
    lines += ["", "all: {:.1f} idle, {:.1f} wall, {:.1f} own, {:.1f} children".format(*total)]
    ends: dict[str, float] = collections.defaultdict(float)
    first = min((r["start"] for r in rows), default=0.0)
    for r in rows:
        ends[r["worker"]] = max(ends[r["worker"]], r["start"] + r["wall"] - first)
    if len(ends) > 1:
        tail = max(ends.values()) - min(ends.values())
        lines.append("workers' ends (s after the first test): "
                     + ", ".join(f"{w} {t:.0f}" for w, t in sorted(ends.items())) + f"; tail {tail:.1f} s")
    return lines


def summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    out = {f"{key}_s": round(sum(r[key] for r in rows), 1) for key in ("idle", "wall", "own", "children")}
    return {"tests": len(rows), **out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--out", type=Path, default=_out(), help=f"the folder recorded into (${OUT_ENV})")
    ap.add_argument("--top", type=int, default=40, help="tests and modules listed")
    args = ap.parse_args(argv)
    rows = load(args.out)
    if not rows:
        print(f"nothing recorded in {args.out}: run pytest with -p benchmarks.suite_waits first", file=sys.stderr)
        return 1
    print("\n".join(report(rows, args.top)))
    print(json.dumps({"suite_waits": summary(rows)}))  # the one-line summary, last (as every script here)
    return 0


if __name__ == "__main__":
    sys.exit(main())
