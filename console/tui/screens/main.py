"""The main screen: the panes, the layout for the terminal's size, and pane navigation.

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
from textual.binding import Binding
from textual.containers import Grid
from textual.dom import DOMNode
from textual.events import DescendantFocus, Resize
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer

from console.tui.keymap import OPERATOR_KEYS
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


class MainScreen(Screen):
    AUTO_FOCUS = "#conversation"
    BINDINGS = [Binding(k.key, k.action, k.label, show=k.show, id=k.id, tooltip=k.help, key_display=k.key_display)
                for k in OPERATOR_KEYS]

    def __init__(self, state: ConsoleState, now: Callable[[], datetime], *, plan_path: Path, attached: bool = False,
                 max_items: int, on_ready: Callable[[], None] | None = None, run_id: str = "") -> None:
        """Everything the panes need is handed in: the screen never reaches back into the app (one-way imports)."""
        super().__init__(id="main")
        self.state = state
        self.now = now
        self.plan_path = plan_path
        self.attached = attached
        self.run_id = run_id
        self.max_items = max_items
        self.on_ready = on_ready
        self.layout_mode = ""
        self.active = "conversation"

    def compose(self) -> ComposeResult:
        yield StatusLine(self.state, self.now, attached=self.attached, run_id=self.run_id, id="status")
        yield ContextGauge(self.state, compact=True, id="gauge-strip")
        yield PaneTabs(PANES, id="tabs")
        with Grid(id="body"):
            # Order matters: the grid fills row by row (see app.tcss for the spans).
            yield TodoPane(id="todos", classes="pane")
            yield ConversationPane(id="conversation", classes="pane", max_items=self.max_items)
            yield ContextGauge(self.state, id="gauge", classes="pane")
            yield FeedbackPane(id="feedback", classes="pane")
            yield PlanPane(self.plan_path, id="plan", classes="pane")
            yield ExperiencesPane(id="experiences", classes="pane")  # in the plan's place while active (app.tcss)
        yield KeyFooter(compact=True)  # Textual's Footer, its keys changed in place (see the module)

    def on_mount(self) -> None:
        self.query_one("#conversation").border_title = "Conversation"
        self._apply_layout(self.size.width, self.size.height)
        self.pane("conversation").focus()
        if self.on_ready is not None:
            self.on_ready()

    def on_resize(self, event: Resize) -> None:
        self._apply_layout(event.size.width, event.size.height)

    def _apply_layout(self, width: int, height: int) -> None:
        mode = layout_for(width, height)
        if mode == self.layout_mode:
            return
        self.layout_mode = mode
        for name in ("narrow", "medium", "wide"):
            self.set_class(name == mode, f"-{name}")
        # 80 columns hold every operator key, not also the palette's (ctrl+p still opens it; help lists it).
        self.query_one(Footer).show_command_palette = mode != "narrow"
        self._show_active()

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

    def show_pane(self, name: str) -> None:
        self.active = name
        self._show_active()
        if self.maximized is not None:
            self.minimize()
        self.pane(name).focus()

    def action_next_pane(self) -> None:
        self.show_pane(PANES[(PANES.index(self.active) + 1) % len(PANES)])

    def action_previous_pane(self) -> None:
        self.show_pane(PANES[(PANES.index(self.active) - 1) % len(PANES)])

    def action_toggle_maximize(self) -> None:
        if self.maximized is not None:
            self.minimize()
        else:
            self.maximize(self.pane(self.active), container=False)

    def on_descendant_focus(self, event: DescendantFocus) -> None:
        name = self.pane_of(event.widget)
        if name is not None and name != self.active:
            self.active = name
            self._show_active()

    def on_pane_tabs_selected(self, message: PaneTabs.Selected) -> None:
        self.show_pane(message.pane)
