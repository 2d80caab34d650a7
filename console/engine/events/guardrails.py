"""The events of the guardrails (seed 002): feedback, refused and bypassed stops, budgets, stuck loops and the
guardrails' status."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from console.engine.events.base import BoundedInt, EventBase


class Feedback(EventBase):
    """A feedback provider's block (seed 002), delivered to the agent after the turn's tool results.

    ``source`` is the provider's name and ``message`` its summary; ``block`` is the exact
    ``<feedback provider='...'>`` text the agent received.
    """

    type: Literal["feedback"] = "feedback"
    source: str
    severity: Literal["info", "caution", "warning", "error"] = "info"
    message: str
    observations: list[str] = Field(default_factory=list)
    suggestions: list[str] = Field(default_factory=list)
    call_index: BoundedInt = 0
    turn: BoundedInt = 0
    block: str = ""


class CompletionBlocked(EventBase):
    """A stop (job_complete, or a turn without a tool call) refused by the task completion checker."""

    type: Literal["completion_blocked"] = "completion_blocked"
    reason: str
    checker: str = ""
    feedback: str = ""
    # "job_complete" or "end_turn"
    stop_reason: str = ""
    blocks: BoundedInt = 0
    max_blocks: BoundedInt = 0


class CompletionBypassed(EventBase):
    """A stop accepted without the completion check because a budget (deadline, tokens) is spent (seed 002)."""

    type: Literal["completion_bypassed"] = "completion_bypassed"
    budget: Literal["deadline", "tokens", "cost"]
    stop_reason: str
    detail: str = ""


class BudgetExhausted(EventBase):
    """The job's deadline passed or its token budget is spent: the agent is told to wrap up."""

    type: Literal["budget_exhausted"] = "budget_exhausted"
    budget: Literal["deadline", "tokens", "cost"]
    limit: float
    used: float
    detail: str = ""
    # The deadline passed while the run waited for its operator: it ends at once, no wrap-up turn is given.
    wrap_up: bool = True


class BudgetRaised(EventBase):
    """The operator's resume at a spend limit granted one more slice of it: ``limit`` is the budget now."""

    type: Literal["budget_raised"] = "budget_raised"
    budget: Literal["tokens", "cost"]
    limit: float
    added: float
    used: float
    grants: BoundedInt = 1  # slices granted so far
    by: str = ""
    detail: str = ""


class StuckDetected(EventBase):
    type: Literal["stuck_detected"] = "stuck_detected"
    reason: str
    pattern: str = ""


class PolicyInfo(BaseModel):
    name: str
    kind: str
    detail: str = ""


class FeedbackInfo(BaseModel):
    name: str
    kind: str
    trigger: str = ""
    # When it can fire next, in words ("after 3 more calls", "at 12:31:05", "when CHANGELOG.md appears", "fired").
    next: str = ""


class GuardrailsStatus(EventBase):
    """What guards the run now: emitted at the start and whenever it changes (the console's guardrails view)."""

    type: Literal["guardrails_status"] = "guardrails_status"
    policies: list[PolicyInfo] = Field(default_factory=list)
    feedback: list[FeedbackInfo] = Field(default_factory=list)
    checker: str = ""
    # "complete", "incomplete: <what is left>", "off"
    verdict: str = ""
    completion_blocks: BoundedInt = 0
    max_completion_blocks: BoundedInt = 0
    deadline_at: datetime | None = None
    budget_tokens: BoundedInt | None = None
    tokens_used: BoundedInt = 0
    # The money budget (US dollars) and what the job has cost so far.
    budget_usd: float | None = None
    cost_usd: float = 0.0
    # How job-declared command tools run: the bubblewrap that confines them, "UNCONFINED (run --unconfined)",
    # "refused: no sandbox works here", or "" (no command tools). The whole header is a command_sandbox event.
    confinement: str = ""
    tools: list[str] = Field(default_factory=list)
