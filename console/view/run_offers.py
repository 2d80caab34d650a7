"""What the keys of one run's console offer now, and why one offers nothing: decided from plain facts, no Textual.

The run's screen asks :func:`offered` for each of its run commands (its footer shows only what applies: Resume while
paused, Stop now once a stop was asked, none of them on a run that has ended) and, when one is given anyway (the
palette, a key the footer no longer shows), says the :class:`Refusal` of :func:`ended_refusal` or
:func:`phase_refused`. The facts are read once per question (:class:`RunFacts`): whether a process holds the run's
lock may be a read of that lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from console.engine.command_specs import SPECS
from console.view.liveness import PROCESS_GONE, phase_refusal, run_clause, run_liveness
from console.view.state import ConsoleState

# The run's commands: offered only while they can act (see offered); a screen's other keys are always offered.
RUN_ACTIONS: frozenset[str] = frozenset({*(spec.action for spec in SPECS), "toggle_pause", "stop_now", "acknowledge"})


@dataclass(frozen=True)
class RunFacts:
    """What the offers depend on: the run's fold, and how this console reaches the run."""

    state: ConsoleState
    attached: bool  # another process runs the run (its inbox takes the commands); else the run is this process's
    runner_pid: int | None  # the process holding the run's lock, as the controller sees it now
    finished: bool = False  # the run of this process has ended (its engine returned)
    startable: bool = False  # the run's folder is here and resume starts it again (an inbox of this machine)
    local: bool = False  # the run is this machine's: it can be acknowledged here (another machine's is, there)

    @cached_property
    def active(self) -> bool:
        """The run can act on a command now: a process runs it and its end is not logged."""
        if self.attached:
            return self.runner_pid is not None and not self.state.ended
        return not self.finished

    @cached_property
    def can_start_again(self) -> bool:
        """An attached run no process runs, with its folder here, that has not completed: resume starts it again in
        the background (``agent-console resume``, as the fleet's r does) and this console follows it. A run of
        another machine is started there (its controller's resume_hint says how)."""
        st = self.state
        if not self.startable or self.active or "start" in st.requested:
            return False
        if self.runner_pid is not None or not (st.session or st.ended):
            return False  # a process holds the run (its end is being logged), or none ever ran it: nothing to start
        return run_liveness(st, None).kind in ("interrupted", "stopped", "failed", "needs")

    @cached_property
    def can_acknowledge(self) -> bool:
        """A run of this machine no process runs that gave up, crashed or failed and was not acknowledged: ``k``
        makes it ask no more (console.engine.acknowledge; as the fleet's k and ``agent-console ack``)."""
        if not self.local or self.runner_pid is not None:
            return False  # another machine's run is acknowledged there; a live one is answered instead
        st = self.state
        if st.acknowledged or not (st.session or st.ended) or "start" in st.requested:
            return False
        return run_liveness(st, None).kind in ("needs", "failed")


def stopping(st: ConsoleState) -> bool:
    """The run is ending, or this console asked it to."""
    return st.stopping or "stop" in st.requested


def pausing(st: ConsoleState) -> bool:
    """What the run will be once what this console asked for applies: paused (p resumes), or not (p pauses)."""
    return "pause" in st.requested or (st.paused and "resume" not in st.requested)


def offered(action: str, facts: RunFacts) -> bool:
    """Whether the footer offers ``action`` now (True for an action that is none of the run's commands).

    On a run that has ended, or an attached one nobody runs, none of the run's commands but resume (it starts the
    run again, asked first) and acknowledge."""
    if action not in RUN_ACTIONS:
        return True
    st = facts.state
    active = facts.active
    if action == "acknowledge":
        return not active and facts.can_acknowledge
    if action in ("approve", "deny"):
        return st.restart_pending is not None and active
    if action == "answer":  # a question of an MCP server waits during a call (the palette's "Answer question")
        return active and st.needs is not None and st.needs.reason == "mcp_question"
    if not active:
        return action == "resume" and facts.can_start_again  # the run starts again (asked first)
    if action in ("checkpoint", "rewind") and phase_refusal(st):
        return False  # the engine would refuse it (bootstrap, the final review): not offered
    if action == "stop":
        return not stopping(st)
    if action == "stop_now":
        return stopping(st)
    if stopping(st) and action != "toggle_pause":
        return False  # the run is ending: pausing, re-planning or a checkpoint would never apply
    if action == "pause":
        return not pausing(st)
    if action == "resume":
        return pausing(st)
    return True


def offers(facts: RunFacts) -> tuple[bool, ...]:
    """Every run command's answer, in a fixed order (with whether a restart waits): the footer is rebuilt only when
    this changes."""
    return (facts.state.restart_pending is not None, *(offered(a, facts) for a in sorted(RUN_ACTIONS)))


@dataclass(frozen=True)
class Refusal:
    """Why a command does nothing now, as the operator's notice says it."""

    title: str
    message: str


def ended_refusal(command: str, facts: RunFacts, resume: str) -> Refusal | None:
    """Why a run command does nothing on a run that cannot act now (None: the run can act). ``resume``: how the run
    is resumed (``agent-console resume ID``, or how its machine does it; with the key here if it can start again)."""
    if facts.active:
        return None
    st = facts.state
    if st.outcome == "completed":
        return Refusal(f"No {command}", f"The job is complete: there is nothing to {command}.")
    if st.ended:
        return Refusal(f"No {command}", f"The run has ended ({st.outcome}): nothing to {command}. Resume it with "
                                        f"{resume}")
    if "start" in st.requested:
        return Refusal(f"No {command} yet", f"The run is starting again: {command} once it runs.")
    state = run_liveness(st, None).state
    return Refusal(f"No {command}", f"The run {run_clause(state)}: {PROCESS_GONE}, nothing to {command}. Resume "
                                    f"it with {resume}")


def phase_refused(command: str, st: ConsoleState) -> Refusal | None:
    """Why a checkpoint or rewind cannot apply in the run's phase (the engine would refuse it), or None."""
    why = phase_refusal(st)
    return Refusal(f"No {command} now", f"{command.capitalize()} not available: {why}.") if why else None


def resume_way(facts: RunFacts, run_id: str, hint: str, key: str) -> str:
    """How the operator resumes the run: its controller's ``hint`` (a run of another machine is resumed there), else
    ``agent-console resume ID``; with ``key`` here first when this console can start it again (as the fleet's r)."""
    resume = hint or f"agent-console resume {run_id}"
    return f"{key} here (or {resume})" if facts.can_start_again else resume
