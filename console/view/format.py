"""Small text helpers shared by the panes: token counts, durations, times. (Events and tool arguments are put in
words by :mod:`console.view.present`, for every view.)"""

from __future__ import annotations

from datetime import datetime, timedelta

from console.view.present import tokens

__all__ = ["SPARK", "clip", "clock_time", "duration", "elapsed", "span", "sparkline", "tokens"]

SPARK = "▁▂▃▄▅▆▇█"


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def span(seconds: float) -> str:
    """A length of time in words, for "… left" and "… ago" ("18 min 7 s", "2 h 5 min", "45 s"): ``duration``'s
    "18:07" is a stopwatch's and, beside a clock time ("at 17:04:58"), reads as one. Rounded down, two units at
    most (seconds stop mattering past the hour)."""
    s = max(0, int(seconds))
    d, rem = divmod(s, 86_400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    if d:
        return f"{d} d {h} h" if h else f"{d} d"
    if h:
        return f"{h} h {m} min" if m else f"{h} h"
    if m:
        return f"{m} min {sec} s" if sec else f"{m} min"
    return f"{sec} s"


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
