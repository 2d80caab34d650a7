"""Token pressure: how full the next prompt is, where masking and wind-down start, the context window and where
its figure came from, the trend, the last action."""

from __future__ import annotations

from typing import Any

from textual.content import Content
from textual.widget import Widget

from console.view import present
from console.view.format import clock_time, sparkline, tokens
from console.view.state import ConsoleState, GaugeState


def zone_style(g: GaugeState) -> str:
    if g.pct >= g.hard:
        return "$text-error"
    if g.pct >= g.soft:
        return "$text-warning"
    return "$text-success"


def bar(g: GaugeState, width: int) -> Content:
    """A bar of ``width`` cells with the soft (│) and hard (┃) marks drawn in it."""
    width = max(5, width)
    filled = min(width, round(g.pct * width)) if g.limit else 0
    soft_at = min(width - 1, round(g.soft * width))
    hard_at = min(width - 1, round(g.hard * width))
    style = zone_style(g)
    cells: list[tuple[str, str]] = []
    for i in range(width):
        if i == hard_at:
            cells.append(("┃", "bold $text-error"))
        elif i == soft_at:
            cells.append(("│", "bold $text-warning"))
        elif i < filled:
            cells.append(("█", style))
        else:
            cells.append(("░", "$text-muted"))
    # Runs of one style, not a span per cell: this is redrawn on every turn.
    runs: list[tuple[str, str]] = []
    for char, st in cells:
        if runs and runs[-1][1] == st:
            runs[-1] = (runs[-1][0] + char, st)
        else:
            runs.append((char, st))
    return Content.assemble(*runs)


def headline(g: GaugeState) -> Content:
    if not g.limit:
        return Content.styled("Context: waiting for the first turn", "$text-muted")
    what = " budget" if g.budget else ""
    return Content.assemble(("Context ", "bold"), (f"{tokens(g.used)} / {tokens(g.limit)}", "bold"), what, "  ",
                            (present.fill(g.pct), f"bold {zone_style(g)}"))


class ContextGauge(Widget):
    """Full gauge in the wide layouts; ``compact`` (two lines) above the tabs in the narrow one."""

    def __init__(self, state: ConsoleState, *, compact: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.state = state
        self.compact = compact
        if not compact:
            self.can_focus = True
            self.border_title = "Token pressure"

    @property
    def allow_maximize(self) -> bool:
        return not self.compact

    def render(self) -> Content:
        return self._compact() if self.compact else self._full()

    def _last(self, g: GaugeState) -> Content:
        st = self.state
        if st.restart_pending is not None:
            return Content.styled(" RESTART PENDING: press a to approve, d to deny ", "bold reverse $text-warning")
        if not g.last_action:
            return Content.styled("no context action yet", "$text-muted")
        when = f" · {clock_time(g.last_action_ts)}" if g.last_action_ts else ""
        return Content.assemble(g.last_action, (when, "$text-muted"))

    def _full(self) -> Content:
        g = self.state.gauge
        w = max(10, self.size.width or 40)
        lines: list[Content] = [headline(g), bar(g, w)]
        lines.append(Content.assemble(("│", "bold $text-warning"), f" soft {g.soft:.0%}  ",
                                      ("┃", "bold $text-error"), f" hard {g.hard:.0%}"))
        window = present.window_text(g.window, g.window_source)
        if window:
            lines.append(Content.styled(window[:1].upper() + window[1:], "$text-muted").truncate(w, ellipsis=True))
        trend_w = max(5, w - 7)
        spark = sparkline(list(g.trend), g.limit, trend_w)
        lines.append(Content.assemble(("Trend  ", "$text-muted"), (spark, "$text-primary") if spark else
                                      ("(no turns yet)", "$text-muted")))
        lines.append(Content.assemble(("Last   ", "$text-muted"), self._last(g)))
        if g.last_input:
            cached = f" ({tokens(g.last_cached)} cached)" if g.last_cached else ""
            est = "" if g.reported else " (estimated)"
            lines.append(Content.assemble((f"Turn {self.state.turn:<2} ", "$text-muted"),
                                          f"in {tokens(g.last_input)}{cached} · out {tokens(g.last_output)}{est}"))
        return Content("\n").join(lines)

    def _compact(self) -> Content:
        g = self.state.gauge
        w = max(20, self.size.width or 80)
        head = (Content.assemble(("ctx ", "bold"), (f"{present.fill(g.pct)} ", f"bold {zone_style(g)}"),
                                 (f"{tokens(g.used)}/{tokens(g.limit)} ", "$text-muted"))
                if g.limit else Content.styled("ctx waiting… ", "$text-muted"))
        spark_w = min(24, max(0, w // 4))
        spark = sparkline(list(g.trend), g.limit, spark_w)
        bar_w = max(5, w - head.cell_length - spark_w - 2)
        line1 = Content.assemble(head, bar(g, bar_w), "  ", (spark, "$text-primary"))
        last = self._last(g)
        if self.state.restart_pending is None:
            last = Content.assemble(("last: ", "$text-muted"), last)
        return Content.assemble(line1, "\n", last.truncate(w, ellipsis=True))
