"""Asking the operator (:class:`OperatorAsking`): their commands at a turn boundary, a need recorded with its step
(a restart's approval, a spend limit, a stuck agent, refused stops, the model down), the run held while they decide,
their answer (a resume) and their stop, and the deadline that passes while the run waits for them.

A part of :class:`console.engine.session.Session`, over the session's shared state
(:class:`console.engine.session_state.SessionState`).
"""

from __future__ import annotations

from collections.abc import Callable

from console.engine.enforcement import Ask
from console.engine.needs import answered, ask_operator
from console.engine.session_state import SessionState
from console.engine.shutdown import SessionResult, ShutdownReason

# How a need the run waited on is closed when its deadline passes meanwhile (no one answered it; "stop": the
# notifier takes it as an end, not as an answer that let the run go on).
DEADLINE_ENDS_WAIT = "the deadline passed: the run stops as out of time"


class OperatorAsking:
    """The session's operator: what they sent, what the run asks them, and their answer."""

    def __init__(self, state: SessionState) -> None:
        self.state = state
        # While the run holds: whether what it waits on went away by itself (the fleet budget's hold lifted), set
        # by the session (console.engine.between_turns.BetweenTurns.fleet_lifted).
        self.lifted: Callable[[], bool] = lambda: False

    def commands(self) -> None:
        """Apply operator commands at a turn boundary, as a recorded step if they did anything."""
        s = self.state
        rt = s.rt
        applied = s.deps.operator.apply(rt)
        resumed = self.answers()
        notices = rt.take_notices()
        s.conversation.extend(notices)
        s.cm.appended(notices)
        if applied or notices or resumed:
            s.commit(durable=resumed)

    def hold(self) -> SessionResult | None:
        """At a turn boundary: the operator's commands, then, while they hold the run (a need, their pause), their
        next commands as they come. The session's end when the deadline passes meanwhile; None once the run may go
        on or the operator stopped it (the caller looks at the stop)."""
        s = self.state
        rt, op = s.rt, s.deps.operator
        self.commands()
        while op.paused and not op.stop_requested:
            if (late := self.deadline_while_waiting()) is not None:
                return late
            op.channel.wait(op.channel.look_every)  # a command's sender rings (console.engine.doorbell)
            self.commands()
            if op.paused and self.lifted():
                break
            if rt.events.holds_lines:
                # No step is open while the run waits (commands() committed what it applied): what is held
                # only reports, e.g. a notification channel's failure from its thread, which must reach the
                # log (`logs`, `jobs`, the console) now, not at the commit after the operator's answer.
                rt.events.observe()
            rt.events.quiet()
        return None

    def need(self, ask: Ask, *, commit: bool = True) -> None:
        """Ask the operator and hold after this step. Recorded with the step (``commit``: now, else the caller's
        commit carries it), so a run killed while it waits asks again when resumed."""
        s = self.state
        rt = s.rt
        pending = rt.guards.pending()
        if pending is None or pending.reason != ask.reason:
            rt.guards.record_ask(ask)
        ask_operator(rt.events, s.deps.operator, ask.reason, ask.message, ask.evidence)
        if commit:
            s.commit(durable=True)

    def ask_again(self) -> None:
        """A need recorded by an earlier process (killed while the run waited) is asked again: nobody answered
        it. A spend limit is not: the budgets look again at the first boundary (job.toml may have raised it)."""
        s = self.state
        pending = s.rt.guards.pending()
        if pending is None:
            return
        if pending.reason == "budget":
            s.rt.guards.forget_ask()
            s.commit()
            return
        self.need(pending)

    def answers(self) -> bool:
        """Whether the operator's resume (which clears the need: console.engine.operator) just answered the
        recorded need; if so the run goes on with what the answer grants (recorded by the caller's commit)."""
        s = self.state
        op, rt = s.deps.operator, s.rt
        pending = rt.guards.pending()
        if pending is None or op.needs is not None or op.paused or op.stop_requested:
            return False
        rt.guards.answer(resumed=True, by="operator's resume")
        if pending.reason == "stuck":
            rt.inject_notice("[Your operator saw that the run was stuck and let it go on. Do not repeat what did "
                             "not work: take a different approach to the task marked ← CURRENT, or call "
                             "todo_rewind(issue) to re-plan.]", "operator_notice")
        elif pending.reason == "completion_refused":
            rt.inject_notice("[Your operator reviewed the refused stops and let the run go on. Continue with the "
                             "task marked ← CURRENT in the ACTIVE TODO LIST and call todo_complete() when it is "
                             "done, or call todo_rewind(issue) to re-plan.]", "operator_notice")
        return True

    def stopped(self, down: str) -> SessionResult:
        """The operator's stop at a turn boundary. A stop while the run waited for them about a need ends it as
        that need ended runs before they were asked: out of budget, incomplete, interrupted (the model: ``down``
        says why it could not be reached)."""
        s = self.state
        rt, op = s.rt, s.deps.operator
        pending, need = rt.guards.pending(), op.needs
        if op.interrupted_by is not None and (pending is not None or need is not None):
            # A signal (a shutdown, a closed terminal) is nobody's answer: the need stays open (recorded, when the
            # guardrails asked it), the run ends interrupted, and its next process asks again.
            return s.stop_end("interrupted while it waited for its operator")
        detail = ""
        if pending is not None:
            if pending.reason == "completion_refused":
                detail = rt.guards.blocked_out() or pending.message
            rt.guards.answer(resumed=False, by="operator's stop")
        answered(rt.events, op, "operator's stop")
        if pending is not None or need is not None:
            s.commit(durable=True)
        reason = pending.reason if pending is not None else need
        if reason == "budget" and (spent := rt.guards.spend_limit()) is not None:
            return s.end(ShutdownReason.BUDGET_EXHAUSTED, f"stopped at the spend limit: {spent}")
        if reason == "completion_refused":
            return s.end(ShutdownReason.COMPLETION_BLOCKED, detail)
        if reason == "provider_down":
            return s.end(ShutdownReason.MODEL_UNAVAILABLE, down or "the model could not be reached")
        if reason == "stuck":
            return s.stop_end("stopped by the operator, asked because the agent looked stuck")
        return s.stop_end("stopped by the operator")

    def deadline_while_waiting(self) -> SessionResult | None:
        """While the run holds for its operator (a need, their pause): the deadline, once passed, ends it now, as a
        deadline reached while working does (out of time, resumable once the deadline is raised); the need it
        waited on is closed, by the deadline, not by an answer. None before the deadline."""
        s = self.state
        rt, op = s.rt, s.deps.operator
        why = rt.guards.deadline_while_waiting()
        if why is None:
            return None
        if rt.guards.pending() is not None:
            rt.guards.answer(resumed=False, by=DEADLINE_ENDS_WAIT)
        answered(rt.events, op, DEADLINE_ENDS_WAIT)
        op.paused = False
        s.commit(durable=True)
        return s.end(ShutdownReason.BUDGET_EXHAUSTED, why)
