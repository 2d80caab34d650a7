"""What a session asks for when it cannot go on alone: its operator (a need recorded with its step, their
answer, their stop) and the model (a turn's reply, with transient failures retried for the whole turn; a prompt
the server refuses as too long).

Mixins of :class:`console.engine.session.Session`, which owns the state they share (:class:`SessionBase`).
"""

from __future__ import annotations

import random
from typing import Any

from console.engine import events as ev
from console.engine.context.pressure import ContextManager
from console.engine.enforcement import Ask
from console.engine.journal import Checkpoint, Conversation
from console.engine.messages import Message, ModelRequest
from console.engine.model import ProviderError, ready_check
from console.engine.model_call import TICK, Outage, call_abandonably, retrying
from console.engine.needs import answered, ask_operator
from console.engine.operator import Aborted, Paused
from console.engine.runtime import Runtime
from console.engine.shutdown import SessionResult, ShutdownReason
from console.engine.turn import DeadlineCut, SessionDeps, TurnOutput, call_limits, operator_tick, stream_turn

# "Prompt too long" answers in a row (each followed by masking or a restart) before the run gives up.
MAX_OVERFLOWS = 3


class SessionBase:
    """What the asking mixins share with the session that runs them."""

    deps: SessionDeps
    rt: Runtime
    number: int
    conversation: Conversation
    cp: Checkpoint
    cm: ContextManager
    turns_here: int
    outage: Outage | None
    down: str
    ready_checked: bool
    overflows: int
    rng: random.Random | None

    def commit(self, durable: bool = False) -> None:
        raise NotImplementedError

    def end(self, reason: ShutdownReason, detail: str, carry: list[Message] | None = None) -> SessionResult:
        raise NotImplementedError

    def stop_end(self, detail: str) -> SessionResult:
        """The end a stop gives: the operator's (``detail`` says when), or a signal's (interrupted, whenever)."""
        by = self.deps.operator.interrupted_by
        if by is not None:
            return self.end(ShutdownReason.INTERRUPTED, f"interrupted by {by}")
        return self.end(ShutdownReason.USER_SHUTDOWN, detail)


class AskingTheOperator(SessionBase):
    # -- asking the operator ---------------------------------------------------------------------
    def need(self, ask: Ask, *, commit: bool = True) -> None:
        """Ask the operator and hold after this step. Recorded with the step (``commit``: now, else the caller's
        commit carries it), so a run killed while it waits asks again when resumed."""
        rt = self.rt
        pending = rt.guards.pending()
        if pending is None or pending.reason != ask.reason:
            rt.guards.record_ask(ask)
        ask_operator(rt.events, self.deps.operator, ask.reason, ask.message, ask.evidence)
        if commit:
            self.commit(durable=True)

    def ask_again(self) -> None:
        """A need recorded by an earlier process (killed while the run waited) is asked again: nobody answered
        it. A spend limit is not: the budgets look again at the first boundary (job.toml may have raised it)."""
        pending = self.rt.guards.pending()
        if pending is None:
            return
        if pending.reason == "budget":
            self.rt.guards.forget_ask()
            self.commit()
            return
        self.need(pending)

    def answers(self) -> bool:
        """Whether the operator's resume (which clears the need: console.engine.operator) just answered the
        recorded need; if so the run goes on with what the answer grants (recorded by the caller's commit)."""
        op, rt = self.deps.operator, self.rt
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

    def stopped(self) -> SessionResult:
        """The operator's stop at a turn boundary. A stop while the run waited for them about a need ends it as
        that need ended runs before they were asked: out of budget, incomplete, interrupted (the model)."""
        rt, op = self.rt, self.deps.operator
        pending, need = rt.guards.pending(), op.needs
        if op.interrupted_by is not None and (pending is not None or need is not None):
            # A signal (a shutdown, a closed terminal) is nobody's answer: the need stays open (recorded, when the
            # guardrails asked it), the run ends interrupted, and its next process asks again.
            return self.stop_end("interrupted while it waited for its operator")
        detail = ""
        if pending is not None:
            if pending.reason == "completion_refused":
                detail = rt.guards.blocked_out() or pending.message
            rt.guards.answer(resumed=False, by="operator's stop")
        answered(rt.events, op, "operator's stop")
        if pending is not None or need is not None:
            self.commit(durable=True)
        reason = pending.reason if pending is not None else need
        if reason == "budget" and (spent := rt.guards.spend_limit()) is not None:
            return self.end(ShutdownReason.BUDGET_EXHAUSTED, f"stopped at the spend limit: {spent}")
        if reason == "completion_refused":
            return self.end(ShutdownReason.COMPLETION_BLOCKED, detail)
        if reason == "provider_down":
            return self.end(ShutdownReason.MODEL_UNAVAILABLE, self.down or "the model could not be reached")
        if reason == "stuck":
            return self.stop_end("stopped by the operator, asked because the agent looked stuck")
        return self.stop_end("stopped by the operator")



