"""Small text helpers shared by the panes: token counts, durations, times. (Events and tool arguments are put in
words by :mod:`console.view.present`, for every view.)"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from console.engine.cost import format_cost

# No import of console.view.present here (it imports the typed events): the fleet's list draws its first frame
# with these alone, before any event is parsed (tests/tui/test_console_imports.py).
__all__ = ["SPARK", "clip", "clock_time", "cost", "duration", "elapsed", "fill", "run_today", "span", "sparkline",
           "today_line", "tokens"]

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


def tokens(n: int | float) -> str:
    """``950``, ``1.2k``, ``56k``, ``2.50M``."""
    n = int(n)
    if n >= 1_000_000:
        return f"{n / 1_000_000:.2f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)


# How full the context is, for every view (status line, gauge, event lines, the headless log, jobs). The figure
# is a share of the prompt budget (the window less the reply's reserve), not of the window: the next prompt can
# pass the budget (a wind-down turn's saved state and tool results are added before the restart it leads to)
# while still fitting the window. "107% full" read as impossible; past 100% it is said as over.
def fill(share: float) -> str:
    """``96%``, or ``100%+`` past the budget (the tokens beside it say by how much)."""
    return f"{share:.0%}" if share <= 1 else "100%+"


def cost(usd: float | None) -> str:
    """``$0.42``, or "" when the price is unknown (the views leave cost out then, never "n/a")."""
    return "" if usd is None else format_cost(usd)


def run_today(usd: float | None, total: float | None) -> str:
    """A run's spend today beside its whole cost, when they differ (a run older than today): ``today $0.12``."""
    if usd is None or usd == total:
        return ""
    return f"today {format_cost(usd)}"


def today_line(today: Sequence[float | None], needs: Sequence[str] = ()) -> str:
    """The fleet's line for today's spend, from each run's (console.view.ledger's ``Spend.on``): ``today $1.27 over 3
    runs`` ("" when no run spent anything priced today); with each run's need (``needs``), the runs the fleet's daily
    budget holds: ``today $50.02 over 3 runs · fleet budget reached: 2 held``."""
    spent = [usd for usd in today if usd is not None]
    held = sum(1 for n in needs if n == "fleet_budget")
    line = f"today {format_cost(sum(spent))} over {len(spent)} run{'s' if len(spent) != 1 else ''}" if spent else ""
    if held:
        # Short: the title line also says how many runs need you (`agent-console budget` has the figures).
        line += (" · " if line else "") + f"fleet budget reached: {held} held"
    return line


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"
