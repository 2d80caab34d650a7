"""Which request an answer is for: the one fact an action link is bound to, read from a fleet row (the web server,
checking a link) or from the events that made it (the notifier, minting one), in one spelling.

A restart's approval or denial answers the ``restart_pending`` event that is waiting (``restart:SEQ``); a resume or
an acknowledgement answers the ``needs_operator`` event that asked (``need:SEQ``). A link for an earlier request of
the same run answers nothing once that request is gone, however the operator answered it.
"""

from __future__ import annotations

from console.view.fleet import FleetRow

RESTART_ACTIONS = ("approve", "deny")
NEED_ACTIONS = ("resume", "acknowledge")


def request_for(action: str, *, pending_seq: int = 0, needs_seq: int = 0) -> str | None:
    """The request ``action`` answers, from the seqs of the events that ask (None: nothing asks for it)."""
    if action in RESTART_ACTIONS:
        return f"restart:{pending_seq}" if pending_seq else None
    if action in NEED_ACTIONS:
        return f"need:{needs_seq}" if needs_seq else None
    return None


def current_request(row: FleetRow, action: str) -> str | None:
    """What ``action`` would answer on ``row`` now (None: nothing, so a link for it is spent or stale)."""
    return request_for(action, pending_seq=row.pending_seq, needs_seq=row.needs_seq)
