"""The one registry of event types: the discriminated union every log line is parsed with.

A new event type is added here (and gets its presentation in console/view/present/)."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, TypeAdapter

from console.engine.bounded_json import MAX_BYTES, BoundsError
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
    RunAcknowledged,
    RunEnded,
    StateRecovered,
)
from console.engine.events.session import ModelRetry, SessionEnded, SessionStarted, TextDelta, TokenUsage, TurnStarted
from console.engine.events.tools import (
    AssistantMessage,
    CommandSandbox,
    McpElicited,
    McpSampled,
    McpServerEvent,
    ToolCalled,
    ToolDenied,
    ToolResult,
)

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
    | McpServerEvent
    | McpElicited
    | McpSampled
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
    | RunAcknowledged
    | ErrorEvent,
    Field(discriminator="type"),
]

# Built at its first use, not at the import: a runner that only writes events never parses one, and every process
# that imports the events (each command, the console, the runner) paid ~16 ms of CPU and ~1.4 MB for it at its start.
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event, config=ConfigDict(defer_build=True))

# Events too chatty for the audit log; everything they carry is in a logged event too.
IN_PROCESS_ONLY = frozenset({"text_delta"})


def parse_event(line: str | bytes) -> EventBase:
    """One event from its JSON line, read with bounds, whoever wrote it (this run, or another machine's row of a
    shared store): pydantic's parser refuses nesting deeper than about 200 levels without using the Python stack,
    and a line over :data:`console.engine.bounded_json.MAX_BYTES` is refused before it is parsed. ValueError
    (pydantic's ValidationError is one) for a line that is no event; never RecursionError."""
    if len(line) > MAX_BYTES:
        raise BoundsError(f"{len(line)} bytes, more than the {MAX_BYTES} an event may have")
    return EVENT_ADAPTER.validate_json(line)
