"""The guardrails of one job, as the loop sees them: policies, feedback, completion check, budgets.

Built from job.toml's ``[guardrails]`` table (:func:`console.engine.guardrails.config.build_guardrails`);
their state is one :class:`GuardrailState`, recorded with the run's checkpoint.

Restore after a job.toml change: the state of each policy and feedback provider is matched by name. Parts
whose name is still configured are kept; parts of policies or providers no longer configured are dropped;
new ones start fresh. The budget (first start, tokens used) and the completion-block count are kept as
they are: they belong to the job, not to one configuration.

What a rewind (todo_rewind / an operator's rewind) resets:

- tool policies: nothing. The files read and the tools that succeeded are facts of the world that a new
  plan does not undo; forgetting them would only force pointless re-reads and re-runs.
- feedback: nothing. Cadences continue and a file trigger that fired stays fired (once per session); the stuck
  detector's recent calls are kept, and re-planning is progress it sees through the loop's
  ``turns_without_progress``.
- budgets: nothing. The deadline and the token budget cover the whole job.
- completion blocks: reset to 0. The agent is re-planning, so earlier blocked stops say nothing about the
  new plan, and it gets the full ``max_completion_blocks`` again.
- escalation: the stuck nudges count from zero (a rewind is progress: a new todo list); a need the run waits
  on its operator for stays until they answer it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from console.engine.guardrails.budgets import Budgets, BudgetState, Deadline, Exhausted
from console.engine.guardrails.completion import (
    PlanBasedChecker,
    TaskCompletionChecker,
    TaskCompletionContext,
    TaskCompletionResult,
    run_checker,
)
from console.engine.guardrails.escalation import Escalation, EscalationState
from console.engine.guardrails.feedback import MAX_PROVIDERS, FeedbackRunner, FeedbackState
from console.engine.guardrails.policies import PolicyGate, PolicyState

MAX_COMPLETION_BLOCKS = 1000
# The name under which seed 000's protocol (the harness's record of the work) refuses a stop.
PROTOCOL = "protocol"


class GuardrailState(BaseModel):
    """Everything the guardrails remember about a run; JSON round-trippable and bounded."""

    model_config = ConfigDict(extra="forbid")

    policies: dict[str, PolicyState] = Field(default_factory=dict, max_length=MAX_PROVIDERS)
    feedback: FeedbackState = Field(default_factory=FeedbackState)
    budget: BudgetState = Field(default_factory=BudgetState)
    completion_blocks: int = Field(default=0, ge=0, le=10**6)
    # Asking the operator: stuck nudges without progress, refusals, the need the run waits on.
    escalation: EscalationState = Field(default_factory=EscalationState)


class Guardrails:
    def __init__(self, *, gate: PolicyGate, feedback: FeedbackRunner, checker: TaskCompletionChecker | None,
                 budgets: Budgets, max_completion_blocks: int = 5, stuck_escalate_after: int = 3,
                 free_stop: bool = False, low_confidence: float = 0.5) -> None:
        if not 1 <= max_completion_blocks <= MAX_COMPLETION_BLOCKS:
            raise ValueError(f"max_completion_blocks must be in [1, {MAX_COMPLETION_BLOCKS}]")
        self.gate = gate
        self.feedback = feedback
        # The job's declared checker (seed 002), None when it declares none: then seed 000's protocol (the
        # harness's record of the work) decides alone. ``free_stop``: type = "none", a turn without a tool call
        # may end the run whatever the record says (the outcome still says what it shows).
        self.checker = checker
        self.free_stop = free_stop
        self.low_confidence = low_confidence
        self.budgets = budgets
        self.max_completion_blocks = max_completion_blocks
        self.budget_state = BudgetState()
        self.completion_blocks = 0  # stops blocked so far; past the cap the run asks its operator
        self.escalation = Escalation(stuck_escalate_after)

    # -- state -----------------------------------------------------------------------------------------------
    def snapshot(self) -> GuardrailState:
        # A view for immediate serialization (the journal's commit, a projection), not a copy: see
        # FeedbackRunner.snapshot. restore() copies what it takes.
        return GuardrailState.model_construct(policies=self.gate.snapshot(), feedback=self.feedback.snapshot(),
                                              budget=self.budget_state, completion_blocks=self.completion_blocks,
                                              escalation=self.escalation.state)

    def parts(self) -> tuple[dict[str, PolicyState], FeedbackState, BudgetState, int, EscalationState]:
        """The state's parts, in GuardrailState's field order, without building one (read every turn, to see which
        changed: console.engine.runtime). Views, as snapshot()'s are."""
        return (self.gate.snapshot(), self.feedback.snapshot(), self.budget_state, self.completion_blocks,
                self.escalation.state)

    def restore(self, state: GuardrailState) -> None:
        """Take a recorded state; parts of policies/providers no longer configured are dropped (module doc)."""
        self.gate.restore(state.policies)
        self.feedback.restore(state.feedback)
        self.budget_state = state.budget.model_copy(deep=True)
        self.completion_blocks = state.completion_blocks
        self.escalation.state = state.escalation.model_copy(deep=True)

    def reset_for_rewind(self) -> None:
        """What a rewind resets: the completion-block count and the stuck nudges (see the module doc for why)."""
        self.completion_blocks = 0
        self.escalation.progressed()

    # -- budgets ---------------------------------------------------------------------------------------------
    def start(self, now: datetime) -> None:
        """Call at every session start: records the job's first start once (a resume keeps it)."""
        self.budgets.start(self.budget_state, now)
        if self.feedback.state.started_at is None:
            self.feedback.state.started_at = now

    def add_tokens(self, n: int) -> None:
        self.budgets.add_tokens(self.budget_state, n)

    def add_cost(self, usd: float) -> None:
        self.budgets.add_cost(self.budget_state, usd)

    def deadline(self) -> Deadline | None:
        return self.budgets.deadline(self.budget_state)

    def exhausted(self, now: datetime) -> Exhausted | None:
        return self.budgets.exhausted(self.budget_state, now)

    # -- completion ------------------------------------------------------------------------------------------
    def check_completion(self, context: TaskCompletionContext) -> TaskCompletionResult:
        """The verdict on a stop, fail-closed (a raising checker is incomplete): seed 000's protocol (the record
        says nothing is left, ``context.unmet``) and the declared checker, if any."""
        if context.unmet and not isinstance(self.checker, PlanBasedChecker):
            # The declared plan checker says the same, in its own name; otherwise the protocol says it.
            protocol = run_checker(PlanBasedChecker(PROTOCOL), context)
            if self.checker is None:
                return protocol
            declared = run_checker(self.checker, context)
            if declared.complete:
                return protocol
            return TaskCompletionResult.incomplete(f"{protocol.feedback} {declared.feedback}",
                                                   f"{PROTOCOL}+{declared.checker}")
        return TaskCompletionResult.ok() if self.checker is None else run_checker(self.checker, context)

    # -- status ----------------------------------------------------------------------------------------------
    def describe_checker(self) -> str:
        if self.free_stop:
            return "none (free stop)"
        if self.checker is None:
            return f"{PROTOCOL} (seed 000: the harness's record of the work)"
        try:
            return str(self.checker.describe())
        except Exception:
            return str(getattr(self.checker, "name", type(self.checker).__name__))

    def describe(self, now: datetime) -> dict[str, Any]:
        """JSON-friendly pieces for a status event or the TUI."""
        deadline = self.deadline()
        return {
            "policies": self.gate.describe(),
            "feedback": self.feedback.describe(now),
            "checker": self.describe_checker(),
            "max_completion_blocks": self.max_completion_blocks,
            "completion_blocks": self.completion_blocks,
            "deadline_seconds": self.budgets.deadline_seconds,
            "deadline_at": deadline.expires_at.isoformat() if deadline else None,
            "budget_tokens": self.budgets.token_limit(self.budget_state),
            "budget_usd": self.budgets.usd_limit(self.budget_state),
            "tokens_used": self.budget_state.tokens_used,
            "exhausted": self.budget_state.exhausted,
        }
