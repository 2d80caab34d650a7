"""`attach ID` on a run of another machine with a long history in the shared store: how soon the panes show its
newest messages, and how soon every event is folded (the local attach's goal: 100,000 events within 1.5 s).

    python benchmarks/attach_remote.py [--events 100000] [--url postgresql://...]

Without ``--url`` a PostgreSQL server is started for the run (tests/pg_server.py) and removed after it."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def fill(url: str, n: int) -> tuple[str, int]:
    """A run of "machine-a" with ``n`` synthetic events (the TUI benchmark's producer), as its link ships them."""
    import psycopg
    from tui import Producer  # type: ignore[import-not-found]

    from console.engine import events as ev
    from console.engine.store.postgres import PgStore

    out: list[ev.EventBase] = []
    producer = Producer(out.append)
    while len(out) < n:
        producer.run_turns(1)
    PgStore(url).close()
    key = uuid.uuid4().hex
    path = f"/elsewhere/runs/bench-{key[:6]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO runs (key, id, host, path, name, status, started_at, updated_at, last_seq, "
                     "lease_owner, lease_expires) VALUES (%s, %s, 'machine-a', %s, %s, 'running', '2026-11-26T09:00', "
                     "'2026-11-26T09:00', %s, 'machine-a:1:r', now() + interval '1 hour')",
                     (key, key[:5], path, Path(path).name, out[-1].seq))
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO events (run_key, seq, ts, type, body) VALUES (%s, %s, %s, %s, %s)",
                            [(key, e.seq, e.ts, e.type, e.model_dump_json()) for e in out])
    return path, len(out)


async def attach(url: str, path: str, n: int) -> tuple[float, float]:
    from console.engine.store.postgres import PgStore
    from console.tui.launch import build_remote_app

    store = PgStore(url)
    row = next(r for r in store.list(10) if r.path == path)
    store.close()
    t = time.perf_counter()
    app = build_remote_app(url, row, watch=False, animations=False, keymap={})
    first = 0.0
    async with app.run_test(size=(80, 24)) as pilot:
        while not first or app.run_screen.events_seen < n or app.bridge.pending:
            if not first and app.run_screen.ui_alive and app.run_screen.conversation.plain_lines():
                first = time.perf_counter() - t
            await asyncio.sleep(0.005)
        await pilot.pause()
        whole = time.perf_counter() - t
    return first, whole


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--url")
    args = parser.parse_args()
    os.environ["AGENT_CONSOLE_HOST"] = "machine-b"
    server = None
    url = args.url
    if url is None:
        from tests.pg_server import PgServer

        server = PgServer()
        server.start()
        url = server.new_database()
    try:
        t = time.perf_counter()
        path, n = fill(url, args.events)
        print(f"store: {n:,} events of a run of machine-a written in {time.perf_counter() - t:.1f} s")
        first, whole = asyncio.run(attach(url, path, n))
        print(f"attach (store): newest messages drawn in {first:.2f} s; all {n:,} events folded in {whole:.2f} s "
              "(the local attach's goal: <= 1.5 s for 100,000)")
    finally:
        if server is not None:
            server.remove()


if __name__ == "__main__":
    main()
