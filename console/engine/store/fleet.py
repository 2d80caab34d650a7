"""The fleet budget over the jobs store: each run's spend of the day, the operator's raises of today's limits, and the
holds (console.engine.guardrails.fleet), in the store every run of the fleet shares: the embedded SQLite file for
this machine's runs (:class:`SqliteFleet`), a PostgreSQL server for a team's (console.engine.store.pg_fleet).

- **spend**: one row per run (``fleet_spend``: its day, its job, what it spent that day), updated when a turn's cost
  is recorded; a scope's spend today is one indexed sum. A row whose figure is no amount (text, negative, absurd: a
  corrupt or foreign row) counts nothing.
- **raises**: what ``agent-console budget --raise`` / ``--resume`` added to a scope's limit for a day, and by whom.
- **holds**: one row per (day, scope, limit) reached, inserted if absent: the run whose insert made it tells the
  operator's channels. A claim on the telling that was never finished (its runner killed between the hold and its
  need's record) is taken over after :data:`CLAIM_SECONDS` by a run that sees it, with a conditional update: the
  operator hears of a hold once, never zero times, never twice.

:class:`StoreFleetBudget` is the engine's port (:class:`console.engine.guardrails.fleet.FleetBudget`) over one of
them, for one run; the limits come from the operator's config (a callable: the command line re-reads it when the
file changes).
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

from console.engine.cost import format_cost
from console.engine.guardrails.fleet import FLEET, RECHECK_SECONDS, FleetHold, local_day
from console.engine.runs import job_name
from console.engine.store.base import FINISHED

# Seconds a run's claim on telling a hold holds before another run takes it over (its runner died in between).
CLAIM_SECONDS = 30.0
MAX_USD = 1e12  # a figure above this is no amount (a corrupt or foreign row): it counts nothing
# A day's limit, and a day's raise of it, at most: raises add up to this and stop there (a sum past it would read
# back as no amount, and lift nothing).
MAX_LIMIT_USD = 1e9
SCOPE_CHARS = 200

FLEET_SCHEMA = """
CREATE TABLE IF NOT EXISTS fleet_spend (
    path TEXT PRIMARY KEY,
    day TEXT NOT NULL,
    job TEXT NOT NULL,
    usd REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS fleet_spend_day ON fleet_spend (day, job);
CREATE TABLE IF NOT EXISTS fleet_raises (
    day TEXT NOT NULL,
    scope TEXT NOT NULL,
    usd REAL NOT NULL,
    by TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (day, scope)
);
CREATE TABLE IF NOT EXISTS fleet_holds (
    day TEXT NOT NULL,
    scope TEXT NOT NULL,
    limit_usd REAL NOT NULL,
    spent_usd REAL NOT NULL,
    running INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    created_by TEXT NOT NULL,
    claimed_by TEXT,
    claimed_at REAL,
    told_at TEXT,
    PRIMARY KEY (day, scope, limit_usd)
);
CREATE TABLE IF NOT EXISTS fleet_waivers (
    day TEXT NOT NULL,
    scope TEXT NOT NULL,
    limit_usd REAL NOT NULL,
    path TEXT NOT NULL,
    PRIMARY KEY (day, scope, limit_usd, path)
);
"""
# A figure counts only if it is an amount (SQLite keeps whatever a foreign writer put in a REAL column).
_AMOUNT = f"typeof(usd) IN ('real', 'integer') AND usd >= 0 AND usd < {MAX_USD:g}"


@dataclass(frozen=True)
class FleetLimits:
    """The operator's daily limits (``[budgets]`` of their config): the fleet's, and each job's by name."""

    daily_usd: float | None = None
    jobs: dict[str, float] = field(default_factory=dict)

    @property
    def any(self) -> bool:
        return self.daily_usd is not None or bool(self.jobs)


@dataclass(frozen=True)
class Figures:
    """A day's figures for one run's scopes: the fleet's spend, its job's, and today's raises of each."""

    fleet_usd: float = 0.0
    job_usd: float = 0.0
    fleet_raise: float = 0.0
    job_raise: float = 0.0
    fleet_raised_by: str = ""
    job_raised_by: str = ""


@dataclass(frozen=True)
class HoldRow:
    day: str
    scope: str
    limit_usd: float
    spent_usd: float
    running: int
    created_at: str
    created_by: str
    told: bool


@dataclass(frozen=True)
class LiveRun:
    """A run of a scope that is live now, as ``jobs`` says it: a process holds its lock on this machine (or is
    starting it), or, on a shared store, its runner's lease is current. ``path``: its folder (its id: runs.run_id);
    ``status`` and ``detail``: the store's (a held run: "needs you", "fleet_budget: ...")."""

    path: str
    status: str
    detail: str


def runs_here(path: str) -> bool:
    """Whether a process of this machine runs the run in folder ``path`` now (its run lock, or its start)."""
    from console.engine.job_files import JobPaths
    from console.engine.run_lock import RunLock
    from console.engine.starting import starting

    paths = JobPaths(Path(path))
    return RunLock(paths).holder() is not None or starting(paths) is not None


def amount(value: object, top: float = MAX_USD) -> float | None:
    """``value`` as an amount of dollars, None if it is none (text, NaN, negative, above ``top``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) and 0 <= v <= top else None


def job_scope(job: str) -> str:
    return f"job:{job}"[:SCOPE_CHARS]


class FleetLedger(Protocol):
    """What the fleet budget needs of a store (the embedded one: :class:`SqliteFleet`; a shared one:
    console.engine.store.pg_fleet.PgFleet). The run's calls never raise (a problem: no spend counted, no hold);
    the operator's (``raise_limit``, ``holds``, ``spend``) raise, and the command says why."""

    def add_spend(self, path: Path, day: str, job: str, usd: float) -> None: ...
    def figures(self, day: str, job: str) -> Figures | None: ...
    def open_hold(self, day: str, scope: str, limit: float, spent: float, owner: str, now: datetime, *,
                  claim: bool = True) -> bool: ...
    def claim_telling(self, day: str, scope: str, limit: float, owner: str, stale: float) -> bool: ...
    def hold_told(self, day: str, scope: str, limit: float, now: datetime) -> None: ...
    def unclaim(self, day: str, scope: str, limit: float, owner: str) -> None: ...
    def raise_limit(self, day: str, scope: str, usd: float, by: str) -> float: ...
    def waive(self, day: str, scope: str, limit: float, path: Path) -> None: ...
    def waived(self, day: str, scope: str, limit: float, path: Path) -> bool: ...
    def holds(self, day: str) -> list[HoldRow]: ...
    def live_runs(self, day: str, scope: str) -> list[LiveRun]: ...
    def spend(self, day: str) -> dict[str, float]: ...
    def raises(self, day: str) -> dict[str, tuple[float, str]]: ...
    def close(self) -> None: ...


def of_job(path: str, name: str, job: str, spent: set[str]) -> bool:
    """Whether a live run (its folder, its name in the store) is one of ``job``'s, which a job's hold pauses: it
    spent today under that job, or its name is the job's (a run held at its first turn has spent nothing: `budget`
    listed no held run while one was held, and the hold's "N live runs" left it out)."""
    return path in spent or job_name(name) == job


class SqliteFleet:
    """The fleet ledger in the embedded store's file (``jobs.db``): this machine's runs. One connection, kept open
    (the per-turn check is one indexed query, no connection set-up), shared by the run's threads under a lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.error: str | None = None
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            db = sqlite3.connect(self.path, timeout=10, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(FLEET_SCHEMA)
            self._db = db
        return self._db

    def _run(self, sql: str, params: tuple[object, ...]) -> sqlite3.Cursor | None:
        try:
            with self._lock:
                return self._conn().execute(sql, params)
        except (sqlite3.Error, OSError) as exc:
            self.error = f"{self.path}: {exc}"
            return None

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def add_spend(self, path: Path, day: str, job: str, usd: float) -> None:
        if amount(usd) is None:
            return
        self._run("""INSERT INTO fleet_spend (path, day, job, usd) VALUES (?, ?, ?, ?)
                     ON CONFLICT(path) DO UPDATE SET
                     usd = CASE WHEN fleet_spend.day = excluded.day THEN fleet_spend.usd + excluded.usd
                                ELSE excluded.usd END,
                     day = excluded.day, job = excluded.job
                     WHERE excluded.day >= fleet_spend.day""", (str(path), day, job[:SCOPE_CHARS], usd))

    def figures(self, day: str, job: str) -> Figures | None:
        cur = self._run(f"""SELECT
            (SELECT COALESCE(SUM(usd), 0) FROM fleet_spend WHERE day = ? AND {_AMOUNT}),
            (SELECT COALESCE(SUM(usd), 0) FROM fleet_spend WHERE day = ? AND job = ? AND {_AMOUNT}),
            (SELECT usd FROM fleet_raises WHERE day = ? AND scope = ?),
            (SELECT usd FROM fleet_raises WHERE day = ? AND scope = ?),
            (SELECT by FROM fleet_raises WHERE day = ? AND scope = ?),
            (SELECT by FROM fleet_raises WHERE day = ? AND scope = ?)""",
                        (day, day, job[:SCOPE_CHARS], day, FLEET, day, job_scope(job), day, FLEET, day,
                         job_scope(job)))
        row = None if cur is None else cur.fetchone()
        if row is None:
            return None
        return Figures(amount(row[0]) or 0.0, amount(row[1]) or 0.0, amount(row[2], MAX_LIMIT_USD) or 0.0,
                       amount(row[3], MAX_LIMIT_USD) or 0.0, str(row[4] or "")[:200], str(row[5] or "")[:200])

    def open_hold(self, day: str, scope: str, limit: float, spent: float, owner: str, now: datetime, *,
                  claim: bool = True) -> bool:
        """Make the day's hold of ``scope`` (True: this call made it), its telling claimed by ``owner`` (``claim``:
        a run with no channel claims nothing, leaving it to a held run that has one)."""
        marks = ", ".join("?" for _ in FINISHED)
        # The live runs the hold pauses, as the jobs table knows them (a job's: those that spent today).
        if scope == FLEET:
            running = self._run(f"SELECT COUNT(*) FROM jobs WHERE status NOT IN ({marks})", FINISHED)
        else:
            running = self._run(f"""SELECT COUNT(*) FROM fleet_spend s JOIN jobs j ON j.path = s.path
                                    WHERE s.day = ? AND s.job = ? AND j.status NOT IN ({marks})""",
                                (day, scope.removeprefix("job:"), *FINISHED))
        n = 0 if running is None else int(running.fetchone()[0])
        cur = self._run("""INSERT INTO fleet_holds (day, scope, limit_usd, spent_usd, running, created_at,
                           created_by, claimed_by, claimed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                           ON CONFLICT DO NOTHING""",
                        (day, scope, limit, spent, n, now.isoformat(timespec="seconds"), owner[:200],
                         owner[:200] if claim else None, time.time() if claim else None))
        return cur is not None and cur.rowcount == 1

    def claim_telling(self, day: str, scope: str, limit: float, owner: str, stale: float) -> bool:
        now = time.time()
        # A claim no run could have made (no time, or one ahead of ours by more than a stale claim's age: a planted
        # or corrupt row) is no claim: left as it is, nobody would ever tell the hold.
        cur = self._run("""UPDATE fleet_holds SET claimed_by = ?, claimed_at = ?
                           WHERE day = ? AND scope = ? AND limit_usd = ? AND told_at IS NULL
                           AND (claimed_at IS NULL OR typeof(claimed_at) NOT IN ('real', 'integer')
                                OR claimed_at < ? OR claimed_at > ?)""",
                        (owner[:200], now, day, scope, limit, now - stale, now + max(stale, CLAIM_SECONDS)))
        return cur is not None and cur.rowcount == 1

    def hold_told(self, day: str, scope: str, limit: float, now: datetime) -> None:
        self._run("UPDATE fleet_holds SET told_at = ? WHERE day = ? AND scope = ? AND limit_usd = ?",
                  (now.isoformat(timespec="seconds"), day, scope, limit))

    def unclaim(self, day: str, scope: str, limit: float, owner: str) -> None:
        self._run("""UPDATE fleet_holds SET claimed_by = NULL, claimed_at = NULL
                     WHERE day = ? AND scope = ? AND limit_usd = ? AND claimed_by = ? AND told_at IS NULL""",
                  (day, scope, limit, owner[:200]))

    def waive(self, day: str, scope: str, limit: float, path: Path) -> None:
        self._run("INSERT INTO fleet_waivers (day, scope, limit_usd, path) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                  (day, scope, limit, str(path)))

    def waived(self, day: str, scope: str, limit: float, path: Path) -> bool:
        cur = self._run("SELECT 1 FROM fleet_waivers WHERE day = ? AND scope = ? AND limit_usd = ? AND path = ?",
                        (day, scope, limit, str(path)))
        return cur is not None and cur.fetchone() is not None

    def _strict(self, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        with self._lock:
            return self._conn().execute(sql, params).fetchall()

    def raise_limit(self, day: str, scope: str, usd: float, by: str) -> float:
        """Add ``usd`` to ``scope``'s limit for ``day`` (the operator's command); today's raise of it, after."""
        self._strict("""INSERT INTO fleet_raises (day, scope, usd, by) VALUES (?, ?, ?, ?)
                        ON CONFLICT(day, scope) DO UPDATE SET usd = MIN(fleet_raises.usd + excluded.usd, ?),
                        by = excluded.by""", (day, scope[:SCOPE_CHARS], min(usd, MAX_LIMIT_USD), by[:200],
                                              MAX_LIMIT_USD))
        row = self._strict("SELECT usd FROM fleet_raises WHERE day = ? AND scope = ?", (day, scope[:SCOPE_CHARS]))
        return amount(row[0][0], MAX_LIMIT_USD) or 0.0 if row else 0.0

    def raises(self, day: str) -> dict[str, tuple[float, str]]:
        return {str(scope): (a, str(by or "")) for scope, usd, by in
                self._strict("SELECT scope, usd, by FROM fleet_raises WHERE day = ?", (day,))
                if (a := amount(usd, MAX_LIMIT_USD)) is not None}

    def holds(self, day: str) -> list[HoldRow]:
        rows = self._strict("""SELECT day, scope, limit_usd, spent_usd, running, created_at, created_by,
                               told_at IS NOT NULL FROM fleet_holds WHERE day = ? ORDER BY created_at""", (day,))
        out = []
        for d, scope, limit, spent, running, at, by, told in rows:
            if (lim := amount(limit)) is None or (sp := amount(spent)) is None:
                continue  # a corrupt or foreign row: no hold of ours
            out.append(HoldRow(str(d), str(scope), lim, sp, int(running) if isinstance(running, int) else 0,
                               str(at), str(by), bool(told)))
        return out

    def live_runs(self, day: str, scope: str) -> list[LiveRun]:
        """The runs of ``scope`` live now (a job's: those that spent ``day``): the store's unfinished rows whose
        lock a process holds. The store's word alone counted runs killed (-9) or interrupted while held, whose rows
        still say "needs you": "3 live runs" with one runner."""
        marks = ", ".join("?" for _ in FINISHED)
        rows = self._strict(f"SELECT path, status, COALESCE(detail, ''), name FROM jobs WHERE status NOT IN ({marks})",
                            FINISHED)
        if scope != FLEET:
            job = scope.removeprefix("job:")
            spent = {str(p) for (p,) in self._strict("SELECT path FROM fleet_spend WHERE day = ? AND job = ?",
                                                     (day, job))}
            rows = [r for r in rows if of_job(str(r[0]), str(r[3]), job, spent)]
        return [LiveRun(str(p), str(s), str(d)) for p, s, d, _n in rows if runs_here(str(p))]

    def spend(self, day: str) -> dict[str, float]:
        """``day``'s spend of each job (the fleet's is their sum)."""
        return {str(job): amount(usd) or 0.0 for job, usd in self._strict(
            f"SELECT job, SUM(usd) FROM fleet_spend WHERE day = ? AND {_AMOUNT} GROUP BY job ORDER BY job", (day,))}


