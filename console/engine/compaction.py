"""Compaction at a phase boundary: layers 4-5 become one new previous summary (the facts always, the model's
prose added to them when the job asks for an LLM summary)."""

from __future__ import annotations

import functools

from console.engine import events as ev
from console.engine.context.summary import build_summary, llm_summary_request, summary_message
from console.engine.messages import Message
from console.engine.model import (
    ProviderError,
    TextDelta,
)
from console.engine.model_call import stream_abandonably
from console.engine.operator import Aborted, Paused
from console.engine.turn import SessionDeps, call_limits, operator_tick


def llm_summary(deps: SessionDeps, conversation: list[Message]) -> str | None:
    """A model-written summary of layers 4-5, or None (the caller falls back to the deterministic one)."""
    rt = deps.runtime
    tick = functools.partial(operator_tick, deps)
    try:
        # Abandonable like a turn: a stop or a stall must not wait for an optional summary.
        parts = [e.text for e in stream_abandonably(deps.provider, llm_summary_request(conversation),
                                                    call_limits(deps.settings), tick) if isinstance(e, TextDelta)]
    except (Aborted, Paused):
        # The operator's stop or pause applies at the turn's end, right after this (deterministic) compaction.
        rt.events.emit(ev.ErrorEvent, message="LLM summary abandoned for the operator's command; using the "
                                              "deterministic one", where="compaction", recoverable=True)
        return None
    except Exception as exc:  # a failed, garbled or cut summary: the deterministic one is always there
        why = str(exc) if isinstance(exc, ProviderError) else f"{type(exc).__name__}: {str(exc)[:200]}"
        rt.events.emit(ev.ErrorEvent, message=f"LLM summary failed, using the deterministic one: {why}",
                       where="compaction", recoverable=True)
        return None
    text = "".join(parts).strip()
    return text or None


def compact(deps: SessionDeps, conversation: list[Message], reason: str, keep: list[Message] | None = None) -> None:
    """Layers 4-5 become a new previous summary (the new todos are already in layer 2), then ``keep``."""
    rt = deps.runtime
    before = len(conversation)
    text = build_summary(rt.paths, rt.workspace, rt.clock.now(),
                         memory=rt.memory if deps.settings.requires_context else None)
    if deps.settings.summary == "llm" and (written := llm_summary(deps, conversation)):
        # The facts stay: the model's prose is added to them, never trusted to replace them.
        text = text.rstrip() + "\n\nSummary of the conversation, written by the model:\n" + written + "\n"
    conversation[:] = [summary_message(text), *(keep or [])]
    rt.events.emit(ev.ContextCompacted, messages_before=before, messages_after=len(conversation),
                   summary_chars=len(text), reason=reason, carried=len(keep or []))
