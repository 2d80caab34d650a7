"""The jobs store under a fleet's load: the shared PostgreSQL store and the embedded default, side by side.

1. Event append: ``--runners`` runners (threads, each its own run folder, event stream and, with PostgreSQL, its
   own link and connection pool) each emit ``--rate`` events a second for ``--seconds``: the p99 of an emit (what a
   turn pays: the file append, the same with either store) and, with PostgreSQL, the p99 from an emit until its
   row is committed in the store (the link's shipping; goal 1 s).
2. Operator command: from another "machine" (its own store connection), a command sent to one of the busy runs,
   until the run has applied it (goal 2 s): each runner reads its inbox at its turn boundaries, as a run does
   (every event it emits here is a turn), and records the command ``applied`` in its log; with PostgreSQL the
   figure ends when that record is back in the store, where the sender sees it (embedded: ``write_inbox`` on this
   machine, until the run's log says applied).
3. Fleet refresh: ``--fleet`` runs in the store (each with ``--fleet-events`` events), the fleet's poll once every
   log is folded (what the fleet view pays every second; goal 200 ms). With PostgreSQL the runs are another
   machine's: folded from the store's events, not from folders.

Uses ``--url`` (or AGENT_CONSOLE_STORE), else starts a PostgreSQL server of its own (tests/pg_server.py, from the
test extras) and stops it at the end. Prints figures with their goals, then one JSON line. Not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from console.engine import events as ev  # noqa: E402
from console.engine.clock import SystemClock  # noqa: E402
from console.engine.control import ControlChannel, write_inbox  # noqa: E402
from console.engine.job import JobPaths  # noqa: E402
from console.engine.operator import OperatorState  # noqa: E402
from console.engine.store import JobStore  # noqa: E402

GOALS = {"ship_p99_ms": 1000.0, "command_p99_ms": 2000.0, "fleet_ms": 200.0}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, round(q / 100 * (len(values) - 1)))]


def make_run(base: Path, n: int) -> JobPaths:
    root = base / f"run-{n:04d}"
    (root / ".console").mkdir(parents=True)
    (root / "instructions.md").write_text("# bench\n")
    return JobPaths(root)


class Runner(threading.Thread):
    """One run: emits events at ``rate`` a second; with a shared store, its link ships them."""

    def __init__(self, paths: JobPaths, rate: float, seconds: float, url: str | None) -> None:
        super().__init__(daemon=True)
        self.paths = paths
        self.rate, self.seconds = rate, seconds
        self.events = ev.EventStream(paths.events, SystemClock())
        self.emits: list[float] = []
        self.emitted_at: dict[int, float] = {}
        self.link: Any = None
        self.store: Any = None
        self.channel = ControlChannel(paths.inbox)
        self.applied: dict[str, float] = {}  # a command's id -> when the run recorded it applied
        if url:
            from console.engine.store.link import StoreLink
            from console.engine.store.postgres import PgStore

            self.store = PgStore(url, host="bench-a", pool_max=2)
            self.store.started(paths.root, paths.root.name, "scripted", "bench", datetime.now(UTC))
            self.link = StoreLink(self.store, paths, self.events, OperatorState(self.channel),
                                  owner=f"bench:{paths.root.name}", now=lambda: datetime.now(UTC))
            self.link.start()

    def run(self) -> None:
        gap = 1 / self.rate
        end = time.monotonic() + self.seconds
        rng = random.Random(self.paths.root.name)
        time.sleep(rng.uniform(0, gap))
        while time.monotonic() < end:
            self.emitted_at[self.events.seq + 1] = time.time()  # before the emit: its link may ship it at once
            t = time.perf_counter()
            self.events.emit(ev.ErrorEvent, message="x" * rng.randint(50, 400), where="bench", recoverable=True)
            self.emits.append(time.perf_counter() - t)
            for cmd in self.channel.poll(force=False):  # the turn boundary: commands applied, as a run does
                self.emitted_at[self.events.seq + 1] = time.time()
                self.events.emit(ev.OperatorCommand, command=cmd.command, source=cmd.source, status="applied",
                                 detail="bench", command_id=cmd.id)
                self.applied[cmd.id] = time.time()
            time.sleep(gap)

    def close(self) -> None:
        if self.link is not None:
            self.link.close()
            self.store.close()
        self.events.close()



def bench_appends(url: str | None, base: Path, n: int, rate: float, seconds: float) -> dict[str, Any]:
    runners = [Runner(make_run(base, i), rate, seconds, url) for i in range(n)]
    lat: list[float] = []
    if url:  # what each batch took from emit to commit: wrap append_events (the link's one call that ships)
        for r in runners:
            orig = r.store.append_events

            def timed(key: str, lines: list[Any], *more: Any, orig: Any = orig, r: Runner = r) -> None:
                orig(key, lines, *more)
                now = time.time()
                lat.extend(now - r.emitted_at[seq] for seq, *_ in lines if seq in r.emitted_at)

            r.store.append_events = timed
    for r in runners:
        r.start()
    command = bench_command(url, runners, seconds) if url else bench_command_embedded(runners)
    for r in runners:
        r.join()
    if url:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(lat) < sum(len(r.emitted_at) for r in runners):
            time.sleep(0.1)
    for r in runners:
        r.close()
    lost = 0
    if url:  # every event of every log is in the store
        import psycopg

        with psycopg.connect(url) as conn:
            for r in runners:
                (have,) = conn.execute("SELECT count(*) FROM events WHERE run_key=%s", (r.link.key,)).fetchone()
                lost += len(r.emitted_at) - have
    emits = [x for r in runners for x in r.emits]
    out = {"events": len(emits), "emit_p50_ms": pct(emits, 50) * 1e3, "emit_p99_ms": pct(emits, 99) * 1e3, **command}
    if url:
        out |= {"shipped": len(lat), "lost": lost, "ship_p50_ms": pct(lat, 50) * 1e3,
                "ship_p99_ms": pct(lat, 99) * 1e3}
    return out


def bench_command(url: str, runners: list[Runner], seconds: float) -> dict[str, Any]:
    """Commands from another machine to busy runs: send (a row + NOTIFY) -> the file in the run's inbox."""
    from console.engine.store.postgres import PgStore

    viewer = PgStore(url, host="bench-b")
    times: list[float] = []
    rng = random.Random(7)
    end = time.monotonic() + seconds - 1
    time.sleep(1)
    missed = 0
    while time.monotonic() < end:
        r = rng.choice(runners)
        cid = uuid.uuid4().hex
        since = _seen(viewer, r.link.key, 0, "")[1]
        t = time.perf_counter()
        viewer.send_command(r.link.key, {"id": cid, "command": "checkpoint", "args": {}, "source": "b"})
        while True:  # until the run's record of it applied is in the store: what the sender's machine sees
            found, since = _seen(viewer, r.link.key, since, cid)
            if found or time.perf_counter() - t > 10:
                missed += not found
                break
            time.sleep(0.01)
        times.append(time.perf_counter() - t)
        time.sleep(0.2)
    viewer.close()
    return {"commands": len(times), "command_p50_ms": pct(times, 50) * 1e3, "command_p99_ms": pct(times, 99) * 1e3,
            "commands_not_applied_in_10s": missed}


