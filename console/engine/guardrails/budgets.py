"""Budgets: a wall-clock deadline, a token budget and a money budget for the whole job (seed 002: "Budget provides
backstop").

The deadline runs from the job's *first* start: a resume keeps the recorded ``started_at``, so stopping and
resuming a job does not buy it more time. Once exhausted, a budget stays exhausted (``exhausted`` is
recorded), which is also what lets the loop skip the completion check (seed: "Budget/deadline bypass").

The token and money budgets are spend limits: reaching one pauses the run and asks its operator (the
loop). The operator's resume grants one more slice of the same size: the limit becomes the job.toml
value times (1 + the slices granted), and the grants are recorded here, so a resume after a kill keeps
them. The deadline is not a spend limit: time passes whether the run waits or not, so it still gives the
agent its wrap-up turn and ends the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# The bounds and the durations job.toml is checked with are defined with the table's checks (offered here too).
from console.engine.guardrails.bounds import MAX_BUDGET_TOKENS as MAX_BUDGET_TOKENS
from console.engine.guardrails.bounds import MAX_BUDGET_USD as MAX_BUDGET_USD
from console.engine.guardrails.bounds import MAX_DEADLINE_SECONDS as MAX_DEADLINE_SECONDS
from console.engine.guardrails.bounds import parse_duration as parse_duration

Exhausted = Literal["deadline", "tokens", "cost"]
# The budgets that pause the run and ask its operator instead of ending it.
SPEND_LIMITS: frozenset[str] = frozenset({"tokens", "cost"})
MAX_GRANTS = 10**6

# Tokens recorded so far are bounded too, so a corrupted state file cannot hold an absurd number.
MAX_TOKENS_USED = 10**15
MAX_COST_USED = 1e12
# The wrap-up turn a spent budget grants has this long for its model call and its commands.
WRAP_UP_SECONDS = 120.0

def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"


def format_duration(seconds: float) -> str:
    """A duration for an agent or an operator, rounded down: "45 seconds", "5 minutes", "2 hours 5 minutes"."""
    s = max(0, int(seconds))
    if s < 60:
        return _plural(s, "second")
    m = s // 60
    if m < 120:
        return _plural(m, "minute")
    h, rm = divmod(m, 60)
    return _plural(h, "hour") + (" " + _plural(rm, "minute") if rm else "")


@dataclass(frozen=True)
class Deadline:
    expires_at: datetime
    started_at: datetime | None = None  # the job's first start, for "the work so far took ..."

    def remaining(self, now: datetime) -> timedelta:
        """Time left; negative once the deadline has passed."""
        return self.expires_at - now

    def elapsed(self, now: datetime) -> timedelta | None:
        """Time since the job first started, None if unknown."""
        return None if self.started_at is None else now - self.started_at


class BudgetState(BaseModel):
    """The run's recorded budget use. Mutable (the loop updates it every turn); snapshots are copies."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    started_at: datetime | None = None
    tokens_used: int = Field(default=0, ge=0, le=MAX_TOKENS_USED)
    # US dollars spent by the whole job, for the turns whose model has a known price.
    cost_usd: float = Field(default=0.0, ge=0, le=MAX_COST_USED, allow_inf_nan=False)
    exhausted: Exhausted | None = None
    # Turns the loop granted the agent to wrap up after exhaustion (the loop's bookkeeping; kept here so a
    # resume does not grant them again).
    wrap_up_turns: int = Field(default=0, ge=0, le=10**6)
    # When the wrap-up turn's time is up: its model call and its commands are cut then (see Enforcer.cut_at).
    wrap_up_until: datetime | None = None
    # Slices of the token / money budget the operator granted by resuming a run paused at its spend limit:
    # each raises that limit by job.toml's amount.
    token_grants: int = Field(default=0, ge=0, le=MAX_GRANTS)
    cost_grants: int = Field(default=0, ge=0, le=MAX_GRANTS)


@dataclass(frozen=True)
class Budgets:
    deadline_seconds: float | None = None
    budget_tokens: int | None = None
    # US dollars for the whole job, counted from the model's prices (a model without a price never reaches it).
    budget_usd: float | None = None

    def __post_init__(self) -> None:
        if self.deadline_seconds is not None and not 0 < self.deadline_seconds <= MAX_DEADLINE_SECONDS:
            raise ValueError(f"deadline_seconds must be in (0, {MAX_DEADLINE_SECONDS}]")
        if self.budget_tokens is not None and not 0 < self.budget_tokens <= MAX_BUDGET_TOKENS:
            raise ValueError(f"budget_tokens must be in [1, {MAX_BUDGET_TOKENS}]")
        if self.budget_usd is not None and not 0 < self.budget_usd <= MAX_BUDGET_USD:
            raise ValueError(f"budget_usd must be in (0, {MAX_BUDGET_USD:g}]")

    def start(self, state: BudgetState, now: datetime) -> BudgetState:
        """Record the job's first start (once: a resume keeps it). Returns ``state``, updated in place."""
        if state.started_at is None:
            state.started_at = now
        return state

    def deadline(self, state: BudgetState) -> Deadline | None:
        if self.deadline_seconds is None or state.started_at is None:
            return None
        return Deadline(state.started_at + timedelta(seconds=self.deadline_seconds), state.started_at)

    def token_limit(self, state: BudgetState) -> int | None:
        """The token budget now: job.toml's, plus one slice of it per grant of the operator."""
        return None if self.budget_tokens is None else self.budget_tokens * (1 + state.token_grants)

    def usd_limit(self, state: BudgetState) -> float | None:
        """The money budget now (US dollars): job.toml's, plus one slice of it per grant of the operator."""
        return None if self.budget_usd is None else self.budget_usd * (1 + state.cost_grants)

    def add_tokens(self, state: BudgetState, n: int) -> BudgetState:
        """Count ``n`` more tokens (negative counts are ignored). Returns ``state``, updated in place."""
        if n > 0:
            state.tokens_used = min(MAX_TOKENS_USED, state.tokens_used + n)
        return state

    def add_cost(self, state: BudgetState, usd: float) -> BudgetState:
        """Count ``usd`` more dollars (negative or non-finite amounts are ignored)."""
        if 0 < usd < float("inf"):
            state.cost_usd = min(MAX_COST_USED, state.cost_usd + usd)
        return state

    def exhausted(self, state: BudgetState, now: datetime) -> Exhausted | None:
        """Which budget ran out (the deadline first, then tokens, then cost), None if none; recorded in ``state``
        and sticky."""
        if state.exhausted is not None:
            return state.exhausted
        deadline = self.deadline(state)
        if deadline is not None and now >= deadline.expires_at:
            state.exhausted = "deadline"
        elif (tokens := self.token_limit(state)) is not None and state.tokens_used >= tokens:
            state.exhausted = "tokens"
        elif (usd := self.usd_limit(state)) is not None and state.cost_usd >= usd:
            state.exhausted = "cost"
        return state.exhausted
