"""The tool gate: every model tool call passes the job's policies before it runs, and the policies learn from
each result. A decision that looked at the job folder is recorded before the call acts, so the redo of a call a
kill interrupted is judged as the first attempt was."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from console.engine import events as ev
from console.engine.enforcement.context import EnforcementContext
from console.engine.guardrails import GateVerdict
from console.engine.job_files import one_line


class ToolGate:
    """The policies at every tool call. ``record_intent`` records a fact before the call acts (keyed by the call);
    ``redo`` gives back (and forgets) what a killed process recorded for that key."""

    def __init__(self, ctx: EnforcementContext, *, record_intent: Callable[[str, dict[str, Any]], None],
                 redo: Callable[[str], dict[str, Any] | None]) -> None:
        self.ctx = ctx
        self._record_intent = record_intent
        self._redo = redo

    def check(self, turn: int, call_id: str, tool: str, params: Mapping[str, Any]) -> str | None:
        """None if every policy allows the call, else the error result the agent gets (and the event)."""
        key = f"{call_id}#gate"
        recorded = self._redo(key)
        if recorded is not None and recorded.get("allowed") is True:
            return None  # the first attempt was allowed and may have acted: judge the redo the same way
        verdict: GateVerdict = self.ctx.guardrails.gate.check(tool, params, self.ctx.world)
        if verdict.allowed:
            if verdict.consulted_world:
                # The call is about to change what the policy looked at (a new file becomes an existing one).
                self._record_intent(key, {"allowed": True})
            return None
        reason = one_line(verdict.reason, 2000)
        self.ctx.events.emit(ev.ToolDenied, turn=turn, call_id=call_id, tool=tool, policy=verdict.policy or "?",
                             reason=reason, error=verdict.error)
        return f"Denied by the {verdict.policy} policy: {reason}"

    def after_call(self, tool: str, params: Mapping[str, Any] | None, ok: bool, *, denied: bool) -> None:
        """A call that ran has its result: the policies learn from it (recorded with the call's own step)."""
        if params is None or denied:
            return
        gate = self.ctx.guardrails.gate
        before = gate.snapshot()
        for err in gate.on_result(tool, params, ok, self.ctx.world):
            self.ctx.events.emit(ev.ErrorEvent, message=f"policy bookkeeping failed: {err}"[:2000],
                                 where="guardrails", recoverable=True)
        if gate.snapshot() != before:
            self.ctx.changed()
