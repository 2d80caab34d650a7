"""`store sync`: catch up the shared store with this machine's runs that ended while it was away (each run's
``.console/store-behind.json``; see console.engine.store.catchup). `jobs`, `run`, `logs` and the fleet do the same
on their own whenever they open the store; this says what it did, run by run."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from console.cli.common import UsageError, err, say
from console.outcome import EXIT_FAILED, EXIT_OK


def add_parser(sub: Any) -> None:
    s = sub.add_parser("store", help="the shared store: `store sync` sends it what runs of this machine owe it",
                       description="store sync: every run of this machine that ended while the shared store was "
                                   "away (its folder holds .console/store-behind.json) sends its missing events, "
                                   "its final status and its lease back; each run is named. jobs, run, logs and "
                                   "the fleet do the same on their own when they open the store.")
    s.add_argument("action", choices=["sync"], help="sync: catch the store up now")
    s.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="stop after this long (what is left is caught up by the next one); default 60")


def cmd_store(args: argparse.Namespace) -> int:
    from console.engine.job_files import JobError, JobPaths
    from console.engine.store import StoreError, is_shared_url
    from console.engine.store.catchup import catch_up_machine, catch_up_run
    from console.engine.store.marker import MARKER
    from console.settings import load_settings

    try:
        settings = load_settings()
    except (JobError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if not is_shared_url(settings.store_url):
        say("the store is the embedded one (on this machine): it is never behind")
        return EXIT_OK
    timeout = min(max(float(args.timeout), 0.1), 86_400.0) if args.timeout == args.timeout else 60.0
    deadline = time.monotonic() + timeout
    try:
        from console.engine.store.postgres import PgStore

        assert settings.store_url is not None
        store = PgStore(settings.store_url)
    except StoreError as exc:
        err(f"{exc}; nothing was sent")
        return EXIT_FAILED
    try:
        store.data_dir = settings.data_dir
        outcomes = catch_up_machine(store, settings.data_dir, budget=timeout)
        # A marker whose pointer was lost (a data dir wiped): the run folders of this data dir, a stat each.
        seen = {o.path for o in outcomes}
        for state in sorted(Path(settings.runs_dir).glob(f"*/.console/{MARKER}")):
            folder = state.parent.parent
            if str(folder) not in seen and time.monotonic() < deadline:
                outcomes.append(catch_up_run(store, JobPaths(folder), settings.data_dir, deadline=deadline))
    finally:
        store.close()
    for o in outcomes:
        say(f"{'caught up' if o.done else 'left'}  {o.path}  ({o.why})")
    left = sum(1 for o in outcomes if not o.done)
    say(f"{len(outcomes) - left} run(s) caught up, {left} left" if outcomes else
        "nothing to catch up: the store has every run of this machine")
    return EXIT_FAILED if left else EXIT_OK
