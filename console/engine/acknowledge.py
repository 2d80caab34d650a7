"""The operator acknowledges a run that ended without completing: it stops asking for them.

An agent that gave up, or a run that crashed, needs its operator "for ever": every view lists it first, the fleet
rings. Once the operator has seen it and decided to leave it for now, :func:`acknowledge` records a typed
``run_acknowledged`` event in the run's own log (the one record every view folds, shipped to a shared store like
every line, so another machine's fleet sees it too) and tells the jobs store (the row keeps its status and outcome;
it no longer says since when it needs you). The folder and the outcome are kept, and a resume goes on with the run:
its new process asks anew for whatever still needs the operator (the views forget an acknowledgement at a process's
``session_started``).

Only a run no process runs is acknowledged (the run lock is held while the line is written, so a resume cannot start
in between): a live run's need is answered (approve, resume, stop), not acknowledged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from console.engine import events as ev
from console.engine.job_files import JobPaths
from console.engine.run_lock import RunLock
from console.engine.store.base import Store

SHIP_SECONDS = 10.0  # the most a shared store is given to take the log's new line (the next catch-up ships the rest)
# What came of it: "acknowledged" (written now), "already" (it was: nothing written), "completed" (nothing to
# acknowledge), "live" (a process runs it: answer it instead), "never" (it never ran: no log).
Status = Literal["acknowledged", "already", "completed", "live", "never"]


@dataclass(frozen=True)
class Ended:
    """How a run's log says it stands, for an acknowledgement (a small fold: the engine has no view's)."""

    started: bool = False  # a process ever started it
    outcome: str = ""  # its last process's outcome ("" while it had none logged: it died or crashed)
    needs: str = ""  # what it asks for now ("" nothing)
    acknowledged: bool = False  # its end was acknowledged since its last process started
    session: int = 0


@dataclass(frozen=True)
class Acknowledgement:
    status: Status
    what: str = ""  # what was (or is) acknowledged: "gave_up", "crashed", "failed"...
    pid: int | None = None  # the process running it ("live")

    @property
    def ok(self) -> bool:
        return self.status in ("acknowledged", "already", "completed")


def read_end(path: Path) -> Ended:
    """Fold the run's log for what an acknowledgement needs (its last process's end, its need, an earlier ack)."""
    started, outcome, needs, acked, session = False, "", "", False, 0
    for e in ev.read_events(path):
        session = max(session, e.session)
        if isinstance(e, ev.SessionStarted) and e.reason in ("new", "resume"):
            started, outcome, needs, acked = True, "", "", False
        elif isinstance(e, ev.NeedsOperator):
            needs = e.reason
        elif isinstance(e, ev.NeedsOperatorCleared | ev.JobCompleted):
            needs = ""
        elif isinstance(e, ev.RunEnded):
            outcome = e.outcome or ("completed" if e.reason == "job_complete" else "failed")
            if needs and not (outcome == "gave_up" and needs == "gave_up"):
                needs = ""  # the run is over: nothing in it waits (but an agent that gave up does)
        elif isinstance(e, ev.RunAcknowledged):
            needs, acked = "", True
    return Ended(started, outcome, needs, acked, session)


def acknowledge(paths: JobPaths, by: str, store: Store | None = None,
                now: datetime | None = None) -> Acknowledgement:
    """Acknowledge the run at ``paths`` (``by``: cli | fleet | console). The event is written under the run's lock;
    ``store``: the jobs store to tell (its problems are its ``error``, as for every engine update)."""
    lock = RunLock(paths)
    if not paths.events.exists():
        return Acknowledgement("never")
    if not lock.acquire():
        return Acknowledgement("live", pid=lock.holder())
    try:
        end = read_end(paths.events)
        if not end.started:
            return Acknowledgement("never")
        what = end.needs or end.outcome or "crashed"  # a run that died without logging its end
        if end.outcome == "completed":
            return Acknowledgement("completed", "completed")
        if end.acknowledged:
            return Acknowledgement("already", end.outcome or "interrupted")
        stream = ev.EventStream(paths.events, session=end.session)
        try:
            stream.emit(ev.RunAcknowledged, reason=what, by=by)
            stream.sync()  # on disk before anyone is told it is acknowledged
        finally:
            stream.close()
    finally:
        lock.release()
    if store is not None:
        store.acknowledged(paths.root, now or datetime.now(UTC))
        if store.shared:  # another machine's fleet folds the store's copy of the log: the line goes there too
            _ship(store, paths)
    return Acknowledgement("acknowledged", what)


def _ship(store: Store, paths: JobPaths) -> None:
    from console.engine.store.base import StoreError
    from console.engine.store.catchup import ship_log

    try:
        ship_log(store, paths, time.monotonic() + SHIP_SECONDS)
    except StoreError as exc:  # the line is in the folder: the next catch-up (store sync) ships it
        store.error = str(exc)
