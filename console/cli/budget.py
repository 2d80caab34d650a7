"""`budget`: the fleet's daily budget (``[budgets]`` of the operator's config: console.engine.guardrails.fleet) as it
stands today, and the operator's answers to a hold: ``--raise USD`` (today's limit, by USD) and ``--resume`` (one
more day's budget for today), recorded in the store so every run of every machine sharing it sees them and every
paused run goes on at its next look. Also what a run's process is given to check it (:func:`run_fleet_budget`).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from console.cli.common import UsageError, err, say
from console.engine.job_files import one_line
from console.outcome import EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from console.engine.store.postgres import PgStore

BUDGET_HELP = (
    "The fleet's daily budget ([budgets] daily_usd, and [budgets.jobs] NAME = usd, in the operator's config): "
    "today's spend of each scope (the operator's local day), its limit, and the holds. When a scope's spend reaches "
    "its limit, every run in it pauses at its next turn boundary and the operator is told once; --raise or --resume "
    "lets every paused run go on (they look again every few seconds), and `agent-console resume RUN` one run alone. "
    "Exit 0: shown or recorded; 1: the store could not be used; 2: a bad flag, or no budget is set.")
MAX_RAISE = 1e9


def add_parser(sub: Any) -> None:
    b = sub.add_parser("budget", help="the fleet's daily budget: today's spend, the limits, the holds; raise or resume",
                       description=BUDGET_HELP)
    b.add_argument("--job", metavar="NAME", help="the limit of this job ([budgets.jobs] NAME), not the fleet's")
    act = b.add_mutually_exclusive_group()
    act.add_argument("--raise", dest="raise_usd", type=float, metavar="USD",
                     help="raise today's limit by USD (every paused run of its scope goes on)")
    act.add_argument("--resume", action="store_true",
                     help="grant one more slice of the limit for today (the configured daily amount), as a run's "
                          "budget resume does")
    b.add_argument("--json", action="store_true", help="print one JSON object (schema_version 1; see docs/cli.md)")


# How long the config must stay empty or gone before that counts as the operator's (the limits it held lifted).
BLANK_GRACE = 2.0


class ConfigLimits:
    """The config's ``[budgets]``, read again when the file changes (its mtime and size): a run picks up a raised
    ``daily_usd`` at its next look, without a restart. A config that no longer reads keeps the last good limits
    (the run's start said what was wrong with it; an edit in progress is no reason to lift a limit). So does a file
    that is empty or gone, until it has stayed so for :data:`BLANK_GRACE` seconds: an editor that writes the file
    in place empties it for a moment, while an operator who removes it means it."""

    def __init__(self, load: Callable[[], Any], path: Path, monotonic: Callable[[], float] = time.monotonic,
                 say: Callable[[str], None] | None = None) -> None:
        """``say``: told once, in one line, when a changed file does not read (the run's stderr: its runner.log)."""
        from console.engine.store.fleet import FleetLimits

        self.load = load
        self.path = path
        self.monotonic = monotonic
        self.say = say
        self._said = ""
        self._seen: tuple[int, int] | None = None
        self._blank_since: float | None = None
        self._limits = FleetLimits()
        self.reads = 0

    def __call__(self) -> Any:
        from console.engine.store.fleet import FleetLimits

        try:
            st = os.stat(self.path)
            seen = (st.st_mtime_ns, st.st_size)
        except OSError:
            seen = (0, 0)
        if seen[1] == 0 and self._seen is not None:  # empty or gone: only once it stays so
            now = self.monotonic()
            if self._blank_since is None:
                self._blank_since = now
            if now - self._blank_since < BLANK_GRACE:
                return self._limits
        else:
            self._blank_since = None
        if seen != self._seen:
            self._seen = seen
            self.reads += 1
            try:
                b = self.load().budgets
                self._limits = FleetLimits(b.daily_usd, dict(b.jobs))
                self._said = ""
            except Exception as exc:  # kept: see the class's doc; said once (found by a new operator's trial: a
                # config broken mid-run was passed over without a word, the run going on under the old limit)
                why = one_line(str(exc), 300) or type(exc).__name__
                if self.say is not None and why != self._said:
                    self._said = why
                    self.say(f"the config file changed and does not read now ({why}): the fleet budget keeps the "
                             "limits it read before, until the file reads again")
        return self._limits


def _ledger(store: Any, settings: Any) -> Any:
    """The fleet ledger of ``store``: the shared store's tables, or the embedded file's."""
    from console.engine.store import is_shared
    from console.engine.store.fleet import SqliteFleet

    if is_shared(store):
        from console.engine.store.pg_fleet import PgFleet

        return PgFleet(cast("PgStore", store))  # the one shared store there is (a view probes no store's class)
    return SqliteFleet(settings.store_path)


def run_fleet_budget(settings: Any, store: Any, root: Path, run_id: str) -> Any:
    """The fleet budget a run's process checks at each turn boundary (console.engine.store.fleet), over its store;
    None without a store. Made even when the config sets no limit now: one added later is read at the next look."""
    from console.engine.runs import job_name
    from console.engine.store import this_host
    from console.engine.store.fleet import StoreFleetBudget
    from console.settings import config_path, load_settings

    if store is None:
        return None
    limits = ConfigLimits(load_settings, config_path(), say=err)
    limits()
    return StoreFleetBudget(_ledger(store, settings), root, job_name(root), limits,
                            f"{this_host()}:{os.getpid()}:{run_id}")


def cmd_budget(args: argparse.Namespace) -> int:
    from console.engine.cost import format_cost
    from console.engine.guardrails.fleet import FLEET, held_in, job_flag, local_day, scope_words
    from console.engine.job_files import JobError
    from console.engine.runs import run_id
    from console.engine.store import StoreError, this_host
    from console.engine.store.fleet import job_scope
    from console.settings import load_settings

    try:
        settings = load_settings()
    except JobError as exc:
        raise UsageError(str(exc)) from None
    b = settings.budgets
    scope = FLEET if args.job is None else job_scope(args.job)
    base = b.daily_usd if args.job is None else b.jobs.get(args.job)
    if (args.raise_usd is not None or args.resume) and base is None:
        where = "[budgets] daily_usd" if args.job is None else f"[budgets.jobs] {args.job}"
        raise UsageError(f"no daily budget is set for {scope_words(scope)}: set {where} in the operator's config")
    if args.raise_usd is not None and not 0 < args.raise_usd <= MAX_RAISE:
        raise UsageError(f"--raise takes US dollars in (0, {MAX_RAISE:g}]")
    now = datetime.now().astimezone()
    day = local_day(now)
    try:
        store = settings.open_store()
    except StoreError as exc:
        err(f"the store could not be used: {exc}")
        return EXIT_FAILED
    except (sqlite3.Error, OSError) as exc:
        raise UsageError(f"{settings.store_path}: the jobs database cannot be read ({exc})") from None
    try:
        ledger = _ledger(store, settings)
        try:
            if args.raise_usd is not None or args.resume:
                usd = float(args.raise_usd) if args.raise_usd is not None else float(base or 0)
                by = f"agent-console budget {'--raise ' + format_cost(usd) if args.raise_usd else '--resume'} " \
                     f"on {this_host()}"
                extra = ledger.raise_limit(day, scope, usd, by)
                limit = round((base or 0) + extra, 6)
                # A raise that leaves the limit at or below today's spend lifts nothing (a run's check holds it
                # again, at the new limit): said so, with what would lift it.
                jobs = ledger.spend(day)
                spent = sum(jobs.values()) if args.job is None else jobs.get(args.job, 0.0)
                go = ("every run it held goes on within a few seconds" if spent < limit else
                      f"its runs are still held: today's spend is {format_cost(spent)}; raise by more than "
                      f"{format_cost(spent - limit)} to let them go on")
                say(f"{scope_words(scope)}: today's budget is now {format_cost(limit)} "
                    f"({format_cost(base)} a day, raised by {format_cost(extra)} today); {go}")
                return EXIT_OK
            spend, raises, holds = ledger.spend(day), ledger.raises(day), ledger.holds(day)
            # The runs each scope with a hold today pauses now (live, their need the fleet budget's in that scope):
            # the operator answers for them, and `jobs`, `logs`, `resume` take these ids.
            waiting = {h.scope: sorted(run_id(r.path) for r in ledger.live_runs(day, h.scope)
                                       if held_in(r.detail, h.scope)) for h in holds}
        finally:
            ledger.close()
    except (StoreError, sqlite3.Error, OSError) as exc:
        err(f"the store could not be used: {exc}")
        return EXIT_FAILED
    finally:
        store.close()
    fleet_spent = sum(spend.values())
    if args.job is not None:
        # That job's scope alone, with its spend today even where no limit is set for it.
        scopes = [(scope, base, spend.get(args.job, 0.0))]
    else:
        scopes = [(FLEET, b.daily_usd, fleet_spent)] + [(job_scope(j), usd, spend.get(j, 0.0))
                                                        for j, usd in sorted(b.jobs.items())]
    rows = []
    for sc, limit_base, spent in scopes:
        extra = raises.get(sc, (0.0, ""))[0]
        limit = None if limit_base is None else round(limit_base + extra, 6)
        open_hold = next((h for h in holds if h.scope == sc and limit is not None and h.limit_usd == limit
                          and spent >= limit), None)
        rows.append({"scope": sc, "spent_usd": round(spent, 6), "daily_usd": limit_base, "raised_usd": extra,
                     "limit_usd": limit, "held": open_hold is not None,
                     "held_since": open_hold.created_at if open_hold else None,
                     "held_runs": waiting.get(sc, []) if open_hold else []})
    if args.json:
        say(json.dumps({"schema_version": 1, "day": day, "scopes": rows,
                        "jobs": {j: round(u, 6) for j, u in spend.items()}}))
        return EXIT_OK
    say(f"today ({day}, {now:%Z}):")
    for r in rows:
        limit = ", no daily budget" if r["limit_usd"] is None else f" of {format_cost(r['limit_usd'])}"
        raised = f" (raised by {format_cost(r['raised_usd'])} today)" if r["raised_usd"] else ""
        job = job_flag(r["scope"])
        held = f"  HELD since {_local_time(r['held_since'])}: its runs wait for `agent-console budget{job} " \
               f"--raise USD` or `agent-console budget{job} --resume`" if r["held"] else ""
        say(f"  {scope_words(r['scope'])}: {format_cost(r['spent_usd'])}{limit}{raised}{held}")
        if r["held"]:
            ids = r["held_runs"]
            say(f"    runs held: {', '.join(ids)}" if ids else
                "    runs held: none now (a run reaching the limit is held at its next turn)")
    if b.daily_usd is None and not b.jobs:
        from console.settings import config_path

        # Where it would go: the file this command read (AGENT_CONSOLE_CONFIG, or the default place).
        say("no [budgets] is set in the operator's config: nothing holds the fleet; to set one: daily_usd = USD "
            f"under [budgets] in {config_path()}")
    else:
        # A turn without a price has no cost: said here too, not only at such a run's start.
        say("priced turns only: a run whose model has no [prices] is not counted (`agent-console costs` shows "
            "unpriced usage)")
    return EXIT_OK


def _local_time(text: str | None) -> str:
    """A hold's ISO time as the operator reads it: ``09:34`` (local), the text as it is if it does not parse."""
    from datetime import datetime

    try:
        return f"{datetime.fromisoformat(str(text)).astimezone():%H:%M}"
    except ValueError:
        return str(text)
