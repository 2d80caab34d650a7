"""`jobs`: the runs of the jobs store, newest first (the ones that need their operator first); `jobs --prune`."""

from __future__ import annotations

import argparse
import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

from console.cli.common import (
    MAX_LIST,
    check_flags,
    err,
    fit_parts,
    one_line,
    say,
)
from console.cli.table import jobs_table
from console.outcome import EXIT_FAILED, EXIT_OK, EXIT_USAGE


def cmd_jobs(args: argparse.Namespace) -> int:
    from rich.console import Console

    from console.engine.job import JobError
    from console.engine.runs import run_id
    from console.engine.store import JobStore, folder_gone
    from console.settings import load_settings

    try:
        check_flags(args)
        settings = load_settings()
    except (JobError, ValueError) as exc:
        err(str(exc))
        return EXIT_USAGE
    if args.prune:
        return prune_jobs(settings.store_path)
    try:
        # Every run that is not finished, whatever its age (one waiting for approval is never hidden), then the
        # newest finished ones up to --limit.
        live_rows, _older = JobStore(settings.store_path).list_live_and_recent(args.limit)
        rows = live_rows
    except (sqlite3.Error, OSError) as exc:
        err(f"{settings.store_path}: the jobs database cannot be read ({exc}); move it aside and a new one is made")
        return EXIT_USAGE
    from console.engine.job import JobPaths
    from console.engine.run_lock import RunLock

    def live(r: Any) -> Any:
        if folder_gone(r.path):  # deleted or moved: only the row is left (jobs --prune forgets it)
            return replace(r, status="gone", detail="its folder no longer exists; agent-console jobs --prune "
                           "forgets it")
        # A run that died (kill -9, power cut) never wrote its end: the lock tells the truth. (One that crashed
        # still needs its operator: it says so.)
        crashed = r.status == "needs you" and (r.detail or "").startswith("crashed:")
        if r.status in ("running", "awaiting approval", "needs you") and not crashed \
                and RunLock(JobPaths(Path(r.path))).holder() is None:
            detail = f"it needed you ({r.detail}) when its process ended" if r.status == "needs you" else r.detail
            return replace(r, status="interrupted", needs_since=None, detail=detail or "no process runs it; resume "
                           f"with: agent-console run --in-place {run_id(r.path)}")
        return r

    rows = [live(r) for r in rows]
    # The runs that need their operator first (one whose agent gave up does too), then newest first.
    rows.sort(key=lambda r: r.status not in ("needs you", "gave up"))
    if args.json:
        for r in rows:
            say(json.dumps({"id": run_id(r.path), **r.__dict__}))
        return EXIT_OK
    if not rows:
        say("no runs yet: try  agent-console run sample_jobs/quickstart")
        return EXIT_OK
    # A gone run's line says it is gone, and how to forget it (its summary is still in --json).
    rows = [replace(r, summary=None) if r.status == "gone" else r for r in rows]
    console = Console()
    width = console.width
    lines, hidden = jobs_table(rows, width)
    for text in lines:
        console.print(text, soft_wrap=True)  # each row is one line of at most `width`: never folded
    notes = [f"{len(rows)} run(s), newest first", "commands take a run's id, folder or the start of its name"]
    if hidden:
        notes += [f"hidden to fit: {', '.join(hidden)}", "jobs --json has every field"]
    if gone := sum(1 for r in rows if r.status == "gone"):
        notes.append(f"{gone} gone (folder deleted or moved): jobs --prune forgets {'it' if gone == 1 else 'them'}")
    notes.append(f"run folders: {settings.runs_dir}")
    for note in fit_parts([one_line(n) for n in notes], width):
        console.print(note, style="dim", soft_wrap=True, highlight=False, markup=False)
    return EXIT_OK



def prune_jobs(store_path: Path) -> int:
    """`jobs --prune`: forget every run whose folder is gone, naming each; how many, on the last line."""
    from console.engine.runs import run_id
    from console.engine.store import JobStore, folder_gone

    try:
        store = JobStore(store_path)
        gone = [r for r in store.list(MAX_LIST) if folder_gone(r.path)]
        forgot = store.forget([r.path for r in gone]) if gone else 0
    except (sqlite3.Error, OSError) as exc:
        err(f"{store_path}: the jobs database cannot be changed ({exc}); nothing was forgotten")
        return EXIT_FAILED
    for r in gone:
        say(f"forgot {run_id(r.path)}  {r.path}  ({r.status})")
    say(f"forgot {forgot} run{'s' if forgot != 1 else ''} whose folder is gone" if forgot else
        "no run's folder is gone: nothing to forget")
    return EXIT_OK
