"""The one-line pane switcher of the narrow layout (tab cycles it; a click picks a pane)."""

from __future__ import annotations

from typing import Any

from textual.content import Content
from textual.events import Click
from textual.message import Message
from textual.widget import Widget

PANE_LABELS = {
    "conversation": "Conversation",
    "todos": "Todos",
    "plan": "Plan",
    "gauge": "Context",
    "feedback": "Feedback",
    "experiences": "Experiences",
}


class PaneTabs(Widget):
    DEFAULT_CSS = "PaneTabs { height: 1; }"

    class Selected(Message):
        def __init__(self, pane: str) -> None:
            super().__init__()
            self.pane = pane

    def __init__(self, panes: list[str], **kw: Any) -> None:
        super().__init__(**kw)
        self.panes = panes
        self.active = panes[0]
        self.badges: dict[str, str] = {}
        self._spans: list[tuple[int, int, str]] = []

    def set_active(self, pane: str) -> None:
        self.active = pane
        self.refresh()

    def set_badge(self, pane: str, badge: str) -> None:
        if self.badges.get(pane, "") != badge:
            self.badges[pane] = badge
            self.refresh()

    def render(self) -> Content:
        parts: list[str | tuple[str, str]] = []
        self._spans = []
        x = 0
        for pane in self.panes:
            label = f" {PANE_LABELS.get(pane, pane)}{self.badges.get(pane, '')} "
            style = "bold reverse $text-primary" if pane == self.active else "$text-muted"
            parts.append((label, style))
            self._spans.append((x, x + len(label), pane))
            x += len(label)
            parts.append(" ")
            x += 1
        return Content.assemble(*parts)

    def on_click(self, event: Click) -> None:
        for start, end, pane in self._spans:
            if start <= event.x < end:
                self.post_message(self.Selected(pane))
                return
