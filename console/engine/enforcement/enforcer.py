"""The enforcer: the run's guardrails with the world and the recorders they need, and the tool gate every
model tool call passes before it runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from console.engine import events as ev
from console.engine.clock import Clock
from console.engine.cost import format_cost
from console.engine.enforcement.asks import _Asks
from console.engine.enforcement.world import SandboxWorld
from console.engine.guardrails import GateVerdict, Guardrails, GuardrailState, ToolCallSummary
from console.engine.guardrails.budgets import SPEND_LIMITS, WRAP_UP_SECONDS
from console.engine.job import one_line
from console.engine.messages import Message, ToolCall
from console.engine.plan import Plan
from console.engine.todos import TodoState


class Enforcer(_Asks):
    """The run's guardrails, with the world and the recorders they need (a narrow context, not the Runtime)."""

    def __init__(self, guardrails: Guardrails, *, events: ev.EventStream, clock: Clock, world: SandboxWorld,
                 changed: Callable[[], None], record_intent: Callable[[str, dict[str, Any]], None],
                 redo: Callable[[str], dict[str, Any] | None], todos: Callable[[], TodoState],
                 load_plan: Callable[[], Plan]) -> None:
        self.g = guardrails
        self.events = events
        self.clock = clock
        self.world = world
        self._changed = changed
        self._record_intent = record_intent
        self._redo = redo
        self._todos = todos
        self._load_plan = load_plan
        self._last_status: dict[str, Any] | None = None
        self.last_refusal = ""
        self._verdict_key: tuple[Any, ...] | None = None
        self._verdict_text: str | None = None
        self._verdict_at = 0.0
        self.confinement = ""
        self.command_tools: list[str] = []
        self.on_stuck: Callable[[str], None] | None = None  # the run's experiences.md hears of each stuck pattern

    # -- state -----------------------------------------------------------------------------------
    def snapshot(self) -> GuardrailState:
        return self.g.snapshot()

    def restore(self, state: GuardrailState) -> None:
        self.g.restore(state)

    def start(self, priced: bool | None = None) -> None:
        """The run starts (or resumes): the budgets' clock starts once per job, and an operator who raised a
        spent budget in job.toml gets the run going again.

        ``priced``: whether the model's prices are known. False with a ``budget_usd`` set: no cost is ever
        counted, so that budget can never be reached; the operator is told so once, at the start."""
        budget_usd = self.g.budgets.budget_usd
        if priced is False and budget_usd is not None:
            self.events.emit(ev.ErrorEvent, where="guardrails", recoverable=True, message=(
                f"budget_usd = {format_cost(budget_usd)} can never be reached: no price is known for this model, "
                "so no cost is counted. Add the model under [prices] in the config (see docs/operators-guide.md), "
                "or limit the job with budget_tokens."))
        st = self.g.budget_state
        now = self.clock.now()
        before = (st.model_dump(), self.g.feedback.state.started_at)
        self.g.start(now)
        if st.exhausted is not None:
            st.exhausted, wrap = None, st.wrap_up_turns
            if (kind := self.g.exhausted(now)) is None or kind in SPEND_LIMITS:
                # Raised in job.toml (the run goes on), or still at a spend limit: the run asks again at its
                # first turn boundary; no wrap-up turn is involved either way.
                st.wrap_up_turns, st.wrap_up_until = 0, None
            else:
                st.wrap_up_turns = wrap
                if st.wrap_up_until is not None:
                    # Resumed in (or after) the wrap-up turn: the operator's resume gives it its time again.
                    st.wrap_up_until = now + timedelta(seconds=WRAP_UP_SECONDS)
        # A new run is the operator's decision to go on: refused stops count from zero again.
        if self.g.completion_blocks > self.g.max_completion_blocks:
            self.g.completion_blocks = 0
            self._changed()
        if (st.model_dump(), self.g.feedback.state.started_at) != before:
            self._changed()

    def session_started(self, number: int) -> None:
        """Session ``number`` starts, new or resumed: the file triggers fire once per session (seed 002), recorded
        with the session's start."""
        if self.g.feedback.session_started(number):
            self._changed()

    # -- the tool gate ---------------------------------------------------------------------------
    def gate(self, turn: int, call_id: str, tool: str, params: Mapping[str, Any]) -> str | None:
        """None if every policy allows the call, else the error result the agent gets (and the event)."""
        key = f"{call_id}#gate"
        recorded = self._redo(key)
        if recorded is not None and recorded.get("allowed") is True:
            return None  # the first attempt was allowed and may have acted: judge the redo the same way
        verdict: GateVerdict = self.g.gate.check(tool, params, self.world)
        if verdict.allowed:
            if verdict.consulted_world:
                # The call is about to change what the policy looked at (a new file becomes an existing one).
                self._record_intent(key, {"allowed": True})
            return None
        reason = one_line(verdict.reason, 2000)
        self.events.emit(ev.ToolDenied, turn=turn, call_id=call_id, tool=tool, policy=verdict.policy or "?",
                         reason=reason, error=verdict.error)
        return f"Denied by the {verdict.policy} policy: {reason}"

    def after_call(self, tool: str, params: Mapping[str, Any] | None, ok: bool, *, denied: bool) -> None:
        """A call that ran has its result: the policies learn from it (recorded with the call's own step)."""
        if params is None or denied:
            return
        before = self.g.gate.snapshot()
        for err in self.g.gate.on_result(tool, params, ok, self.world):
            self.events.emit(ev.ErrorEvent, message=f"policy bookkeeping failed: {err}"[:2000],
                             where="guardrails", recoverable=True)
        if self.g.gate.snapshot() != before:
            self._changed()

    def record_turn(self, turn: int, calls: list[ToolCall], results: dict[str, Message]) -> None:
        """The turn's calls, for the feedback providers (the stuck detector's history), taken from the recorded
        conversation at the turn's end: one change of state per turn, and a resumed turn records the same."""
        for call in calls:
            result = results.get(call.id)
            ok = result is not None and result.meta.get("ok", True) is not False
            self.g.feedback.record_call(ToolCallSummary.of(call.name, call.arguments, ok,
                                                           result.content if result is not None else "", turn))
        if calls:
            self._changed()
