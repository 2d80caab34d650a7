"""How a run ended, in the operator's terms: its :class:`RunResult`, its outcome (:func:`outcome_of`: only the
harness's record of the work makes a job completed), the jobs table's word for it (:func:`status_for`) and where a
resumed run picks up (:func:`where_resumed`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from console.engine import events as ev
from console.engine.shutdown import ShutdownReason

if TYPE_CHECKING:  # annotations only: `wait` reads a run's end through this module without the session machinery
    from console.engine.journal import Checkpoint
    from console.engine.messages import Message
    from console.engine.state import JobOutcome

STATUS_FOR = {
    ShutdownReason.JOB_COMPLETE: "completed",
    ShutdownReason.USER_SHUTDOWN: "stopped",
    ShutdownReason.MAX_TURNS: "incomplete",
    ShutdownReason.ERROR: "failed",
    ShutdownReason.CONTEXT_FULL: "failed",
    ShutdownReason.COMPLETION_BLOCKED: "incomplete",
    ShutdownReason.BUDGET_EXHAUSTED: "out of budget",
    ShutdownReason.AGENT_STOPPED: "agent stopped",
    # Nothing is lost: run --in-place goes on once the model answers again.
    ShutdownReason.MODEL_UNAVAILABLE: "interrupted",
    # It waits for its operator (a run that needs them is listed first, whatever its age).
    ShutdownReason.GAVE_UP: "gave up",
    # A signal: nothing is lost, run --in-place goes on.
    ShutdownReason.INTERRUPTED: "interrupted",
}
# Reasons a run ends on that are the harness's failure, not the work's state (an internal error, a restart loop).
FAILED_REASONS = frozenset({ShutdownReason.ERROR, ShutdownReason.CONTEXT_FULL})


@dataclass
class RunResult:
    reason: ShutdownReason
    detail: str
    sessions: int
    outcome: JobOutcome | None
    restarts: int = 0
    # How it ended, in the operator's terms (events.Outcome): only "completed" is a job done.
    ended: ev.Outcome = "incomplete"
    # Nothing ran: an earlier run had completed the job.
    already: bool = False
    # What the operator fixes before a resume goes on (console.engine.shutdown.SessionResult.fix).
    fix: str = ""

    @property
    def ok(self) -> bool:
        return self.ended == "completed"


def folder_removed(e: ev.RunEnded) -> bool:
    """The run ended because its folder was deleted or moved away (the stop console.engine.control.FOLDER_GONE
    sends): nothing is left to resume, and no ending may offer a resume."""
    from console.engine.control import FOLDER_GONE

    return e.reason == ShutdownReason.INTERRUPTED.value and FOLDER_GONE in e.detail


def status_for(reason: ShutdownReason, ended: ev.Outcome) -> str:
    """The jobs table's word for a run that ended: what ended it, unless the outcome says otherwise (a free stop
    or a job_complete the record does not bear out is incomplete, whatever ended it)."""
    if ended in ("completed", "failed"):
        return ended
    status = STATUS_FOR[reason]
    return "incomplete" if status == "completed" or reason is ShutdownReason.AGENT_STOPPED else status


def ended_status(e: ev.RunEnded) -> str:
    """The jobs table's word for a run whose log ends with ``e`` (what :func:`status_for` stored at its end).

    A log from before outcomes were recorded says only what ended it; a reason this version does not know leaves
    the outcome to say it (a newer version's log read by an older one)."""
    ended = e.outcome
    try:
        reason = ShutdownReason(e.reason)
    except ValueError:
        return {"completed": "completed", "failed": "failed", "gave_up": "gave up"}.get(ended or "", "incomplete")
    if ended is None:
        ended = "completed" if reason in (ShutdownReason.JOB_COMPLETE, ShutdownReason.AGENT_STOPPED) else \
            "failed" if reason in FAILED_REASONS else "incomplete"
    return status_for(reason, ended)


def outcome_of(reason: ShutdownReason, outcome: JobOutcome | None, unmet: list[str]) -> ev.Outcome:
    """A run's outcome from what ended it and the harness's record of the work (``unmet``: what it says is left).

    Completed means the record shows the plan done, whatever ended the run (a job_complete, a job_complete made
    in a deadline's wrap-up turn, a free stop): never the agent's say-so alone."""
    if outcome is not None and outcome.gave_up:
        return "gave_up"
    if reason in FAILED_REASONS:
        return "failed"
    if (outcome is not None or reason is ShutdownReason.AGENT_STOPPED) and not unmet:
        return "completed"
    return "incomplete"


def where_resumed(cp: Checkpoint, conversation: list[Message], cut: int) -> str:
    """Where a resumed run picks up, in the operator's words."""
    if cp.stage == "tools":
        calls = next((len(m.tool_calls) for m in reversed(conversation) if m.role == "assistant"), 0)
        where = f"turn {cp.turn}, tool call {cp.next_call + 1} of {calls}" if cp.next_call < calls else \
            f"the end of turn {cp.turn}"
    else:
        where = f"after turn {cp.turn}"
    return where + (" (an unfinished step was cut and is redone)" if cut else "")
