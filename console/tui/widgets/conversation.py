"""The conversation pane: assistant text as Markdown, tool calls, and the harness's markers.

Built for long runs. It is one scrolling widget that draws lines (Textual's line
API), not a widget per message: each message is rendered once into lines (again
only when it changes, the width changes or the theme changes), and only the
lines on screen are drawn. Appending costs the new message, not the whole view.

- the view keeps the newest ``max_items`` messages (the log keeps everything);
- a streaming message re-renders its Markdown at most ``STREAM_FPS`` times a second;
- it follows the tail (Textual's anchor) until the operator scrolls up, and again
  from the bottom (``end``);
- tool calls are one line; click one (or ``e`` for the newest, ``E`` for all) to
  expand its arguments and result;
- masked observations, compactions and restart markers are marked in place;
- the model's reasoning ("thinking") is its own dimmed item, never mixed into the answer;
- a model call that fails and is retried drops what it streamed (the agent never sees it either): the
  view shows a mark line for the wait, then the retried reply, never a half reply followed by a whole one.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

from rich.markdown import Markdown as RichMarkdown
from textual.binding import Binding
from textual.content import Content
from textual.events import Click
from textual.timer import Timer

from console import present
from console.engine import events as ev
from console.tui.format import brief_args, clip, pretty_args, tokens
from console.tui.state import stuck_told
from console.tui.widgets import markdown_lite
from console.tui.widgets.lines import Item, ItemView

MAX_ITEMS = 2000  # messages kept in the view
TRIM_SLACK = 200  # trim in batches: recomputing offsets on every event would be wasteful
STREAM_FPS = 8
RESULT_PREVIEW = 4000
ARGS_PREVIEW = 1500
MASKABLE_CHARS = 240  # the engine does not mask results under ~60 tokens
KEEP_RECENT_RESULTS = 2  # nor the newest two
THINKING_PREVIEW = 1200  # the most of a turn's reasoning shown (its tail while it streams, its start after)

NOTICE_STYLE = {
    "info": "$text-muted",
    "masked": "$text-warning",
    "wind-down": "bold $text-warning",
    "restart": "bold $text-warning",
    "compacted": "$text-secondary",
    "session": "bold $text-primary",
    "phase": "bold $text-accent",
    "error": "$text-error",
    "success": "bold $text-success",
    "operator": "$text-secondary",
    "refused": "bold $text-warning",
    "bypassed": "$text-warning",
    "budget": "bold $text-warning",
    "retry": "$text-warning",
    "feedback-info": "$text-primary",
    "feedback-caution": "$text-warning",
    "feedback-warning": "bold $text-warning",
    "feedback-error": "bold $text-error",
}


# -- items: what the view knows about each message ---------------------------------------------------
@dataclass(eq=False)
class AssistantItem(Item):
    session: int = 0
    turn: int = 0
    text: str = ""
    final: bool = False

    def __post_init__(self) -> None:
        self.gutter, self.margin = "▌ ", True

    def body(self) -> object:
        self.gutter_style = "$primary" if self.final else "$accent"
        text = self.text.strip() or "…"
        if markdown_lite.is_simple(text):
            return markdown_lite.inline(_join_paragraph_lines(text))
        return RichMarkdown(text)

    def estimate(self, width: int) -> int:
        return _text_lines(self.text, width)


@dataclass(eq=False)
class ThinkingItem(Item):
    """The model's reasoning for a turn (reasoning_content, thinking): dimmed and italic, apart from the answer."""

    session: int = 0
    turn: int = 0
    text: str = ""
    final: bool = False

    def __post_init__(self) -> None:
        self.gutter, self.margin = "┊ ", True
        self.gutter_style = "$text-muted"

    def shown(self) -> str:
        text = self.text.strip()
        if len(text) <= THINKING_PREVIEW:
            return text
        more = len(text) - THINKING_PREVIEW
        if not self.final:  # what it is thinking now
            return f"… {text[-THINKING_PREVIEW:]}"
        return f"{text[:THINKING_PREVIEW]} … ({more:,} more chars in .console/events.jsonl)"

    def body(self) -> object:
        return Content.assemble(("thinking ", "bold"), self.shown() or "…").stylize("italic $text-muted")

    def estimate(self, width: int) -> int:
        return _text_lines("thinking " + self.shown(), width)


