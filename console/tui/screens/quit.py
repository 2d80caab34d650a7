"""Leaving the console of a live run: detach (the run goes on without a screen) or stop the run."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Static

from console.engine.text import safe_text
from console.tui.screens.dialog import Dialog


class QuitScreen(Dialog[str | None]):
    """Answers "detach", "stop" or None (stay). Detach is where the focus starts: the safe answer. Like every
    question, it takes no answer in its first moment (console.tui.screens.dialog)."""

    ANSWERS = frozenset({"answer"})
    QUITS = True
    LEAVES = "detach"  # a second Ctrl+C: the console closes, the run goes on
    # Textual focuses it once the screen is active (a query in on_mount can run after a quick dismissal).
    AUTO_FOCUS = "#detach"
    BINDINGS = [
        Binding("d", "answer('detach')", "Detach", id="quit_detach"),
        Binding("s", "answer('stop')", "Stop the run", id="quit_stop"),
        Binding("escape", "answer(None)", "Stay", id="quit_stay"),
    ]

    def __init__(self, run_id: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.run_id = run_id

    def compose(self) -> ComposeResult:
        run = safe_text(self.run_id, one_line=True)
        with Vertical(id="dialog") as box:
            box.border_title = Content("Leave this run's console?")
            yield Static(Content(
                "Detach: the console closes and the run goes on by itself; come back with "
                f"`agent-console attach {run}` (or `agent-console`, the fleet), follow it with "
                f"`agent-console logs -f {run}`.\n"
                "Stop the run: it stops now (the turn in flight is dropped and asked again on resume); "
                f"resume it later with `agent-console resume {run}`."), id="message")
            with Horizontal(classes="buttons"):
                yield Button("Detach (d)", id="detach", variant="primary", compact=True)
                yield Button("Stop the run (s)", id="stop", variant="error", compact=True)
                yield Button("Stay (esc)", id="stay", compact=True)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if not self.armed:
            return
        self.action_answer(None if event.button.id == "stay" else event.button.id)

    def action_answer(self, answer: str | None) -> None:
        self.dismiss(answer)
