"""`ack ID`: acknowledge a run that ended without completing (its agent gave up, it crashed or failed), so it stops
asking for its operator; its outcome and folder are kept and `resume ID` still goes on with it
(console.engine.acknowledge). Named as on-call tools name it: "ack" is the word an operator paged at night types;
`acknowledge` is its long form."""

from __future__ import annotations

import argparse
from typing import Any

from console.cli.common import RUN_HELP, UsageError, err, refuse_foreign, run_folder, say, where_runs_are
from console.outcome import EXIT_FAILED, EXIT_OK

NAMES = ("ack", "acknowledge")
HELP = "acknowledge a run that gave up, crashed or failed: it stops asking for you (resume still goes on with it)"


def add_parser(sub: Any) -> None:
    a = sub.add_parser(NAMES[0], aliases=list(NAMES[1:]), help=HELP,
                       description="Acknowledge a run that has ended without completing (its agent gave up, it "
                                   "crashed or failed): it is no longer listed first as needing you and asks you no "
                                   "more. Its outcome and folder are kept; agent-console resume ID goes on with it, "
                                   "and a need of that new run asks again. Exit 0: acknowledged (or nothing asked); "
                                   "2: no such run, or it is not a run that has ended.")
    a.add_argument("job", metavar="JOB", help=RUN_HELP)


def cmd_ack(args: argparse.Namespace) -> int:
    from console.engine.acknowledge import acknowledge
    from console.engine.job_files import JobError, validate_job_folder

    try:
        settings = where_runs_are()
        paths = validate_job_folder(run_folder(args.job, settings))
        refuse_foreign(paths, settings.data_dir)
    except (JobError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    rid = paths.run_id
    store = _store(settings)
    try:
        done = acknowledge(paths, "cli", store)
    except OSError as exc:
        err(f"ack: run {rid} ({paths.root}) cannot be acknowledged: {exc.strerror or exc}; see agent-console "
            f"logs {rid}")
        return EXIT_FAILED
    finally:
        if store is not None:
            store.close()
    if done.status == "never":
        raise UsageError(f"ack: {paths.root} has never run, so nothing asks for you there; list the runs with: "
                         "agent-console jobs")
    if done.status == "live":
        raise UsageError(f"ack: run {rid} is running (process {done.pid}), so it is answered, not acknowledged: open "
                         f"it with agent-console attach {rid} (or agent-console stop {rid})")
    if done.status == "completed":
        say(f"ack: run {rid} completed: nothing asks for you there")
        return EXIT_OK
    what = _words(done.what)
    if done.status == "already":
        say(f"ack: run {rid} ({what}) was already acknowledged; go on with it: agent-console resume {rid}")
        return EXIT_OK
    stale = f" (the jobs store was not told: {store.error})" if store is not None and store.error else ""
    say(f"ack: run {rid} ({what}) acknowledged: it asks for you no more; its outcome and folder are kept{stale}. "
        f"Go on with it: agent-console resume {rid}")
    return EXIT_OK


def _words(what: str) -> str:
    from console.engine.needs import label

    return {"gave_up": "the agent gave up"}.get(what) or label(what)


def _store(settings: Any) -> Any:
    """The jobs store to tell (None when it cannot be opened: the run's own log holds the acknowledgement)."""
    import sqlite3

    from console.engine.store import StoreError

    try:
        return settings.open_store()
    except (StoreError, sqlite3.Error, OSError):
        return None
