"""Rewind: ask the operator what is wrong; the agent re-plans the phase around it."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Input, Static

from console.engine.text import safe_text
from console.tui.screens.dialog import Dialog

EXPLAIN = ("The current todo list is archived with your issue as its failure note; the agent reads the plan, "
           "the instructions and the workspace summary again and writes a revised todo list.")


class RewindScreen(Dialog[str | None]):
    """Asks for the issue. The rewind is for the phase shown here (``number``): the console sends it with the
    command and the engine refuses the rewind if that phase has ended by the time it lands.

    Letters typed into the field are text, whatever key they are elsewhere (d, a, s, q...)."""

    ANSWERS = frozenset({"cancel"})
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="rewind_cancel")]

    def __init__(self, phase: str = "", *, number: int | None = None, blink: bool = True, text: str = "",
                 **kw: Any) -> None:
        """``text``: the field's text to start with (a rewind the engine refused: the operator's words kept)."""
        super().__init__(**kw)
        self.text = text
        self.phase = phase
        self.number = number
        self.blink = blink

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as box:
            # The phase's name is the agent's: text (a Content), never markup; safe for the terminal.
            phase = safe_text(self.phase, one_line=True)
            box.border_title = Content("Rewind the current phase" + (f" · {phase}" if phase else ""))
            yield Static(EXPLAIN, id="message", markup=False)
            # Words kept from a refused rewind are added to, not typed over.
            yield Input(safe_text(self.text, one_line=True), placeholder="What is wrong? e.g. the digest misses "
                        "the risks section", id="issue", select_on_focus=False)
            yield Static("", id="hint")
            with Horizontal(classes="buttons"):
                yield Button("Rewind (enter)", id="ok", variant="warning", compact=True)
                yield Button("Cancel (esc)", id="cancel", compact=True)

    def on_mount(self) -> None:
        field = self.query_one(Input)
        field.cursor_blink = self.blink
        field.focus()

    def _submit(self) -> None:
        if not self.armed:  # Enter in the dialog's first moment: kept as typed, not sent
            return
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
        elif self.armed:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
