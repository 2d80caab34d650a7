"""What the run asks its operator (stuck, completion refused, a spend limit), decided here and recorded in the
guardrails' state, so that a kill while the run waits loses nothing."""

from __future__ import annotations

from console.engine.enforcement.budgets import BudgetWatch
from console.engine.enforcement.context import EnforcementContext
from console.engine.enforcement.stops import Stops
from console.engine.enforcement.world import Ask
from console.engine.guardrails.escalation import Pending

# An answer a need offers only where a rewind can apply (console.engine.phases.operator_refusal).
REWIND = "rewind re-plans with your words, "


class Asks:
    """The questions for the operator, and their answers: ``stops`` says whether the refused stops are past their
    bound, ``budgets`` grants a spend limit's next slice."""

    def __init__(self, ctx: EnforcementContext, *, stops: Stops, budgets: BudgetWatch) -> None:
        self.ctx = ctx
        self._stops = stops
        self._budgets = budgets

    def progressed(self) -> None:
        """A todo was completed (or the todo list is new): refused stops and stuck nudges count again from zero
        (the bounds are on stops and nudges without progress)."""
        g = self.ctx.guardrails
        esc = g.escalation
        if g.completion_blocks or esc.state.refusals:
            g.completion_blocks = 0
            esc.refusals_cleared()
            self.ctx.changed()
        if esc.progressed():
            self.ctx.changed()

    def rewound(self) -> None:
        """The plan was rewound: the guardrails' counts of this plan start over."""
        self.ctx.guardrails.reset_for_rewind()
        self.ctx.changed()

    # -- asking the operator ---------------------------------------------------------------------
    def stuck_ask(self, idle_turns: int, *, rewind: bool = True) -> Ask | None:
        """The agent was nudged ``stuck_escalate_after`` times without progress: what to ask its operator.
        ``rewind``: whether a rewind could apply now (not while bootstrapping, nor in the final review): the
        message offers only the answers that act."""
        g = self.ctx.guardrails
        esc = g.escalation
        if not esc.stuck_due():
            return None
        n = esc.state.stuck_nudges
        # The last failing call's error in the message too: `wait` and `jobs` print the message, not the evidence.
        error = f" (last error: {esc.state.errors[-1]})" if esc.state.errors else ""
        return Ask("stuck", f"the agent looks stuck: {n} nudges without progress did not help{error}. Resume lets it "
                            f"go on (the count starts over), {REWIND if rewind else ''}stop ends the run",
                   tuple(esc.stuck_evidence(idle_turns)))

    def completion_ask(self, *, rewind: bool = True) -> Ask | None:
        """The agent's stops were refused past max_completion_blocks: what to ask its operator (``rewind``: as for
        :meth:`stuck_ask`)."""
        g = self.ctx.guardrails
        why = self._stops.blocked_out()
        if why is None or g.escalation.state.pending is not None:
            return None
        mx = g.max_completion_blocks
        last = self._stops.last_refusal
        reasons: list[str] = g.escalation.state.refusals or ([last] if last else [])
        return Ask("completion_refused", f"the agent tried to stop {g.completion_blocks} times with the job "
                                         f"incomplete. Resume gives it {mx} more tries, "
                                         f"{REWIND if rewind else ''}stop ends the run as incomplete",
                   (*reasons, f"{g.completion_blocks} refused stops without a completed todo "
                              f"(max_completion_blocks = {mx})"))

    def pending(self) -> Ask | None:
        """The need the run waits on its operator for (recorded: a run killed while it waited asks again)."""
        g = self.ctx.guardrails
        st = g.escalation.state
        return None if st.pending is None else Ask(st.pending, st.message, tuple(st.evidence))

    def record_ask(self, ask: Ask) -> None:
        g = self.ctx.guardrails
        g.escalation.ask(ask.reason, ask.message, list(ask.evidence))
        self.ctx.changed()

    def forget_ask(self) -> None:
        """The need went away by itself (a spend limit raised in job.toml between runs)."""
        g = self.ctx.guardrails
        if g.escalation.state.pending is not None:
            g.escalation.answered()
            self.ctx.changed()

    def answer(self, *, resumed: bool, by: str) -> Pending | None:
        """The operator answered the pending need. ``resumed``: the run goes on, with what that grants (a stuck
        count from zero, a spend limit's next slice, the full max_completion_blocks again); else they stopped it
        (the budget stays spent and the refused stops stay counted: the run ends as it would have). Returns the
        reason answered, None if nothing was pending."""
        g = self.ctx.guardrails
        reason = g.escalation.answered()
        if reason is None:
            return None
        if resumed and reason == "budget":
            self._budgets.grant(by)
        elif resumed and reason == "completion_refused":
            g.completion_blocks = 0
        self.ctx.changed()
        return reason
