"""The feedback pane: what the agent was told and what the guardrails did, oldest at the top, newest at the bottom.

Two kinds of entries:

- a feedback provider's block (seed 002), as the agent received it after a turn's tool results:
  provider, severity, time, the summary, observations and suggestions (``-> ...``); click one to see
  the exact ``<feedback provider='...'>`` text;
- one-line notices: tool denials, refused and bypassed stops, spent budgets, stuck detections, and the
  engine's own notices (masking, wind-down, restarts, errors, operator commands), in the words of
  :mod:`console.view.present` (the same as the headless log's and the conversation's).

The pane keeps the newest ``MAX_BLOCKS`` entries and follows the tail until the operator scrolls up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.content import Content
from textual.events import Click
from textual.strip import Strip

from console.tui.widgets.lines import Item, ItemView, hang
from console.view.format import clock_time
from console.view.state import FeedbackItem

MAX_BLOCKS = 200


@dataclass(frozen=True)
class Look:
    label: str
    gutter: str  # the bar left of a block
    badge: str  # the severity label
    text: str  # icons, arrows, the source of a notice


# Caution and warning share the theme's warning colour; a warning's label is a badge (reversed), so the two read
# apart at a glance, in the ANSI theme too.
SEVERITY = {
    "info": Look("info", "$primary", "bold $text-primary", "$text-primary"),
    "caution": Look("caution", "$warning-muted", "bold $text-warning", "$text-warning"),
    "warning": Look(" warning ", "$warning", "bold reverse $text-warning", "bold $text-warning"),
    "error": Look(" error ", "$error", "bold reverse $text-error", "bold $text-error"),
    "success": Look("done", "$success", "bold $text-success", "$text-success"),
}
# A notice's icon comes with its words (console.view.present); these are for an entry made without one.
NOTICE_ICON = {"info": "·", "caution": "!", "warning": "‼", "error": "✗", "success": "✔"}


def look(severity: str) -> Look:
    return SEVERITY.get(severity) or Look(severity, "$primary", "bold $text-primary", "$text-primary")


def render_block(item: FeedbackItem, expanded: bool = False) -> Content:
    """A provider's feedback: head (time, provider, severity, turn), summary, observations, suggestions."""
    lk = look(item.severity)
    head: list[str | tuple[str, str]] = [(clock_time(item.ts), "$text-muted"), "  ", ("◆ ", lk.text),
                                         (item.source, "bold"), "  ", (lk.label, lk.badge)]
    where = ", ".join(p for p in (f"turn {item.turn}" if item.turn else "",
                                  f"call {item.call_index}" if item.call_index else "") if p)
    if where:
        head += ["  ", (where, "$text-muted")]
    lines = [Content.assemble(*head), Content.styled(item.message, "bold")]
    lines += [Content.assemble(("· ", "$text-muted"), obs) for obs in item.observations]
    lines += [Content.assemble(("-> ", lk.text), s) for s in item.suggestions]
    if expanded and item.block:
        lines.append(Content.styled(item.block, "$text-muted"))
    return Content("\n").join(lines)


def render_notice(item: FeedbackItem, width: int = 0) -> Content:
    """One line: time, an icon, what happened (in console.view.present's words); wrapped under its text if it must."""
    lk = look(item.severity)
    icon = item.icon or NOTICE_ICON.get(item.severity, "·")
    head = Content.assemble((clock_time(item.ts), "$text-muted"), " ", (f"{icon} ", lk.text))
    body = Content(item.message) if item.icon else Content.assemble((f"{item.source}: ", lk.text), item.message)
    if not width:
        return head + body
    return Content("\n").join(hang(head, body, width))


@dataclass(eq=False)
class FeedbackBlock(Item):
    item: FeedbackItem | None = field(default=None)
    expanded: bool = False

    def __post_init__(self) -> None:
        assert self.item is not None
        self.gutter = "▌ "
        self.gutter_style = look(self.item.severity).gutter
        self.margin = True

    def body(self) -> object:
        assert self.item is not None
        return render_block(self.item, self.expanded)

    def estimate(self, width: int) -> int:
        assert self.item is not None
        return 2 + len(self.item.observations) + len(self.item.suggestions)


@dataclass(eq=False)
class NoticeLine(Item):
    item: FeedbackItem | None = field(default=None)
    width: int = 0  # set by the pane before rendering: continuation lines hang under the text

    def body(self) -> object:
        assert self.item is not None
        return render_notice(self.item, self.width)


@dataclass(eq=False)
class Spacer(Item):
    """The blank line after a feedback block, before the notices that follow it."""

    def body(self) -> object:
        return Content("")


class FeedbackPane(ItemView):
    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)
        self.border_title = "Feedback"
        self.total = 0
        self._by_seq: dict[int, Item] = {}
        self._spacers: dict[int, Spacer] = {}

    def on_mount(self) -> None:
        super().on_mount()
        self.anchor()

    def header(self) -> Content | None:
        if self.items:
            return None
        return Content.styled("No feedback yet. Feedback providers' blocks, tool denials and refused stops "
                              "appear here.", "italic $text-muted")

    def show(self, items: list[FeedbackItem]) -> None:
        """``items`` oldest first (the state's deque); the newest ``MAX_BLOCKS`` are shown."""
        shown = items[-MAX_BLOCKS:]
        entries: list[Item] = []
        by_seq: dict[int, Item] = {}
        spacers: dict[int, Spacer] = {}
        previous: FeedbackItem | None = None
        for it in shown:
            if previous is not None and previous.kind == "feedback" and it.kind != "feedback":
                spacer = self._spacers.get(previous.seq) or Spacer()
                spacers[previous.seq] = spacer
                entries.append(spacer)
            entry = self._by_seq.get(it.seq)
            if entry is None:
                entry = FeedbackBlock(item=it) if it.kind == "feedback" else NoticeLine(item=it)
                self.total += 1
            by_seq[it.seq] = entry
            entries.append(entry)
            previous = it
        first = next((n for n, (old, new) in enumerate(zip(self.items, entries, strict=False)) if old is not new),
                     min(len(self.items), len(entries)))
        self._by_seq, self._spacers = by_seq, spacers
        had_items = bool(self.items)
        self.items = entries
        if had_items != bool(entries):
            self._header = []
            first = 0
        blocks = sum(1 for i in shown if i.kind == "feedback")
        warn = sum(1 for i in shown if i.severity in ("warning", "error"))
        parts = [str(len(shown)), f"{blocks} feedback" if blocks else "", f"{warn} warnings" if warn else ""]
        self.border_subtitle = " · ".join(p for p in parts if p)
        self.relayout(first)

    def render_item(self, item: Item, width: int) -> list[Strip]:
        if isinstance(item, NoticeLine):
            item.width = max(8, width - len(item.gutter))
        return super().render_item(item, width)

    def on_click(self, event: Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        item = self.item_at(round(self.scroll_y) + offset.y)
        if isinstance(item, FeedbackBlock) and item.item is not None and item.item.block:
            event.stop()
            item.expanded = not item.expanded
            item.lines = None
            self.relayout(self.index_of([item]))

    @property
    def entries(self) -> list[FeedbackItem]:
        return [b.item for b in self.items if isinstance(b, FeedbackBlock | NoticeLine) and b.item is not None]

    @property
    def messages(self) -> list[str]:
        return [i.message for i in self.entries]
