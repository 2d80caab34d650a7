"""A context restart awaits the operator: why, and what the next session starts with."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Static

from console.engine import events as ev
from console.engine.text import safe_text
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.dialog import Dialog
from console.view.format import tokens

# The title of the console's notices about a restart waiting (taken back once it is answered).
NOTICE_TITLE = "Restart pending"


def explain(p: ev.RestartPending, run: str = "ID", host: str = "") -> Content:
    """Why the restart waits; ``run``: the run id to name in the resume command; ``host``: the machine
    that runs it, when it is not this one (the command is typed there)."""
    run = safe_text(run, one_line=True)  # a folder's name may hold anything
    where = f" on {safe_text(host, one_line=True)}" if host else ""
    limit = p.prompt_budget or p.context_window
    what = "prompt budget" if p.prompt_budget else "context window"
    rows = [
        ("Why", f"{safe_text(p.reason, one_line=True)}: the next prompt needs {p.usage_pct:.0%} of the {what}"),
        ("Usage", f"{p.used_tokens:,} tokens; budget {limit:,} of a {p.context_window:,}-token window"
         if p.prompt_budget else f"{p.used_tokens:,} of {p.context_window:,} tokens"),
        ("Session", f"{p.session} ended → session {p.next_session} would start"),
        ("Carryover", f"the last {p.carryover_messages} messages (~{tokens(p.carryover_tokens)} tokens), whole turns"),
        ("Kept", "system prompt (re-read from disk), todo list, main_plan.md, files, working memory"),
    ]
    lines = [Content.assemble((f"{k:<10}", "bold $text-primary"), v) for k, v in rows]
    lines.append(Content(""))
    lines.append(Content.styled("Approve to continue in a fresh session; deny to end the run here "
                                f"(it can be resumed later{where} with `agent-console resume {run}`).",
                                "$text-muted"))
    return Content("\n").join(lines)


def deny_question(run: str = "ID", host: str = "") -> ConfirmScreen:
    """Deny ends the run, so it is asked first, wherever it is given (this dialog, the run screen's d, the palette;
    the fleet asks its own). Its key, d, is the quit question's Detach: a q that went astray and then d meant "leave
    the console, the run goes on", and must not end the run. One more key for a decision that ends the run is
    cheap; a key of its own would not do (a key that is free today is another dialog's tomorrow, and the operator's
    fingers learn d for deny from the run screen and the fleet)."""
    run = safe_text(run, one_line=True)
    where = f" on {safe_text(host, one_line=True)}" if host else ""
    return ConfirmScreen("Deny the restart? The run ends",
                         "The run ends here instead of starting a fresh session (it can be resumed later"
                         f"{where} with `agent-console resume {run}`).", "Deny: end the run", "Keep it waiting")


class RestartApprovalScreen(Dialog[str | None]):
    """It appears on its own, maybe while the operator types: its answers (keys, Enter, clicks) wait its first
    moment (see Dialog), and the console never opens it over another question (it waits for that one to be
    answered). Deny asks first (deny_question): it ends the run."""

    ANSWERS = frozenset({"decide"})
    ON_ITS_OWN = True
    # Textual focuses it once the screen is active (a query in on_mount can run after a quick dismissal).
    AUTO_FOCUS = "#approve"
    BINDINGS = [
        Binding("a", "decide('approve')", "Approve", id="modal_approve"),
        Binding("d", "decide('deny')", "Deny", id="modal_deny"),
        Binding("escape", "decide('later')", "Later", id="modal_later"),
    ]

    def __init__(self, pending: ev.RestartPending, run: str = "ID", host: str = "", **kw: Any) -> None:
        super().__init__(**kw)
        self.pending = pending
        self.run = run
        self.host = host
        self.withdrawn = False  # the restart was answered elsewhere while a question was over this one
        self._given = False

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="-restart") as box:
            box.border_title = "Context restart awaits your approval"
            yield Static(explain(self.pending, self.run, self.host), id="message")
            with Horizontal(classes="buttons"):
                yield Button("Approve (a)", id="approve", variant="success", compact=True)
                yield Button("Deny (d)", id="deny", variant="error", compact=True)
                yield Button("Later (esc)", id="later", compact=True)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if not self.armed:
            return
        self.action_decide(event.button.id or "later")

    def action_decide(self, decision: str) -> None:
        if decision == "deny":
            self.app.push_screen(deny_question(self.run, self.host), self._deny_answered)
            return
        self.close(None if decision == "later" else decision)

    def _deny_answered(self, yes: bool | None) -> None:
        """No: the question is back, its answers waiting their moment again (its resume)."""
        if self.withdrawn:
            self.close(None)
        elif yes:
            self.close("deny")

    def withdraw(self) -> None:
        """The restart no longer waits (answered from elsewhere): closed now, or once the screens over it close
        (a Screen's dismiss closes the top screen, whichever it is)."""
        self.withdrawn = True
        self.close(None)

    def on_screen_resume(self) -> None:
        """Textual calls Dialog's handler too (its moment starts again)."""
        if self.withdrawn:
            self.call_later(self.close, None)

    def close(self, result: str | None) -> None:
        if self._given or not self.is_active:  # is_current holds under a modal too; dismiss closes the top
            return
        self._given = True
        self.dismiss(result)
