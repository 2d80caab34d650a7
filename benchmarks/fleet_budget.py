"""The fleet budget's cost per turn boundary (console.engine.store.fleet): what one run's check asks of its store,
with ``--runs`` runs' spend rows of today in it (and as many of other days), embedded and PostgreSQL side by side.

Per check: the Python function calls (deterministic: the quick figure), the CPU time of this process and the wall
time (median of ``--checks``), and the calls of one turn's spend record. The check is one query (one statement of
sums and the day's raises); a hold's creation and telling happen only when a limit is reached, not measured here.
PostgreSQL: ``--url`` (or AGENT_CONSOLE_STORE), else a server of its own (tests/pg_server.py, from the test extras).
Prints figures, then one JSON line. Not a timed test.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from console.engine.guardrails.fleet import local_day  # noqa: E402
from console.engine.store.fleet import FleetLimits, SqliteFleet, StoreFleetBudget  # noqa: E402

NOW = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)


def calls(fn: Any) -> int:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    return int(sum(s[1] for s in pstats.Stats(prof).stats.values()))  # type: ignore[attr-defined]


def measure(name: str, budgets: list[StoreFleetBudget], checks: int) -> dict[str, Any]:
    one = budgets[0]
    for b in budgets:  # today's rows, and as many of yesterday (the index keeps them out of the sum)
        b.spent(NOW - timedelta(days=1), 0.01)
        b.spent(NOW, 0.01)
    one.check(NOW)  # warm: the connection made, the statement prepared
    wall, cpu = [], []
    for _ in range(checks):
        w, c = time.perf_counter(), time.process_time()
        assert one.check(NOW) is None
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return {"store": name, "runs": len(budgets), "check_calls": calls(lambda: one.check(NOW)),
            "spent_calls": calls(lambda: one.spent(NOW, 0.001)),
            "check_wall_ms_p50": round(statistics.median(wall) * 1000, 3),
            "check_cpu_ms_mean": round(statistics.fmean(cpu) * 1000, 3)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--checks", type=int, default=300)
    p.add_argument("--url", default=os.environ.get("AGENT_CONSOLE_STORE"))
    p.add_argument("--no-postgres", action="store_true")
    args = p.parse_args()
    limits = FleetLimits(daily_usd=1e6, jobs={"job0": 1e6})
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        from console.engine.store import JobStore

        db = Path(tmp) / "jobs.db"
        JobStore(db)
        ledger = SqliteFleet(db)
        budgets = [StoreFleetBudget(ledger, Path(tmp) / f"run{n}", f"job{n % 10}", lambda: limits, f"b:{n}")
                   for n in range(args.runs)]
        out.append(measure("embedded", budgets, args.checks))
        ledger.close()
    if not args.no_postgres:
        server = None
        url = args.url
        if not url:
            from tests.pg_server import PgServer

            server = PgServer()
            server.start()
            url = server.new_database()
        try:
            from console.engine.store.pg_fleet import PgFleet
            from console.engine.store.postgres import PgStore

            store = PgStore(url)
            pg = PgFleet(store)
            paths = [Path(f"/bench/run{n}") for n in range(args.runs)]
            for path in paths:
                store.ensure_run(path, path.name, NOW)
            budgets = [StoreFleetBudget(pg, path, f"job{n % 10}", lambda: limits, f"b:{n}")
                       for n, path in enumerate(paths)]
            out.append(measure("postgresql", budgets, args.checks))
            store.close()
        finally:
            if server is not None:
                server.remove()
    for r in out:
        print(f"{r['store']:>10}: {r['runs']} runs' rows; a check {r['check_calls']} Python calls, "
              f"{r['check_cpu_ms_mean']} ms CPU (mean), {r['check_wall_ms_p50']} ms wall (p50); a turn's spend "
              f"{r['spent_calls']} calls")
    print(json.dumps({"day": local_day(NOW), "results": out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
