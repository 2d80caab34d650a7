"""The embedded jobs store (SQLite), the default that needs nothing set up: one row per run folder, updated by the
engine and job_complete.

It lives in the data folder (``jobs.db`` beside ``runs/``), which is created here: both are the operator's only
(0700, and 0600 for the database and its -wal and -shm files), since the folder holds every run's
conversation and the table every run's summary.
"""

from __future__ import annotations

import builtins  # the class's own `list` method shadows the type in its annotations
import contextlib
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from console.engine.atomic import PRIVATE_FILE, private_dir, private_file
from console.engine.store.base import COLUMNS, FINISHED, GAVE_UP, NEEDS_YOU, JobRow

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    path TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    provider TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL DEFAULT '',
    started_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    completed_at TEXT,
    confidence REAL,
    summary TEXT,
    detail TEXT,
    cost_usd REAL
)
"""
# Columns added after the first release: an older database gets them (ALTER TABLE ADD COLUMN keeps every row).
# needs_since: when the run started needing its operator (ISO time), NULL while it does not.
ADDED_COLUMNS = (("cost_usd", "REAL"), ("needs_since", "TEXT"))
# The database's own files, each made 0600 (SQLite gives -wal and -shm the database file's mode).
DB_SUFFIXES = ("", "-wal", "-shm", "-journal")


class JobStore:
    """The table behind `agent-console jobs`.

    It is an index for the operator, not the run's state: a run never fails because
    of it. The engine's updates report a database error in :attr:`error` (the
    supervisor turns it into one event) instead of raising.
    """

    # Only this machine reads it: runs take commands from their inbox, and views read their folders.
    shared = False

    def __init__(self, path: Path) -> None:
        self.path = path
        self.error: str | None = None
        # What could not be made private (a data folder or database of another user): the caller says so once.
        self.not_private: list[str] = []
        if (problem := private_dir(path.parent)) is not None:
            self.not_private.append(problem)
        with contextlib.suppress(FileExistsError):
            # Made 0600 before SQLite makes it 0644 (and its -wal and -shm files after it).
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE))
        self.not_private += [p for suffix in DB_SUFFIXES
                             if (p := private_file(path.with_name(path.name + suffix))) is not None]
        with self._connect() as db:
            db.execute(SCHEMA)
        self._select = ", ".join(COLUMNS)
        self._migrate()

    def _migrate(self) -> None:
        """Add the columns a database made by an older version lacks (rows are kept; the new column is NULL).

        A database this process may not write (read-only, or locked for too long) is still listed: the missing
        columns read as NULL, and :attr:`error` says why they were not added."""
        have: set[str] = set()
        try:
            with self._connect() as db:
                have = {row[1] for row in db.execute("PRAGMA table_info(jobs)")}
                for name, kind in ADDED_COLUMNS:
                    if name in have:
                        continue
                    try:
                        db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {kind}")
                    except sqlite3.OperationalError as exc:
                        if "duplicate column" not in str(exc).lower():  # another process added it meanwhile
                            raise
                    have.add(name)
        except (sqlite3.Error, OSError) as exc:
            self.error = f"{self.path}: {exc}"
            added = {name for name, _kind in ADDED_COLUMNS}
            self._select = ", ".join(f"NULL AS {c}" if c in added and c not in have else c for c in COLUMNS)
        # The SQL that clears a run's need (nothing while the column is missing: the run's updates still work).
        self._no_need = ", needs_since=NULL" if "needs_since" in have else ""

    def _update(self, sql: str, params: tuple[object, ...]) -> bool:
        try:
            with self._connect() as db:
                db.execute(sql, params)
            return True
        except (sqlite3.Error, OSError) as exc:
            self.error = f"{self.path}: {exc}"
            return False

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        # Short-lived connections: several processes (a headless run, `jobs`, an attached
        # console) use the same file, and WAL lets readers go on while one writes.
        db = sqlite3.connect(self.path, timeout=10)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            yield db
            db.commit()
        finally:
            db.close()

    def started(self, path: Path, name: str, provider: str, model: str, now: datetime) -> None:
        ts = now.isoformat(timespec="seconds")
        self._update(
            f"""INSERT INTO jobs (path, name, status, provider, model, started_at, updated_at)
               VALUES (?, ?, 'running', ?, ?, ?, ?)
               ON CONFLICT(path) DO UPDATE SET status='running', provider=excluded.provider,
               model=excluded.model, updated_at=excluded.updated_at, detail=NULL{self._no_need}
               WHERE jobs.status != 'completed'""",
            (str(path), name, provider, model, ts, ts),
        )

    def completed(self, path: Path, now: datetime, confidence: float, summary: str) -> None:
        ts = now.isoformat(timespec="seconds")
        self._update(
            f"""UPDATE jobs SET status='completed', completed_at=?, updated_at=?, confidence=?, summary=?
                {self._no_need} WHERE path=?""",
            (ts, ts, confidence, summary, str(path)),
        )

    def ended(self, path: Path, status: str, now: datetime, detail: str = "") -> None:
        """Record a run that stopped without completing (failed, stopped, paused for approval)."""
        self._update(
            f"UPDATE jobs SET status=?, updated_at=?, detail=?{self._no_need} WHERE path=? AND status != 'completed'",
            (status, now.isoformat(timespec="seconds"), detail, str(path)),
        )

    def needs(self, path: Path, reason: str, message: str, now: datetime, since: datetime | None = None) -> None:
        """The run needs its operator (console.engine.needs): status "needs you", the reason and message as its
        detail, and since when (kept from the first need while none was answered; ``since``: a need the run's
        last process died waiting on, asked again, keeps its own)."""
        ts = now.isoformat(timespec="seconds")
        first = (since or now).isoformat(timespec="seconds")
        sql_since = ", needs_since=COALESCE(needs_since, ?)" if self._no_need else ""
        self._update(
            f"UPDATE jobs SET status='{NEEDS_YOU}', updated_at=?, detail=?{sql_since} "
            "WHERE path=? AND status != 'completed'",
            (ts, f"{reason}: {message}"[:2000], *((first,) if sql_since else ()), str(path)),
        )

    def answered(self, path: Path, now: datetime) -> None:
        """The operator answered the run's need: it runs again (a run that has ended meanwhile keeps its end)."""
        self._update(
            f"UPDATE jobs SET status='running', updated_at=?, detail=NULL{self._no_need} "
            f"WHERE path=? AND status='{NEEDS_YOU}'",
            (now.isoformat(timespec="seconds"), str(path)),
        )

    def gave_up(self, path: Path, now: datetime, confidence: float, detail: str) -> None:
        """The agent gave up (its confidence, what it said): the run needs its operator, since its first need."""
        ts = now.isoformat(timespec="seconds")
        since = ", needs_since=COALESCE(needs_since, ?)" if self._no_need else ""
        self._update(f"UPDATE jobs SET status='{GAVE_UP}', updated_at=?, detail=?, confidence=?{since} "
                     "WHERE path=? AND status != 'completed'",
                     (ts, detail[:2000], confidence, *((ts,) if since else ()), str(path)))

    def acknowledged(self, path: Path, now: datetime) -> None:
        """The operator acknowledged the ended run (console.engine.acknowledge): it keeps its status and outcome and
        no longer needs them (one that crashed needing them is interrupted: a resume goes on with it)."""
        self._update(
            f"UPDATE jobs SET status=CASE WHEN status='{NEEDS_YOU}' THEN 'interrupted' ELSE status END, "
            f"updated_at=?{self._no_need} WHERE path=? AND status != 'completed'",
            (now.isoformat(timespec="seconds"), str(path)),
        )

    def paused(self, path: Path, now: datetime) -> None:
        """The operator paused the run: "paused" while it held ("needs you" stays: it says more)."""
        self._update("UPDATE jobs SET status='paused', updated_at=? WHERE path=? AND status='running'",
                     (now.isoformat(timespec="seconds"), str(path)))

    def unpaused(self, path: Path, now: datetime) -> None:
        """The operator resumed a paused run: it runs again."""
        self._update("UPDATE jobs SET status='running', updated_at=? WHERE path=? AND status='paused'",
                     (now.isoformat(timespec="seconds"), str(path)))

    def cost(self, path: Path, usd: float | None) -> None:
        """Record what the job has cost so far (US dollars, the whole job); None: unknown (no price)."""
        if usd is not None and not (usd >= 0 and usd < float("inf")):
            return  # nan, inf or negative: not a cost, never written
        self._update("UPDATE jobs SET cost_usd=? WHERE path=?", (usd, str(path)))

    def list(self, limit: int = 50) -> list[JobRow]:
        with self._connect() as db:
            rows = db.execute(
                f"SELECT {self._select} FROM jobs ORDER BY started_at DESC, path DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [JobRow(*r) for r in rows]

    def list_live_and_recent(self, recent: int) -> tuple[builtins.list[JobRow], int]:
        """Every run that is not finished (see :data:`FINISHED`), whatever its age, and the ``recent`` newest
        finished ones, newest first; and how many older finished runs were left out.

        What the fleet lists: a run that waits for its operator is never hidden behind hundreds of newer
        finished ones."""
        marks = ", ".join("?" for _ in FINISHED)
        with self._connect() as db:
            live = db.execute(f"SELECT {self._select} FROM jobs WHERE status NOT IN ({marks})", FINISHED).fetchall()
            done = db.execute(f"SELECT {self._select} FROM jobs WHERE status IN ({marks}) "
                              "ORDER BY started_at DESC, path DESC LIMIT ?", (*FINISHED, recent)).fetchall()
            (finished,) = db.execute(f"SELECT COUNT(*) FROM jobs WHERE status IN ({marks})", FINISHED).fetchone()
        rows = sorted((JobRow(*r) for r in (*live, *done)), key=lambda r: (r.started_at, r.path), reverse=True)
        return rows, max(0, finished - len(done))

    def get(self, path: Path) -> JobRow | None:
        with self._connect() as db:
            r = db.execute(f"SELECT {self._select} FROM jobs WHERE path=?", (str(path),)).fetchone()
        return JobRow(*r) if r else None

    def forget(self, paths: builtins.list[str | Path]) -> int:
        """Remove the rows of these runs (`jobs --prune`, the fleet's forget: runs whose folder is gone); how
        many were removed. Raises sqlite3.Error or OSError: the operator asked for it, and is told if it failed."""
        keys = [str(p) for p in paths]
        removed = 0
        with self._connect() as db:
            for start in range(0, len(keys), 500):  # SQLite's bound on the parameters of one statement
                part = keys[start:start + 500]
                removed += db.execute(f"DELETE FROM jobs WHERE path IN ({', '.join('?' for _ in part)})",
                                      part).rowcount
        return removed

    def close(self) -> None:
        """Nothing held open (each call opens its own short-lived connection)."""
