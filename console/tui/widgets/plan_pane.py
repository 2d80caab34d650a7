"""main_plan.md, rendered by Textual's Markdown widget and reloaded whenever it changes on disk.

Changes are seen by a watchfiles watcher (an async worker) on the job folder, so a hand edit in another terminal
shows as fast as the agent's own writes. With watching off (tests, snapshots) the pane reloads on
``plan_changed`` events. The Markdown widget (with the conversation's parser: CommonMark, tables, no linkify)
styles headings, code and quotes with the theme's variables; the
plan's phase markers stand out in the theme's colours too (``✓ COMPLETE`` in its success colour, ``← CURRENT``
as a badge in its accent).

The agent writes main_plan.md, so the pane reads it as it would read any hostile file: through the engine's
:class:`~console.engine.sandbox.Sandbox` (:func:`read_plan`), on a worker thread, with a sandbox opened for that
read and closed after it. A FIFO, a device, a socket, a link out of the job folder or a hard-linked file is never
opened for reading (never waited on, never read from /dev/zero); a plan over ``PLAN_MAX_BYTES`` is not read at
all. Each shows a line saying why in the pane instead. What is shown is made safe for the terminal first
(:func:`console.engine.text.safe_text`: an escape sequence in the plan is shown, not run).

Textual's Markdown widget makes a widget or more of every block (four of a list item), and laying out a thousand
of them took 12 s and kept taking most of a second per key (a 4 KB plan of 1,000 one-word steps; 15,000 made the
console hang and grow to 8 GB). A plan of more than ``PLAN_MAX_BLOCKS`` blocks is drawn whole as one widget
instead, in the conversation's Markdown style (:mod:`console.tui.widgets.markdown_lite`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from markdown_it.token import Token
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownBlock

from console.tui import messages
from console.tui.messages import PlanFileChanged
from console.tui.widgets import markdown_lite
from console.tui.widgets.markdown_lite import make_parser
from console.view.plan_file import PLACEHOLDER, PLAN_MAX_BYTES, read_plan

__all__ = ["PLACEHOLDER", "PLAN_MAX_BYTES", "PlanPane", "mark", "read_plan", "too_many_blocks"]

# Blocks (list items, paragraphs, headings, table cells...) the Markdown widget is given at most: a real plan (20
# phases of 10 steps) has ~450; 1,000 took it seconds. More are drawn as one widget (see the module's docstring).
PLAN_MAX_BLOCKS = 600
COMPLETE_MARK = "✓ COMPLETE"
CURRENT_MARK = "← CURRENT"
MARKS = ((COMPLETE_MARK, "bold $text-success"), (CURRENT_MARK, "bold reverse $text-accent"))


def mark(content: Content) -> Content:
    """``content`` with the plan's phase markers styled (each wherever it occurs)."""
    plain = content.plain
    for text, style in MARKS:
        start = plain.find(text)
        while start >= 0:
            content = content.stylize(style, start, start + len(text))
            start = plain.find(text, start + len(text))
    return content


def too_many_blocks(text: str, most: int = PLAN_MAX_BLOCKS) -> bool:
    """Whether ``text`` makes more than ``most`` blocks (the parser is linear in its input: a 64 KB plan in ms)."""
    return _blocks(markdown_lite.parser().parse(text)) > most


def _blocks(tokens: list[Token]) -> int:
    return sum(1 for t in tokens if t.nesting == 1 or t.type in ("fence", "code_block", "hr", "html_block"))


def long_plan(text: str) -> Content | None:
    """``text`` drawn whole as one Content when it makes too many blocks for the Markdown widget, or nests so deep
    that the parser would drop some of it (:func:`markdown_lite.too_deep`: then it is drawn as it is), else None."""
    tokens = markdown_lite.parser().parse(text)
    if _blocks(tokens) > PLAN_MAX_BLOCKS or markdown_lite.too_deep(tokens):
        return mark(markdown_lite.render(text))
    return None


