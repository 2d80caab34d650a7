"""Operator-facing wording shared by the views: one description per event, used by the headless log, the console
(feedback pane, conversation notices, the gauge's last action) and the fleet view.

:func:`describe` turns an engine event into a :class:`Presented`: an icon, a kind, a severity and one line of plain
text (no colours, no markup, no control characters: agent text can neither break nor colour a line). Each view
styles and places it (the headless log indents it under its turn, the console colours it by severity, the fleet
view shows :func:`brief`), but the words are these, once. :func:`tool_args` is the one formatter of a tool call's
arguments, :func:`reply_text` of the model's text and :func:`result_text` of a call's result in a log line.
:func:`in_story` says which events make a run's story (the headless log and ``agent-console logs``).
Pure functions of engine events: no Textual here (import-linter keeps it so).

One module per family of events, as in :mod:`console.engine.events` (:mod:`.session`, :mod:`.tools`, :mod:`.plan`,
:mod:`.context`, :mod:`.guardrails`, :mod:`.run`), one registry of them all (:mod:`.registry`), the shared words
(:mod:`.words`), tool arguments (:mod:`.args`) and events made safe to fold (:mod:`.safe`). Everything is importable
from here, as ``present.describe``.
"""

from __future__ import annotations

from console.view.present.args import (
    MAIN_KEYS,
    argument_items,
    tool_args,
)
from console.view.present.guardrails import (
    refusal_count,
)
from console.view.present.plan import (
    todo_list_text,
)
from console.view.present.registry import (
    DESCRIBERS,
    SILENT,
    STORY_TYPES,
    describe,
    in_story,
)
from console.view.present.run import (
    EXPERIENCE_SECTIONS,
)
from console.view.present.safe import (
    safe_event,
)
from console.view.present.tools import (
    MCP_SEVERITY,
    SANDBOX_SEVERITY,
    mcp_confinement,
    mcp_may,
    mcp_tools_text,
)
from console.view.present.words import (
    BUDGET_SPENT,
    DEMO,
    DEMO_PROVIDER,
    END_SEVERITY,
    NEED_LABELS,
    OUTCOME_SEVERITY,
    OUTCOME_WORDS,
    QUIET_KINDS,
    REASON_WORDS,
    REPLY,
    RESULT,
    SEVERITIES,
    TEXT,
    Presented,
    brief,
    context_full,
    cost,
    discarded_text,
    fill,
    flat,
    is_demo,
    need_label,
    needs_answer,
    outcome_text,
    pct,
    phase_label,
    phase_short,
    plural,
    reply_text,
    result_text,
    retry_badge,
    retry_text,
    run_ended_text,
    stop_kind,
    stuck_told,
    tokens,
    unpriced_text,
    window_text,
)

__all__ = [
    "BUDGET_SPENT",
    "DEMO",
    "DEMO_PROVIDER",
    "DESCRIBERS",
    "END_SEVERITY",
    "EXPERIENCE_SECTIONS",
    "MAIN_KEYS",
    "MCP_SEVERITY",
    "NEED_LABELS",
    "OUTCOME_SEVERITY",
    "OUTCOME_WORDS",
    "QUIET_KINDS",
    "REASON_WORDS",
    "REPLY",
    "RESULT",
    "SANDBOX_SEVERITY",
    "SEVERITIES",
    "SILENT",
    "STORY_TYPES",
    "TEXT",
    "Presented",
    "argument_items",
    "brief",
    "context_full",
    "cost",
    "describe",
    "discarded_text",
    "fill",
    "flat",
    "in_story",
    "is_demo",
    "mcp_confinement",
    "mcp_may",
    "mcp_tools_text",
    "need_label",
    "needs_answer",
    "outcome_text",
    "pct",
    "phase_label",
    "phase_short",
    "plural",
    "refusal_count",
    "reply_text",
    "result_text",
    "retry_badge",
    "retry_text",
    "run_ended_text",
    "safe_event",
    "stop_kind",
    "stuck_told",
    "todo_list_text",
    "tokens",
    "tool_args",
    "unpriced_text",
    "window_text",
]
