"""The restart's question on one run's console: :class:`RestartPrompt`, a part of
:class:`console.tui.screens.run.RunScreen`.

A context restart that waits for the operator opens its dialog (console.tui.screens.approval) on its own, with a
bell; never over another question (the rewind box being typed into, stop?): it waits for that one to be answered and
says so once. Answered elsewhere (the CLI, another console), its dialog is withdrawn and its notices taken back.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input

from console.tui.screens.approval import NOTICE_TITLE, RestartApprovalScreen
from console.tui.screens.dialog import Dialog
from console.tui.screens.run_context import Notify, RunContext


class Stage(Protocol):
    """What the prompt needs of the app: what is on top, a bell, a screen pushed (Textual's App has them)."""

    @property
    def screen(self) -> Screen[Any]: ...

    @property
    def focused(self) -> Widget | None: ...

    @property
    def screen_stack(self) -> list[Screen[Any]]: ...

    def bell(self) -> None: ...

    def push_screen(self, screen: Any, callback: Any = ...) -> Any: ...


class RestartPrompt:
    """Opens the restart's dialog when one waits, withdraws it when it no longer does; every question of the run's
    screen is asked through :meth:`ask` (the dialog waits for it)."""

    def __init__(self, ctx: RunContext, *, stage: Callable[[], Stage], notify: Notify, retract: Callable[[str], None],
                 approve: Callable[[], None], deny: Callable[[], None], alive: Callable[[], bool],
                 rung: dict[Path, int] | None = None) -> None:
        """``stage``: the app (asked when needed); ``approve``/``deny``: send the answer (the deny asked already, in
        the dialog); ``alive``: the run's screen still shows its panes; ``rung``: the needs_operator seq the bell
        already rang for, per run (shared with the fleet, so a need rings once)."""
        self.ctx = ctx
        self.stage = stage
        self.notify = notify
        self.retract = retract
        self.approve = approve
        self.deny = deny
        self.alive = alive
        self.rung = rung if rung is not None else {}
        self.approval: RestartApprovalScreen | None = None
        self.seq = -1  # the restart_pending whose dialog was opened
        self.waits = -1  # the restart_pending seq whose dialog waits for another question to be answered

    def sync(self) -> None:
        """The run's state changed (or a question was answered): ring for a new need, open, withdraw or hold the
        restart's dialog."""
        ctx, app = self.ctx, self.stage()
        need = ctx.state.needs  # a new need rings once (a restart to approve rings with its dialog, below)
        if need is not None and self.rung.get(ctx.paths.root) != need.seq and ctx.active:
            self.rung[ctx.paths.root] = need.seq
            if need.reason != "restart_approval":
                app.bell()
        pending = ctx.state.restart_pending
        if pending is None:
            if self.seq >= 0 or self.waits >= 0:
                self.retract(NOTICE_TITLE)  # "the restart still waits" is no longer true
                for screen in app.screen_stack:  # nor is the line a question got about it
                    if isinstance(screen, Dialog):
                        screen.note("")
                self.seq = self.waits = -1
            if self.approval is not None:
                dialog, self.approval = self.approval, None
                dialog.withdraw()
            return
        if pending.seq == self.seq or (ctx.controller.attached and ctx.controller.runner_pid() is None):
            return
        # Imported here, when a restart waits: Textual's TextArea costs ~6 ms of CPU before an attach's first frame.
        from textual.widgets import TextArea

        if isinstance(app.screen, Dialog) or isinstance(app.focused, (Input, TextArea)):
            # Another question is open (the rewind box being typed into, stop?): the approval must not take its
            # keys or its focus. It waits for that one to be answered (see ask), and says so once: on the open
            # question's border (a toast would wait for it to close, console.tui.notices), else in a toast.
            if self.waits != pending.seq:
                self.waits = pending.seq
                app.bell()
                if isinstance(app.screen, Dialog):
                    app.screen.note("A restart awaits your approval: it opens after this")
                else:
                    self.notify("A context restart waits for your approval: its dialog opens when this one is "
                                "closed.", title=NOTICE_TITLE, severity="warning", timeout=10)
            return
        self.seq = pending.seq
        self.waits = -1
        app.bell()  # the dialog says the rest (and the other notices wait for it: console.tui.notices)
        self.retract(NOTICE_TITLE)
        # Named by its id (`resume ID` finds it wherever it is typed; a folder wraps in the dialog), on its machine
        # when it is another's.
        self.approval = RestartApprovalScreen(pending, ctx.name, ctx.host)
        self.ask(self.approval, self.decided)

    def ask(self, dialog: Dialog[Any], done: Callable[[Any], None]) -> None:
        """Show a question; once it is answered, an approval that waited for it opens (see sync; a dialog pushed
        otherwise lets it open at the next tick)."""

        def answered(result: Any) -> None:
            done(result)
            if self.alive():
                self.sync()

        self.stage().push_screen(dialog, answered)

    def decided(self, decision: str | None) -> None:
        self.approval = None
        if decision in (None, "later") and self.ctx.state.restart_pending is not None:
            self.notify("The restart still waits: a approves, d denies.", title=NOTICE_TITLE,
                        severity="warning", timeout=10)
        if decision == "approve":
            self.approve()
        elif decision == "deny":  # asked already, in the dialog
            self.deny()
