"""What every part of enforcement holds (the guardrails, the run's recorders) and the budgets' limits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from console.engine import events as ev
from console.engine.clock import Clock
from console.engine.cost import format_cost
from console.engine.enforcement.world import SandboxWorld
from console.engine.guardrails import Guardrails
from console.engine.guardrails.budgets import format_duration
from console.engine.plan import Plan
from console.engine.todos import TodoState


class _EnforcerBase:
    """The enforcer's state, set by :class:`Enforcer.__init__`, and the limits every part of it reads."""

    g: Guardrails
    events: ev.EventStream
    clock: Clock
    world: SandboxWorld
    _changed: Callable[[], None]
    _record_intent: Callable[[str, dict[str, Any]], None]
    _redo: Callable[[str], dict[str, Any] | None]
    _todos: Callable[[], TodoState]
    _load_plan: Callable[[], Plan]
    _last_status: dict[str, Any] | None
    last_refusal: str
    _verdict_key: tuple[Any, ...] | None
    _verdict_text: str | None
    _verdict_at: float
    confinement: str
    command_tools: list[str]
    on_stuck: Callable[[str], None] | None

    def _limit(self, kind: str) -> tuple[float, float]:
        """(the budget's limit now, what is used of it): tokens, dollars or seconds."""
        st, b = self.g.budget_state, self.g.budgets
        if kind == "tokens":
            return float(b.token_limit(st) or 0), float(st.tokens_used)
        if kind == "cost":
            return float(b.usd_limit(st) or 0), round(st.cost_usd, 6)
        elapsed = (self.clock.now() - st.started_at).total_seconds() if st.started_at else 0.0
        return float(b.deadline_seconds or 0), round(elapsed, 3)

    def _shown_limit(self, kind: str) -> str:
        st, b = self.g.budget_state, self.g.budgets
        if kind == "tokens":
            return f"{b.token_limit(st) or 0:,} tokens"
        if kind == "cost":
            return format_cost(b.usd_limit(st) or 0)
        return format_duration(b.deadline_seconds or 0)

    def why(self, kind: str) -> str:
        limit, used = self._limit(kind)
        if kind == "tokens":
            return f"{SPENT_PREFIX['tokens']}: {int(used):,} of {int(limit):,} tokens used"
        if kind == "cost":
            return f"{SPENT_PREFIX['cost']}: {format_cost(used)} of {format_cost(limit)} used"
        return (f"{SPENT_PREFIX['deadline']}: {format_duration(used)} since the job started, deadline "
                f"{format_duration(limit)}")


# How each spent limit's reason (:meth:`_Base.why`) begins, and the job.toml key ([guardrails]) that sets it: the
# views that say which limit to raise before a resume read the reason back (spent_key).
SPENT_PREFIX = {"tokens": "token budget spent", "cost": "money budget spent", "deadline": "deadline passed"}
LIMIT_KEY = {"tokens": "budget_tokens", "cost": "budget_usd", "deadline": "deadline"}


def spent_key(detail: str) -> str:
    """The [guardrails] key of the limit a run's end says was spent ("" when it names none)."""
    return next((LIMIT_KEY[kind] for kind, prefix in SPENT_PREFIX.items() if detail.startswith(prefix)), "")
