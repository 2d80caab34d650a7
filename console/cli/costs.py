"""`costs`: the cost ledger over every run this machine knows (or, with a shared store, every machine's), grouped
by job, model, machine or day, from each run's own token_usage events (console.view.ledger)."""

from __future__ import annotations

import argparse
import sqlite3
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from console.cli.common import MAX_LIST, UsageError, err, say
from console.outcome import EXIT_FAILED, EXIT_OK

COSTS_HELP = ("What runs spent, from each run's own events: every run this machine knows, or every machine's with a "
              "shared store. Grouped by job, model, machine or day (the operator's local days, the timezone named; a "
              "run that spans midnight splits by its turns' times), with the total. Usage of a model without prices "
              "is counted in tokens and said, never as $0. A run whose log cannot be read, or whose folder is gone, "
              "is named. Exit 0: the ledger is whole; 1: printed, but some run's log could not be read whole (or its "
              "folder is gone) or the shared store was away (this machine's runs only); 2: a bad flag.")
BY = ("job", "model", "machine", "day")  # here, not in console.view.ledger: every command builds the parser
GONE = "its folder is gone (deleted or moved): not counted"  # a problem of the ledger's JSON, and its note
PAGE = 20000  # events of other machines' runs fetched from a shared store at a time


def add_parser(sub: Any) -> None:
    c = sub.add_parser("costs", help="the cost ledger: what runs spent, by job, model, machine or day, with totals",
                       description=COSTS_HELP)
    c.add_argument("--since", metavar="WHEN",
                   help="only what was spent since WHEN: an ISO date or time (local unless it names a zone), 24h, "
                        "7d, 90m, today or yesterday (default: all time)")
    c.add_argument("--by", choices=BY, default="job", help="group by: job (default), model, machine or day")
    c.add_argument("--json", action="store_true",
                   help="print one JSON object (schema_version 1: rows, total, runs_unpriced, unreadable; see "
                        "docs/cli.md)")


def cmd_costs(args: argparse.Namespace) -> int:
    from console.engine.job_files import JobError
    from console.settings import load_settings
    from console.view.ledger import Ledger, LedgerError, parse_since

    try:
        settings = load_settings()
        since = parse_since(args.since, datetime.now().astimezone()) if args.since is not None else None
    except (JobError, ValueError, LedgerError) as exc:
        raise UsageError(str(exc)) from None
    runs, away = _runs(settings)
    ledger = Ledger(args.by, since, runs).build()
    if args.json:
        say(ledger.model_dump_json())
    elif sys.stdout.isatty():
        _table(ledger)
    else:
        _plain(ledger)
    return EXIT_FAILED if (ledger.unreadable or away) else EXIT_OK


def _runs(settings: Any) -> tuple[list[Any], bool]:
    """Every run the store knows, each read once (this machine's from its folder, another machine's from the
    shared store's events); when the store is away, this machine's runs from their folders (True: away)."""
    from console.engine.job_files import JobPaths
    from console.engine.runs import job_name, run_id
    from console.engine.store import StoreError, is_shared, this_host
    from console.view.ledger import RunSpend, read_run

    here = this_host()
    away = False
    try:
        store = settings.open_store()
    except StoreError as exc:
        store = None
        away = True
        err(_away(exc, settings))
    except (sqlite3.Error, OSError) as exc:
        raise UsageError(f"{settings.store_path}: the jobs database cannot be read ({exc}); move it aside and a new "
                         "one is made") from None
    try:
        if store is not None:
            try:
                rows = store.list(MAX_LIST)
            except StoreError as exc:
                away = True
                err(_away(exc, settings))
                rows = None
            except (sqlite3.Error, OSError) as exc:
                raise UsageError(f"{settings.store_path}: the jobs database cannot be read ({exc}); move it aside "
                                 "and a new one is made") from None
        else:
            rows = None
        if rows is None:
            from console.cli.local_runs import own_rows

            rows = own_rows(settings)
        out = []
        remote = {}
        for row in rows:
            run = RunSpend(id=run_id(row.path), job=job_name(row.path), machine=row.host or here)
            if row.remote:
                remote[row.key] = run
            elif not Path(row.path).is_dir():
                # Its log went with its folder: not counted, and said (the total is not every run's).
                last = "" if row.cost_usd is None else f" (its last record said {_cost(row.cost_usd)})"
                run.problem = f"{GONE}{last}"
            else:
                read_run(JobPaths(Path(row.path)).events, run)
            out.append(run)
        if remote and store is not None and is_shared(store):
            _read_remote(store, remote)
        return out, away
    finally:
        if store is not None:
            store.close()