@dataclass(eq=False)
class ToolItem(Item):
    call_id: str = ""
    tool: str = ""
    arguments: str = ""
    result: str | None = None
    ok: bool = True
    denied: str = ""  # "<policy>: <reason>"
    policy_error: str = ""
    refused: str = ""  # a job_complete the completion checker refused ("1/5")
    masked: bool = False
    expanded: bool = False
    epoch: int = 0  # compaction epoch: masking only touches results of the current one

    def __post_init__(self) -> None:
        self.gutter = "   "

    def body(self) -> object:
        return render_tool(self)

    def estimate(self, width: int) -> int:
        if self.denied and not self.expanded:
            return _text_lines(render_tool(self).plain, width)
        if not self.expanded:
            return 1 if width >= 110 else _text_lines(self.tool + brief_args(self.arguments, 48) + "  ✓ 12,345 chars",
                                                       width)
        return _text_lines(render_tool(self).plain, width)


@dataclass(eq=False)
class NoticeItem(Item):
    icon: str = ""
    text: str = ""
    kind: str = "info"

    def __post_init__(self) -> None:
        self.margin = True
        self.rules = "$warning" if self.kind == "restart" else ""

    def body(self) -> object:
        content = Content.assemble((f"{self.icon} ", "bold"), self.text)
        return content.stylize(NOTICE_STYLE.get(self.kind, ""))

    def estimate(self, width: int) -> int:
        return _text_lines(f"{self.icon} {self.text}", width)


