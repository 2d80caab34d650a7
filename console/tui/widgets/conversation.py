"""The conversation pane: assistant text as Markdown (markdown-it, in the theme's colours), tool calls, and the
harness's markers.

Built for long runs. It is one scrolling widget that draws lines (Textual's line
API), not a widget per message: each message is rendered once into lines (again
only when it changes, the width changes or the theme changes), and only the
lines on screen are drawn. Appending costs the new message, not the whole view.

- the view keeps the newest ``max_items`` messages (the log keeps everything);
- a streaming message re-renders its Markdown at most ``STREAM_FPS`` times a second;
- it follows the tail (Textual's anchor) until the operator scrolls up, and again
  from the bottom (``end``);
- tool calls are one line; click one (or ``e`` for the newest, ``E`` for all) to
  expand its arguments and result, shown as their text reads (a string argument with its line breaks, a
  hard-wrapped paragraph of a result joined again and wrapped to the pane: see
  :func:`console.tui.widgets.conversation_items.reflow`); the items and how each is drawn are in that module;
- masked observations (the calls ``context_masked`` names), compactions and restart markers are marked in place;
- every other event is a notice in the words of :mod:`console.view.present` (the headless log's and the feedback
  pane's too);
- the model's reasoning ("thinking") is its own dimmed item, never mixed into the answer;
- a model call that fails and is retried drops what it streamed (the agent never sees it either): the
  view shows a mark line for the wait, then the retried reply, never a half reply followed by a whole one;
- every event is taken in as :func:`console.view.present.safe_event` makes it (a reply keeps its lines, loses its
  escape sequences), and every item is drawn as Content, text that Textual never parses as markup.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from textual.binding import Binding
from textual.content import Content
from textual.events import Click
from textual.strip import Strip
from textual.timer import Timer

from console.engine import events as ev
from console.tui.pacing import one_shot
from console.tui.widgets.conversation_items import AssistantItem, NoticeItem, ThinkingItem, ToolItem
from console.tui.widgets.lines import Item, ItemView
from console.view import present
from console.view.format import clip
from console.view.story import Told

# Described elsewhere in the view (the call's own line) or not the conversation's business (the todo pane's).
NOT_NOTICES = frozenset({"tool", "tool-failed", "denied", "todos", "todo-done", "run-end", "plan", "received"})

MAX_ITEMS = 2000  # messages kept in the view
TRIM_SLACK = 200  # trim in batches: recomputing offsets on every event would be wasteful
STREAM_FPS = 8
class ConversationPane(ItemView):
    lazy = True

    """The conversation as the operator sees it (the agent's own context may be masked or compacted)."""

    BINDINGS = [
        Binding("e", "toggle_last_tool", "Expand tool", id="expand_tool", show=False),
        Binding("E", "toggle_all_tools", "Expand all", id="expand_all_tools", show=False),
        Binding("end", "follow", "Follow", show=False),
    ]

    def __init__(self, *, max_items: int = MAX_ITEMS, **kw: object) -> None:
        super().__init__(**kw)
        self.max_items = max_items
        self.trimmed = 0
        self.by_call: dict[str, ToolItem] = {}
        self.streaming: AssistantItem | None = None
        self.thinking: ThinkingItem | None = None
        self._changed_at: int | None = None  # the first index where items were dropped or inserted, until committed
        self.told = Told()  # which events another line already says (the one answer every view shares)
        self.messages_seen = 0
        self._stream_timer: Timer | None = None
        self._streamed_at = 0.0

    def on_mount(self) -> None:
        super().on_mount()
        self.anchor()

    def header(self) -> Content | None:
        if not self.trimmed:
            return None
        return Content.styled(f"⋯ {self.trimmed:,} earlier messages are not shown here; the whole history is in "
                              ".console/events.jsonl", "italic $text-muted")

    def add_not_shown(self, messages: int) -> None:
        """Count ``messages`` more earlier messages as not shown (a long log folded after its newest part was
        drawn): the header line says the new count."""
        if messages <= 0:
            return
        self.trimmed += messages
        self._header = []
        self.offsets = []
        if self.render_width:
            self.relayout(0)

    # -- folding events into items --------------------------------------------------------------
    def _notice(self, p: present.Presented | None, new: list[Item]) -> None:
        if p is not None:
            new.append(NoticeItem(icon=p.icon, text=p.line, kind=p.kind, severity=p.severity))

    def render_item(self, item: Item, width: int) -> list[Strip]:
        if isinstance(item, AssistantItem | ToolItem | NoticeItem):
            item.width = max(8, width - len(item.gutter))
        return super().render_item(item, width)

    def ingest(self, events: Iterable[ev.EventBase]) -> None:
        new: list[Item] = []
        dirty: list[Item] = []
        stream_dirty = False
        for e in map(present.safe_event, events):
            if isinstance(e, ev.TextDelta) and e.reasoning:
                t = self.thinking
                if t is None or t.turn != e.turn or t.final:
                    t = self.thinking = ThinkingItem(session=e.session, turn=e.turn)
                    new.append(t)
                t.text += e.text
                stream_dirty = True
            elif isinstance(e, ev.TextDelta):
                s = self.streaming
                if s is None or s.turn != e.turn or s.final:
                    s = self.streaming = AssistantItem(session=e.session, turn=e.turn)
                    new.append(s)
                s.text += e.text
                stream_dirty = True
            elif isinstance(e, ev.ModelRetry):
                self._discard_stream(e.turn, new)
                self._notice(present.describe(e), new)
            elif isinstance(e, ev.TurnStarted):
                self._discard_stream(e.turn, new)  # the turn is asked again (a pause dropped the reply in progress)
            elif isinstance(e, ev.AssistantMessage):
                self.messages_seen += 1
                t = self.thinking
                if t is not None and t.turn == e.turn and not t.final:
                    # What streamed, unless the log's copy says more (the log caps it; the stream does not).
                    t.text, t.final = (e.reasoning if len(e.reasoning) > len(t.text) else t.text), True
                    dirty.append(t)
                elif e.reasoning.strip():
                    self._insert_before(self.streaming, ThinkingItem(session=e.session, turn=e.turn,
                                                                     text=e.reasoning, final=True), e.turn, new)
                self.thinking = None
                s = self.streaming
                if s is not None and s.turn == e.turn and not s.final:
                    s.text, s.final = e.text, True
                    dirty.append(s)
                elif e.text.strip():
                    new.append(AssistantItem(session=e.session, turn=e.turn, text=e.text, final=True))
                self.streaming = None
            elif isinstance(e, ev.ToolCalled):
                self.messages_seen += 1
                item = ToolItem(call_id=e.call_id, tool=e.tool, arguments=e.arguments)
                self.by_call[e.call_id] = item
                new.append(item)
            elif isinstance(e, ev.ToolResult):
                called = self.by_call.get(e.call_id)
                if called is None:  # its call was trimmed from the view, or the log starts mid-turn
                    called = ToolItem(call_id=e.call_id, tool=e.tool)
                    self.by_call[e.call_id] = called
                    new.append(called)
                called.result, called.ok = e.content, e.ok
                dirty.append(called)
            else:
                self._ingest_marker(e, new, dirty)
        self._commit(new, dirty, stream_dirty)

    def _insert_before(self, answer: AssistantItem | None, item: Item, turn: int, new: list[Item]) -> None:
        """Put ``item`` (the turn's reasoning) above the turn's streamed answer, or last if there is none."""
        if answer is None or answer.turn != turn or answer.final:
            new.append(item)
            return
        for n, other in enumerate(new):
            if other is answer:
                new.insert(n, item)
                return
        at = self.index_of([answer])
        if at >= len(self.items):
            new.append(item)
            return
        self.items.insert(at, item)
        self._changed_at = at if self._changed_at is None else min(self._changed_at, at)  # offsets change from here

    def _discard_stream(self, turn: int, new: list[Item]) -> bool:
        """Drop the text and the reasoning streamed for ``turn`` that no assistant_message confirmed: the attempt
        failed (a retry follows) or was dropped (asked again). Returns whether anything was dropped."""
        gone: list[Item] = []
        if self.streaming is not None and self.streaming.turn == turn and not self.streaming.final:
            gone.append(self.streaming)
            self.streaming = None
        if self.thinking is not None and self.thinking.turn == turn and not self.thinking.final:
            gone.append(self.thinking)
            self.thinking = None
        for item in gone:
            if any(item is n for n in new):
                new[:] = [n for n in new if n is not item]
                continue
            at = self.index_of([item])
            if at < len(self.items):
                del self.items[at]
                self._changed_at = at if self._changed_at is None else min(self._changed_at, at)
        return bool(gone)

    def _ingest_marker(self, e: ev.EventBase, new: list[Item], dirty: list[Item]) -> None:
        """Every other event: a mark on a call's line, or a notice in console.view.present's words."""
        if self.told.said_elsewhere(e):
            return  # e.g. the stuck detector's feedback line said it
        if isinstance(e, ev.ToolDenied):
            # The call's own line says it: "⊗ denied by <policy>: <reason>", not an ordinary error.
            item = self.by_call.get(e.call_id)
            if item is None:
                item = ToolItem(call_id=e.call_id, tool=e.tool)
                self.by_call[e.call_id] = item
                new.append(item)
            else:
                dirty.append(item)
            item.denied = f"{e.policy}: {clip(e.reason, 2000)}"
            item.policy_error = e.error or ""
            return
        if isinstance(e, ev.ContextMasked):
            dirty.extend(self._mark_masked(e.call_ids, new))
        elif isinstance(e, ev.SessionStarted):
            self.streaming = self.thinking = None
        elif isinstance(e, ev.CompletionBlocked) and e.stop_reason == "job_complete":
            # The call's own line says it was refused, not that it failed.
            call = next((i for i in reversed([*self.items[-50:], *new]) if isinstance(i, ToolItem)
                         and i.tool == "job_complete"), None)
            if call is not None and not call.refused:
                call.refused = present.refusal_count(e) or "yes"
                if call not in new:
                    dirty.append(call)
        p = present.describe(e)
        if p is None or p.kind in NOT_NOTICES:
            return
        if p.kind == "session-end" and p.severity not in ("warning", "error"):
            return  # a completed job or a context restart says more than this
        self._notice(p, new)

    def _mark_masked(self, call_ids: list[str], new: list[Item]) -> list[ToolItem]:
        """The results the engine masked, as ``context_masked`` names them (by call id)."""
        out: list[ToolItem] = []
        for call_id in call_ids:
            item = self.by_call.get(call_id)
            if item is not None and not item.masked:
                item.masked = True
                if not any(item is n for n in new):
                    out.append(item)
        return out

    # -- items -> lines --------------------------------------------------------------------------
    def _commit(self, new: list[Item], dirty: list[Item], stream_dirty: bool) -> None:
        moved, self._changed_at = self._changed_at, None
        if not new and not dirty and not stream_dirty and moved is None:
            return
        first_changed = len(self.items) if moved is None else min(moved, len(self.items))
        self.items.extend(new)
        if len(self.items) > self.max_items + TRIM_SLACK:
            drop = len(self.items) - self.max_items
            for old in self.items[:drop]:
                if isinstance(old, ToolItem) and self.by_call.get(old.call_id) is old:
                    del self.by_call[old.call_id]
                if old is self.streaming:
                    self.streaming = None
                if old is self.thinking:
                    self.thinking = None
            removed_lines = self.offsets[drop] if drop < len(self.offsets) else self.total_lines
            del self.items[:drop]
            self.trimmed += drop
            self._header = []
            self.offsets = []
            first_changed = 0
            if not self.is_anchored or self._anchor_released:
                # Keep what the operator is reading in place.
                self.scroll_to(y=max(0, self.scroll_y - removed_lines), animate=False, immediate=True)
        for item in dirty:
            item.lines = None
        if not self.render_width:
            return  # not laid out yet: rendered at the first resize
        if dirty:
            first_changed = min(first_changed, self.index_of(dirty))
        if stream_dirty and (self.streaming is not None or self.thinking is not None):
            self._schedule_stream()
        self.relayout(first_changed)

    def _schedule_stream(self) -> None:
        wait = 1 / STREAM_FPS - (time.monotonic() - self._streamed_at)
        if wait <= 0:
            self._flush_stream()
        elif self._stream_timer is None:
            self._stream_timer = one_shot(self, wait, self._flush_stream)

    def _flush_stream(self) -> None:
        if self._stream_timer is not None:
            self._stream_timer.stop()
            self._stream_timer = None
        self._streamed_at = time.monotonic()
        live: list[Item] = [s for s in (self.thinking, self.streaming) if s is not None]
        if not live:
            return
        for s in live:
            s.lines = None
        self.relayout(self.index_of(live))

    # -- interaction ---------------------------------------------------------------------------------
    def on_click(self, event: Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        item = self.item_at(round(self.scroll_y) + offset.y)
        if isinstance(item, ToolItem):
            event.stop()
            self._toggle([item], not item.expanded)

    def _toggle(self, tools: list[ToolItem], expand: bool) -> None:
        for t in tools:
            t.expanded = expand
            t.lines = None
        if tools:
            self.relayout(self.index_of(list(tools)))

    def action_toggle_last_tool(self) -> None:
        last = next((i for i in reversed(self.items) if isinstance(i, ToolItem)), None)
        if last is not None:
            self._toggle([last], not last.expanded)

    def action_toggle_all_tools(self) -> None:
        tools = [i for i in self.items if isinstance(i, ToolItem)]
        self._toggle(tools, not any(t.expanded for t in tools))

    def action_follow(self) -> None:
        self.anchor()

    @property
    def item_count(self) -> int:
        return len(self.items)
