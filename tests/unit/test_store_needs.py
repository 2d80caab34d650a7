"""The jobs table's "needs you": the status, why (the detail) and since when (needs_since), cleared by the answer or
the run's end; added to a database an older version made; a database that cannot take the column still works."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

from console.engine.store import NEEDS_YOU, JobStore
from tests.unit.test_store_cost import OLD_SCHEMA, NoAlter

T0 = datetime(2026, 1, 15, 12, 0, 0, tzinfo=UTC)


def test_a_need_then_its_answer(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.db")
    job = tmp_path / "run-1"
    store.started(job, "run-1", "openai", "gpt-4.1", T0)
    store.needs(job, "stuck", "no todo completed in 40 turns", T0 + timedelta(minutes=5))
    row = store.get(job)
    assert row is not None and (row.status, row.detail, row.needs_since) == (
        NEEDS_YOU, "stuck: no todo completed in 40 turns", (T0 + timedelta(minutes=5)).isoformat())
    # Another need while unanswered: the newest reason, since the first moment.
    store.needs(job, "budget", "spend limit reached", T0 + timedelta(minutes=9))
    row = store.get(job)
    assert row.detail == "budget: spend limit reached" and row.needs_since == (T0 + timedelta(minutes=5)).isoformat()
    store.answered(job, T0 + timedelta(minutes=10))
    row = store.get(job)
    assert (row.status, row.detail, row.needs_since) == ("running", None, None)
    assert store.error is None


def test_the_runs_end_clears_its_need_and_a_completed_run_stays_completed(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.db")
    job = tmp_path / "run-1"
    store.started(job, "run-1", "openai", "gpt-4.1", T0)
    store.needs(job, "crashed", "the run crashed", T0)
    store.ended(job, "failed", T0, "internal error")
    row = store.get(job)
    assert (row.status, row.needs_since) == ("failed", None)
    store.answered(job, T0)  # an answer after the end changes nothing
    assert store.get(job).status == "failed"
    store.started(job, "run-1", "openai", "gpt-4.1", T0)
    store.needs(job, "restart_approval", "approve", T0)
    store.started(job, "run-1", "openai", "gpt-4.1", T0)  # an approved restart: running again, no need
    assert (store.get(job).status, store.get(job).needs_since) == ("running", None)
    store.needs(job, "stuck", "x", T0)
    store.completed(job, T0, 0.9, "done")
    store.needs(job, "stuck", "late", T0)  # never over a completed run
    row = store.get(job)
    assert (row.status, row.summary, row.needs_since) == ("completed", "done", None)


def test_a_run_that_needs_you_is_listed_whatever_its_age(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.db")
    old = tmp_path / "old"
    store.started(old, "old", "scripted", "m", T0 - timedelta(days=30))
    store.needs(old, "stuck", "x", T0 - timedelta(days=30))
    for n in range(5):
        job = tmp_path / f"done-{n}"
        store.started(job, job.name, "scripted", "m", T0 + timedelta(minutes=n))
        store.completed(job, T0, 1.0, "ok")
    rows, older = store.list_live_and_recent(2)
    assert str(old) in [r.path for r in rows] and older == 3


def test_an_old_database_gets_the_column(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    with sqlite3.connect(path) as db:
        db.execute(OLD_SCHEMA)
        db.execute("INSERT INTO jobs (path, name, status, started_at, updated_at) VALUES ('/r/1', 'r', 'running', "
                   "'2026-01-01T00:00:00', '2026-01-01T00:00:00')")
    db.close()
    store = JobStore(path)
    assert store.get(Path("/r/1")).needs_since is None  # type: ignore[union-attr]
    store.needs(Path("/r/1"), "stuck", "x", T0)
    assert store.get(Path("/r/1")).needs_since == T0.isoformat()  # type: ignore[union-attr]
    assert store.error is None


def test_a_database_that_cannot_take_the_column_still_records_the_need(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    with sqlite3.connect(path) as db:
        db.execute(OLD_SCHEMA)
    db.close()
    store = NoAlter(path)
    assert store.error is not None  # said once by the caller
    store.error = None
    job = tmp_path / "run-1"
    store.started(job, "run-1", "openai", "gpt-4.1", T0)
    store.needs(job, "stuck", "no progress", T0)
    row = store.get(job)
    assert row is not None and (row.status, row.detail, row.needs_since) == (NEEDS_YOU, "stuck: no progress", None)
    store.answered(job, T0)
    store.ended(job, "stopped", T0, "by the operator")
    assert store.get(job).status == "stopped" and store.error is None  # type: ignore[union-attr]
