"""A scrolling list of items drawn as lines (Textual's line API), for panes that grow all run long.

A widget per message would make every new message re-lay-out all the others; here
each item is rendered once into lines (again only when it changes, or when the
width or the theme changes) and only the lines on screen are drawn. Items carry
an optional gutter (a coloured bar or an indent) and a blank line above.

With ``lazy`` on, an item is rendered only when it comes into view; until then its
height is an estimate. A view that follows the tail of a 5,000-message run renders
the few messages on screen, not 5,000.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual.content import Content
from textual.events import Resize
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer
from textual.visual import Visual, visualize

from console.tui.pacing import one_shot


@dataclass(eq=False)
class Item(ABC):
    lines: list[Strip] | None = field(default=None, repr=False)

    gutter: str = field(default="", init=False, repr=False)
    gutter_style: str = field(default="", init=False, repr=False)
    margin: bool = field(default=False, init=False, repr=False)
    rules: str = field(default="", init=False, repr=False)  # a style: a heavy rule above and below

    est: int = field(default=0, init=False, repr=False)
    est_width: int = field(default=0, init=False, repr=False)

    @abstractmethod
    def body(self) -> object:
        """A Content or a Rich renderable (each kind of item draws its own)."""

    def estimate(self, width: int) -> int:
        """Lines this item will take at ``width`` (content only), before it is rendered."""
        return 1

    @property
    def height(self) -> int:
        return len(self.lines) if self.lines is not None else self.est


def hang(head: Content, body: Content, width: int) -> list[Content]:
    """``head`` then ``body`` wrapped to ``width``, its continuation lines indented under the body's start."""
    indent = head.cell_length
    if width <= indent + 10:
        return [head + body]
    lines = body.wrap(width - indent) or [Content("")]
    return [head + lines[0], *(Content(" " * indent) + line for line in lines[1:])]


OVERSCAN = 10  # lines rendered beyond the viewport, so a short scroll shows real text at once
VISIBLE_INTERVAL = 0.1  # under a flood of events, what is on screen is re-rendered at most this often
RENDER_BUDGET = 0.006  # seconds of rendering per tick: a flood must not starve the keyboard
PAINT_INTERVAL = 1 / 20  # a lazy view repaints at most this often (each repaint redraws the whole pane)


