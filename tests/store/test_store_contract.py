"""One contract, two stores: the embedded SQLite file and PostgreSQL (a real server) answer alike."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from console.engine.store import FINISHED, NEEDS_YOU, Store, StoreError, open_store, shown_store_url

T0 = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)


def opened(url: str, tmp_path: Path) -> Store:
    return open_store(url or None, tmp_path / "data" / "jobs.db")


def test_a_run_through_its_states(store_url: str, tmp_path: Path) -> None:
    store = opened(store_url, tmp_path)
    run = tmp_path / "runs" / "quickstart-20261126-090000"
    store.started(run, run.name, "scripted", "scripted-agent", T0)
    (row,) = store.list()
    assert (row.path, row.name, row.status, row.provider, row.started_at) == (
        str(run), run.name, "running", "scripted", T0.isoformat(timespec="seconds"))
    store.needs(run, "stuck", "no todo completed in 40 turns", T0 + timedelta(minutes=1))
    store.needs(run, "budget", "spent", T0 + timedelta(minutes=2))  # the first need's time is kept
    row = store.get(run)
    assert row is not None and row.status == NEEDS_YOU and row.detail == "budget: spent"
    assert row.needs_since == (T0 + timedelta(minutes=1)).isoformat(timespec="seconds")
    store.answered(run, T0 + timedelta(minutes=3))
    row = store.get(run)
    assert row is not None and (row.status, row.detail, row.needs_since) == ("running", None, None)
    store.cost(run, 1.25)
    store.cost(run, float("nan"))  # not a cost: never written
    store.completed(run, T0 + timedelta(minutes=4), 0.9, "done")
    store.ended(run, "failed", T0 + timedelta(minutes=5), "late")  # a completed run keeps its end
    store.started(run, run.name, "scripted", "scripted-agent", T0 + timedelta(minutes=6))  # and is not restarted
    row = store.get(run)
    assert row is not None and (row.status, row.confidence, row.summary, row.cost_usd) == ("completed", 0.9, "done",
                                                                                           1.25)
    assert store.error is None
    store.close()


def test_the_operators_pause_is_a_state_of_its_own(store_url: str, tmp_path: Path) -> None:
    """`jobs` reads no log: the store says "paused" while the operator holds the run, never over a need (which says
    more) or an end, and "running" again once they resume it."""
    store = opened(store_url, tmp_path)
    run = tmp_path / "runs" / "paused-run"
    store.started(run, run.name, "scripted", "scripted-agent", T0)
    store.paused(run, T0 + timedelta(minutes=1))
    row = store.get(run)
    assert row is not None and (row.status, row.updated_at) == ("paused", (T0 + timedelta(minutes=1)).isoformat())
    assert row in store.list_live_and_recent(0)[0]  # paused is live: the fleet lists it whatever its age
    store.unpaused(run, T0 + timedelta(minutes=2))
    assert store.get(run).status == "running"  # type: ignore[union-attr]
    store.needs(run, "stuck", "no todo completed in 40 turns", T0 + timedelta(minutes=3))
    store.paused(run, T0 + timedelta(minutes=4))  # a need says more than a pause
    assert store.get(run).status == NEEDS_YOU  # type: ignore[union-attr]
    store.unpaused(run, T0 + timedelta(minutes=5))  # a resume of a run that was not paused changes nothing
    assert store.get(run).status == NEEDS_YOU  # type: ignore[union-attr]
    store.answered(run, T0 + timedelta(minutes=6))
    store.paused(run, T0 + timedelta(minutes=7))
    store.ended(run, "stopped", T0 + timedelta(minutes=8), "stopped by the operator")
    store.unpaused(run, T0 + timedelta(minutes=9))  # never over an end
    assert store.get(run).status == "stopped"  # type: ignore[union-attr]
    assert store.error is None
    store.close()


def test_a_run_whose_agent_gave_up_keeps_its_confidence_and_since_when(store_url: str, tmp_path: Path) -> None:
    store = opened(store_url, tmp_path)
    run = tmp_path / "runs" / "gave-up"
    store.started(run, run.name, "scripted", "scripted-agent", T0)
    store.needs(run, "gave_up", "cannot read the input", T0 + timedelta(minutes=1))
    store.gave_up(run, T0 + timedelta(minutes=2), 0.1, "cannot read the input (notes: no text layer)")
    row = store.get(run)
    assert row is not None and (row.status, row.confidence, row.detail, row.needs_since) == (
        "gave up", 0.1, "cannot read the input (notes: no text layer)", (T0 + timedelta(minutes=1)).isoformat())
    assert row in store.list_live_and_recent(0)[0]  # it waits for its operator: listed whatever its age
    store.completed(run, T0 + timedelta(minutes=3), 0.9, "done")  # resumed and completed
    store.gave_up(run, T0 + timedelta(minutes=4), 0.0, "late")  # never over a completed run
    assert store.get(run).status == "completed"  # type: ignore[union-attr]
    assert store.error is None
    store.close()


def test_an_acknowledged_run_keeps_its_status_and_asks_no_more(store_url: str, tmp_path: Path) -> None:
    """Issue 33: `ack ID` (console.engine.acknowledge) on a run that gave up keeps its word and outcome and clears
    since when it needed its operator; one that crashed needing them is interrupted; a completed one is left."""
    store = opened(store_url, tmp_path)
    gave_up, crashed, done = (tmp_path / "runs" / n for n in ("gave-up", "crashed", "done"))
    for run in (gave_up, crashed, done):
        store.started(run, run.name, "scripted", "scripted-agent", T0)
    store.gave_up(gave_up, T0 + timedelta(minutes=2), 0.1, "cannot read the input")
    store.needs(crashed, "crashed", "internal error", T0 + timedelta(minutes=1))
    store.completed(done, T0 + timedelta(minutes=3), 0.9, "done")
    for run in (gave_up, crashed, done):
        store.acknowledged(run, T0 + timedelta(minutes=5))
    row = store.get(gave_up)
    assert row is not None and (row.status, row.confidence, row.detail, row.needs_since) == (
        "gave up", 0.1, "cannot read the input", None)
    row = store.get(crashed)
    assert row is not None and (row.status, row.needs_since) == ("interrupted", None)
    assert store.get(done).status == "completed"  # type: ignore[union-attr]
    assert store.error is None
    store.close()


def test_live_runs_are_listed_whatever_their_age(store_url: str, tmp_path: Path) -> None:
    store = opened(store_url, tmp_path)
    old_live = tmp_path / "runs" / "a-live"
    store.started(old_live, old_live.name, "scripted", "m", T0 - timedelta(days=30))
    for n in range(6):
        run = tmp_path / "runs" / f"done-{n}"
        store.started(run, run.name, "scripted", "m", T0 + timedelta(minutes=n))
        store.ended(run, FINISHED[n % len(FINISHED)], T0 + timedelta(minutes=n, seconds=30))
    rows, older = store.list_live_and_recent(2)
    assert [Path(r.path).name for r in rows] == ["done-5", "done-4", "a-live"]
    assert older == 4
    assert len(store.list(3)) == 3
    store.close()


def test_forget_removes_only_the_runs_named(store_url: str, tmp_path: Path) -> None:
    store = opened(store_url, tmp_path)
    runs = [tmp_path / "runs" / f"r{n}" for n in range(3)]
    for n, run in enumerate(runs):
        store.started(run, run.name, "scripted", "m", T0 + timedelta(minutes=n))
    assert store.forget([runs[0], str(runs[2]), tmp_path / "never"]) == 2
    assert [r.path for r in store.list()] == [str(runs[1])]
    assert store.get(runs[0]) is None
    store.close()


def test_hostile_text_is_stored_as_text(store_url: str, tmp_path: Path) -> None:
    store = opened(store_url, tmp_path)
    run = tmp_path / "runs" / "x'); DROP TABLE runs; --"
    store.started(run, run.name, "scripted", "m\x1b[31m", T0)
    store.needs(run, "stuck", "'\"\\; \x00 ok"[:4] + "\u2603" * 3000, T0)
    row = store.get(run)
    assert row is not None and row.model == "m\x1b[31m" and len(row.detail or "") == 2000
    assert store.error is None
    store.close()


def test_postgres_migrates_once_even_when_started_together(pg_url: str, tmp_path: Path) -> None:
    import psycopg

    from console.engine.store.schema import LATEST

    stores: list[Store] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            stores.append(opened(pg_url, tmp_path))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(stores) == 4
    with psycopg.connect(pg_url) as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM schema_version ORDER BY version")]
    assert versions == list(range(1, LATEST + 1))
    for s in stores:
        s.close()


def test_postgres_refuses_a_schema_newer_than_it_knows(pg_url: str, tmp_path: Path) -> None:
    import psycopg

    opened(pg_url, tmp_path).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version (version) VALUES (999)")
    with pytest.raises(StoreError, match="version 999, newer"):
        opened(pg_url, tmp_path)


def test_a_password_never_reaches_an_error(pg_server: object, tmp_path: Path) -> None:
    url = "postgresql://someone:s3cret-pw@127.0.0.1:1/nothing"
    assert "s3cret" not in shown_store_url(url) and shown_store_url(url) == "postgresql://someone@127.0.0.1:1/nothing"
    assert "s3cret" not in shown_store_url(url + "?password=s3cret-pw")
    with pytest.raises(StoreError) as caught:
        opened(url, tmp_path)
    assert "s3cret" not in str(caught.value) and "127.0.0.1" in str(caught.value)


def test_a_store_says_whether_it_is_shared_and_a_shared_one_offers_what_its_protocol_declares(
        store_url: str, tmp_path: Path) -> None:
    """The views ask the store (is_shared: its declared ``shared``), never which class it is; what SharedStore
    declares, the PostgreSQL store has."""
    import inspect

    from console.engine.store import SharedStore, is_shared

    store = opened(store_url, tmp_path)
    try:
        assert is_shared(store) == bool(store_url) == store.shared
        if is_shared(store):
            methods = {n for n, v in vars(SharedStore).items() if inspect.isfunction(v) and not n.startswith("_")}
            assert methods and methods <= set(dir(store)) and isinstance(store.host, str)
            for name in methods:
                assert inspect.signature(getattr(store, name)).parameters.keys() == \
                    inspect.signature(getattr(SharedStore, name)).parameters.keys() - {"self"}, name
    finally:
        store.close()