class StoreFleetBudget:
    """The engine's :class:`~console.engine.guardrails.fleet.FleetBudget` for one run, over a :class:`FleetLedger`.

    ``limits`` is asked at each check (the command line's reads the config's ``[budgets]`` again only when the file
    changed). Per check: one query (:meth:`FleetLedger.figures`); a hold's creation and telling only when a limit is
    reached."""

    def __init__(self, ledger: FleetLedger, path: Path, job: str, limits: Callable[[], FleetLimits], owner: str,
                 *, claim_seconds: float = CLAIM_SECONDS, recheck_seconds: float = RECHECK_SECONDS) -> None:
        self.ledger = ledger
        self.path = path
        self.job = job
        self.limits = limits
        self.owner = owner
        self.claim_seconds = claim_seconds
        self.recheck_seconds = recheck_seconds
        self.checks = 0  # how many checks asked the store (the benchmark's figure)
        # Whether this run has a channel to tell a hold to (the supervisor says so from its run's notifier): one
        # without never claims the telling, which a held run with a channel takes (a run started without channels
        # made the day's hold, and the runs with a webhook it held afterwards were never told).
        self.tells = True
        self.known = True  # whether the last check had the store's answer
        # Each scope's limit in the config and who last raised it today, as the last check saw them (a hold's
        # lifting says which lifted it).
        self._base: dict[str, float] = {}
        self._by: dict[str, str] = {}
        self._waived: set[tuple[str, str, float]] = set()  # holds the operator let this run go on past

    def lifted(self, hold: FleetHold, now: datetime) -> str:
        if local_day(now) != hold.day:
            return "a new day began"
        limits = self.limits()
        base = limits.daily_usd if hold.scope == FLEET else limits.jobs.get(hold.scope.removeprefix("job:"))
        by = self._by.get(hold.scope, "")
        if base is None:
            return "the fleet budget was removed from the config"
        if base != self._base.get(hold.scope, base):
            return f"the config's [budgets] now says {format_cost(base)} a day"
        return f"the fleet budget was raised ({by})" if by else "the fleet budget was raised"

    def limited(self) -> bool:
        return self.limits().any

    def spent(self, now: datetime, usd: float) -> None:
        self.ledger.add_spend(self.path, local_day(now), self.job, usd)

    def check(self, now: datetime) -> FleetHold | None:
        limits = self.limits()
        self.known = True
        if not limits.any:
            return None
        day = local_day(now)
        self.checks += 1
        f = self.ledger.figures(day, self.job)
        self.known = f is not None
        if f is None:
            return None  # the store cannot answer now: nobody is held on a figure nobody knows
        job_limit = limits.jobs.get(self.job)
        self._by = {FLEET: f.fleet_raised_by, job_scope(self.job): f.job_raised_by}
        for scope, base, spent, extra in ((FLEET, limits.daily_usd, f.fleet_usd, f.fleet_raise),
                                          (job_scope(self.job), job_limit, f.job_usd, f.job_raise)):
            if base is None:
                continue
            limit = round(base + extra, 6)
            if spent < limit:
                continue
            self._base[scope] = base
            if (day, scope, limit) in self._waived or self.ledger.waived(day, scope, limit, self.path):
                self._waived.add((day, scope, limit))
                continue  # the operator let this run go on past this limit today
            made = self.ledger.open_hold(day, scope, limit, spent, self.owner, now, claim=self.tells)
            tell = self.tells and (made or self.ledger.claim_telling(day, scope, limit, self.owner,
                                                                     self.claim_seconds))
            # The runs it pauses, counted when it is told (the figure the hold recorded at its creation is stale
            # once a takeover tells it later, and counted runs no process ran).
            running = self._live(day, scope) if tell else 0
            return FleetHold(day, scope, limit, spent, tell, running)
        return None

    def _live(self, day: str, scope: str) -> int:
        try:
            return len(self.ledger.live_runs(day, scope))
        except Exception:  # the telling goes on without the count
            return 0

    def waive(self, hold: FleetHold) -> None:
        self._waived.add(hold.key)
        self.ledger.waive(hold.day, hold.scope, hold.limit_usd, self.path)

    def told(self, hold: FleetHold, now: datetime) -> None:
        self.ledger.hold_told(hold.day, hold.scope, hold.limit_usd, now)

    def pass_on(self, hold: FleetHold) -> None:
        self.ledger.unclaim(hold.day, hold.scope, hold.limit_usd, self.owner)
