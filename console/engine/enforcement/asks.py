"""What the run asks its operator (stuck, completion refused, a spend limit), decided here and recorded in the
guardrails' state, so that a kill while the run waits loses nothing."""

from __future__ import annotations

from console.engine.enforcement.budgets import _Budgets
from console.engine.enforcement.world import Ask
from console.engine.guardrails.escalation import Pending

# An answer a need offers only where a rewind can apply (console.engine.phases.operator_refusal).
REWIND = "rewind re-plans with your words, "


class _Asks(_Budgets):
    """The questions for the operator, and their answers."""

    def progressed(self) -> None:
        """A todo was completed (or the todo list is new): refused stops and stuck nudges count again from zero
        (the bounds are on stops and nudges without progress)."""
        esc = self.g.escalation
        if self.g.completion_blocks or esc.state.refusals:
            self.g.completion_blocks = 0
            esc.refusals_cleared()
            self._changed()
        if esc.progressed():
            self._changed()

    def rewound(self) -> None:
        self.g.reset_for_rewind()
        self._changed()

    # -- asking the operator ---------------------------------------------------------------------
    def stuck_ask(self, idle_turns: int, *, rewind: bool = True) -> Ask | None:
        """The agent was nudged ``stuck_escalate_after`` times without progress: what to ask its operator.
        ``rewind``: whether a rewind could apply now (not while bootstrapping, nor in the final review): the
        message offers only the answers that act."""
        esc = self.g.escalation
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
        why = self.blocked_out()
        if why is None or self.g.escalation.state.pending is not None:
            return None
        mx = self.g.max_completion_blocks
        reasons: list[str] = self.g.escalation.state.refusals or ([self.last_refusal] if self.last_refusal else [])
        return Ask("completion_refused", f"the agent tried to stop {self.g.completion_blocks} times with the job "
                                         f"incomplete. Resume gives it {mx} more tries, "
                                         f"{REWIND if rewind else ''}stop ends the run as incomplete",
                   (*reasons, f"{self.g.completion_blocks} refused stops without a completed todo "
                              f"(max_completion_blocks = {mx})"))

    def pending(self) -> Ask | None:
        """The need the run waits on its operator for (recorded: a run killed while it waited asks again)."""
        st = self.g.escalation.state
        return None if st.pending is None else Ask(st.pending, st.message, tuple(st.evidence))

    def record_ask(self, ask: Ask) -> None:
        self.g.escalation.ask(ask.reason, ask.message, list(ask.evidence))
        self._changed()

    def forget_ask(self) -> None:
        """The need went away by itself (a spend limit raised in job.toml between runs)."""
        if self.g.escalation.state.pending is not None:
            self.g.escalation.answered()
            self._changed()

    def answer(self, *, resumed: bool, by: str) -> Pending | None:
        """The operator answered the pending need. ``resumed``: the run goes on, with what that grants (a stuck
        count from zero, a spend limit's next slice, the full max_completion_blocks again); else they stopped it
        (the budget stays spent and the refused stops stay counted: the run ends as it would have). Returns the
        reason answered, None if nothing was pending."""
        reason = self.g.escalation.answered()
        if reason is None:
            return None
        if resumed and reason == "budget":
            self.grant(by)
        elif resumed and reason == "completion_refused":
            self.g.completion_blocks = 0
        self._changed()
        return reason
