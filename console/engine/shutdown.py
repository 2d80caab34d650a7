"""How a session ends: the reason (a restart, the job's end, the operator's stop...) and what the next one needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from console.engine.messages import Message


class ShutdownReason(StrEnum):
    USER_SHUTDOWN = "user_shutdown"
    CONTEXT_FULL = "context_full"
    JOB_COMPLETE = "job_complete"
    MAX_TURNS = "max_turns"
    ERROR = "error"
    # The completion checker refused more stops than max_completion_blocks allows (seed 002), and the operator,
    # asked, stopped the run.
    COMPLETION_BLOCKED = "completion_blocked"
    # The deadline passed (the agent had its wrap-up turn), or a spend limit was reached and the operator, asked,
    # stopped the run.
    BUDGET_EXHAUSTED = "budget_exhausted"
    # A turn ended without a tool call and no completion check stood in the way ([guardrails.completion]
    # type = "none"): the agent's stop is the end of the run.
    AGENT_STOPPED = "agent_stopped"
    # The model could not be reached past its retry bound, and the operator, asked, stopped the run: nothing is
    # lost, run --in-place goes on.
    MODEL_UNAVAILABLE = "model_unavailable"
    # The agent gave up: job_complete with a low confidence and notes saying why (seed 000's unrecoverable case).
    GAVE_UP = "gave_up"
    # A signal stopped the run (Ctrl+C, SIGTERM: a kill, systemd, a machine shutting down), not its operator's
    # decision: nothing is lost, run --in-place goes on. Every view says interrupted, and the exit code is 130.
    INTERRUPTED = "interrupted"


@dataclass
class SessionResult:
    reason: ShutdownReason
    turns: int
    session_number: int
    carryover: list[Message] = field(default_factory=list)
    detail: str = ""
    used_tokens: int = 0
    budget: int = 0
    # The session's turns in all (across resumes), for the next session's restart marker (seed 004).
    session_turns: int = 0
    # What the operator fixes before a resume goes on (a provider's refusal: "set OPENAI_API_KEY to a working key").
    fix: str = ""
