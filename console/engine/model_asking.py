"""Asking the model (:class:`ModelAsking`): a turn's reply, with transient failures retried for the whole turn (each
wait an event), the server's readiness checked before a session's first chat request, an outage that outlasts its
bound asked of the operator, and a prompt the server refuses as too long taken as a full context.

A part of :class:`console.engine.session.Session`, over the session's shared state
(:class:`console.engine.session_state.SessionState`); it holds what only it keeps: the outage of the turn being
asked, why the model is down, whether the server was checked, the overflows in a row, the retries' jitter.
"""

from __future__ import annotations

import random
from typing import Any

from console.engine import events as ev
from console.engine.messages import ModelRequest
from console.engine.model import ProviderError, ready_check
from console.engine.model_call import TICK, Outage, call_abandonably, retrying
from console.engine.needs import ask_operator
from console.engine.operator import Aborted, Paused
from console.engine.session_state import SessionState
from console.engine.shutdown import SessionResult, ShutdownReason
from console.engine.turn import DeadlineCut, TurnOutput, call_limits, operator_tick, stream_turn

# "Prompt too long" answers in a row (each followed by masking or a restart) before the run gives up.
MAX_OVERFLOWS = 3


class ModelAsking:
    """The session's model: asked for each turn, checked once per session, its outages and overflows handled."""

    def __init__(self, state: SessionState) -> None:
        self.state = state
        self.outage: Outage | None = None  # the failures of the turn being asked
        self.down = ""  # why the model could not be reached, while the run asks its operator about it
        self.ready_checked = False  # the model's server was checked before the session's first chat request
        self.overflows = 0  # "prompt too long" answers in a row
        seed = state.deps.seed
        self.rng = random.Random(seed) if seed is not None else None

    def turn(self, request: ModelRequest) -> TurnOutput | SessionResult | None:
        """The turn's reply; the session's end (a stop meanwhile, a failure for good); or None when the turn did
        not happen and the top of the loop decides (a pause, the deadline, the model down or the context full)."""
        s = self.state
        rt = s.rt
        try:
            out = self.ask(request)
        except Aborted:
            # The half-streamed reply is dropped: the last commit stays the resume point.
            return s.stop_end("stopped by the operator during a turn")
        except Paused:
            s.unask()  # asked again, under the same number, once the operator resumes
            return None
        except DeadlineCut:
            # The half reply is dropped; the budgets' check at the top of the loop grants the wrap-up turn
            # (or, if this was it, ends the run).
            s.unask()
            rt.events.emit(ev.ErrorEvent, message="the model's reply was cut: the job's time is up",
                           where="budget", recoverable=True)
            rt.events.observe()
            return None
        except ProviderError as exc:
            return self.failed(exc)
        self.overflows = 0
        return out

    def ask(self, request: ModelRequest) -> TurnOutput:
        """The turn's reply, with transient failures retried for the whole turn (each wait an event)."""
        s = self.state
        rt, deps = s.rt, s.deps
        limits = call_limits(deps.settings)
        outage = self.outage = Outage(limits, now=rt.clock.monotonic)
        streamed = [0]

        def attempt() -> TurnOutput:
            streamed[0] = 0
            try:
                return stream_turn(deps, s.cp.turn, request, streamed)
            finally:
                # The state lent to the state-file thread while the model was asked is the run's again (what
                # follows, a failure's handling included, may change it).
                rt.projections.serialized()

        def announce(state: Any) -> None:
            exc = state.outcome.exception()
            rt.events.emit(ev.ModelRetry, turn=s.cp.turn, attempt=state.attempt_number + 1,
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
        s = self.state
        rt, deps = s.rt, s.deps
        check = ready_check(deps.provider)
        if check is None:
            self.ready_checked = True
            return None
        limits = call_limits(deps.settings)
        outage = self.outage = Outage(limits, now=rt.clock.monotonic)
        turn = s.cp.turn + 1  # the turn the check comes before (nothing of it streamed: nothing to discard)

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
            return s.stop_end("stopped by the operator while the model's server was checked")
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
        s = self.state
        clock = s.rt.clock
        end = clock.monotonic() + seconds
        while True:
            operator_tick(s.deps)
            left = end - clock.monotonic()
            if left <= 0:
                return
            clock.sleep(min(TICK, left))

    def failed(self, exc: ProviderError) -> SessionResult | None:
        """A model call that failed for good: the session's end, or None to go on (a full context; the model
        not reached: the run asks its operator and holds)."""
        s = self.state
        rt = s.rt
        if exc.kind == "context":
            return self.overflowed(exc)
        if exc.kind == "transient":
            self.provider_down(exc)
            return None
        rt.events.emit(ev.ErrorEvent, message=str(exc), where="provider", recoverable=False)
        rt.events.observe()
        ended = s.end(ShutdownReason.ERROR, str(exc))
        ended.fix = exc.fix  # a key to set, credit to add: the run's end names it, then the resume
        return ended

    def provider_down(self, exc: ProviderError, *, turn_asked: bool = True) -> None:
        """Transient failures outlasted the turn's bound (unreachable_wait for a server not reached at all,
        retry_total_wait else): the run asks its operator and holds; their resume asks the model again (the same
        turn, a fresh bound), their stop ends the run, resumable. A provider back in the morning finds it
        waiting. ``turn_asked`` False: it was the session's readiness check, before any turn was asked."""
        s = self.state
        rt, st = s.rt, s.deps.settings
        outage = self.outage or Outage(call_limits(st), now=rt.clock.monotonic)
        tries, elapsed, limit = max(1, outage.tries), outage.elapsed(), outage.limit()
        bound = "unreachable_wait: the server cannot be reached" if outage.unreachable else "retry_total_wait"
        asked = (f"; the server asked to wait {exc.retry_after:.0f} s more" if exc.retry_after
                 and elapsed + exc.retry_after > limit else "")
        tried = f"{tries} {'try' if tries == 1 else 'tries'} over {elapsed:.0f} s"
        detail = f"the model could not be reached: {tried} (limit {limit:g} s, {bound}{asked}); last: {exc}"
        rt.events.emit(ev.ErrorEvent, message=detail, where="provider", recoverable=True)
        if turn_asked:
            s.unask()  # asked again, under the same number, once the operator resumes
        self.down = detail
        ask_operator(rt.events, s.deps.operator, "provider_down",
                     f"the model could not be reached ({getattr(exc, 'cause', '') or 'failed'}): resume tries again, "
                     "stop ends the run (agent-console resume goes on with it later)",
                     [str(exc), f"failing for {elapsed:.0f} s: {tried}", f"limit {limit:g} s ({bound}{asked})"])
        rt.events.observe()

    def overflowed(self, exc: ProviderError) -> SessionResult | None:
        """The server says the prompt is too long: the context is full, whatever our estimate says. The next
        look at the pressure masks or restarts; a fresh session's first prompt that is still too long ends
        the run (nothing is left to take out)."""
        s = self.state
        rt, cm = s.rt, s.cm
        s.unask()
        self.overflows += 1
        rt.events.emit(ev.ErrorEvent, message=f"{exc} - the context is treated as full", where="context",
                       recoverable=True)
        if self.overflows > MAX_OVERFLOWS or not any(m.role == "assistant" for m in s.conversation):
            # Nothing can be taken out (the session's first prompt, no reply in it yet, is already too long),
            # or taking out did not help: our window is larger than the model's. (A session resumed with
            # replies in it can still restart: its first turn here is not its first turn.)
            detail = (f"the model's server refused the prompt as too long ({exc}), with nothing left to mask or "
                      f"restart; lower context_window (now {s.deps.settings.context_window:,}) to the model's "
                      "real window")
            rt.events.emit(ev.ErrorEvent, message=detail, where="context", recoverable=False)
            return s.end(ShutdownReason.ERROR, detail)
        cm.used = max(cm.used, cm.budget) + 1  # over the budget: mask if that is enough, else restart
        s.cp.evaluated = False
        return None
