"""Which request an answer is for: the one fact an action link is bound to, read from a fleet row (the web server,
checking a link) or from the events that made it (the notifier, minting one), in one spelling.

A restart's approval or denial answers the ``restart_pending`` event that is waiting (``restart:SEQ``); a resume or
an acknowledgement answers the ``needs_operator`` event that asked (``need:SEQ``). A resume of a run whose process
died without recording its end (a kill -9, the out-of-memory killer: its watcher tells the channels) answers that
death: the run as its log was left (``died:SEQ``, the log's last seq), so a resume or an acknowledgement since, which
each add to the log, or a second death, leave the link nothing to answer. A link for an earlier request of the same
run answers nothing once that request is gone, however the operator answered it.
"""

from __future__ import annotations

from console.engine.events.log import last_seq
from console.engine.job_files import JobPaths
from console.view.fleet import INTERRUPTED, FleetRow

RESTART_ACTIONS = ("approve", "deny")
NEED_ACTIONS = ("resume", "acknowledge")


def request_for(action: str, *, pending_seq: int = 0, needs_seq: int = 0, died_seq: int = 0) -> str | None:
    """The request ``action`` answers, from the seqs of the events that ask (None: nothing asks for it);
    ``died_seq``: the last seq of the log of a run whose process died (a resume answers it, when no need does)."""
    if action in RESTART_ACTIONS:
        return f"restart:{pending_seq}" if pending_seq else None
    if action in NEED_ACTIONS:
        if needs_seq:
            return f"need:{needs_seq}"
        return f"died:{died_seq}" if action == "resume" and died_seq else None
    return None


def current_request(row: FleetRow, action: str) -> str | None:
    """What ``action`` would answer on ``row`` now (None: nothing, so a link for it is spent or stale). A run of
    this machine that died (interrupted: no process, no end recorded) is read at its log's tail for its last seq."""
    died = 0
    if action == "resume" and not row.needs_seq and row.state == INTERRUPTED and not row.has_runner and not row.host:
        died = last_seq(JobPaths(row.path).events)
    return request_for(action, pending_seq=row.pending_seq, needs_seq=row.needs_seq, died_seq=died)
