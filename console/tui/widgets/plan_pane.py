"""main_plan.md, rendered as Markdown and reloaded whenever it changes on disk.

Changes are seen by a watchfiles watcher (an async worker) on the job folder, so
a hand edit in another terminal shows as fast as the agent's own writes. With
watching off (tests, snapshots) the pane reloads on ``plan_changed`` events.
The Markdown is drawn by one widget (Rich's renderer), however long the plan.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from rich.markdown import Markdown as RichMarkdown
from textual import work

from console.tui.messages import PlanFileChanged
from console.tui.widgets.lines import Item, ItemView

PLACEHOLDER = "*main_plan.md has not been written yet: the agent writes it during bootstrap.*"


@dataclass(eq=False)
class MarkdownItem(Item):
    text: str = ""

    def body(self) -> object:
        return RichMarkdown(self.text)


class PlanPane(ItemView):
    def __init__(self, path: Path, **kw: object) -> None:
        super().__init__(**kw)
        self.path = path
        self.border_title = "main_plan.md"
        self.text: str | None = None
        self.reloads = 0
        self._stop = asyncio.Event()

    def on_mount(self) -> None:
        super().on_mount()
        self.items = [MarkdownItem(text=PLACEHOLDER)]
        self.relayout(0)

    def read(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return PLACEHOLDER
        except (OSError, UnicodeDecodeError) as exc:
            return f"*main_plan.md cannot be read: {exc}*"

    async def reload(self) -> None:
        text = await asyncio.to_thread(self.read)
        self.show(text)

    def show(self, text: str) -> None:
        if text == self.text:
            return
        self.text = text
        self.reloads += 1
        self.items = [MarkdownItem(text=text)]
        self.relayout(0)
        done = text.count("✓ COMPLETE")
        phases = sum(1 for line in text.splitlines() if line.startswith("## Phase"))
        self.border_subtitle = f"{done}/{phases} phases complete" if phases else ""

    def on_plan_file_changed(self, message: PlanFileChanged) -> None:
        message.stop()
        self.run_worker(self.reload(), group="plan-reload", exclusive=True)

    @work(group="plan-watch", exclusive=True)
    async def watch(self) -> None:
        """Follow main_plan.md with watchfiles (the folder, not the file: the agent replaces it atomically)."""
        from watchfiles import awatch

        folder, name = self.path.parent, self.path.name

        def only_plan(_change: object, path: str) -> bool:
            return Path(path).name == name

        try:
            async for _changes in awatch(folder, watch_filter=only_plan, recursive=False, debounce=150, step=50,
                                         stop_event=self._stop):
                self.post_message(PlanFileChanged())
        except (OSError, RuntimeError) as exc:
            self.notify(f"Not watching main_plan.md: {exc}", severity="warning")

    def on_unmount(self) -> None:
        self._stop.set()
