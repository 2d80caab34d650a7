"""Leaving one run's console: q (back to the fleet's list, detach, or stop and quit) and a signal (stop, then quit):
:class:`Leaving`, a part of :class:`console.tui.screens.run.RunScreen`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from console.engine.commands import AnyCommand, Stop
from console.outcome import EXIT_OK
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.quit import QuitScreen
from console.tui.screens.run_context import Ask, Notify, RunContext

STOP_PATIENCE = 10.0  # leaving with "stop the run": seconds to wait for the stop to land before closing anyway


class Leaving:
    """How the console lets go of its run; ``exit`` closes the console with an exit code, ``back`` returns to the
    fleet's list (the run goes on)."""

    def __init__(self, ctx: RunContext, *, in_fleet: bool, exit: Callable[[int], None], back: Callable[[], None],
                 ask: Ask, push: Ask, notify: Notify, send: Callable[[AnyCommand, str], bool],
                 status_refresh: Callable[[], None], later: Callable[[float, Callable[[], None]], Any]) -> None:
        """``ask``: a question the restart's approval waits for; ``push``: a screen shown as it is (the quit
        question of a run in this process); ``send``: a command, said if it cannot be sent (console.tui.screens.
        run_keys.RunCommands.send); ``later``: call a function once, after some seconds."""
        self.ctx = ctx
        self.in_fleet = in_fleet
        self.exit = exit
        self.back = back
        self.ask = ask
        self.push = push
        self.notify = notify
        self.send = send
        self.status_refresh = status_refresh
        self.later = later

    def close(self, code: int | None = None) -> None:
        """Close the console: with ``code``, else the run's exit code (0 while it has none)."""
        ctx = self.ctx
        self.exit(code if code is not None else (ctx.exit_code if ctx.exit_code is not None else EXIT_OK))

    def stop_and_quit(self) -> None:
        """A signal (SIGTERM, SIGHUP): nobody may be watching; the run is stopped now and the console closes as
        soon as it has (at once if the run had already ended)."""
        ctx = self.ctx
        if ctx.finished:
            self.close()
            return
        ctx.quit_requested = True
        ctx.state.requested["stop"] = "stopping (signal), then quitting"
        self.status_refresh()

    def quit(self) -> None:
        """q: back to the fleet's list (the run goes on); attached alone, detach or stop; a run in this process
        asks, then stops it and quits."""
        ctx = self.ctx
        if self.in_fleet:
            self.back()
            return
        if ctx.controller.attached:
            self._leave_attached()
            return
        if ctx.finished:
            self.close()
            return
        if ctx.quit_requested:
            self.notify("Waiting for the run to stop…")
            return

        def done(yes: bool | None) -> None:
            if yes and ctx.finished:
                # The run ended while the dialog was open: nothing left to stop, nothing will report back.
                self.close()
                return
            if yes:
                ctx.quit_requested = True
                ctx.controller.send(Stop())
                ctx.controller.send(Stop())  # the second stop abandons the current turn
                ctx.state.requested["stop"] = "stopping, then quitting"
                self.status_refresh()

        self.push(ConfirmScreen("Quit and stop the run?", "The run lives in this process: quitting stops it. "
                                "Everything so far is saved; resume with `agent-console run --in-place "
                                f"{ctx.paths.root}`. (To watch a run you can leave, start it with --headless and use "
                                "`agent-console attach`.)", "Stop and quit", "Stay", quits=True), done)

    def _leave_attached(self) -> None:
        """q on a run another process runs: detach (it goes on) or stop it; nothing to ask once it has ended."""
        ctx = self.ctx
        if not ctx.active:
            self.close(EXIT_OK)
            return
        if ctx.quit_requested:
            self.close(EXIT_OK)  # q again while the stop lands: leave it to land alone
            return

        def done(answer: str | None) -> None:
            if answer == "detach" or (answer == "stop" and not ctx.active):
                self.close(EXIT_OK)
            elif answer == "stop" and self.send(Stop(), "stopping, then quitting"):
                ctx.controller.send(Stop())  # the second stop drops the turn in flight
                ctx.quit_requested = True
                self.later(STOP_PATIENCE, lambda: self.close(EXIT_OK))

        self.ask(QuitScreen(ctx.name), done)
