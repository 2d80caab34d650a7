"""The one registry: which describer presents each event type (every type has one, or is :data:`SILENT`), which
events make a run's story, and :func:`describe` itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from console.engine import events as ev
from console.engine.text import safe_text
from console.view.present.context import (
    _compacted,
    _masked,
    _restart_approved,
    _restart_denied,
    _restart_pending,
    _wind_down,
)
from console.view.present.guardrails import _blocked, _bypassed, _exhausted, _feedback, _raised, _stuck
from console.view.present.plan import _phase, _plan, _refused, _todos
from console.view.present.run import (
    _acknowledged,
    _completed,
    _error,
    _experience,
    _gave_up,
    _launch,
    _needs,
    _needs_cleared,
    _operator,
    _recovered,
    _run_ended,
)
from console.view.present.session import _retry, _session_ended, _session_started
from console.view.present.tools import (
    _command_sandbox,
    _mcp_elicited,
    _mcp_sampled,
    _mcp_server,
    _reply,
    _tool_called,
    _tool_denied,
    _tool_result,
)
from console.view.present.words import Presented

DESCRIBERS: dict[type, Callable[[Any], Presented | None]] = {
    ev.SessionStarted: _session_started,
    ev.SessionEnded: _session_ended,
    ev.RunEnded: _run_ended,
    ev.ModelRetry: _retry,
    ev.AssistantMessage: _reply,
    ev.ToolCalled: _tool_called,
    ev.ToolResult: _tool_result,
    ev.ToolDenied: _tool_denied,
    ev.TodosChanged: _todos,
    ev.TodoRefused: _refused,
    ev.PlanChanged: _plan,
    ev.PhaseTransition: _phase,
    ev.Feedback: _feedback,
    ev.ContextMasked: _masked,
    ev.ContextCompacted: _compacted,
    ev.WindDown: _wind_down,
    ev.RestartPending: _restart_pending,
    ev.RestartApproved: _restart_approved,
    ev.RestartDenied: _restart_denied,
    ev.CompletionBlocked: _blocked,
    ev.CompletionBypassed: _bypassed,
    ev.BudgetExhausted: _exhausted,
    ev.BudgetRaised: _raised,
    ev.StuckDetected: _stuck,
    ev.ExperienceRecorded: _experience,
    ev.CommandSandbox: _command_sandbox,
    ev.McpServerEvent: _mcp_server,
    ev.McpElicited: _mcp_elicited,
    ev.McpSampled: _mcp_sampled,
    ev.LaunchSettings: _launch,
    ev.OperatorCommand: _operator,
    ev.JobCompleted: _completed,
    ev.JobGaveUp: _gave_up,
    ev.StateRecovered: _recovered,
    ev.NeedsOperator: _needs,
    ev.NeedsOperatorCleared: _needs_cleared,
    ev.RunAcknowledged: _acknowledged,
    ev.ErrorEvent: _error,
}
# Described by no view on their own: the turn line (headless), the status line and the panes show what they carry.
SILENT = frozenset({ev.TurnStarted, ev.TextDelta, ev.TokenUsage, ev.GuardrailsStatus, ev.MemoryUpdated})


def _type_name(cls: type) -> str:
    return cls.model_fields["type"].default  # type: ignore[attr-defined, no-any-return]


# A run's story (the headless log, `agent-console logs`): the turns (the model's text and its calls, from the
# assistant_message; the tokens, from the token_usage that closes the turn), the calls' results, and every event an
# operator reads about: todos and phases, the guardrails, the context, restarts, operator commands, needs-you
# moments, the run's end. Left out: turn_started, text deltas, tool_called (the turn's line says the calls),
# guardrails_status and memory_updated (bookkeeping).
STORY_TYPES = frozenset({_type_name(cls) for cls in DESCRIBERS if cls is not ev.ToolCalled}
                        | {_type_name(ev.TokenUsage)})


def in_story(e: ev.EventBase | str) -> bool:
    """Whether an operator sees ``e`` (an event, or its ``type``) in a run's story: the one answer the headless
    log and ``agent-console logs`` both follow (the latter skips other lines of a huge log without parsing them)."""
    # An event's type read first: isinstance(e, str) failing on a pydantic event costs ~600 instructions, three
    # times the getattr (a str has no attribute "type": it is its own name).
    t = getattr(e, "type", e)
    return isinstance(t, str) and t in STORY_TYPES


def describe(e: ev.EventBase) -> Presented | None:
    """``e`` as an operator reads it, or None for an event no view describes on its own (a text delta, a turn's
    token usage, a successful tool result, a guardrails status, ...)."""
    fn = DESCRIBERS.get(type(e))
    if fn is None:
        return None
    p = fn(e)
    if p is None:
        return None
    # Each describer already shows agent text through one_line or flat; this holds for a field one forgot too.
    # An empty field or list is safe as it is: not passed through safe_text (each a call with keywords).
    return Presented(p.icon, p.kind, p.severity, safe_text(p.text, one_line=True),
                     safe_text(p.detail, one_line=True) if p.detail else "",
                     safe_text(p.source, one_line=True) if p.source else "", e.seq, e.ts,
                     tuple(safe_text(line, one_line=True) for line in p.lines) if p.lines else ())
