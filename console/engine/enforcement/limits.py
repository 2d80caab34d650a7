"""The budgets' limits as the parts of enforcement say them: what is used of each, and why a spent one stops the
run; and, for the views, which job.toml key raises the limit a run's end names."""

from __future__ import annotations

from console.engine.clock import Clock
from console.engine.cost import format_cost
from console.engine.guardrails import Guardrails
from console.engine.guardrails.budgets import format_duration

# How each spent limit's reason (:func:`why`) begins, and the job.toml key ([guardrails]) that sets it: the views
# that say which limit to raise before a resume read the reason back (spent_key).
SPENT_PREFIX = {"tokens": "token budget spent", "cost": "money budget spent", "deadline": "deadline passed"}
LIMIT_KEY = {"tokens": "budget_tokens", "cost": "budget_usd", "deadline": "deadline"}


def limit(g: Guardrails, clock: Clock, kind: str) -> tuple[float, float]:
    """(the budget's limit now, what is used of it): tokens, dollars or seconds."""
    st, b = g.budget_state, g.budgets
    if kind == "tokens":
        return float(b.token_limit(st) or 0), float(st.tokens_used)
    if kind == "cost":
        return float(b.usd_limit(st) or 0), round(st.cost_usd, 6)
    elapsed = (clock.now() - st.started_at).total_seconds() if st.started_at else 0.0
    return float(b.deadline_seconds or 0), round(elapsed, 3)


def shown_limit(g: Guardrails, kind: str) -> str:
    """The budget's limit now, as the operator and the agent read it."""
    st, b = g.budget_state, g.budgets
    if kind == "tokens":
        return f"{b.token_limit(st) or 0:,} tokens"
    if kind == "cost":
        return format_cost(b.usd_limit(st) or 0)
    return format_duration(b.deadline_seconds or 0)


def why(g: Guardrails, clock: Clock, kind: str) -> str:
    """Why the budget ``kind`` stops the run: its limit and what is used of it."""
    top, used = limit(g, clock, kind)
    if kind == "tokens":
        return f"{SPENT_PREFIX['tokens']}: {int(used):,} of {int(top):,} tokens used"
    if kind == "cost":
        return f"{SPENT_PREFIX['cost']}: {format_cost(used)} of {format_cost(top)} used"
    return (f"{SPENT_PREFIX['deadline']}: {format_duration(used)} since the job started, deadline "
            f"{format_duration(top)}")


def spent_key(detail: str) -> str:
    """The [guardrails] key of the limit a run's end says was spent ("" when it names none)."""
    return next((LIMIT_KEY[kind] for kind, prefix in SPENT_PREFIX.items() if detail.startswith(prefix)), "")
