"""Answer: the question an MCP server asks the operator during a tool call (elicitation), one field each, or
declined, or cancelled (console.engine.tools.mcp_elicitation). The run checks the answer against the question's form
and says what it did not take; the dialog only gathers it."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Input, Static

from console.engine.questions import question_fields
from console.engine.text import safe_text
from console.tui.screens.dialog import Dialog

# (action, the fields' values as typed: empty ones left out) or None: closed without an answer.
Answered = tuple[str, dict[str, str]] | None


class AnswerScreen(Dialog[Answered]):
    """The server's message (its words: text, never markup), a field for each of its form's fields (their lines
    as the run told them), and the three answers. Letters typed into a field are text, whatever key they are
    elsewhere."""

    ANSWERS = frozenset({"close"})
    BINDINGS = [Binding("escape", "close", "Close", id="answer_close")]

    def __init__(self, message: str, evidence: list[str] | tuple[str, ...], *,
                 values: dict[str, str] | None = None, **kw: Any) -> None:
        """``values``: what the fields start with (a refused answer's, offered again)."""
        super().__init__(**kw)
        self.values = dict(values or {})
        self.message = message
        self.fields = question_fields(evidence)
        self.evidence = list(evidence)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog") as box:
            box.border_title = Content("A question of an MCP server")
            yield Static(safe_text(self.message), id="message", markup=False)
            with Vertical(id="fields"):  # the dialog scrolls when they are many (app.tcss)
                for i, (name, line) in enumerate(self.fields):
                    yield Static(safe_text(line, one_line=True), classes="field-line", markup=False)
                    # Compact (one row each): a form of several fields fits an 80x24 terminal.
                    yield Input(safe_text(self.values.get(name, ""), one_line=True), placeholder=name,
                                id=f"field-{i}", select_on_focus=False, compact=True)
            yield Static("esc closes this without answering (the question waits on)" if self.fields else
                         "It asks for no field: answer, decline or cancel (esc closes this).", id="hint", markup=False)
            with Horizontal(classes="buttons"):
                yield Button("Answer (enter)", id="ok", variant="primary", compact=True)
                yield Button("Decline", id="decline", compact=True)
                yield Button("Cancel question", id="cancel", compact=True)

    def on_mount(self) -> None:
        inputs = self.query(Input)
        if inputs:
            inputs.first().focus()

    def _values(self) -> dict[str, str]:
        out = {}
        for i, (name, _) in enumerate(self.fields):
            value = self.query_one(f"#field-{i}", Input).value
            if value.strip():
                out[name] = value
        return out

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.armed:
            self.dismiss(("accept", self._values()))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if not self.armed:
            return
        if event.button.id == "ok":
            self.dismiss(("accept", self._values()))
        elif event.button.id in ("decline", "cancel"):
            self.dismiss((str(event.button.id), {}))
        else:
            self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
