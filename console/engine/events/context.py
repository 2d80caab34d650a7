"""The events of context pressure (seed 004): masking, compaction, the wind-down and the restart approval."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from console.engine.events.base import BoundedInt, EventBase


class ContextMasked(EventBase):
    type: Literal["context_masked"] = "context_masked"
    masked: BoundedInt
    tokens_freed: BoundedInt = 0
    used_before: BoundedInt = 0
    used_after: BoundedInt = 0
    context_window: BoundedInt = 0
    prompt_budget: BoundedInt = 0
    call_ids: list[str] = Field(default_factory=list)
    detail: str = ""


class ContextCompacted(EventBase):
    type: Literal["context_compacted"] = "context_compacted"
    messages_before: BoundedInt
    messages_after: BoundedInt
    summary_chars: BoundedInt
    reason: str = ""
    # The conversation's own messages kept after the summary (a restart's marker is not one of them); None in
    # logs written before it was said: messages_after - 1 then.
    carried: BoundedInt | None = None


class WindDown(EventBase):
    type: Literal["wind_down"] = "wind_down"
    usage_pct: float
    used_tokens: BoundedInt = 0
    context_window: BoundedInt = 0
    prompt_budget: BoundedInt = 0
    message: str = ""


class RestartPending(EventBase):
    type: Literal["restart_pending"] = "restart_pending"
    usage_pct: float = 0.0
    used_tokens: BoundedInt = 0
    context_window: BoundedInt = 0
    prompt_budget: BoundedInt = 0
    carryover_messages: BoundedInt = 0
    carryover_tokens: BoundedInt = 0
    next_session: BoundedInt = 0
    reason: str = "context full"


class RestartApproved(EventBase):
    type: Literal["restart_approved"] = "restart_approved"
    by: str = "auto"


class RestartDenied(EventBase):
    type: Literal["restart_denied"] = "restart_denied"
    by: str = "operator"
