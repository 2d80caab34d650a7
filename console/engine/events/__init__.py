"""Typed, versioned events: the engine's backbone.

Every state change is one of these. They are appended to ``JOB/.console/events.jsonl``
(the audit log operators query with jq) and published in-process to subscribers
(the console, the headless log). The ``type`` strings are a stable schema: add
new ones freely, rename none.

One module per family (:mod:`.session`, :mod:`.tools`, :mod:`.plan`, :mod:`.context`, :mod:`.guardrails`,
:mod:`.run`), one registry of them all (:mod:`.registry`), the log's reader (:mod:`.log`) and the stream that
writes and publishes them (:mod:`.stream`). Everything is importable from here, as ``ev.ToolCalled``.
"""

from __future__ import annotations

from console.engine.events.base import EVENT_TEXT_LIMIT, SCHEMA_VERSION, Cut, EventBase, cap_text
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
    FeedbackInfo,
    GuardrailsStatus,
    PolicyInfo,
    StuckDetected,
)
from console.engine.events.log import copy_events, damaged_lines, last_seq, read_events, read_new, seq_of
from console.engine.events.plan import PhaseTransition, PlanChanged, TodoItemRecord, TodoRefused, TodosChanged
from console.engine.events.registry import EVENT_ADAPTER, IN_PROCESS_ONLY, Event, parse_event
from console.engine.events.run import (
    ErrorEvent,
    ExperienceRecorded,
    JobCompleted,
    JobGaveUp,
    LaunchSettings,
    MemoryUpdated,
    NeedReason,
    NeedsOperator,
    NeedsOperatorCleared,
    OperatorCommand,
    Outcome,
    RunAcknowledged,
    RunEnded,
    StateRecovered,
)
from console.engine.events.session import ModelRetry, SessionEnded, SessionStarted, TextDelta, TokenUsage, TurnStarted
from console.engine.events.stream import EventStream, Subscriber
from console.engine.events.tools import (
    AssistantMessage,
    CommandSandbox,
    McpElicited,
    McpSampled,
    McpServerEvent,
    ToolCalled,
    ToolCallRecord,
    ToolDenied,
    ToolResult,
)

__all__ = [
    "EVENT_ADAPTER",
    "EVENT_TEXT_LIMIT",
    "IN_PROCESS_ONLY",
    "SCHEMA_VERSION",
    "AssistantMessage",
    "BudgetExhausted",
    "BudgetRaised",
    "CommandSandbox",
    "CompletionBlocked",
    "CompletionBypassed",
    "ContextCompacted",
    "ContextMasked",
    "Cut",
    "ErrorEvent",
    "Event",
    "EventBase",
    "EventStream",
    "ExperienceRecorded",
    "Feedback",
    "FeedbackInfo",
    "GuardrailsStatus",
    "JobCompleted",
    "JobGaveUp",
    "LaunchSettings",
    "McpElicited",
    "McpSampled",
    "McpServerEvent",
    "MemoryUpdated",
    "ModelRetry",
    "NeedReason",
    "NeedsOperator",
    "NeedsOperatorCleared",
    "OperatorCommand",
    "Outcome",
    "PhaseTransition",
    "PlanChanged",
    "PolicyInfo",
    "RestartApproved",
    "RestartDenied",
    "RestartPending",
    "RunAcknowledged",
    "RunEnded",
    "SessionEnded",
    "SessionStarted",
    "StateRecovered",
    "StuckDetected",
    "Subscriber",
    "TextDelta",
    "TodoItemRecord",
    "TodoRefused",
    "TodosChanged",
    "TokenUsage",
    "ToolCallRecord",
    "ToolCalled",
    "ToolDenied",
    "ToolResult",
    "TurnStarted",
    "WindDown",
    "cap_text",
    "copy_events",
    "damaged_lines",
    "last_seq",
    "parse_event",
    "read_events",
    "read_new",
    "seq_of",
]
