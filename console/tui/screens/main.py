"""A run's panes: the layout for the terminal's size, and which pane is active (:class:`RunPanes`, the widget
:class:`console.tui.screens.run.RunScreen` composes).

Three layouts, picked from the terminal size:

- narrow (under 100 columns or 28 rows, e.g. 80x24): one pane at a time with a tab
  strip, and a two-line context gauge that is always visible;
- medium (under 160 columns, e.g. 120x40): two columns;
- wide (e.g. 200x50): three columns.

The panes are the same widgets in every layout (a grid with spans), so switching
layouts never loses a pane's state.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.dom import DOMNode
from textual.events import DescendantFocus
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Footer

from console.tui.widgets.conversation import ConversationPane
from console.tui.widgets.experiences_pane import ExperiencesPane
from console.tui.widgets.feedback import FeedbackPane
from console.tui.widgets.footer import KeyFooter
from console.tui.widgets.gauge import ContextGauge
from console.tui.widgets.plan_pane import PlanPane
from console.tui.widgets.status import StatusLine
from console.tui.widgets.tabs import PaneTabs
from console.tui.widgets.todo_pane import TodoPane
from console.view.state import ConsoleState

# In screen order (the grid fills row by row in this order, see app.tcss): tab and the narrow tab strip follow it.
PANES = ["todos", "conversation", "gauge", "feedback", "plan", "experiences"]
NARROW_WIDTH, NARROW_HEIGHT, WIDE_WIDTH = 100, 28, 160


def layout_for(width: int, height: int) -> str:
    if width < NARROW_WIDTH or height < NARROW_HEIGHT:
        return "narrow"
    return "medium" if width < WIDE_WIDTH else "wide"


class RunPanes(Vertical):
    """The status line, the panes and the footer of one run, laid out for the screen's size (the screen says it:
    :meth:`fit`); the layout and the active pane are classes of this widget (see app.tcss)."""

    def __init__(self, state: ConsoleState, now: Callable[[], datetime], *, plan_path: Path, attached: bool = False,
                 max_items: int, run_id: str = "") -> None:
        """Everything the panes need is handed in: they never reach back into the screen or the app."""
        super().__init__(id="panes")
        self.state = state
        self.now = now
        self.plan_path = plan_path
        self.attached = attached
        self.run_id = run_id
        self.max_items = max_items
        self.layout_mode = ""
        self.active = "conversation"

    def compose(self) -> ComposeResult:
        # The layout for the app's size and the active pane are classes given before the panes are mounted: given
        # on the screen's mount (fit), they restyled every pane once more (~6 ms of CPU before an attach's first
        # frame). fit changes them when the screen's size, on its mount or a resize, calls for another layout.
        self.layout_mode = layout_for(self.app.size.width, self.app.size.height)
        self.add_class(f"-{self.layout_mode}")  # no pane yet: this node alone is restyled
        yield StatusLine(self.state, self.now, attached=self.attached, run_id=self.run_id, id="status")
        yield ContextGauge(self.state, compact=True, id="gauge-strip")
        tabs = PaneTabs(PANES, id="tabs")
        tabs.active = self.active
        yield tabs
        with Grid(id="body"):
            # Order matters: the grid fills row by row (see app.tcss for the spans).
            yield TodoPane(id="todos", classes=self._pane_classes("todos"))
            yield ConversationPane(id="conversation", classes=self._pane_classes("conversation"),
                                   max_items=self.max_items)
            yield ContextGauge(self.state, id="gauge", classes=self._pane_classes("gauge"))
            yield FeedbackPane(id="feedback", classes=self._pane_classes("feedback"))
            yield PlanPane(self.plan_path, id="plan", classes=self._pane_classes("plan"))
            # In the plan's place while active (app.tcss).
            yield ExperiencesPane(id="experiences", classes=self._pane_classes("experiences"))
        # Textual's Footer, its keys changed in place (see the module); 80 columns hold every operator key, not
        # also the palette's (see fit).
        yield KeyFooter(compact=True, show_command_palette=self.layout_mode != "narrow")

    def _pane_classes(self, pane: str) -> str:
        return "pane -active" if pane == self.active else "pane"

    def ready(self, size: Size) -> None:
        """The screen is mounted (its size known): title the conversation, lay the panes out."""
        self.query_one("#conversation").border_title = "Conversation"
        self.fit(size)

    def fit(self, size: Size) -> None:
        """Lay the panes out for the screen's size (called on its mount and on every resize)."""
        mode = layout_for(size.width, size.height)
        if mode == self.layout_mode:
            return
        self.layout_mode = mode
        for name in ("narrow", "medium", "wide"):
            self.set_class(name == mode, f"-{name}")
        # 80 columns hold every operator key, not also the palette's (ctrl+p still opens it; help lists it).
        self.query_one(Footer).show_command_palette = mode != "narrow"
        self._show_active()

    def crowd(self, crowded: bool) -> None:
        """Two more keys in the footer (approve, deny): at 80 columns two others make room (app.tcss)."""
        self.set_class(crowded, "-crowded")

    # -- panes -------------------------------------------------------------------------------
    def pane(self, name: str) -> Widget:
        return self.query_one(f"#{name}")

    def pane_of(self, widget: Widget | None) -> str | None:
        node: DOMNode | None = widget
        while node is not None and node is not self:
            if node.id in PANES and node.has_class("pane"):
                return node.id
            node = node.parent
        return None

    def _show_active(self) -> None:
        for name in PANES:
            self.pane(name).set_class(name == self.active, "-active")
        self.query_one(PaneTabs).set_active(self.active)
        self.set_class(self.active == "experiences", "-experiences")

    def show(self, name: str) -> Widget:
        """Make ``name`` the active pane; the pane (the screen focuses it, once it has restored a maximized one)."""
        self.active = name
        self._show_active()
        return self.pane(name)

    def step(self, by: int) -> str:
        """The pane ``by`` places after the active one (tab: 1, shift+tab: -1)."""
        return PANES[(PANES.index(self.active) + by) % len(PANES)]

    def on_descendant_focus(self, event: DescendantFocus) -> None:
        name = self.pane_of(event.widget)
        if name is not None and name != self.active:
            self.active = name
            self._show_active()
