"""The fleet ledger (console.engine.store.fleet.FleetLedger) in a shared PostgreSQL store: every machine's runs.

A run's spend goes through its link's queue like its other updates (``spent``: the run's figure for its day, never
an increment, so a marker's catch-up applies it again safely), never on the turn's path; the check at a turn
boundary is one query. A store that cannot be reached holds nobody, and is not asked again for
:data:`AWAY_SECONDS` (a turn never waits on a server that is down more than once in that time).
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from console.engine.guardrails.fleet import FLEET
from console.engine.store.base import FINISHED, StoreError
from console.engine.store.fleet import (
    CLAIM_SECONDS,
    MAX_LIMIT_USD,
    MAX_USD,
    SCOPE_CHARS,
    Figures,
    HoldRow,
    LiveRun,
    amount,
    job_scope,
    of_job,
)
from console.engine.store.postgres import PgStore

AWAY_SECONDS = 30.0
_AMOUNT = f"usd >= 0 AND usd < {MAX_USD:g} AND usd = usd"  # NaN <> NaN: a foreign NaN counts nothing


class PgFleet:
    def __init__(self, store: PgStore) -> None:
        self.store = store
        self.error: str | None = None
        self._lock = threading.Lock()
        self._today: dict[tuple[str, str], float] = {}  # (run key, day) -> this process's figure of that day
        self._away_until = 0.0

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]] | None:
        """A query for the run's checks: None when the store cannot answer (and then not asked for a while)."""
        if time.monotonic() < self._away_until:
            return None
        try:
            with self.store.connection() as conn:
                cur = conn.execute(sql, params)
                return list(cur.fetchall()) if cur.description is not None else []
        except StoreError as exc:
            self.error = str(exc)
            self._away_until = time.monotonic() + AWAY_SECONDS
            return None

    def _strict(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self.store.connection() as conn:
            cur = conn.execute(sql, params)
            return list(cur.fetchall()) if cur.description is not None else []

    def add_spend(self, path: Path, day: str, job: str, usd: float) -> None:
        if amount(usd) is None:
            return
        key = self.store.key(path)
        with self._lock:
            if (key, day) not in self._today:
                # What this run spent today before this process (a resume): the store's figure, once.
                rows = self._rows("SELECT usd FROM fleet_spend WHERE key = %s AND day = %s", (key, day))
                self._today[(key, day)] = (amount(rows[0][0]) or 0.0) if rows else 0.0
            total = self._today[(key, day)] = self._today[(key, day)] + usd
        self.store._update("spent", (day, job[:SCOPE_CHARS], total, key))

    def figures(self, day: str, job: str) -> Figures | None:
        rows = self._rows(f"""SELECT
            (SELECT COALESCE(SUM(usd), 0) FROM fleet_spend WHERE day = %s AND {_AMOUNT}),
            (SELECT COALESCE(SUM(usd), 0) FROM fleet_spend WHERE day = %s AND job = %s AND {_AMOUNT}),
            (SELECT usd FROM fleet_raises WHERE day = %s AND scope = %s),
            (SELECT usd FROM fleet_raises WHERE day = %s AND scope = %s),
            (SELECT by FROM fleet_raises WHERE day = %s AND scope = %s),
            (SELECT by FROM fleet_raises WHERE day = %s AND scope = %s)""",
                          (day, day, job[:SCOPE_CHARS], day, FLEET, day, job_scope(job), day, FLEET, day,
                           job_scope(job)))
        if not rows:
            return None
        r = rows[0]
        return Figures(amount(r[0]) or 0.0, amount(r[1]) or 0.0, amount(r[2], MAX_LIMIT_USD) or 0.0,
                       amount(r[3], MAX_LIMIT_USD) or 0.0, str(r[4] or "")[:200], str(r[5] or "")[:200])

    def open_hold(self, day: str, scope: str, limit: float, spent: float, owner: str, now: datetime, *,
                  claim: bool = True) -> bool:
        marks = ", ".join("%s" for _ in FINISHED)
        # The live runs the hold pauses: those with a current lease (a job's: those that spent today).
        live = f"r.status NOT IN ({marks}) AND r.lease_expires > now()"
        count = (f"SELECT COUNT(*) FROM runs r WHERE {live}" if scope == FLEET else
                 f"SELECT COUNT(*) FROM fleet_spend s JOIN runs r ON r.key = s.key WHERE {live} AND s.day = %s "
                 "AND s.job = %s")
        params: tuple[Any, ...] = FINISHED if scope == FLEET else (*FINISHED, day, scope.removeprefix("job:"))
        rows = self._rows(f"""INSERT INTO fleet_holds (day, scope, limit_usd, spent_usd, running, created_at,
                              created_by, claimed_by, claimed_at)
                              SELECT %s, %s, %s, %s, ({count}), %s, %s, %s, CASE WHEN %s THEN now() END
                              ON CONFLICT DO NOTHING RETURNING 1""",
                          (day, scope, limit, spent, *params, now.isoformat(timespec="seconds"), owner[:200],
                           owner[:200] if claim else None, claim))
        return bool(rows)

    def claim_telling(self, day: str, scope: str, limit: float, owner: str, stale: float) -> bool:
        rows = self._rows("""UPDATE fleet_holds SET claimed_by = %s, claimed_at = now()
                             WHERE day = %s AND scope = %s AND limit_usd = %s AND told_at IS NULL
                             AND (claimed_at IS NULL OR claimed_at < now() - make_interval(secs => %s)
                                  OR claimed_at > now() + make_interval(secs => %s))
                             RETURNING 1""", (owner[:200], day, scope, limit, stale, max(stale, CLAIM_SECONDS)))
        return bool(rows)

    def hold_told(self, day: str, scope: str, limit: float, now: datetime) -> None:
        self._rows("UPDATE fleet_holds SET told_at = %s WHERE day = %s AND scope = %s AND limit_usd = %s",
                   (now.isoformat(timespec="seconds"), day, scope, limit))

    def unclaim(self, day: str, scope: str, limit: float, owner: str) -> None:
        self._rows("""UPDATE fleet_holds SET claimed_by = NULL, claimed_at = NULL
                      WHERE day = %s AND scope = %s AND limit_usd = %s AND claimed_by = %s AND told_at IS NULL""",
                   (day, scope, limit, owner[:200]))

    def waive(self, day: str, scope: str, limit: float, path: Path) -> None:
        self._rows("INSERT INTO fleet_waivers (day, scope, limit_usd, key) VALUES (%s, %s, %s, %s) "
                   "ON CONFLICT DO NOTHING", (day, scope, limit, self.store.key(path)))

    def waived(self, day: str, scope: str, limit: float, path: Path) -> bool:
        return bool(self._rows("SELECT 1 FROM fleet_waivers WHERE day = %s AND scope = %s AND limit_usd = %s "
                               "AND key = %s", (day, scope, limit, self.store.key(path))))

    def raise_limit(self, day: str, scope: str, usd: float, by: str) -> float:
        rows = self._strict("""INSERT INTO fleet_raises (day, scope, usd, by) VALUES (%s, %s, %s, %s)
                               ON CONFLICT (day, scope) DO UPDATE SET usd = LEAST(fleet_raises.usd + EXCLUDED.usd, %s),
                               by = EXCLUDED.by RETURNING usd""",
                            (day, scope[:SCOPE_CHARS], min(usd, MAX_LIMIT_USD), by[:200], MAX_LIMIT_USD))
        return (amount(rows[0][0], MAX_LIMIT_USD) or 0.0) if rows else 0.0

    def live_runs(self, day: str, scope: str) -> list[LiveRun]:
        """The runs of ``scope`` live now (a job's: those that spent ``day``): unfinished, their runner's lease
        current (as ``open_hold`` counts them)."""
        marks = ", ".join("%s" for _ in FINISHED)
        live = f"r.status NOT IN ({marks}) AND r.lease_expires > now()"
        rows = self._strict(f"SELECT r.path, r.status, COALESCE(r.detail, ''), r.name FROM runs r WHERE {live}",
                            FINISHED)
        if scope != FLEET:
            job = scope.removeprefix("job:")
            spent = {str(p) for (p,) in self._strict("SELECT r.path FROM fleet_spend s JOIN runs r ON r.key = s.key "
                                                     "WHERE s.day = %s AND s.job = %s", (day, job))}
            rows = [r for r in rows if of_job(str(r[0]), str(r[3]), job, spent)]
        return [LiveRun(str(p), str(s), str(d)) for p, s, d, _n in rows]

    def raises(self, day: str) -> dict[str, tuple[float, str]]:
        return {str(scope): (a, str(by or "")) for scope, usd, by in
                self._strict("SELECT scope, usd, by FROM fleet_raises WHERE day = %s", (day,))
                if (a := amount(usd, MAX_LIMIT_USD)) is not None}

    def holds(self, day: str) -> list[HoldRow]:
        rows = self._strict("""SELECT day, scope, limit_usd, spent_usd, running, created_at, created_by,
                               told_at IS NOT NULL FROM fleet_holds WHERE day = %s ORDER BY created_at""", (day,))
        out = []
        for d, scope, limit, spent, running, at, by, told in rows:
            if (lim := amount(limit)) is None or (sp := amount(spent)) is None:
                continue
            out.append(HoldRow(str(d), str(scope), lim, sp, int(running or 0), str(at), str(by), bool(told)))
        return out

    def spend(self, day: str) -> dict[str, float]:
        return {str(job): amount(usd) or 0.0 for job, usd in self._strict(
            f"SELECT job, SUM(usd) FROM fleet_spend WHERE day = %s AND {_AMOUNT} GROUP BY job ORDER BY job", (day,))}

    def close(self) -> None:
        """The store is the caller's to close."""