class PlanPane(VerticalScroll):
    """The plan as a scrolling Markdown document; ``text`` is what it shows (after the widget has it)."""

    ALLOW_MAXIMIZE = True
    DEFAULT_CSS = """
    PlanPane > Markdown {
        padding: 0;
        margin: 0;
        MarkdownH1 { margin: 0 0 1 0; content-align: left middle; }
        MarkdownH2 { margin: 1 0 0 0; }
        MarkdownH3, MarkdownH4, MarkdownH5, MarkdownH6 { margin: 1 0 0 0; }
        MarkdownBulletList, MarkdownOrderedList { margin: 0 0 1 0; }
    }
    """

    def __init__(self, path: Path, **kw: Any) -> None:
        super().__init__(**kw)
        self.path = path
        self.border_title = "main_plan.md"
        self.text: str | None = None
        # What to show instead of the file (a run of another machine: its main_plan.md is not on this one).
        self.source: Callable[[], str] | None = None
        self.reloads = 0
        self._stop = asyncio.Event()
        self.document = Markdown(PLACEHOLDER, id="plan-md", open_links=False, parser_factory=make_parser)
        self.long = Static(id="plan-long")  # a plan of too many blocks for the Markdown widget, drawn whole
        self.long.display = False
        self.long_content = Content("")

    def compose(self) -> ComposeResult:
        yield self.document
        yield self.long

    def read(self) -> str:
        """What the pane shows now (blocking: call it on a thread, as :meth:`reload` does)."""
        return self.source() if self.source is not None else read_plan(self.path)

    @work(group="plan-reload", exclusive=True)
    async def reload_soon(self) -> None:
        """:meth:`reload` on a worker; a newer one cancels it. The worker is handed the method, not a coroutine
        made before it starts: a reload cancelled before it started left its coroutine never awaited (a
        RuntimeWarning at the app's end)."""
        await self.reload()

    async def reload(self) -> None:
        # On a thread: a read never waits on the file (the sandbox sees to that), but a slow disk must not stall keys.
        text = await asyncio.to_thread(self.read)
        await self.show(text)

    async def show(self, text: str) -> None:
        """Show ``text`` (Markdown); ``text`` is set once the document holds it."""
        if text == self.text or not self.document.is_attached:
            return  # unchanged, or the app is closing
        long = await asyncio.to_thread(long_plan, text)  # parsed off the loop: keys go on meanwhile
        if not self.document.is_attached:
            return
        if long is not None:
            self.long_content = long
            self.long.update(long)
            self.long.display, self.document.display = True, False
            await asyncio.shield(self.document.update(""))  # its blocks of the last plan are not kept
            self._shown(text)
            return
        self.long.display, self.document.display = False, True
        # Shielded: a newer reload (an exclusive worker) cancels this one, and a Markdown.update() cancelled between
        # removing its blocks and mounting the new ones left a block that never handled a message again: the app's
        # exit then waited on it for ever (tests under load). The newer reload waits for this one on the document's
        # lock instead.
        await asyncio.shield(self.document.update(text))
        if not self.document.is_attached:
            return
        self._mark_phases()
        self._shown(text)

    def _shown(self, text: str) -> None:
        self.text = text
        self.reloads += 1
        done = text.count(COMPLETE_MARK)
        phases = sum(1 for line in text.splitlines() if line.startswith("## Phase"))
        self.border_subtitle = f"{done}/{phases} phases complete" if phases else ""

    def _mark_phases(self) -> None:
        for block in self.document.query(MarkdownBlock):
            content = block.content
            if isinstance(content, Content) and (COMPLETE_MARK in content.plain or CURRENT_MARK in content.plain):
                block.update(mark(content))

    def plain_lines(self) -> list[str]:
        """The document's text, block by block (for tests and debugging)."""
        if self.long.display:
            return [line for line in self.long_content.plain.splitlines() if line]
        out: list[str] = []
        for block in self.document.query(MarkdownBlock):
            content = block.content
            if isinstance(content, Content) and content.plain:
                out.extend(content.plain.splitlines())
        return out

    def on_plan_file_changed(self, message: PlanFileChanged) -> None:
        message.stop()
        self.reload_soon()

    @work(group="plan-watch", exclusive=True)
    async def follow_plan(self) -> None:
        """Follow main_plan.md with watchfiles (the folder, not the file: the agent replaces it atomically)."""
        from watchfiles import awatch

        folder, name = self.path.parent, self.path.name

        def only_plan(_change: object, path: str) -> bool:
            return Path(path).name == name

        caught_up = False
        try:
            # yield_on_timeout: an empty set comes after the first quiet spell, when the watcher is certainly up; the
            # file is read once more then, for a change made between the pane's first read and the watcher's start
            # (the run's screen starts it after its first frames: console.tui.messages.WATCH_AFTER).
            async for changes in awatch(folder, watch_filter=only_plan, recursive=False, debounce=150, step=50,
                                        stop_event=self._stop, yield_on_timeout=True,
                                        rust_timeout=messages.WATCH_QUIET_MS):
                if changes or not caught_up:
                    caught_up = True
                    self.post_message(PlanFileChanged())
        except (OSError, RuntimeError) as exc:
            self.notify(f"Not watching main_plan.md: {exc}", severity="warning")

    def on_unmount(self) -> None:
        self._stop.set()
