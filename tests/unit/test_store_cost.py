"""The jobs table's cost column: recorded per job, and added to a database an older version made."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from console.engine.store import JobStore

T0 = datetime(2026, 1, 15, 12, 0, 0, tzinfo=UTC)

# The table as the first release made it (no cost_usd).
OLD_SCHEMA = """
CREATE TABLE jobs (
    path TEXT PRIMARY KEY, name TEXT NOT NULL, status TEXT NOT NULL, provider TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL DEFAULT '', started_at TEXT NOT NULL, updated_at TEXT NOT NULL, completed_at TEXT,
    confidence REAL, summary TEXT, detail TEXT
)
"""


def test_cost_is_recorded_and_listed(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.db")
    job = tmp_path / "run-1"
    store.started(job, "run-1", "openai", "gpt-4.1", T0)
    row = store.get(job)
    assert row is not None and row.cost_usd is None  # unknown until the supervisor records one
    store.cost(job, 0.4217)
    assert store.get(job).cost_usd == 0.4217  # type: ignore[union-attr]
    store.completed(job, T0, 0.9, "done")
    store.started(job, "run-1", "openai", "gpt-4.1", T0)  # a later run keeps the job's cost
    [listed] = store.list()
    assert (listed.status, listed.cost_usd) == ("completed", 0.4217)
    store.cost(job, None)  # unknown again (a model without a price): not a number that lies
    assert store.get(job).cost_usd is None  # type: ignore[union-attr]
    for bad in (float("nan"), float("inf"), -1.0):
        store.cost(job, bad)
    assert store.get(job).cost_usd is None and store.error is None  # type: ignore[union-attr]


def test_an_old_database_gets_the_column_and_keeps_every_row(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    with sqlite3.connect(path) as db:
        db.execute(OLD_SCHEMA)
        db.executemany("INSERT INTO jobs (path, name, status, started_at, updated_at, confidence, summary) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?)",
                       [(f"/runs/{n}", f"job-{n}", "completed", f"2026-01-0{n}T00:00:00", f"2026-01-0{n}T00:00:00",
                         0.5 + n / 10, f"summary {n}") for n in range(1, 4)])
    db.close()
    store = JobStore(path)
    rows = store.list()
    assert [(r.name, r.summary, r.cost_usd) for r in rows] == [
        ("job-3", "summary 3", None), ("job-2", "summary 2", None), ("job-1", "summary 1", None)]
    store.cost(Path("/runs/2"), 1.5)
    assert JobStore(path).get(Path("/runs/2")).cost_usd == 1.5  # type: ignore[union-attr]  # opened again: no re-add
    assert store.error is None
    with sqlite3.connect(path) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(jobs)")]
    db.close()
    assert columns.count("cost_usd") == 1 and columns.count("needs_since") == 1 and len(columns) == 13


class NoAlter(JobStore):
    """A database this process may read but not change the shape of (SQLite's authorizer refuses ALTER TABLE)."""

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        with super()._connect() as db:
            db.set_authorizer(lambda action, *_: sqlite3.SQLITE_DENY if action == sqlite3.SQLITE_ALTER_TABLE
                              else sqlite3.SQLITE_OK)
            yield db


def test_an_old_database_that_cannot_be_altered_is_still_listed(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    with sqlite3.connect(path) as db:
        db.execute(OLD_SCHEMA)
        db.execute("INSERT INTO jobs (path, name, status, started_at, updated_at) VALUES ('/r', 'r', 'failed', "
                   "'2026-01-01', '2026-01-01')")
    db.close()
    store = NoAlter(path)
    assert store.error is not None and "not authorized" in store.error
    [row] = store.list()
    assert (row.name, row.status, row.cost_usd) == ("r", "failed", None)
    assert store.get(Path("/r")) == row
    store.error = None
    store.cost(Path("/r"), 1.0)  # the column is not there: reported, never raised
    assert store.error is not None
