"""How the session events read: a session's start (its model, a restart's carry-over) and end, a model retry."""

from __future__ import annotations

from console.engine import events as ev
from console.engine.job_files import one_line
from console.view.present.words import (
    DEMO,
    END_SEVERITY,
    REASON_WORDS,
    Presented,
    flat,
    is_demo,
    pct,
    plural,
    retry_text,
    tokens,
)


def _model_label(provider: str, model: str) -> str:
    return one_line(f"{provider}/{model}".strip("/"), 120)


def _session_started(e: ev.SessionStarted) -> Presented:
    if e.reason == "restart":
        size = ""
        if e.prompt_tokens_est:
            share = f" ({pct(e.prompt_tokens_est, e.prompt_budget)} of the prompt budget)" if e.prompt_budget else ""
            size = f"its first prompt: ~{tokens(e.prompt_tokens_est)} tokens{share}"
        return Presented("↻", "restart", "info", f"session {e.session} started after a context restart: "
                                                 f"{plural(e.carryover_messages, 'message')} carried over", size,
                         source="context")
    label = _model_label(e.provider, e.model)
    how = "resumed" if e.reason == "resume" else "started"
    text = f"session {e.session} {how}" + (f" ({label})" if label else "")
    if e.detail:
        text += f": {flat(e.detail)}"
    # Once per process (not at each context restart): what the prompts carry when it is not the default.
    said = [DEMO] if is_demo(e.provider) else []
    said += _context_notes(e)
    return Presented("●", "session", "info", text, "; ".join(said), "engine")


def _context_notes(e: ev.SessionStarted) -> list[str]:
    """Seed 003's settings when they differ from the defaults (``working memory off (requires_context = ...``)."""
    notes = []
    if not e.working_memory:
        notes.append("working memory off (requires_context = false): the prompts carry no task history or blockers")
    if e.file_index:
        notes.append("file index on: the agent has find_files")
    return notes


def _session_ended(e: ev.SessionEnded) -> Presented:
    # job_complete's and a give-up's own lines say what they said.
    detail = f" ({flat(e.detail, 0)})" if e.detail and e.reason not in ("job_complete", "gave_up") else ""
    why = REASON_WORDS.get(e.reason) or one_line(e.reason, 80)
    return Presented("■", "session-end", END_SEVERITY.get(e.reason, "error"),
                     f"session {e.session} ended: {why} after {plural(e.turns, 'turn')}{detail}", source="engine")


def _retry(e: ev.ModelRetry) -> Presented:
    gone = f"the partial reply ({e.discarded_chars:,} chars) was discarded" if e.discarded_chars else ""
    return Presented("⧗", "retry", "caution", f"model call failed: {retry_text(e, message=160)}", gone, "model")