def _seen(viewer: Any, key: str, since: int, command_id: str) -> tuple[bool, int]:
    """Whether the run's events after ``since`` in the store say ``command_id`` applied, and the last one's place."""
    found = False
    while batch := viewer.event_texts_after(key, since):
        since = batch[-1][0]
        found = found or any(text is not None and command_id and command_id in text and '"applied"' in text
                             for _, text in batch)
    return found, since


def bench_command_embedded(runners: list[Runner]) -> dict[str, Any]:
    times = []
    missed = 0
    time.sleep(1)
    for r in runners[:20]:
        t = time.perf_counter()
        cmd = write_inbox(r.paths, "checkpoint")
        while cmd.id not in r.applied:  # the run's turn boundary read it and recorded it applied
            if time.perf_counter() - t > 10:
                missed += 1
                break
            time.sleep(0.002)
        times.append(time.perf_counter() - t)
    return {"commands": len(times), "command_p50_ms": pct(times, 50) * 1e3, "command_p99_ms": pct(times, 99) * 1e3,
            "commands_not_applied_in_10s": missed}


def bench_fleet(url: str | None, base: Path, runs: int, per_run: int) -> dict[str, Any]:
    """The fleet's poll over ``runs`` runs once all are folded (the view's steady refresh)."""
    from console.view.fleet import Fleet

    t0 = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
    lines = [json.dumps({"v": 1, "ts": (t0 + timedelta(seconds=i)).isoformat(), "seq": i + 1, "session": 1,
                         "type": "error", "message": f"event {i}", "where": "bench", "recoverable": True})
             for i in range(per_run)]
    data = base / "fleet-data"
    data.mkdir()
    if url:
        from console.engine.store.postgres import PgStore

        store = PgStore(url, host="bench-a")
        for n in range(runs):
            path = Path(f"/bench-a/runs/run-{n:04d}")
            store.started(path, path.name, "scripted", "bench", t0 + timedelta(seconds=n))
            store.append_events(store.key(path), [(i + 1, None, "error", line) for i, line in enumerate(lines)])
        store.close()
        os.environ["AGENT_CONSOLE_HOST"] = "bench-b"  # the fleet's machine: every run is another machine's
    else:
        store_e = JobStore(data / "jobs.db")
        for n in range(runs):
            paths = make_run(base / "fleet-runs", n)
            paths.events.write_text("\n".join(lines) + "\n")
            store_e.started(paths.root, paths.root.name, "scripted", "bench", t0 + timedelta(seconds=n))
    fleet = Fleet(data / "jobs.db", now=lambda: datetime.now(UTC), url=url, limit=runs + 100)
    t = time.perf_counter()
    first = fleet.poll()
    first_s = time.perf_counter() - t
    polls = []
    for _ in range(15):
        t = time.perf_counter()
        rows = fleet.poll()
        polls.append(time.perf_counter() - t)
    fleet.close()
    os.environ.pop("AGENT_CONSOLE_HOST", None)
    assert len(rows) == len(first) >= runs, (len(rows), runs)  # (the appends' runs share the database)
    return {"fleet_runs": len(rows), "fleet_first_ms": first_s * 1e3, "fleet_ms": statistics.median(polls) * 1e3,
            "fleet_p99_ms": pct(polls, 99) * 1e3}


