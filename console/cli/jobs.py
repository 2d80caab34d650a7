"""`jobs`: the runs of the jobs store, newest first (the ones that need their operator first); `jobs --prune`."""

from __future__ import annotations

import argparse
import json
import sqlite3
from dataclasses import replace
from typing import Any

from console.cli.common import (
    MAX_LIST,
    UsageError,
    check_flags,
    err,
    fit_parts,
    say,
    where_runs_are,
)
from console.outcome import EXIT_FAILED, EXIT_OK
from console.view.jobs import one_line


def cmd_jobs(args: argparse.Namespace) -> int:
    from rich.console import Console

    from console.engine.job_files import JobError
    from console.engine.runs import run_id
    from console.engine.store import FINISHED, StoreError
    from console.view.jobs import as_now, jobs_table, needs_first, unconfined

    try:
        check_flags(args)
        settings = where_runs_are()
    except (JobError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if args.prune:
        return prune_jobs(settings)
    older = finished = 0  # finished runs past --limit, left out (said: a list cut in silence reads as the whole fleet)
    try:
        # Every run that is not finished, whatever its age (one waiting for approval is never hidden), then the
        # newest finished ones up to --limit.
        store = settings.open_store()
        try:
            live_rows, older = store.list_live_and_recent(args.limit)
        finally:
            store.close()
        rows = live_rows
        away = None
        finished = sum(1 for r in rows if r.status in FINISHED)  # by the store's word, before as_now
    except StoreError as exc:
        # The store is an index of the run folders: this machine's are listed from them meanwhile, marked.
        from console.cli.local_runs import STORE_AWAY, own_rows

        away = str(exc)
        rows = own_rows(settings)
        err(f"{STORE_AWAY}: {away}; this machine's runs, read from their folders under {settings.runs_dir} (a run's "
            "story: agent-console logs RUN_FOLDER)")
    except (sqlite3.Error, OSError) as exc:
        raise UsageError(f"{settings.store_path}: the jobs database cannot be read ({exc}); move it aside and a new "
                         "one is made") from None
    rows = [as_now(r) for r in rows]
    rows.sort(key=needs_first)
    from console.engine.seal import Seal, SealError

    try:  # each run's record is believed only with this operator's seal (a run's UNCONFINED mark)
        seal: Seal | None = Seal.of(settings.data_dir)
    except SealError as exc:
        err(f"warning: {exc}")
        seal = None
    if args.json:
        for r in rows:
            record = {**r.__dict__, "unconfined": unconfined(r, seal)}
            if away is not None:  # read from its folder: the store's fields it has not (cost, summary) are null
                record["store"] = "away"
            if not r.host:  # the embedded store: no machine, no lease (its records keep their keys)
                for extra in ("host", "leased", "key"):
                    record.pop(extra, None)
            say(json.dumps({"id": run_id(r.path), **record}))
        if older:  # stdout stays JSON lines, every one a run: the cut is said on stderr
            err(f"{len(rows)} of {len(rows) + older} runs listed (every run not finished, and the {finished} newest "
                f"finished); {older} older finished not listed: jobs --json --limit {finished + older} lists them all")
        return EXIT_OK
    if not rows:
        say("no runs of this machine in its data dir (the store is away)" if away is not None else
            "no runs yet: try  agent-console run sample_jobs/quickstart")
        return EXIT_OK
    # A gone run's line says it is gone, and how to forget it (its summary is still in --json).
    rows = [replace(r, summary=None) if r.status == "gone" else r for r in rows]
    console = Console()
    width = console.width
    lines, hidden = jobs_table(rows, width, seal)
    for text in lines:
        console.print(text, soft_wrap=True)  # each row is one line of at most `width`: never folded
    # Sorted by needs_first: the runs that need their operator come before newer ones, and the note says so.
    order = "newest first" if all(needs_first(r) for r in rows) else "those that need you first, then newest first"
    notes = [f"{len(rows)} run(s), {order}"]
    if older:
        notes = [f"{len(rows)} of {len(rows) + older} runs, {order}",
                 f"{older} older finished not shown: jobs --limit {finished + older} shows them all"]
    notes.append("commands take a run's id, folder or the start of its name")
    if away is not None:
        notes.insert(0, "store away: this machine's runs only, from their folders")
    if hidden:
        notes += [f"hidden to fit: {', '.join(hidden)}", "jobs --json has every field"]
    if gone := sum(1 for r in rows if r.status == "gone"):
        notes.append(f"{gone} gone (folder deleted or moved): jobs --prune forgets {'it' if gone == 1 else 'them'}")
    notes.append(f"run folders: {settings.runs_dir}")
    for note in fit_parts([one_line(n) for n in notes], width):
        console.print(note, style="dim", soft_wrap=True, highlight=False, markup=False)
    return EXIT_OK



def prune_jobs(settings: Any) -> int:
    """`jobs --prune`: forget every run of this machine whose folder is gone, naming each; how many, on the last
    line. (A shared store's runs of other machines are theirs to prune: their folders are not here.)"""
    from console.engine.runs import run_id
    from console.engine.store import StoreError, folder_gone

    try:
        store = settings.open_store()
        try:
            gone = [r for r in store.list(MAX_LIST) if not r.remote and folder_gone(r.path)]
            forgot = store.forget([r.path for r in gone]) if gone else 0
        finally:
            store.close()
    except StoreError as exc:
        err(f"{exc}; nothing was forgotten")
        return EXIT_FAILED
    except (sqlite3.Error, OSError) as exc:
        err(f"{settings.store_path}: the jobs database cannot be changed ({exc}); nothing was forgotten")
        return EXIT_FAILED
    for r in gone:
        say(f"forgot {run_id(r.path)}  {r.path}  ({r.status})")
    say(f"forgot {forgot} run{'s' if forgot != 1 else ''} whose folder is gone" if forgot else
        "no run's folder is gone: nothing to forget")
    return EXIT_OK
