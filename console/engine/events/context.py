"""The events of context pressure (seed 004): masking, compaction, the wind-down and the restart approval."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from console.engine.events.base import EventBase


class ContextMasked(EventBase):
    type: Literal["context_masked"] = "context_masked"
    masked: int
    tokens_freed: int = 0
    used_before: int = 0
    used_after: int = 0
    context_window: int = 0
    prompt_budget: int = 0
    call_ids: list[str] = Field(default_factory=list)
    detail: str = ""


class ContextCompacted(EventBase):
    type: Literal["context_compacted"] = "context_compacted"
    messages_before: int
    messages_after: int
    summary_chars: int
    reason: str = ""
    # The conversation's own messages kept after the summary (a restart's marker is not one of them); None in
    # logs written before it was said: messages_after - 1 then.
    carried: int | None = None


class WindDown(EventBase):
    type: Literal["wind_down"] = "wind_down"
    usage_pct: float
    used_tokens: int = 0
    context_window: int = 0
    prompt_budget: int = 0
    message: str = ""


class RestartPending(EventBase):
    type: Literal["restart_pending"] = "restart_pending"
    usage_pct: float = 0.0
    used_tokens: int = 0
    context_window: int = 0
    prompt_budget: int = 0
    carryover_messages: int = 0
    carryover_tokens: int = 0
    next_session: int = 0
    reason: str = "context full"


class RestartApproved(EventBase):
    type: Literal["restart_approved"] = "restart_approved"
    by: str = "auto"


class RestartDenied(EventBase):
    type: Literal["restart_denied"] = "restart_denied"
    by: str = "operator"
