"""Feedback blocks, newest first: source, severity and time of every notice the run produced.

Today these are the engine's own notices (masking, wind-down, restarts, tool
denials and failures, errors, completion blocks, operator command results);
``feedback`` events from feedback providers land here the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.content import Content

from console.tui.format import clock_time
from console.tui.state import FeedbackItem
from console.tui.widgets.lines import Item, ItemView

MAX_BLOCKS = 200
SEVERITY = {  # label, colour
    "info": ("info", "primary"),
    "caution": ("caution", "warning"),
    "warning": ("warning", "warning"),
    "error": ("error", "error"),
    "success": ("done", "success"),
}


def render_feedback(item: FeedbackItem) -> Content:
    label, color = SEVERITY.get(item.severity, (item.severity, "primary"))
    head = Content.assemble((clock_time(item.ts), "$text-muted"), "  ", (item.source, "bold"), "  ",
                            (label, f"bold $text-{color}"))
    return Content.assemble(head, "\n", item.message)


@dataclass(eq=False)
class FeedbackBlock(Item):
    item: FeedbackItem | None = field(default=None)

    def __post_init__(self) -> None:
        assert self.item is not None
        self.gutter = "▌ "
        self.gutter_style = f"${SEVERITY.get(self.item.severity, ('', 'primary'))[1]}"
        self.margin = True

    def body(self) -> object:
        assert self.item is not None
        return render_feedback(self.item)


class FeedbackPane(ItemView):
    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)
        self.border_title = "Feedback"
        self.total = 0
        self._by_seq: dict[int, FeedbackBlock] = {}

    def header(self) -> Content | None:
        return None if self.items else Content.styled("No notices yet.", "italic $text-muted")

    def show(self, items: list[FeedbackItem]) -> None:
        """``items`` newest first (the state's deque)."""
        shown = items[:MAX_BLOCKS]
        blocks = []
        for it in shown:
            block = self._by_seq.get(it.seq)
            if block is None:
                block = FeedbackBlock(item=it)
                self.total += 1
            blocks.append(block)
        self._by_seq = {b.item.seq: b for b in blocks if b.item is not None}
        self.items = list(blocks)
        self._header = []
        warn = sum(1 for i in items if i.severity in ("warning", "error"))
        self.border_subtitle = f"{len(items)} · {warn} warnings/errors" if warn else f"{len(items)}"
        self.relayout(0)
        self.scroll_home(animate=False)

    @property
    def messages(self) -> list[str]:
        return [b.item.message for b in self.items if isinstance(b, FeedbackBlock) and b.item is not None]
