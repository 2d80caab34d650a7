"""A yes/no question (stop the run? quit and stop it?)."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Static

from console.engine.text import safe_text
from console.tui.screens.dialog import Dialog


class ConfirmScreen(Dialog[bool]):
    LEAVES = True  # asked as the quit question ("Quit and stop the run?"), a second Ctrl+C says yes
    ANSWERS = frozenset({"answer"})
    # Textual focuses it once the screen is active (a query in on_mount can run after a quick dismissal).
    AUTO_FOCUS = "#no"
    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm_yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm_no"),
    ]

    def __init__(self, title: str, message: str, yes: str = "Yes", no: str = "No", **kw: Any) -> None:
        super().__init__(**kw)
        self.title_text = title
        self.message = message
        self.yes = yes
        self.no = no

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as box:
            # Text, never markup, and safe for the terminal: the message names the run's folder.
            box.border_title = Content(safe_text(self.title_text, one_line=True))
            yield Static(Content(safe_text(self.message)), id="message")
            with Horizontal(classes="buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="error", compact=True)
                yield Button(f"{self.no} (n)", id="no", compact=True)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if not self.armed:
            return
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
