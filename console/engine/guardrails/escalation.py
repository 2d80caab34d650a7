"""Escalation: when nudging the agent has not helped, the run asks its operator instead of nudging for hours.

Pure bookkeeping, recorded with the guardrails' state (so a resume after a kill knows it):

- stuck: every stuck-detector feedback is a nudge; ``stuck_escalate_after`` nudges in a row without progress
  (a todo completed, a new todo list: a phase transition or a rewind) and the run asks (reason ``stuck``),
  with the nudges' patterns as evidence. The operator's answer (resume, or stop) starts the count over.
- a refused stop past ``max_completion_blocks`` asks (``completion_refused``) with the checker's reasons.
- a spend limit asks (``budget``); the grant is the budget's (:mod:`console.engine.guardrails.budgets`).

``pending`` is the need the run is waiting on its operator for. It is kept until the operator answers, so a
run killed while it waited asks again when it is resumed (with the same evidence) instead of going on as if
someone had said yes. A provider that is down is not recorded: a resumed run simply tries it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# Defined with job.toml's checks (stuck_escalate_after's bound), offered here too.
from console.engine.guardrails.bounds import MAX_ESCALATE_AFTER as MAX_ESCALATE_AFTER

# The reasons recorded in the state (the engine's NeedReason has more: those need no memory across a kill).
Pending = Literal["stuck", "budget", "completion_refused"]

EVIDENCE_KEPT = 3  # nudges / refusals remembered for the evidence
EVIDENCE_LINES = 8
EVIDENCE_CHARS = 300


def _add(lines: list[str], line: str) -> list[str]:
    """``lines`` with ``line`` last, the same line not twice in a row, the last EVIDENCE_KEPT only."""
    line = line[:EVIDENCE_CHARS]
    kept = [x for x in lines if x != line] + [line]
    return kept[-EVIDENCE_KEPT:]


class EscalationState(BaseModel):
    """What the run remembers about asking its operator; JSON round-trippable and bounded."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # Stuck nudges since the last progress or the operator's last answer, and what the last ones said.
    stuck_nudges: int = Field(default=0, ge=0, le=10**9)
    nudges: list[str] = Field(default_factory=list, max_length=EVIDENCE_KEPT)
    # The errors of the failing calls in those patterns ("check({}) failed: ..."): what the operator acts on.
    errors: list[str] = Field(default_factory=list, max_length=EVIDENCE_KEPT)
    # The completion checker's last reasons for refusing a stop.
    refusals: list[str] = Field(default_factory=list, max_length=EVIDENCE_KEPT)
    # The need the run waits on (None: it waits on nobody), and what it asked with.
    pending: Pending | None = None
    message: str = Field(default="", max_length=2000)
    evidence: list[str] = Field(default_factory=list, max_length=EVIDENCE_LINES)


class Escalation:
    """The rules over one :class:`EscalationState` (the facade's ``escalation`` part)."""

    def __init__(self, stuck_escalate_after: int = 3) -> None:
        if not 0 <= stuck_escalate_after <= MAX_ESCALATE_AFTER:
            raise ValueError(f"stuck_escalate_after must be in [0, {MAX_ESCALATE_AFTER}] (0: never ask)")
        self.stuck_escalate_after = stuck_escalate_after
        self.state = EscalationState()

    # -- stuck -----------------------------------------------------------------------------------------------
    def nudged(self, pattern: str, errors: Sequence[str] = ()) -> None:
        """The stuck detector nudged the agent (``pattern``: what it saw, e.g. "repeat: read_file(...) ...";
        ``errors``: each failing call of the pattern with its error, one line each, already made safe)."""
        st = self.state
        st.stuck_nudges += 1
        st.nudges = _add(st.nudges, pattern)
        for error in errors:
            st.errors = _add(st.errors, error)

    def progressed(self) -> bool:
        """The agent made progress: the nudges count from zero again. True if that changed anything."""
        st = self.state
        if not st.stuck_nudges and not st.nudges and not st.errors:
            return False
        st.stuck_nudges, st.nudges, st.errors = 0, [], []
        return True

    def stuck_due(self) -> bool:
        """Whether the nudges without progress reached ``stuck_escalate_after`` (and nothing is asked yet)."""
        n = self.stuck_escalate_after
        return bool(n) and self.state.stuck_nudges >= n and self.state.pending is None

    def stuck_evidence(self, idle_turns: int) -> list[str]:
        st = self.state
        lines = [*st.nudges, *st.errors]  # at most EVIDENCE_KEPT each: with the two lines below, EVIDENCE_LINES
        lines.append(f"{st.stuck_nudges} stuck nudges without progress (stuck_escalate_after = "
                     f"{self.stuck_escalate_after})")
        if idle_turns > 0:
            lines.append(f"no todo completed for {idle_turns} turns")
        return lines

    # -- refused stops ---------------------------------------------------------------------------------------
    def refused(self, reason: str) -> None:
        self.state.refusals = _add(self.state.refusals, reason)

    def refusals_cleared(self) -> None:
        self.state.refusals = []

    # -- asking and answers ----------------------------------------------------------------------------------
    def ask(self, reason: Pending, message: str, evidence: list[str]) -> None:
        st = self.state
        st.pending = reason
        st.message = message[:2000]
        st.evidence = [x[:EVIDENCE_CHARS] for x in evidence[:EVIDENCE_LINES]]

    def answered(self) -> Pending | None:
        """The operator answered the pending need: forget it (what the answer grants is the caller's). A stuck
        answer starts the nudges over, so the run does not ask again at once. Returns what was pending."""
        st = self.state
        reason, st.pending, st.message, st.evidence = st.pending, None, "", []
        if reason == "stuck":
            st.stuck_nudges, st.nudges, st.errors = 0, [], []
        elif reason == "completion_refused":
            st.refusals = []
        return reason