def _join_paragraph_lines(text: str) -> str:
    """Markdown's soft line breaks: lines of one paragraph join with a space; blank lines stay."""
    paragraphs = re.split(r"\n\s*\n", text)
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def _text_lines(text: str, width: int) -> int:
    width = max(1, width)
    return sum(max(1, -(-len(line) // width)) for line in (text or " ").split("\n"))


def render_tool(it: ToolItem) -> Content:
    arrow = "▾" if it.expanded else "▸"
    args = brief_args(it.arguments, 48)
    parts: list[str | tuple[str, str]] = [(f"{arrow} ", "$text-muted"), (it.tool, "bold $text-secondary")]
    if args:
        parts += ["  ", (args, "$text-muted")]
    if it.denied:
        policy, _, reason = it.denied.partition(": ")
        parts += ["  ", (f"⊗ denied by {policy}:", "bold $text-warning"), " ",
                  (clip(reason, 100 if not it.expanded else 400), "$text-warning")]
    elif it.refused:
        count = f" ({it.refused})" if "/" in it.refused else ""
        parts += ["  ", (f"↩ refused{count}: the job is not complete", "bold $text-warning")]
    elif it.result is None:
        parts += ["  ", ("…", "$text-muted")]
    elif it.ok:
        parts += ["  ", (f"✓ {len(it.result):,} chars", "$text-success")]
    else:
        first = it.result.strip().splitlines()[0] if it.result.strip() else "failed"
        parts += ["  ", (f"✗ {clip(first, 70)}", "$text-error")]
    if it.masked:
        parts += ["  ", ("⊘ masked", "bold $text-warning")]
    head = Content.assemble(*parts)
    if it.masked:
        head = head.stylize("italic")
    if not it.expanded:
        return head
    body: list[Content] = [head]
    args_text = pretty_args(it.arguments)
    if len(args_text) > ARGS_PREVIEW:
        args_text = args_text[:ARGS_PREVIEW] + f"\n… ({len(args_text) - ARGS_PREVIEW:,} more chars)"
    body.append(Content.assemble(("arguments ", "bold $text-muted"), args_text))
    if it.denied:
        body.append(Content.assemble(("not run: ", "bold $text-muted"), f"the {it.denied.partition(': ')[0]} policy "
                                     "refused it; the agent got the reason as the call's error result"))
        if it.policy_error:
            body.append(Content.assemble(("the policy failed ", "bold $text-muted"), it.policy_error))
    if it.result is not None:
        result = it.result
        if len(result) > RESULT_PREVIEW:
            result = result[:RESULT_PREVIEW] + (f"\n… ({len(it.result) - RESULT_PREVIEW:,} more chars; the whole "
                                                "result is in .console/events.jsonl)")
        label = "result (masked: the agent now sees a placeholder) " if it.masked else "result "
        body.append(Content.assemble((label, "bold $text-muted"), result))
    return Content("\n").join(body)


# -- the view ------------------------------------------------------------------------------------------------
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
        self.epoch = 0
        self.last_feedback: ev.Feedback | None = None
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

    # -- folding events into items --------------------------------------------------------------
    def _notice(self, icon: str, text: str, kind: str, new: list[Item]) -> None:
        new.append(NoticeItem(icon=icon, text=text, kind=kind))

    def ingest(self, events: Iterable[ev.EventBase]) -> None:
        new: list[Item] = []
        dirty: list[Item] = []
        stream_dirty = False
        for e in events:
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
                dropped = self._discard_stream(e.turn, new)
                gone = (f" The partial reply ({e.discarded_chars:,} chars) was discarded." if e.discarded_chars
                        else " The partial reply was discarded." if dropped else "")
                self._notice("⧗", f"Model call failed: {present.retry_text(e, message=200)}.{gone}", "retry", new)
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
                item = ToolItem(call_id=e.call_id, tool=e.tool, arguments=e.arguments, epoch=self.epoch)
                self.by_call[e.call_id] = item
                new.append(item)
            elif isinstance(e, ev.ToolResult):
                item = self.by_call.get(e.call_id)
                if item is None:  # its call was trimmed from the view, or the log starts mid-turn
                    item = ToolItem(call_id=e.call_id, tool=e.tool, epoch=self.epoch)
                    self.by_call[e.call_id] = item
                    new.append(item)
                item.result, item.ok = e.content, e.ok
                dirty.append(item)
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
        if isinstance(e, ev.ToolDenied):
            # The call's own line says it: "⊗ denied by <policy>: <reason>", not an ordinary error.
            item = self.by_call.get(e.call_id)
            if item is None:
                item = ToolItem(call_id=e.call_id, tool=e.tool, epoch=self.epoch)
                self.by_call[e.call_id] = item
                new.append(item)
            else:
                dirty.append(item)
            item.denied = f"{e.policy}: {clip(e.reason, 2000)}"
            item.policy_error = e.error or ""
        elif isinstance(e, ev.ContextMasked):
            dirty.extend(self._mark_masked(e.masked, new))
            limit = e.prompt_budget or e.context_window
            pct = f" ({e.used_before / limit:.0%} → {e.used_after / limit:.0%} of the budget)" if limit else ""
            self._notice("⊘", f"Context: masked the {e.masked} oldest tool result{'s' if e.masked != 1 else ''}, "
                              f"~{tokens(e.tokens_freed)} tokens freed{pct}. The agent now sees placeholders.",
                         "masked", new)
        elif isinstance(e, ev.WindDown):
            self._notice("⚠", f"Wind-down: context {e.usage_pct:.0%} full. The agent was asked to save its state; "
                              "the session restarts after its next turn.", "wind-down", new)
        elif isinstance(e, ev.ContextCompacted):
            self.epoch += 1
            carried = f" + {e.messages_after - 1} carried" if e.messages_after > 1 else ""
            self._notice("≡", f"Context compacted: {e.messages_before} messages → summary{carried}. Why: "
                              f"{e.reason or 'compaction'}. What is above is no longer in the agent's context.",
                         "compacted", new)
        elif isinstance(e, ev.SessionStarted):
            self.streaming = self.thinking = None
            if e.reason == "restart":
                self._notice("↻", f"RESTART · session {e.session} · the previous context was full · "
                                  f"{e.carryover_messages} messages carried over", "restart", new)
            else:
                how = "resumed" if e.reason == "resume" else "started"
                where = f" · {e.detail}" if e.detail else ""
                self._notice("●", f"Session {e.session} {how} · {e.provider}/{e.model}{where}", "session", new)
        elif isinstance(e, ev.RestartPending):
            self._notice("⏸", f"Restart pending: context {e.usage_pct:.0%} full. Session {e.next_session} would "
                              f"start with {e.carryover_messages} carried messages (~{tokens(e.carryover_tokens)} "
                              "tokens). a approves, d denies.", "restart", new)
        elif isinstance(e, ev.RestartApproved):
            self._notice("✓", f"Restart approved ({e.by}).", "wind-down", new)
        elif isinstance(e, ev.RestartDenied):
            self._notice("✗", f"Restart denied ({e.by}): the run ends here.", "error", new)
        elif isinstance(e, ev.PhaseTransition):
            if e.stage == "completed":
                to = f"Phase {e.to_phase}: {e.to_name}" if e.to_phase else f"{e.to_name}"
                self._notice("━━", f"{to}  ({e.kind} transition)", "phase", new)
            elif e.kind in ("rewind", "checkpoint"):
                what = "Rewind" if e.kind == "rewind" else "Checkpoint"
                self._notice("↺", f"{what} of phase {e.from_phase}" + (f": {e.issue}" if e.issue else ""), "phase",
                             new)
        elif isinstance(e, ev.CompletionBlocked):
            if e.stop_reason == "job_complete":  # the call's own line says it was refused, not that it failed
                call = next((i for i in reversed([*self.items[-50:], *new]) if isinstance(i, ToolItem)
                             and i.tool == "job_complete"), None)
                if call is not None and not call.refused:
                    call.refused = f"{e.blocks}/{e.max_blocks}" if e.max_blocks else "yes"
                    if call not in new:
                        dirty.append(call)
            who = f" by {e.checker}" if e.checker else ""
            count = f" · refused stop {e.blocks} of at most {e.max_blocks}" if e.max_blocks else ""
            what = "job_complete" if e.stop_reason == "job_complete" else "Stop"
            self._notice("↩", f"{what} refused{who}: {clip(e.feedback or e.reason, 300)}{count}. The agent was "
                              "told to continue.", "refused", new)
        elif isinstance(e, ev.CompletionBypassed):
            what = "job_complete" if e.stop_reason == "job_complete" else "The stop"
            budget = {"deadline": "the deadline passed", "cost": "the money budget is spent"}.get(
                e.budget, "the token budget is spent")
            self._notice("↷", f"{what} accepted without the completion check: {budget}.", "bypassed", new)
        elif isinstance(e, ev.BudgetExhausted):
            what = e.detail or {"deadline": "deadline passed", "cost": "money budget spent"}.get(
                e.budget, "token budget spent")
            self._notice("◷", f"{what[:1].upper()}{what[1:]}. The agent was told to wrap up.", "budget", new)
        elif isinstance(e, ev.StuckDetected):
            if not stuck_told(self.last_feedback, e):  # the stuck detector's feedback line said it
                self._notice("⚠", f"Stuck: {e.reason}" + (f" ({e.pattern})" if e.pattern else ""), "wind-down", new)
        elif isinstance(e, ev.Feedback):
            self.last_feedback = e
            kind = f"feedback-{e.severity}" if f"feedback-{e.severity}" in NOTICE_STYLE else "feedback-info"
            self._notice("◆", f"feedback from {e.source} ({e.severity}): {clip(e.message, 120)}", kind, new)
        elif isinstance(e, ev.OperatorCommand) and e.status == "discarded":
            self._notice("⌘", f"Operator ({e.source}): {present.discarded_text(e)}", "info", new)
        elif isinstance(e, ev.OperatorCommand):
            if e.status != "received":
                detail = f" — {e.detail}" if e.detail else ""
                kind = "operator" if e.status == "applied" else "error"
                self._notice("⌘", f"Operator ({e.source}): {e.command.replace('_', ' ')} {e.status}{detail}", kind,
                             new)
        elif isinstance(e, ev.ErrorEvent):
            self._notice("✗", f"Error ({e.where or 'engine'}): {e.message}", "error", new)
        elif isinstance(e, ev.JobCompleted):
            self._notice("✔", f"Job complete (confidence {e.confidence:.2f}): {e.summary}", "success", new)
        elif isinstance(e, ev.SessionEnded) and e.reason not in ("job_complete", "context_full"):
            self._notice("■", f"Session {e.session} ended: {e.reason}" + (f" ({e.detail})" if e.detail else ""),
                         "error", new)

    def _mark_masked(self, n: int, new: list[Item]) -> list[ToolItem]:
        """Which results the engine masked, as far as the view can tell.

        ``context_masked`` does not name the calls, so this mirrors the engine's rule: the oldest
        unmasked results since the last compaction, except the newest two and the very short ones.
        """
        tools = [i for i in (*self.items, *new) if isinstance(i, ToolItem) and i.epoch == self.epoch
                 and i.result is not None]
        eligible = tools[:-KEEP_RECENT_RESULTS] if len(tools) > KEEP_RECENT_RESULTS else []
        out: list[ToolItem] = []
        for item in eligible:
            if len(out) >= n:
                break
            if not item.masked and len(item.result or "") >= MASKABLE_CHARS:
                item.masked = True
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
            self._stream_timer = self.set_timer(wait, self._flush_stream)

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
