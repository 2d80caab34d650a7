"""Small text helpers shared by the panes: token counts, durations, times. (Events and tool arguments are put in
words by :mod:`console.view.present`, for every view.)"""

from __future__ import annotations

from datetime import datetime, timedelta

from console.view.present import tokens

__all__ = ["SPARK", "clip", "clock_time", "duration", "elapsed", "sparkline", "tokens"]

SPARK = "▁▂▃▄▅▆▇█"


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def clock_time(ts: datetime) -> str:
    """Local wall-clock time of an event (events are stamped in UTC)."""
    return ts.astimezone().strftime("%H:%M:%S")


def elapsed(start: datetime | None, end: datetime | None) -> str:
    if start is None or end is None:
        return "0:00"
    return duration((end - start) / timedelta(seconds=1))


def sparkline(values: list[int], ceiling: int, width: int) -> str:
    """Bars scaled to ``ceiling`` (the context window), so the height means pressure, not relative change."""
    if width <= 0:
        return ""
    vals = values[-width:]
    if not vals or ceiling <= 0:
        return ""
    out = []
    for v in vals:
        idx = round(min(1.0, max(0.0, v / ceiling)) * (len(SPARK) - 1))
        out.append(SPARK[idx])
    return "".join(out)


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"
