"""What the fleet's keys offer for the selected run, decided from the row's plain facts. Pure Python: no Textual.

A key that acts on a run (attach, approve, deny, stop, pause, resume, acknowledge, forget) is offered (the footer,
the key itself, the palette) only while it applies to the selected run (:func:`applies`); a key pressed anyway (the
palette's filter, a row that changed under the cursor) says why it does nothing (:func:`refusal`). Both read only
the row's facts: its state, what it needs, its pending restart, whether a process (or another machine's runner)
runs it, whose machine it is, whether it was acknowledged (:class:`console.view.fleet.FleetRow`, a frozen snapshot).
The fleet's screen (console.tui.screens.fleet) asks these; its actions (console.tui.screens.fleet_actions) act.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.view.fleet import GONE, FleetRow

# The keys that act on the selected run: each is offered (footer, key) only while it applies to it (:func:`applies`).
ROW_ACTIONS = ("attach", "approve", "deny", "stop", "pause", "resume", "acknowledge", "forget")

# The palette's entries for the selected run, each offered only while it applies (as its footer key):
# (action, title, help).
PALETTE = (
    ("attach", "Attach", "Open the console of the selected run (q comes back)"),
    ("approve", "Approve restart", "Approve the selected run's pending context restart"),
    ("deny", "Deny restart", "Deny the selected run's pending restart (the run ends)"),
    ("acknowledge", "Acknowledge run", "The selected run that gave up, crashed or failed asks for you no more (resume "
     "still goes on with it)"),
)


def applies(action: str, row: FleetRow | None) -> bool:
    """Whether ``action`` acts on ``row`` now (what the fleet would do rather than say "nothing to ...")."""
    if row is None:
        return False
    if action == "attach":
        return row.state != GONE
    if action in ("approve", "deny"):
        return bool(row.pending_seq)
    if action == "stop":
        return row.has_runner
    if action == "pause":
        return row.pausable
    if action == "resume":
        return bool(row.resume)
    if action == "acknowledge":
        return row.ackable
    if action == "forget":
        return row.state == GONE
    return True


def offered(row: FleetRow | None) -> tuple[bool, ...]:
    """Which of :data:`ROW_ACTIONS` the footer offers for ``row`` (the footer is redrawn when this changes)."""
    return tuple(applies(action, row) for action in ROW_ACTIONS)


@dataclass(frozen=True)
class Refusal:
    """What a key says instead of acting on a run it does not apply to: a notice's title and its line."""

    title: str
    message: str


def refusal(action: str, row: FleetRow) -> Refusal | None:
    """Why ``action`` does nothing for ``row``, in the operator's words (None: it acts). Enter attaches to any row
    (a gone run's console says its folder is gone)."""
    name = f"{row.id} {row.job}"
    if action == "stop" and not row.has_runner:
        return Refusal("Nothing to stop", f"{name}: no process runs it ({row.state}).")
    if action == "forget" and row.state != GONE:
        return Refusal("Nothing to forget", f"{name}: its folder is still there; only a run whose folder is gone is "
                       "forgotten.")
    if action == "pause" and not row.pausable:
        why = "no process runs it" if not row.has_runner else f"its state is {row.state_text}"
        return Refusal("Nothing to pause", f"{name}: nothing to pause ({why}).")
    if action == "resume" and row.resume not in ("unpause", "start"):
        why = "it has completed" if row.state == "completed" else f"its state is {row.state}"
        if row.needs == "mcp_question" and row.has_runner:
            why = f"an MCP server asks a question: agent-console answer {row.id} --set NAME=VALUE, or --decline"
        return Refusal("Nothing to resume", f"{name}: nothing to resume ({why}).")
    if action == "acknowledge" and not row.ackable:
        why = ("a process runs it: answer it instead" if row.has_runner else
               f"it is {row.host}'s: acknowledge it there (agent-console ack {row.id})" if row.host else
               "it was acknowledged" if row.acknowledged else f"its state is {row.state_text}")
        return Refusal("Nothing to acknowledge", f"{name}: nothing to acknowledge ({why}).")
    if action in ("approve", "deny") and not row.pending_seq:
        return Refusal(f"Nothing to {action}", f"{name} has no restart waiting for approval ({row.state}).")
    return None
