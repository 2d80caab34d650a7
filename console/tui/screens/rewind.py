"""Rewind: ask the operator what is wrong; the agent re-plans the phase around it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from console.engine.text import safe_text

EXPLAIN = ("The current todo list is archived with your issue as its failure note; the agent reads the plan, "
           "the instructions and the workspace summary again and writes a revised todo list.")


class RewindScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="rewind_cancel")]

    def __init__(self, phase: str = "", *, blink: bool = True) -> None:
        super().__init__(classes="modal")
        self.phase = phase
        self.blink = blink

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as box:
            # The phase's name is the agent's: text (a Content), never markup; safe for the terminal.
            phase = safe_text(self.phase, one_line=True)
            box.border_title = Content("Rewind the current phase" + (f" · {phase}" if phase else ""))
            yield Static(EXPLAIN, id="message", markup=False)
            yield Input(placeholder="What is wrong? e.g. the digest misses the risks section", id="issue")
            yield Static("", id="hint")
            with Horizontal(classes="buttons"):
                yield Button("Rewind (enter)", id="ok", variant="warning", compact=True)
                yield Button("Cancel (esc)", id="cancel", compact=True)

    def on_mount(self) -> None:
        field = self.query_one(Input)
        field.cursor_blink = self.blink
        field.focus()

    def _submit(self) -> None:
        issue = self.query_one(Input).value.strip()
        if not issue:
            self.query_one("#hint", Static).update("The agent needs the issue text to re-plan around it.")
            return
        self.dismiss(issue)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "ok":
            self._submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