def _away(exc: Exception, settings: Any) -> str:
    return (f"the store is away ({exc}): this machine's runs only, from their folders under {settings.runs_dir} "
            "(exit 1); every machine's once it answers: agent-console costs")


def _read_remote(store: Any, runs: dict[str, Any]) -> None:
    """Other machines' runs: their events from the shared store, a page at a time (each event read once)."""
    from console.engine.store import StoreError
    from console.view.ledger import fold_lines

    after = dict.fromkeys(runs, 0)
    try:
        while after:
            got = store.events_of_many(after, PAGE)
            for key, pos, body in got:
                after[key] = max(after[key], pos)
                if body is None:
                    continue  # larger than a body may be: no token_usage is
                if fold_lines([body], runs[key].spend):
                    runs[key].problem = runs[key].problem or "damaged events in the store (passed over)"
            if len(got) < PAGE:
                break
    except StoreError as exc:
        for run in runs.values():
            run.problem = run.problem or f"its events could not be read from the store ({exc})"


def _cost(usd: float | None) -> str:
    from console.engine.cost import format_cost

    return "-" if usd is None else format_cost(usd)


def _window(ledger: Any) -> str:
    """``since 2026-01-15 08:00 (CET)`` or ``all time``, and the timezone the days are in."""
    if not ledger.since:
        return f"all time; days in {ledger.timezone}"
    since = datetime.fromisoformat(ledger.since).astimezone()
    return f"since {since:%Y-%m-%d %H:%M} {ledger.timezone}; days in {ledger.timezone}"


def _notes(ledger: Any) -> list[str]:
    notes = []
    if ledger.runs_unpriced:
        n = len(ledger.runs_unpriced)
        notes.append(f"{n} run{'s' if n != 1 else ''} had unpriced usage ({ledger.total.unpriced_tokens:,} tokens, "
                     f"not in the cost): {', '.join(ledger.runs_unpriced[:10])}{' ...' if n > 10 else ''}; add the "
                     "model under [prices] in the config (docs/operators-guide.md)")
    gone = [u for u in ledger.unreadable if u.problem.startswith(GONE)]
    if gone:
        n = len(gone)
        named = ", ".join(f"{u.id} on {u.machine}{u.problem.removeprefix(GONE)}" for u in gone[:10])
        whose = "their folders" if n != 1 else "its folder"
        notes.append(f"{n} run{'s are' if n != 1 else ' is'} not counted, {whose} "
                     f"gone (deleted or moved): {named}{' ...' if n > 10 else ''}; `agent-console jobs --prune` "
                     f"forgets {'them' if n != 1 else 'it'}")
    if unread := [u for u in ledger.unreadable if not u.problem.startswith(GONE)]:
        n = len(unread)
        named = "; ".join(f"{u.id} on {u.machine}: {u.problem}" for u in unread[:10])
        notes.append(f"{n} run{'s' if n != 1 else ''} could not be read whole (counted as far as read): {named}"
                     f"{' ...' if n > 10 else ''}")
    return notes


def _plain(ledger: Any) -> None:
    say(f"costs by {ledger.by}, {_window(ledger)}")
    for line in [*ledger.rows, ledger.total]:  # one line a row, its fields named (for grep and awk)
        say(f"{line.key}  {_cost(line.cost_usd)}  runs={line.runs} turns={line.turns} in={line.input_tokens} "
            f"out={line.output_tokens} cached={line.cached_input_tokens} unpriced={line.unpriced_tokens}")
    for note in _notes(ledger):
        say(note)


def _table(ledger: Any) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from console.view.jobs import one_line

    table = Table(title=Text(f"costs by {ledger.by}, {_window(ledger)}"), title_justify="left", show_footer=True)
    total = ledger.total
    table.add_column(ledger.by, footer="total")
    table.add_column("cost", justify="right", footer=_cost(total.cost_usd))
    table.add_column("runs", justify="right", footer=str(total.runs))
    table.add_column("turns", justify="right", footer=str(total.turns))
    table.add_column("tokens in", justify="right", footer=f"{total.input_tokens:,}")
    table.add_column("out", justify="right", footer=f"{total.output_tokens:,}")
    table.add_column("unpriced", justify="right", footer=f"{total.unpriced_tokens:,}")
    for line in ledger.rows:  # a job's name is the operator's folder name: any text, made safe and plain
        table.add_row(Text(one_line(line.key)), _cost(line.cost_usd), str(line.runs), str(line.turns),
                      f"{line.input_tokens:,}", f"{line.output_tokens:,}", f"{line.unpriced_tokens:,}")
    console = Console()
    if ledger.rows:
        console.print(table)
    else:
        console.print(Text(f"nothing spent ({_window(ledger)})"))
    for note in _notes(ledger):
        console.print(Text(one_line(note)), style="dim", soft_wrap=True)