class AskingTheModel(SessionBase):
    # -- asking the model ------------------------------------------------------------------------
    def ask(self, request: ModelRequest) -> TurnOutput:
        """The turn's reply, with transient failures retried for the whole turn (each wait an event)."""
        rt, deps = self.rt, self.deps
        limits = call_limits(deps.settings)
        outage = self.outage = Outage(limits, now=rt.clock.monotonic)
        streamed = [0]

        def attempt() -> TurnOutput:
            streamed[0] = 0
            try:
                return stream_turn(deps, self.cp.turn, request, streamed)
            finally:
                # The state lent to the state-file thread while the model was asked is the run's again (what
                # follows, a failure's handling included, may change it).
                rt.projections.serialized()

        def announce(state: Any) -> None:
            exc = state.outcome.exception()
            rt.events.emit(ev.ModelRetry, turn=self.cp.turn, attempt=state.attempt_number + 1,
                           delay_s=state.upcoming_sleep, cause=getattr(exc, "cause", "") or type(exc).__name__,
                           message=str(exc), waited_s=round(outage.elapsed() + state.upcoming_sleep, 3),
                           max_wait_s=outage.limit(), discarded_chars=streamed[0])
            rt.events.observe()

        try:
            return attempt()  # the common case, without the retry machinery's cost (~20-100 us a turn)
        except ProviderError as exc:
            if exc.kind != "transient":
                raise
            failed: list[ProviderError] = [exc]

        def again() -> TurnOutput:
            if failed:
                raise failed.pop()  # the first attempt's failure, already had: tenacity counts it as attempt 1
            return attempt()

        return retrying(limits, self.wait, announce, self.rng, outage)(again)

    def model_ready(self) -> SessionResult | None:
        """Seed 004's ``check_ollama_ready`` ("called once per session"): before the session's first chat request,
        the provider's cheap readiness check (an OpenAI-compatible server's GET /models), made and retried as a
        turn is (each wait a model_retry; a server not reached at all asks after unreachable_wait, 30 s). When it
        stays down the run asks its operator (``provider_down``) and holds, before any chat request: their resume
        goes on to the turn (which retries and asks again if the server is still down), their stop ends the run.
        The session's end when a stop came during the check; None to go on (``ready_checked`` says whether the
        check is done: a pause meanwhile leaves it to be made once the run goes on)."""
        rt, deps = self.rt, self.deps
        check = ready_check(deps.provider)
        if check is None:
            self.ready_checked = True
            return None
        limits = call_limits(deps.settings)
        outage = self.outage = Outage(limits, now=rt.clock.monotonic)
        turn = self.cp.turn + 1  # the turn the check comes before (nothing of it streamed: nothing to discard)

        def attempt() -> None:
            call_abandonably(deps.provider, check, limits, lambda: operator_tick(deps))

        def announce(state: Any) -> None:
            exc = state.outcome.exception()
            rt.events.emit(ev.ModelRetry, turn=turn, attempt=state.attempt_number + 1,
                           delay_s=state.upcoming_sleep, cause=getattr(exc, "cause", "") or type(exc).__name__,
                           message=str(exc), waited_s=round(outage.elapsed() + state.upcoming_sleep, 3),
                           max_wait_s=outage.limit())
            rt.events.observe()

        try:
            retrying(limits, self.wait, announce, self.rng, outage)(attempt)
        except Aborted:
            return self.stop_end("stopped by the operator while the model's server was checked")
        except Paused:
            return None  # checked once the operator resumes
        except DeadlineCut:
            self.ready_checked = True  # the budgets' check at the top of the loop ends the run (or grants its wrap-up)
            return None
        except ProviderError as exc:
            self.ready_checked = True
            if exc.kind == "transient":
                self.provider_down(exc, turn_asked=False)
            return None  # another answer is the chat request's to report
        self.ready_checked = True
        return None

    def wait(self, seconds: float) -> None:
        """A retry's wait, in ticks that let a stop or a pause act at once."""
        clock = self.rt.clock
        end = clock.monotonic() + seconds
        while True:
            operator_tick(self.deps)
            left = end - clock.monotonic()
            if left <= 0:
                return
            clock.sleep(min(TICK, left))

    def failed(self, exc: ProviderError) -> SessionResult | None:
        """A model call that failed for good: the session's end, or None to go on (a full context; the model
        not reached: the run asks its operator and holds)."""
        rt = self.rt
        if exc.kind == "context":
            return self.overflowed(exc)
        if exc.kind == "transient":
            self.provider_down(exc)
            return None
        rt.events.emit(ev.ErrorEvent, message=str(exc), where="provider", recoverable=False)
        rt.events.observe()
        ended = self.end(ShutdownReason.ERROR, str(exc))
        ended.fix = exc.fix  # a key to set, credit to add: the run's end names it, then the resume
        return ended

    def provider_down(self, exc: ProviderError, *, turn_asked: bool = True) -> None:
        """Transient failures outlasted the turn's bound (unreachable_wait for a server not reached at all,
        retry_total_wait else): the run asks its operator and holds; their resume asks the model again (the same
        turn, a fresh bound), their stop ends the run, resumable. A provider back in the morning finds it
        waiting. ``turn_asked`` False: it was the session's readiness check, before any turn was asked."""
        rt, st = self.rt, self.deps.settings
        outage = self.outage or Outage(call_limits(st), now=rt.clock.monotonic)
        tries, elapsed, limit = max(1, outage.tries), outage.elapsed(), outage.limit()
        bound = "unreachable_wait: the server cannot be reached" if outage.unreachable else "retry_total_wait"
        asked = (f"; the server asked to wait {exc.retry_after:.0f} s more" if exc.retry_after
                 and elapsed + exc.retry_after > limit else "")
        tried = f"{tries} {'try' if tries == 1 else 'tries'} over {elapsed:.0f} s"
        detail = f"the model could not be reached: {tried} (limit {limit:g} s, {bound}{asked}); last: {exc}"
        rt.events.emit(ev.ErrorEvent, message=detail, where="provider", recoverable=True)
        if turn_asked:
            self.unask()  # asked again, under the same number, once the operator resumes
        self.down = detail
        ask_operator(rt.events, self.deps.operator, "provider_down",
                     f"the model could not be reached ({getattr(exc, 'cause', '') or 'failed'}): resume tries again, "
                     "stop ends the run (agent-console resume goes on with it later)",
                     [str(exc), f"failing for {elapsed:.0f} s: {tried}", f"limit {limit:g} s ({bound}{asked})"])
        rt.events.observe()

    def unask(self) -> None:
        """The turn that was being asked did not happen: its number is used again."""
        self.cp.turn -= 1
        self.turns_here -= 1

    def overflowed(self, exc: ProviderError) -> SessionResult | None:
        """The server says the prompt is too long: the context is full, whatever our estimate says. The next
        look at the pressure masks or restarts; a fresh session's first prompt that is still too long ends
        the run (nothing is left to take out)."""
        rt, cm = self.rt, self.cm
        self.unask()
        self.overflows += 1
        rt.events.emit(ev.ErrorEvent, message=f"{exc} - the context is treated as full", where="context",
                       recoverable=True)
        if self.overflows > MAX_OVERFLOWS or not any(m.role == "assistant" for m in self.conversation):
            # Nothing can be taken out (the session's first prompt, no reply in it yet, is already too long),
            # or taking out did not help: our window is larger than the model's. (A session resumed with
            # replies in it can still restart: its first turn here is not its first turn.)
            detail = (f"the model's server refused the prompt as too long ({exc}), with nothing left to mask or "
                      f"restart; lower context_window (now {self.deps.settings.context_window:,}) to the model's "
                      "real window")
            rt.events.emit(ev.ErrorEvent, message=detail, where="context", recoverable=False)
            return self.end(ShutdownReason.ERROR, detail)
        cm.used = max(cm.used, cm.budget) + 1  # over the budget: mask if that is enough, else restart
        self.cp.evaluated = False
        return None
