"""The one registry of event types: the discriminated union every log line is parsed with.

A new event type is added here (and gets its presentation in console/view/present/)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, TypeAdapter

from console.engine.events.base import EventBase
from console.engine.events.context import (
    ContextCompacted,
    ContextMasked,
    RestartApproved,
    RestartDenied,
    RestartPending,
    WindDown,
)
from console.engine.events.guardrails import (
    BudgetExhausted,
    BudgetRaised,
    CompletionBlocked,
    CompletionBypassed,
    Feedback,
    GuardrailsStatus,
    StuckDetected,
)
from console.engine.events.plan import PhaseTransition, PlanChanged, TodoRefused, TodosChanged
from console.engine.events.run import (
    ErrorEvent,
    ExperienceRecorded,
    JobCompleted,
    JobGaveUp,
    LaunchSettings,
    MemoryUpdated,
    NeedsOperator,
    NeedsOperatorCleared,
    OperatorCommand,
    RunEnded,
    StateRecovered,
)
from console.engine.events.session import ModelRetry, SessionEnded, SessionStarted, TextDelta, TokenUsage, TurnStarted
from console.engine.events.tools import AssistantMessage, CommandSandbox, ToolCalled, ToolDenied, ToolResult

Event = Annotated[
    SessionStarted
    | SessionEnded
    | TurnStarted
    | TextDelta
    | ModelRetry
    | AssistantMessage
    | ToolCalled
    | ToolDenied
    | ToolResult
    | TodosChanged
    | TodoRefused
    | PlanChanged
    | PhaseTransition
    | Feedback
    | TokenUsage
    | ContextMasked
    | ContextCompacted
    | WindDown
    | RestartPending
    | RestartApproved
    | RestartDenied
    | CompletionBlocked
    | CompletionBypassed
    | BudgetExhausted
    | BudgetRaised
    | StuckDetected
    | GuardrailsStatus
    | CommandSandbox
    | OperatorCommand
    | JobCompleted
    | JobGaveUp
    | MemoryUpdated
    | ExperienceRecorded
    | RunEnded
    | StateRecovered
    | LaunchSettings
    | NeedsOperator
    | NeedsOperatorCleared
    | ErrorEvent,
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)

# Events too chatty for the audit log; everything they carry is in a logged event too.
IN_PROCESS_ONLY = frozenset({"text_delta"})


def parse_event(line: str) -> EventBase:
    return EVENT_ADAPTER.validate_json(line)
