"""What the guardrails see of the run (the job folder, through the sandbox) and the small answers enforcement
gives the loop: a stop's verdict, a budget's turn, a question for the operator."""

from __future__ import annotations

from dataclasses import dataclass

from console.engine.guardrails.escalation import Pending
from console.engine.sandbox import Sandbox, SandboxError
from console.engine.text import safe_text

# Seconds between two looks at the files a completion checker names, for the console's status.
STATUS_REFRESH = 5.0
# The kind of message that carries feedback blocks in the conversation (after the turn's tool results).
FEEDBACK_KIND = "feedback"
# The deadline's wrap-up turn (the spend limits ask the operator instead: no turn is spent past them).
WRAP_UP = {
    "deadline": "[The job's deadline ({limit}) has passed. Wrap up NOW, in this turn: save what you have, record "
                "what is left with add_note, and call job_complete with an honest confidence and notes. The run "
                "ends after this turn.]",
}


def flat(text: str, limit: int) -> str:
    """A checker's feedback on one line for the agent and the log: lines joined with a space (never a literal
    "\\n"), control characters escaped, at most ``limit`` characters."""
    return safe_text(text, one_line=True, join=True, limit=limit)


class SandboxWorld:
    """The job folder as the guardrails may see it: through the sandbox, like the agent's own tools."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    def normalize(self, path: str) -> str | None:
        try:
            rel = self.sandbox.check(path)
        except SandboxError:
            return None
        return None if rel == "." else rel

    def file_exists(self, path: str) -> bool:
        try:
            info = self.sandbox.info(self.sandbox.check(path))
        except SandboxError:
            return False
        return info is not None and info.kind == "file"


@dataclass
class StopVerdict:
    allowed: bool
    # What the agent is told when the stop is refused.
    message: str = ""
    # The refusals are past max_completion_blocks: the run asks its operator, with this reason.
    give_up: str | None = None
    bypassed: bool = False


@dataclass(frozen=True)
class BudgetTurn:
    """What the budgets call for at a turn boundary (at most one of these is set)."""

    wrap_up: str | None = None  # the deadline passed: give the agent this message, for its wrap-up turn
    ends: str | None = None  # the wrap-up turn was had: the run ends now, for this reason
    ask: str | None = None  # a spend limit is reached: the run asks its operator (why), with the evidence
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ask:
    """A need to put to the operator: the reason recorded, the message and the evidence."""

    reason: Pending
    message: str
    evidence: tuple[str, ...]
