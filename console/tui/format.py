"""Small text helpers shared by the panes: token counts, durations, times, tool arguments."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

SPARK = "▁▂▃▄▅▆▇█"


def tokens(n: int | float) -> str:
    n = int(n)
    if n >= 1_000_000:
        return f"{n / 1_000_000:.2f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)


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


def brief_args(raw: str, limit: int = 60) -> str:
    """The one argument that says what a tool call is about (path, pattern, ...)."""
    try:
        data = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return "<invalid JSON>"
    if not isinstance(data, dict) or not data:
        return ""
    key = next((k for k in ("path", "pattern", "text", "issue", "summary", "note") if k in data), None)
    if key is None:
        if isinstance(data.get("todos"), list):
            return f"{len(data['todos'])} tasks"
        key = next(iter(data))
    val = str(data[key]).replace("\n", " ")
    val = val if len(val) <= limit else val[: limit - 1] + "…"
    return f"{key}={val}"


def pretty_args(raw: str) -> str:
    try:
        return json.dumps(json.loads(raw or "{}"), indent=1, ensure_ascii=False)
    except json.JSONDecodeError:
        return raw


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
