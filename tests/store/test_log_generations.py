"""A run's log moved aside and begun again reuses seqs the shared store holds (repair.py keeps a damaged log's good
lines, so the next events take the seqs of the damaged last ones; a log that was not a file starts from 1): the store
keeps both generations (schema 2), in order for its followers, never dropping the new lines as duplicates; reading
the log again adds nothing. Against a real PostgreSQL server."""

from __future__ import annotations

import json

import psycopg

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.operator import OperatorState
from console.engine.repair import check_log
from console.engine.store.link import StoreLink
from console.engine.store.postgres import PgStore
from console.engine.store.schema import LATEST, MIGRATIONS
from tests.store.machines import sql, wait_until


def ship_all(link: StoreLink) -> None:
    while link._ship():
        pass


def rows(url: str) -> list[tuple[int, int, str]]:
    return [(e, s, m) for e, s, m in sql(url, "SELECT epoch, seq, body->>'message' FROM events ORDER BY pos")]


def new_link(store: PgStore, paths, stream: ev.EventStream) -> StoreLink:
    return StoreLink(store, paths, stream, OperatorState(), owner="test:1:r", now=FakeClock().now)


def test_a_damaged_log_repaired_keeps_both_generations(make_job, pg_url: str) -> None:
    paths = make_job()
    paths.state.mkdir(parents=True, exist_ok=True)
    store = PgStore(pg_url)
    clock = FakeClock()
    stream = ev.EventStream(paths.events, clock)
    for i in range(10):
        stream.emit(ev.ErrorEvent, message=f"first {i + 1}", where="test", recoverable=True)
    stream.close()
    ship_all(new_link(store, paths, stream))
    # The disk damages the last three lines; the next run's repair keeps the seven good ones, aside the original.
    lines = paths.events.read_bytes().splitlines(keepends=True)
    paths.events.write_bytes(b"".join(lines[:7]) + b"".join(b"\x00garbage" + x[8:] for x in lines[7:]))
    assert check_log(paths, clock)
    again = ev.EventStream(paths.events, clock)
    assert again.seq == 7
    for i in range(3):
        again.emit(ev.ErrorEvent, message=f"second {i + 8}", where="test", recoverable=True)
    again.close()
    ship_all(new_link(store, paths, again))
    first = [(0, i, f"first {i}") for i in range(1, 11)]
    assert rows(pg_url) == [*first, *((1, i, f"second {i}") for i in range(8, 11))]
    # A follower that had read the whole first generation gets the second after it.
    key = store.key(paths.root)
    (last,) = store.last_seqs([key]).values()
    assert [b["message"] for _, b in store.events_after(key, 10)] == ["second 8", "second 9", "second 10"]
    assert last > 10
    # Read again from its start (the next run, a rescan after the store was away): nothing more, no new generation.
    ship_all(new_link(store, paths, again))
    assert len(rows(pg_url)) == 13 and sql(pg_url, "SELECT log_epoch FROM runs") == [(1,)]
    store.close()


def test_a_log_begun_again_under_a_running_link(make_job, pg_url: str) -> None:
    """The log replaced while the link runs (moved aside, a new one from seq 1): the link sees another file and
    reads it against the store."""
    paths = make_job()
    paths.state.mkdir(parents=True, exist_ok=True)
    store = PgStore(pg_url)
    clock = FakeClock()
    stream = ev.EventStream(paths.events, clock)
    link = new_link(store, paths, stream)
    link.start()
    try:
        for i in range(5):
            stream.emit(ev.ErrorEvent, message=f"old {i + 1}", where="test", recoverable=True)
        wait_until(lambda: len(rows(pg_url)) == 5, 30, "the first five in the store")
        stream.close()
        paths.events.rename(paths.state / "events.aside.jsonl")
        fresh = ev.EventStream(paths.events, clock)
        for i in range(8):
            fresh.emit(ev.ErrorEvent, message=f"new {i + 1}", where="test", recoverable=True)
        wait_until(lambda: len(rows(pg_url)) == 13, 30, f"the new log's lines in the store: {rows(pg_url)}")
        fresh.close()
    finally:
        link.close()
    got = rows(pg_url)
    assert got[:5] == [(0, i, f"old {i}") for i in range(1, 6)]
    assert got[5:] == [(1, i, f"new {i}") for i in range(1, 9)]
    store.close()


def test_a_line_in_the_engines_shape_that_is_no_json_is_left_out_and_the_rest_sent(make_job, pg_url: str) -> None:
    paths = make_job()
    paths.state.mkdir(parents=True, exist_ok=True)
    store = PgStore(pg_url)
    stream = ev.EventStream(paths.events, FakeClock())
    stream.emit(ev.ErrorEvent, message="one", where="test", recoverable=True)
    with paths.events.open("ab") as fh:  # the head is ours, the rest is not JSON: the server refuses the batch
        fh.write(b'{"v":1,"ts":"2026-01-01T00:00:00Z","seq":2,"session":1,"type":"error","message":"x",}\n')
    stream.seq = 2
    stream.emit(ev.ErrorEvent, message="three", where="test", recoverable=True)
    stream.close()
    ship_all(new_link(store, paths, stream))
    assert rows(pg_url) == [(0, 1, "one"), (0, 3, "three")]
    store.close()


def test_a_store_of_schema_1_is_migrated_and_keeps_its_events(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL "
                     "DEFAULT now())")
        conn.execute(MIGRATIONS[0][1])
        conn.execute("INSERT INTO schema_version (version) VALUES (1)")
        conn.execute("INSERT INTO runs (key, id, host, path, name, status, started_at, updated_at, last_seq) "
                     "VALUES ('k', 'i', 'h', '/p', 'n', 'running', 't', 't', 2)")
        for seq in (1, 2):
            conn.execute("INSERT INTO events (run_key, seq, type, body) VALUES ('k', %s, 'error', %s)",
                         (seq, json.dumps({"seq": seq, "message": f"m{seq}"})))
    store = PgStore(pg_url)
    assert [(s, b["message"]) for s, b in store.events_after("k", 0)] == [(1, "m1"), (2, "m2")]
    assert store.held("k") == (0, {1: [(0, None)], 2: [(0, None)]})
    assert sql(pg_url, "SELECT max(version) FROM schema_version") == [(LATEST,)]
    store.close()
