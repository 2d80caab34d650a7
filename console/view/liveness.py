"""How a run stands as its own console sees it: the engine's one answer (:func:`console.engine.runs.liveness`),
given what the run's log says (its fold) and whether a process holds its lock. The fleet and ``jobs`` ask the same
function, so the console of a run whose process died says "interrupted" where they do. No Textual here."""

from __future__ import annotations

from console.engine.runs import RUNNING, Liveness, Seen, liveness
from console.engine.text import safe_text
from console.view.format import clock_time
from console.view.state import ConsoleState

# Said beside the state of a run that no process runs and that did not end (kill -9, a power cut, a crash).
PROCESS_GONE = "its process is gone"


# A state word (console.engine.runs) said as what the run does or is: "needs you" and "gave up" are not
# adjectives ("The run is needs you since 02:17:45" was said).
_CLAUSES = {"needs you": "needs you", "gave up": "gave up", "completed": "completed", "failed": "failed",
            "stopped": "stopped", "agent stopped": "was stopped by its agent", "incomplete": "ended incomplete",
            "interrupted": "was interrupted", "starting": "is starting", "running": "is running",
            "paused": "is paused", "out of budget": "is out of budget", "awaiting approval": "is awaiting approval",
            "gone": "is gone (its folder was deleted or moved)"}


def run_clause(state: str) -> str:
    """What follows "The run " to say it is in ``state``: "needs you", "was interrupted", "is paused"."""
    return _CLAUSES.get(state, f"is in the state {state!r}")


def seen_of(st: ConsoleState) -> Seen:
    """What a run's log says about it, for :func:`console.engine.runs.liveness`."""
    return Seen(needs=st.needs.reason if st.needs is not None else "", restart_pending=st.restart_pending is not None,
                paused=st.paused, started=bool(st.session), outcome=st.outcome or "", ended=st.ended,
                acknowledged=st.acknowledged)


def run_liveness(st: ConsoleState, pid: int | None) -> Liveness:
    """The run's state from its log alone (no jobs store at hand): until its end is logged the store records it as
    running, so with nobody holding its lock it is interrupted (or needs its operator, if it crashed or gave up)."""
    return liveness(st.outcome or RUNNING, pid, seen=seen_of(st))


def phase_refusal(st: ConsoleState) -> str:
    """Why the engine would refuse an operator's checkpoint or rewind in the run's current phase ("": it would not):
    the same reasons as its own (console.engine.phases), so the console does not offer what it would refuse."""
    todos = st.todos
    kind = todos.kind if todos is not None else ""
    if kind in ("", "empty"):
        # No todo list seen yet (a run starting, or one of another machine whose events have not come): no phase to
        # act on. The engine's first list is the bootstrap's, where it refuses both: offered, the key or the page's
        # form would be refused a moment later (a view said "rewind phase None").
        return "the run has no todo list yet: there is no phase to re-orient to or re-plan"
    # The transition out of the bootstrap (its list still the bootstrap's, phase 0) is refused too.
    if kind == "bootstrap" or (kind == "transition" and todos is not None and todos.phase_number <= 0):
        return "the job is still bootstrapping: there is no plan to re-orient to yet"
    if kind == "completion":
        return "the job is in its final review"
    return ""


def resume_text(st: ConsoleState, name: str) -> str:
    """The resume question of a run no process runs: how it stands (its state, since when and why, where it was) and
    what resuming does. ``name``: how ``agent-console resume`` names it. (It said "The run is stopped: it has
    stopped.")"""
    state = run_liveness(st, None).state
    if st.ended:
        since = f" (it ended at {clock_time(st.ended_at)})" if st.ended_at is not None else ""
        detail = safe_text(st.outcome_detail, one_line=True)
        how = f"The run {run_clause(state)}{since}" + (f": {detail}" if detail and detail != state else "") + "."
    else:
        how = f"The run {run_clause(state)}: {PROCESS_GONE} and its end was never logged."
    where = [f"session {st.session}"] if st.session else []
    if st.phase:
        where.append(f"phase {st.phase}")
    was = f" It was in {', '.join(where)}." if where else ""
    return (f"{how}{was} Resuming starts it again in the background where it stopped (a turn that was in "
            "flight is asked again), with the provider, model and settings it was started with; this console "
            f"follows it. (The same as: agent-console resume {name})")