def report(name: str, fig: dict[str, Any]) -> None:
    print(f"\n{name}")
    print(f"  event append: {fig['events']:,} events; emit p50 {fig['emit_p50_ms']:.3f} ms, "
          f"p99 {fig['emit_p99_ms']:.3f} ms (a turn's cost, the same with either store)")
    if "ship_p99_ms" in fig:
        print(f"  shipped to the store: {fig['shipped']:,} ({fig['lost']} missing); emit -> committed p50 "
              f"{fig['ship_p50_ms']:.0f} ms, p99 {fig['ship_p99_ms']:.0f} ms (goal {GOALS['ship_p99_ms']:.0f} ms)")
    print(f"  operator command: {fig['commands']} sent; p50 {fig['command_p50_ms']:.1f} ms, p99 "
          f"{fig['command_p99_ms']:.1f} ms (goal {GOALS['command_p99_ms']:.0f} ms)")
    print(f"  fleet refresh, {fig['fleet_runs']:,} runs: {fig['fleet_ms']:.1f} ms (p99 {fig['fleet_p99_ms']:.1f} ms; "
          f"goal {GOALS['fleet_ms']:.0f} ms); first poll, every log folded: {fig['fleet_first_ms']:.0f} ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=os.environ.get("AGENT_CONSOLE_STORE"))
    ap.add_argument("--runners", type=int, default=50)
    ap.add_argument("--rate", type=float, default=10.0, help="events a second per runner")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--fleet", type=int, default=1000)
    ap.add_argument("--fleet-events", type=int, default=50)
    args = ap.parse_args()
    server = None
    url = args.url
    if not url:
        from tests.pg_server import PgServer

        server = PgServer()
        server.start()
        url = server.new_database()
    base = Path(tempfile.mkdtemp(prefix="agent-console-bench-store-"))
    results: dict[str, Any] = {}
    try:
        for name, use in (("postgresql", url), ("embedded", None)):
            folder = base / name
            folder.mkdir()
            fig = bench_appends(use, folder, args.runners, args.rate, args.seconds)
            fig |= bench_fleet(use, folder, args.fleet, args.fleet_events)
            report(f"{name}: {args.runners} runners x {args.rate:g} events/s for {args.seconds:g} s", fig)
            results[name] = fig
    finally:
        shutil.rmtree(base, ignore_errors=True)
        if server is not None:
            server.remove()
    print(json.dumps({"store": results, "goals": GOALS}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
