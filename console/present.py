"""Operator-facing wording shared by the views (the headless log and the console): one text per event, not two.

Plain text only (no colours, no markup); each view styles and places it. Pure functions of engine events.
"""

from __future__ import annotations

from console.engine import events as ev
from console.engine.cost import format_cost
from console.engine.job import one_line

# Said wherever an operator could take the offline scripted model's output for a real model's.
DEMO = "scripted demo model: deterministic, no AI"

__all__ = ["DEMO", "cost", "discarded_text", "retry_badge", "retry_text", "unpriced_text", "window_text"]


def cost(usd: float | None) -> str:
    """``$0.42``, or "" when the price is unknown (the views leave cost out then, never "n/a")."""
    return "" if usd is None else format_cost(usd)


def unpriced_text(model: str) -> str:
    """Said once per view when the model's price is unknown (``session_started.priced`` is False)."""
    name = one_line(model, 80) or "this model"
    return (f"no price known for {name}: costs are not shown; add it under [prices] in the config "
            "(see README)")


def _seconds(s: float) -> str:
    # A jittered first wait is often under a second: "0 s" would read as "not at all".
    return f"{s:.1f} s" if 0 < s < 9.95 and s != round(s) else f"{max(0, round(s))} s"


def retry_text(e: ev.ModelRetry, message: int = 0) -> str:
    """``rate limited; retrying in 32 s, attempt 3 (waited 48 s of max 600 s)``: one model retry, in one line.

    The waits so far are said from the second wait on (the first one says nothing more than its delay).
    ``message``: add up to that many characters of the provider's own message (0: none)."""
    cause = one_line(e.cause, 60) or "model call failed"
    text = f"{cause}; retrying in {_seconds(e.delay_s)}, attempt {e.attempt}"
    if e.max_wait_s > 0 and e.waited_s > e.delay_s + 0.5:
        text += f" (waited {_seconds(e.waited_s)} of max {_seconds(e.max_wait_s)})"
    said = one_line(e.message, message) if message and e.message.strip() else ""
    if said and said.strip().lower() != cause.lower():
        text += f": {said}"
    return text


def retry_badge(e: ev.ModelRetry, left_s: float | None, short: bool = False) -> str:
    """The state while a retry waits: ``waiting: rate limited, retry in 32 s`` (``left_s``: seconds left, counting
    down; None: the delay as announced), then ``retrying: attempt 3`` once the wait is over. ``short``: ``retry in
    32 s`` and ``retrying``, for a narrow line."""
    if left_s is not None and left_s <= 0:
        return "retrying" if short else f"retrying: attempt {e.attempt}"
    left = e.delay_s if left_s is None else left_s
    seconds = max(1, -int(-left // 1))
    if short:
        return f"retry in {seconds} s"
    cause = one_line(e.cause, 28) or "model call failed"
    return f"waiting: {cause}, retry in {seconds} s"


def discarded_text(e: ev.OperatorCommand) -> str:
    """``discarded stop from an earlier run``: a command left in the inbox for a run that is over."""
    detail = f" ({one_line(e.detail, 160)})" if e.detail else ""
    return f"discarded {one_line(e.command.replace('_', ' '), 40)} from an earlier run{detail}"


def window_text(window: int, source: str) -> str:
    """``window 200k (registry: claude-sonnet-4-5)``: the context window and where the figure came from."""
    if not window:
        return ""
    if window >= 1_000_000:
        n = f"{window / 1_000_000:g}M" if window % 100_000 == 0 else f"{window / 1_000_000:.2f}M"
    elif window >= 10_000:
        n = f"{round(window / 1000)}k"
    else:
        n = f"{window:,}"
    where = f" ({one_line(source, 60)})" if source else ""
    return f"window {n}{where}"
