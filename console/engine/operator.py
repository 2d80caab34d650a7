"""Applying operator commands to a running engine.

Commands arrive through :class:`ControlChannel` (the console in-process, or
the inbox from another shell) and are applied here, at turn boundaries:
force a checkpoint, rewind with the operator's issue text, pause/resume,
stop, and approve or deny a pending restart.

While the model is being asked (a stream, a stall, a wait before a retry) a stop or a pause acts at once:
the reply in progress is dropped (nothing of it was recorded) and asked again when the run goes on. While
tools run, a stop waits for the turn's end (a second stop stops at once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, assert_never

from console.engine import events as ev
from console.engine.commands import Answer, ApproveRestart, Checkpoint, DenyRestart, Pause, Resume, Rewind, Stop
from console.engine.control import SIGNALS, Command, ControlChannel
from console.engine.needs import answered, label
from console.engine.questions import Question, parse_values

if TYPE_CHECKING:
    from console.engine.runtime import Runtime


class Aborted(Exception):
    """The operator asked for an immediate stop while a turn was in flight."""


class Paused(Exception):
    """The operator paused while the model was being asked: the call is dropped, the run holds."""




@dataclass
class OperatorState:
    channel: ControlChannel = field(default_factory=ControlChannel)
    stop_requested: bool = False
    abort: bool = False
    paused: bool = False
    awaiting_restart: bool = False
    restart_decision: str | None = None
    # What the run is waiting for its operator about (console.engine.needs), None when it is not.
    needs: ev.NeedReason | None = None
    # Commands that arrived mid-turn, applied at the next turn boundary.
    deferred: list[Command] = field(default_factory=list)
    # The signal whose stop came first ("SIGTERM", "Ctrl+C"), if a signal stopped the run: it ends interrupted.
    interrupted_by: str | None = None
    # The question an MCP server asks during the call in flight (console.engine.tools.mcp_elicitation), while it
    # waits for the operator's answer command; None when none waits (an answer is then refused).
    question: Question | None = None

    def apply(self, rt: Runtime, *, streaming: bool = False, between_sessions: bool = False,
              asking: bool = False, look: bool = False) -> list[Command]:
        """Drain and apply pending commands.

        While streaming only stop is acted on at once (``asking``: the model is being asked, so stop and
        pause act at once, raising :class:`Aborted` or :class:`Paused`); between sessions (waiting for a
        restart's approval) a checkpoint or rewind waits for the next session's first
        turn boundary, where it is recorded with the conversation it belongs to. ``look``: the inbox is read now
        even while streaming (its looks are otherwise spaced by POLL_INTERVAL then).
        """
        cmds = self.channel.poll(force=not streaming or look)
        if streaming:
            now = AT_ONCE_WHILE_ASKING if asking else AT_ONCE_WHILE_STREAMING
            if self.question is not None:  # a resume answers no question: said at once, naming what does
                now = (*now, Resume)
            self.deferred += [c for c in cmds if not isinstance(c.body, now)]
            cmds = [c for c in cmds if isinstance(c.body, now)]
        elif between_sessions:
            self.deferred += [c for c in cmds if isinstance(c.body, WITH_A_CONVERSATION)]
            cmds = [c for c in cmds if not isinstance(c.body, WITH_A_CONVERSATION)]
        else:
            cmds, self.deferred = self.deferred + cmds, []
        for bad in self.channel.invalid:
            rt.events.emit(ev.OperatorCommand, command="invalid", source="inbox", status="rejected", detail=bad)
        self.channel.invalid.clear()
        for old in self.channel.stale:
            rt.events.emit(ev.OperatorCommand, command=old.command, args=old.body.logged(), source=old.source,
                           status="discarded", command_id=old.id,
                           detail=f"sent at {old.issued_at:%H:%M:%S} to an earlier run of this job; not applied")
        self.channel.stale.clear()
        for cmd in cmds:
            rt.events.emit(ev.OperatorCommand, command=cmd.command, args=cmd.body.logged(), source=cmd.source,
                           status="received", command_id=cmd.id)
            if isinstance(cmd.body, Stop) and not self.stop_requested and cmd.source in SIGNALS:
                self.interrupted_by = cmd.source  # the first stop decides how the run ends
            if asking and isinstance(cmd.body, Stop) and not self.stop_requested:
                self.stop_requested = self.abort = True
                status, detail = "applied", "stopping now: the reply in progress is dropped and asked again on resume"
            else:
                status, detail = self._apply_one(rt, cmd, streaming)
            if asking and isinstance(cmd.body, Pause) and status == "applied":
                detail = "paused: the reply in progress is dropped and asked again on resume"
            rt.events.emit(ev.OperatorCommand, command=cmd.command, args=cmd.body.logged(), source=cmd.source,
                           status=status, detail=detail, command_id=cmd.id)
        if streaming and self.abort:
            raise Aborted
        if asking and self.paused:
            raise Paused
        return cmds

    def answer_the_rest(self, events: ev.EventStream) -> None:
        """As the run ends: each command submitted in-process that no step took (sent as the run decided to end: a
        second stop right behind the first, which the doorbell's wake no longer lets a look take together) is
        answered, so its sender is not left waiting for an answer that never comes."""
        for cmd in self.channel.take_submitted():
            events.emit(ev.OperatorCommand, command=cmd.command, args=cmd.body.logged(), source=cmd.source,
                        status="received", command_id=cmd.id)
            detail = ("the run has stopped already" if isinstance(cmd.body, Stop)
                      else "the run ended before it could apply it: nothing done")
            events.emit(ev.OperatorCommand, command=cmd.command, args=cmd.body.logged(), source=cmd.source,
                        status="rejected", detail=detail, command_id=cmd.id)

    def apply_while_asking(self, rt: Runtime) -> None:
        """:meth:`apply` while the model is asked (stop and pause act at once), on each streamed item: with nothing
        new to hand over and nothing in force, nothing to do."""
        if self.abort or self.paused or not self.channel.idle():
            rt.projections.serialized()  # a command may change the state lent to the state-file thread
            self.apply(rt, streaming=True, asking=True)

    def _apply_one(self, rt: Runtime, cmd: Command, streaming: bool) -> tuple[str, str]:
        """What the command means: (status, detail). One case per command of the typed union (the type checker
        says when a command has none)."""
        body = cmd.body
        match body:
            case Stop():
                if self.stop_requested or self.paused or self.awaiting_restart:
                    self.abort = True
                    self.stop_requested = True
                    return "applied", "stopping now"
                self.stop_requested = True
                return "applied", "stopping after the current turn (send stop again to stop now)"
            case Pause():
                if self.paused:
                    return "rejected", "already paused"
                self.paused = True
                if self.awaiting_restart or self.needs is not None:
                    # No turn is in flight: the run waits for its operator, and holds once that is answered.
                    return "applied", "paused: it holds once what it waits for is answered, until resumed"
                return "applied", "pausing after the current turn"
            case Resume():
                if not self.paused:
                    return "rejected", self._not_paused(rt)
                self.paused = False
                answered(rt.events, self, "operator's resume")
                return "applied", "resumed"
            case ApproveRestart() | DenyRestart():
                if not self.awaiting_restart:
                    return "rejected", "no restart is pending"
                approve = isinstance(body, ApproveRestart)
                if self.restart_decision is not None:
                    # Two answers at once (two shells, a phone and a shell): the first is the one applied, and
                    # the second's sender is told so, not that theirs was.
                    first = "approved" if self.restart_decision == "approve" else "denied"
                    return "rejected", f"the restart was {first} already (the first answer decides): nothing changed"
                self.restart_decision = "approve" if approve else "deny"
                return "applied", "restart approved" if approve else "restart denied"
            case Checkpoint() | Rewind():
                return self._transition(rt, body)
            case Answer():
                return self._answer(body, cmd.source)
            case _:
                assert_never(body)

    def _answer(self, body: Answer, source: str) -> tuple[str, str]:
        """An answer to the question waiting now: checked against its form, kept for the call that asks it."""
        q = self.question
        if q is not None and q.action is not None and body.question in (None, q.id):
            # Two answers at once (two shells, the palette and a shell): the first is the one applied.
            return "rejected", f"question {q.id} was answered already (by {q.by}): nothing answered"
        if q is None or q.action is not None:
            return "rejected", "no question of an MCP server waits for an answer now"
        if body.question is not None and body.question != q.id:
            return "rejected", (f"question {body.question[:64]} is not the one waiting (question {q.id} of MCP "
                                f"server {q.server} waits now): nothing answered")
        try:
            return "applied", q.answer(body.action, parse_values(body.set or ()), by=f"operator ({source})")
        except ValueError as exc:
            return "rejected", f"not answered: {exc}; question {q.id} still waits"

    def _not_paused(self, rt: Runtime) -> str:
        """Why a resume answers nothing, and what would: the run may need its operator for something a resume
        does not answer (a restart's approval, ...), which `jobs` shows as "needs you"."""
        rid = rt.paths.run_id
        need = "restart_approval" if self.awaiting_restart else self.needs
        if need is None:
            return "not paused"
        what = NOT_ANSWERED_BY_RESUME.get(need, "agent-console stop {id} ends it")
        return f"not paused: it waits for {label(need)}: {what.format(id=rid)}"

    @staticmethod
    def _transition(rt: Runtime, body: Checkpoint | Rewind) -> tuple[str, str]:
        """A checkpoint or a rewind: a phase transition the operator asked for."""
        if rt.job_done:
            return "rejected", "the job is complete"
        if isinstance(body, Rewind) and (why := _phase_moved_on(rt, body.phase)):
            return "rejected", why
        if why := rt.phases.operator_refusal():
            return "rejected", why
        if isinstance(body, Checkpoint):
            if rt.todos.state.pending is not None:
                return "rejected", "a phase transition is already in progress"
            rt.phases.checkpoint(body.note or None)
            return "applied", "checkpoint started: the agent re-orients at its next turn"
        rt.phases.rewind(f"(operator) {body.issue.strip()}")
        return "applied", "rewind started: the agent re-plans at its next turn"


# What answers a need that a resume does not (the needs that do not pause the run), in the operator's commands.
NOT_ANSWERED_BY_RESUME = {
    "restart_approval": "agent-console approve {id} or deny {id}",
    "store_down": "nothing to answer: the run goes on from its folder and the store catches up when it is back "
                  "(agent-console stop {id} ends it)",
    "crashed": "the run is ending on an internal error; once it has ended, agent-console resume {id}",
    "gave_up": "the run is ending as the agent gave up; once it has ended, agent-console resume {id}",
    "mcp_question": "agent-console answer {id} --set NAME=VALUE (one for each field), --decline or --cancel",
}

# Which commands act while the model is being asked (a stream, a stall, a wait before a retry); the others wait
# for the turn's end. Between sessions a checkpoint or a rewind waits for the next session's first turn boundary,
# where it is recorded with the conversation it belongs to.
# An answer acts at once wherever it comes: a question waits only during a call (else it is refused, never held).
AT_ONCE_WHILE_STREAMING = (Stop, Answer)
AT_ONCE_WHILE_ASKING = (Stop, Pause, Answer)
WITH_A_CONVERSATION = (Checkpoint, Rewind)


def _phase_moved_on(rt: Runtime, number: int | None) -> str | None:
    """Why a rewind for phase ``number`` (the phase the operator's dialog showed; checked a phase number by the
    typed command) must not apply now: the run is in another phase (it ended, or it was never reached). None: no
    phase named (applies to the current one), or it is the current phase (a transition out of it still in
    progress counts: the rewind re-plans that phase)."""
    if number is None:
        return None
    st = rt.todos.state
    if st.kind == "phase":
        if number == st.phase_number:
            return None
        now = f"the run is in phase {st.phase_number} now"
        ended = number < st.phase_number
    elif st.kind == "completion":
        now, ended = "the job is in its final review", True
    elif st.kind == "bootstrap":
        now, ended = "the job is still bootstrapping", False
    else:
        now, ended = "no phase is current", False
    if ended:
        return f"phase {number} has already ended ({now}); rewind not applied"
    return f"phase {number} is not the current phase ({now}); rewind not applied"
