"""With the shared store away, a machine still lists and reads its own runs (from their folders, marked "store
away"), and a server that refuses is told at once: only one that never answers is given the connect bound
(issue 33, point 6). Before: `jobs` and `logs ID` failed after 5 s although the server refused at once (the pool
retried the refused connection until its timeout), and the error did not suggest the folder."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import psycopg_pool
import pytest

from console.engine.store import StoreError
from console.engine.store import postgres as pg
from tests.store.machines import QUICKSTART, Machine


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed): a connection to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that takes the connection (the kernel's backlog) and never says a word: a stall."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    try:
        yield int(s.getsockname()[1])
    finally:
        s.close()


@pytest.fixture
def attempts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every connection psycopg is asked to make (the pool's included), and every pool built."""
    made: list[str] = []
    real = psycopg.Connection.connect.__func__  # type: ignore[attr-defined]

    def counting(cls: Any, *args: Any, **kwargs: Any) -> Any:
        made.append("connect")
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "connect", classmethod(counting))  # the pool's way
    monkeypatch.setattr(psycopg, "connect", lambda *a, **kw: counting(psycopg.Connection, *a, **kw))  # the module's
    class Pool(psycopg_pool.ConnectionPool):  # type: ignore[type-arg]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append("pool")
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(psycopg_pool, "ConnectionPool", Pool)
    return made


def test_a_refused_server_is_told_after_one_attempt_without_the_pools_retries(attempts: list[str]) -> None:
    url = f"postgresql://someone:s3cret@127.0.0.1:{closed_port()}/db"
    with pytest.raises(StoreError) as raised:
        pg.PgStore(url)
    assert "refused" in str(raised.value) and "s3cret" not in str(raised.value)
    # One connection asked for, and no pool (whose workers retry with backoff until its 5 s timeout).
    assert attempts == ["connect"]


def test_a_run_starting_beside_a_refused_server_is_told_at_once_and_goes_on(attempts: list[str]) -> None:
    store = pg.PgStore(f"postgresql://u@127.0.0.1:{closed_port()}/db", lenient=True)
    try:
        assert store.error is not None and "refused" in store.error
        assert attempts[:2] == ["connect", "pool"]  # no wait for the pool's first connection: it catches up later
    finally:
        store.close()


def test_while_the_server_refuses_each_call_is_told_at_once_not_after_the_pools_timeout(attempts: list[str]) -> None:
    """Found measuring the suite's waits: a run starting beside a store that refused made three store calls before its
    first turn, each waiting the pool's whole timeout for a connection that could not come (its first turn 15 s
    late). While the server is away, a call looks with one connection of its own, refused at once."""
    store = pg.PgStore(f"postgresql://u@127.0.0.1:{closed_port()}/db", lenient=True)
    try:
        for _ in range(3):
            before = attempts.count("connect")
            with pytest.raises(StoreError) as raised, store.connection():
                pass
            assert "refused" in str(raised.value) and "no connection within" not in str(raised.value)
            assert attempts.count("connect") >= before + 1
    finally:
        store.close()


def test_a_server_that_never_answers_is_given_its_bound(attempts: list[str], silent_port: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg, "CONNECT_TIMEOUT", 2)  # libpq's least connect_timeout
    with pytest.raises(StoreError) as raised:
        pg.PgStore(f"postgresql://u@127.0.0.1:{silent_port}/db")
    assert "timeout" in str(raised.value) and attempts == ["connect"]


def test_jobs_and_logs_read_this_machines_runs_from_their_folders_while_the_store_is_away(
        pg_url: str, tmp_path: Path) -> None:
    a = Machine("machine-a", tmp_path, pg_url)
    done = a.start(str(QUICKSTART), "--speed", "0")
    assert done.wait() == 0
    folder = done.folder()
    run = next(r["id"] for r in a.jobs() if r["path"] == str(folder))
    a.env["AGENT_CONSOLE_STORE"] = f"postgresql://u@127.0.0.1:{closed_port()}/db"  # the server is down now

    listed = a.cli("jobs", "--json", timeout=60)
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["id"], r["path"], r["status"], r["store"]) for r in rows] == [(run, str(folder), "completed", "away")]
    assert listed.stderr.startswith("agent-console: store away: ") and "refused" in listed.stderr

    table = a.cli("jobs", timeout=60)
    assert table.returncode == 0 and run in table.stdout and "store away" in table.stdout, table.stdout

    story = a.cli("logs", run, timeout=60)
    assert story.returncode == 0, story.stderr
    first = story.stderr.splitlines()[0]
    assert first.startswith("agent-console: store away") and str(folder) in first
    assert "job complete" in story.stdout

    # A reference that names none of them: the line names what works (the listing, the folder), which it does.
    missing = a.cli("logs", "nosuch", timeout=60)
    assert missing.returncode == 2 and "agent-console logs RUN_FOLDER" in missing.stderr
    by_folder = a.cli("logs", str(folder), timeout=60)
    assert by_folder.returncode == 0 and "job complete" in by_folder.stdout