class ItemView(ScrollView, can_focus=True):
    DEFAULT_CSS = "ItemView { overflow-x: hidden; }"  # lines are rendered to the width: never scroll sideways
    lazy = False

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.can_maximize = True
        self.items: list[Item] = []
        self.offsets: list[int] = []  # first line of each item (after the header)
        self.total_lines = 0
        self.render_width = 0
        self.renders = 0
        self._header: list[Strip] = []
        self._gutters: dict[tuple[str, str], Strip] = {}
        self._visible_timer: Timer | None = None
        self._paint: tuple[Style, int] | None = None
        self._paint_timer: Timer | None = None
        self._painted_at = 0.0
        self._visible_at = 0.0
        self._held_until = 0.0

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.invalidate())

    def header(self) -> Content | None:
        """Optional text above the items."""
        return None

    # -- rendering ----------------------------------------------------------------------------------
    def _strip_of(self, text: str, style: str) -> Strip:
        key = (text, style)
        strip = self._gutters.get(key)
        if strip is None:
            visual = visualize(self, Content.styled(text, style), markup=False)
            strips = Visual.to_strips(self, visual, len(text), 1, self.visual_style)
            strip = strips[0].adjust_cell_length(len(text)) if strips else Strip.blank(len(text))
            self._gutters[key] = strip
        return strip

    def render_item(self, item: Item, width: int) -> list[Strip]:
        self.renders += 1
        body = item.body()
        gutter_w = len(item.gutter)
        inner = max(8, width - gutter_w)
        strips = Visual.to_strips(self, visualize(self, body, markup=False), inner, None, self.visual_style)
        if item.rules:
            rule = self._strip_of("━" * inner, item.rules)
            strips = [rule, *strips, rule]
        if gutter_w:
            g = self._strip_of(item.gutter, item.gutter_style)
            strips = [Strip.join([g, s]) for s in strips]
        if item.margin:
            strips = [Strip.blank(0), *strips]
        return strips or [Strip.blank(0)]

    def relayout(self, start: int = 0) -> None:
        """Render the items from ``start`` that need it (lazy: estimate them), recompute offsets from there."""
        width = self.render_width
        if not width:
            return
        if not self._header:
            head = self.header()
            if head is not None:
                self._header = Visual.to_strips(self, visualize(self, head, markup=False), width, None,
                                                self.visual_style)
        self._offsets_from(start)
        if self.lazy:
            wait = VISIBLE_INTERVAL - (time.monotonic() - self._visible_at)
            if wait <= 0:
                self._visible_tick()
                return
            self._schedule_visible(wait)
        self._sync_size()

    def _sync_size(self) -> None:
        """Tell Textual the new height without a screen-wide layout: only this pane repaints.

        (Setting ``virtual_size`` normally re-lays-out the whole screen, which at 200x50 costs
        tens of milliseconds: on every batch of events that would starve the keyboard.)
        """
        size = Size(self.render_width, self.total_lines)
        if size != self.virtual_size:
            had_scrollbar = self.show_vertical_scrollbar
            self.set_reactive(ScrollView.virtual_size, size)
            self._scroll_update(size)
            if self.show_vertical_scrollbar != had_scrollbar:
                self.refresh(layout=True)  # the scrollbar came or went: that needs a layout
            if self.is_anchored and not self._anchor_released:
                self.set_reactive(ScrollView.scroll_y, self.max_scroll_y)
                self.scroll_target_y = self.max_scroll_y
                self.vertical_scrollbar.position = self.max_scroll_y
        self.request_paint()

    def hold(self, seconds: float) -> None:
        """Leave the screen to a key's effect for ``seconds``: the rendering and repainting this view would do
        meanwhile wait until then (a flood of events must not stand between a key and its frame)."""
        self._held_until = max(self._held_until, time.monotonic() + seconds)

    def _held(self) -> float:
        return self._held_until - time.monotonic()

    def request_paint(self) -> None:
        if not self.lazy:
            self.refresh()
            return
        wait = max(PAINT_INTERVAL - (time.monotonic() - self._painted_at), self._held())
        if wait <= 0:
            self._paint_now()
        elif self._paint_timer is None:
            self._paint_timer = one_shot(self, wait, self._paint_due)

    def _paint_due(self) -> None:
        self._paint_timer = None
        held = self._held()
        if held > 0:
            self._paint_timer = one_shot(self, held, self._paint_due)
            return
        self._paint_now()

    def _paint_now(self) -> None:
        if self._paint_timer is not None:
            self._paint_timer.stop()
            self._paint_timer = None
        self._painted_at = time.monotonic()
        self.refresh()

    def _schedule_visible(self, wait: float) -> None:
        if self._visible_timer is None:
            self._visible_timer = one_shot(self, max(0.001, wait), self._visible_due)

    def _visible_due(self) -> None:
        self._visible_timer = None
        self._visible_tick()

    def _visible_tick(self) -> None:
        if self._visible_timer is not None:  # called before its time (relayout): this tick does its work
            self._visible_timer.stop()
            self._visible_timer = None
        held = self._held()
        if held > 0:
            self._schedule_visible(held)
            return
        self._visible_at = time.monotonic()
        if not self.render_visible():
            self._schedule_visible(0.001)  # out of budget: the rest on the next tick
        self._sync_size()

    def _offsets_from(self, start: int) -> None:
        width = self.render_width
        start = max(0, min(start, len(self.offsets)))
        del self.offsets[start:]
        line = (self.offsets[-1] + self.items[start - 1].height) if start else len(self._header)
        lazy = self.lazy
        for item in self.items[start:]:
            if item.lines is None:
                if lazy:
                    if item.est_width != width:
                        item.est_width = width
                        inner = max(8, width - len(item.gutter))
                        item.est = item.estimate(inner) + (2 if item.rules else 0) + item.margin
                else:
                    item.lines = self.render_item(item, width)
            self.offsets.append(line)
            line += item.height
        self.total_lines = line

    def _viewport(self) -> tuple[int, int, bool]:
        """First and last line to render, and whether the view follows the tail."""
        height = max(1, self.scrollable_content_region.height or self.size.height or 24)
        if self.is_anchored and not self._anchor_released:
            top = max(0, self.total_lines - height)  # where the view is about to be
            return max(0, top - OVERSCAN), top + height, True
        top = round(self.scroll_y)
        return max(0, top - OVERSCAN), top + height + OVERSCAN, False

    def render_visible(self, budget: float = RENDER_BUDGET) -> bool:
        """Render the items in (and near) the viewport, within ``budget`` seconds.

        Returns False if time ran out with items still to render (they stay blank until the next
        tick). Following the tail, the newest items are rendered first.
        """
        if not self.render_width or not self.offsets:
            return True
        deadline = time.perf_counter() + budget
        for _ in range(4):  # heights settle in a pass or two
            first, last, tail = self._viewport()
            lo = max(0, self._index_at(first))
            hi = lo
            while hi < len(self.items) and self.offsets[hi] < last:
                hi += 1
            order = range(hi - 1, lo - 1, -1) if tail else range(lo, hi)
            lowest = None
            for n in order:
                item = self.items[n]
                if item.lines is not None:
                    continue
                if time.perf_counter() > deadline:
                    if lowest is not None:
                        self._offsets_from(lowest + 1)
                    return False
                item.lines = self.render_item(item, self.render_width)
                if len(item.lines) != item.est:
                    lowest = n if lowest is None else min(lowest, n)
            if lowest is None:
                return True
            self._offsets_from(lowest + 1)
        return True

    def flush(self) -> None:
        """Render what is in view and repaint now, whatever the throttles say (for tests and snapshots)."""
        if self.lazy:
            self.render_visible(budget=60.0)
        self._sync_size()
        self._paint_now()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self.lazy:
            self._schedule_visible(0.001)

    def invalidate(self) -> None:
        """Re-render everything (the width or the theme changed)."""
        self._gutters.clear()
        self._header = []
        for item in self.items:
            item.lines = None
        self.relayout(0)

    def index_of(self, items: list[Item]) -> int:
        """The smallest index of ``items`` in the view (len(self.items) if none is there).

        Searched from the end: what changes is nearly always among the newest items.
        """
        wanted = set(map(id, items))
        found = len(self.items)
        left = len(wanted)
        for n in range(len(self.items) - 1, -1, -1):
            if id(self.items[n]) in wanted:
                found = n
                left -= 1
                if not left:
                    break
        return found

    def on_resize(self, event: Resize) -> None:
        self._rewidth()

    def _rewidth(self) -> None:
        width = self.scrollable_content_region.width
        if width and width != self.render_width:
            self.render_width = width
            self.invalidate()

    # -- drawing ------------------------------------------------------------------------------------
    def render_lines(self, crop: Region) -> list[Strip]:
        width = self.scrollable_content_region.width
        if width and self.render_width and width != self.render_width:
            # A scrollbar came or went without a resize: render again at the width there is.
            self.call_later(self._rewidth)
        # Looked up once per paint, not once per line: both cost more than drawing a cached line.
        self._paint = (self.rich_style, width)
        try:
            return super().render_lines(crop)
        finally:
            self._paint = None

    def render_line(self, y: int) -> Strip:
        style, width = self._paint or (self.rich_style, self.scrollable_content_region.width)
        line = round(self.scroll_y) + y
        if line < len(self._header):
            return self._header[line].crop_extend(0, width, style).apply_style(style)
        item = self.item_at(line)
        if item is None:
            return Strip.blank(width, style)
        n = self._index_at(line)
        if item.lines is None:  # scrolled faster than the items were rendered: drawn on the next tick
            self._schedule_visible(0.001)
            return Strip.blank(width, style)
        lines = item.lines
        k = line - self.offsets[n]
        strip = lines[k] if 0 <= k < len(lines) else Strip([Segment("")])
        return strip.crop_extend(0, width, style).apply_style(style)

    def _index_at(self, line: int) -> int:
        return bisect_right(self.offsets, line) - 1

    def item_at(self, line: int) -> Item | None:
        if line < len(self._header) or line >= self.total_lines or not self.offsets:
            return None
        n = self._index_at(line)
        return self.items[n] if 0 <= n < len(self.items) else None

    def plain_lines(self) -> list[str]:
        """Every line of the view as text, rendering what was not yet (for tests and debugging)."""
        out = [s.text for s in self._header]
        for item in self.items:
            lines = item.lines
            if lines is None and self.render_width:
                lines = self.render_item(item, self.render_width)
            out.extend(s.text for s in lines or ())
        return out
