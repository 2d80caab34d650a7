"""The fleet's actions on the runs it lists: attach, approve, deny, stop, pause, resume, acknowledge, forget, and the
bell when a run needs its operator. The fleet's screen only shows rows and says what the operator asked for
(:class:`console.tui.screens.fleet.FleetScreen.Act`); this half of the app asks before anything that ends, starts
or forgets a run, and acts: through the run's inbox, or ``agent-console resume`` for a run no process runs."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from textual import work
from textual.app import App

from console.engine.command_specs import BY_CLI
from console.engine.job import JobPaths
from console.engine.store import StoreError, folder_gone, open_store
from console.tui.commands import InboxController
from console.tui.messages import FleetRows
from console.tui.notices import retract
from console.tui.screens.confirm import ConfirmScreen
from console.view.fleet import GONE, Fleet, FleetRow

if TYPE_CHECKING:
    from textual.screen import Screen

    from console.tui.screens.dialog import Dialog
    from console.tui.screens.fleet import FleetScreen  # imported when the fleet is shown (an attach never is)
    from console.tui.screens.run import Run, RunScreen

NEEDS_TITLES = ("Approval needed", "Needs you")  # the fleet's notices of runs that need their operator
# Seconds a needs notice stays: long enough to be read, short enough not to sit over the list's columns (the row and
# the title keep saying it).
NEEDS_TIMEOUT = 5.0


class FleetActions(App[int]):
    """The fleet's half of :class:`console.tui.app.ConsoleApp`."""

    fleet: Fleet | None
    fleet_view: FleetScreen | None
    _rung: dict[Path, int]
    _needs_primed: bool  # the list was read whole once: a need seen after that is new (it rings, a notice says it)
    # The needs notice shown over a run's console: its title, the needs it told of.
    _needs_told: tuple[str, dict[Path, int]] | None
    _fleet_drawn: threading.Event  # set once rows are on the screen: the poller folds the logs after that

    def ask(self, dialog: Dialog, done: Callable[[Any], None]) -> None:
        """A question of the fleet's (a run's screen asks its own)."""
        self.push_screen(dialog, done)

    if TYPE_CHECKING:

        def open_run(self, path: Path) -> None: ...  # the app's: it builds the run's screen
        def _run_screen(self, run: Run, *, in_fleet: bool = False) -> RunScreen: ...
        def _is_run_screen(self, screen: Screen) -> TypeGuard[RunScreen]: ...

    def on_fleet_rows(self, message: FleetRows) -> None:
        if self.fleet_view is None or not self.fleet_view.is_attached:
            self._fleet_drawn.set()  # nothing to draw them on: the poller need not wait
            return
        self.fleet_view.update_rows(message.rows, message.error)
        if not self._fleet_drawn.is_set():
            self.call_after_refresh(self._fleet_drawn.set)
        self._retract_stale_needs(message.rows)
        newly = [r for r in message.rows if r.needs_seq and self._rung.get(r.path) != r.needs_seq]
        for row in newly:
            self._rung[row.path] = row.needs_seq
        if not self._needs_primed:
            # What needed the operator before the list was first read whole is no news: the list's title counts
            # it and its rows come first, highlighted. The bell (and a notice over a run's console) is for a need
            # that comes while the list is open: a notice on every start covered the columns and said nothing new.
            self._needs_primed = getattr(message.rows, "folded", True)
            return
        screen = self.screen
        if self._is_run_screen(screen):  # that run's own need: its console says it (and rings) itself
            newly = [r for r in newly if r.path != screen.paths.root]
        if not newly:
            return
        self.bell()
        if not self._is_run_screen(screen):
            # Over the list (or a question over it), the run's row says it, first and highlighted, and the title
            # counts it: a notice there would only cover the columns it is in (at 80x24, the state, phase, ctx and
            # cost of the rows under it).
            return
        # Over a run's console, a short notice names the other run (one at a time, the newest: a run that restarts
        # often must not stack notices over the screen). It goes when the list is back or the need is gone.
        for title in NEEDS_TITLES:
            retract(self, title)
        names = ", ".join(f"{r.id} {r.job}" for r in newly[:2]) + (" and more" if len(newly) > 2 else "")
        approval = all(r.pending_seq for r in newly)
        what = "a restart to approve" if approval else \
            f"needs you ({', '.join(sorted({r.needs_label for r in newly}))})"
        title = NEEDS_TITLES[0 if approval else 1]
        self._needs_told = (title, {r.path: r.needs_seq for r in newly})
        self.notify(f"{names}: {what} (q returns to the list).", title=title, severity="warning",
                    timeout=NEEDS_TIMEOUT)

    def _retract_stale_needs(self, rows: list[FleetRow]) -> None:
        """Take back the fleet's needs notice once none of the needs it told of is still there (approved, denied,
        resumed, acknowledged, ended)."""
        if self._needs_told is None:
            return
        title, told = self._needs_told
        now = {r.path: r.needs_seq for r in rows}
        if not any(now.get(path) == seq for path, seq in told.items()):
            self._needs_told = None
            retract(self, title)

    def on_fleet_screen_shown(self, _message: FleetScreen.Shown) -> None:
        """The list is back (q from a run's console): a needs notice told over that console is done with (it said
        "q returns to the list"; the list's row and title say the rest)."""
        if self._needs_told is not None:
            title = self._needs_told[0]
            self._needs_told = None
            retract(self, title)

    def on_fleet_screen_act(self, message: FleetScreen.Act) -> None:
        row = message.row
        if message.action == "attach":
            if row.host and self.fleet is not None and self.fleet.url:  # another machine's: fed from the store
                self.open_remote_run(row, self.fleet.url)
                return
            self.open_run(row.path)
            return
        if message.action in ("stop", "forget"):
            self._fleet_end(message.action, row)
            return
        if message.action == "resume":
            self._fleet_resume(row)
            return
        if message.action == "pause":
            self._fleet_pause(row)
            return
        if message.action == "acknowledge":
            self._fleet_acknowledge(row)
            return
        if not row.pending_seq:
            self.notify(f"{row.id} {row.job} has no restart waiting for approval ({row.state}).",
                        title=f"Nothing to {message.action}")
            return
        if message.action == "deny":  # it ends the run: asked first, naming the run
            self.ask(ConfirmScreen(f"Deny the restart of {row.id} {row.job}?",
                                   f"The run {row.name} ends here instead of starting a fresh session (it can be "
                                   f"resumed later: agent-console resume {row.id}).", "Deny", "Keep it "
                                   "waiting"),
                     lambda yes: self._fleet_send(row, "deny") if yes else None)
            return
        self._fleet_send(row, message.action)

    def open_remote_run(self, row: FleetRow, url: str) -> None:
        """The console of a run of another machine, fed from the shared store (keys through it); q comes back."""
        from console.tui.screens.run import Run
        from console.tui.store_follow import StoreController

        paths = JobPaths(row.path)  # that machine's folder: named, never read here
        controller = StoreController(url, row.key, row.host, row.id, source="fleet",
                                     screenshots=self.fleet.store_path.parent / "screenshots" if self.fleet else None)
        self.push_screen(self._run_screen(Run(controller=controller, paths=paths, job_title=row.name, follow=True,
                                              run_id=row.id), in_fleet=True))

    def _fleet_send(self, row: FleetRow, action: str) -> None:
        problem = self._fleet_command(row, BY_CLI[action].name)
        if problem:
            self.notify(problem, title=f"{action} not sent", severity="warning")
        elif action == "stop":
            self.notify(f"{row.id} {row.job}: stop sent (after its current turn; at once if it waits or is paused).",
                        title="Stop sent")
        else:
            what = "approved" if action == "approve" else "denied (the run ends; it can be resumed)"
            self.notify(f"{row.id} {row.job}: restart {what}.", title=f"{action.capitalize()} sent")

    def _fleet_end(self, action: str, row: FleetRow) -> None:
        """Stop a run, or forget one whose folder is gone: each asks first, naming the run."""
        if action == "stop":
            if not row.has_runner:
                self.notify(f"{row.id} {row.job}: no process runs it ({row.state}).", title="Nothing to stop")
                return
            # The short form (a dialog wraps a long folder): `resume ID` finds the run wherever this is typed.
            later = f"agent-console resume {row.id}" + (f" on {row.host}" if row.host else "")
            self.ask(ConfirmScreen(f"Stop {row.id} {row.job}?",
                                   f"The run {row.name} stops after its current turn (at once while it waits for "
                                   "the model, for approval or is paused); a second stop stops it at once. Resume "
                                   f"it later with: {later}", "Stop", "Keep running"),
                     lambda yes: self._fleet_send(row, "stop") if yes else None)
            return
        if row.state != GONE:
            self.notify(f"{row.id} {row.job}: its folder is still there; only a run whose folder is gone is "
                        "forgotten.", title="Nothing to forget")
            return

        def forget(yes: bool | None) -> None:
            if yes:
                self.forget_runs([row])

        self.ask(ConfirmScreen(f"Forget {row.id} {row.job}?",
                               f"Its folder {row.path} no longer exists. Its row is removed from the jobs list "
                               "(agent-console jobs and this list); nothing else is touched.", "Forget", "Keep"),
                 forget)

    def _fleet_command(self, row: FleetRow, command: str) -> str | None:
        """Send a live run one of the operator's commands: through its inbox, or the store for another machine's
        run. What went wrong, or None."""
        if row.host and self.fleet is not None and self.fleet.url:
            from console.view.jobs import send_remote

            return send_remote(self.fleet.url, self.fleet.store_path, row.key, command, "fleet")
        return InboxController(JobPaths(row.path), source="fleet").send(command)

    def _fleet_pause(self, row: FleetRow) -> None:
        """``p``: a run at work pauses after its current turn (not asked first: ``r`` unpauses it)."""
        if not row.pausable:
            why = "no process runs it" if not row.has_runner else f"it is {row.state_text}"
            self.notify(f"{row.id} {row.job}: nothing to pause ({why}).", title="Nothing to pause")
            return
        if problem := self._fleet_command(row, "pause"):
            self.notify(problem, title="pause not sent", severity="warning")
        else:
            self.notify(f"{row.id} {row.job}: pause sent (after its current turn; r resumes it).",
                        title="Pause sent")

    def _fleet_resume(self, row: FleetRow) -> None:
        """``r``: a paused run unpauses (its inbox); a run no process runs starts again in the background, asked
        first, with the settings it was started with (``agent-console resume``: the one path every resume takes)."""
        if row.resume == "unpause":
            if problem := self._fleet_command(row, "resume"):
                self.notify(problem, title="resume not sent", severity="warning")
            else:
                self.notify(f"{row.id} {row.job}: resume sent.", title="Resume sent")
            return
        if row.resume != "start":
            why = "it has completed" if row.state == "completed" else f"it is {row.state}"
            self.notify(f"{row.id} {row.job}: nothing to resume ({why}).", title="Nothing to resume")
            return
        self.ask(ConfirmScreen(f"Resume {row.id} {row.job}?",
                               f"The run {row.name} starts again in the background, with the provider, model and "
                               "settings it was started with; it comes back where it stopped. Enter attaches to "
                               "it once it runs.", "Resume", "Leave it"),
                 lambda yes: self._resume_if(yes, row))

    def _fleet_acknowledge(self, row: FleetRow) -> None:
        """``k``: a run that gave up, crashed or failed asks no more (not asked first: it ends nothing, and ``r``
        still resumes it)."""
        if not row.ackable:
            why = ("a process runs it: answer it instead" if row.has_runner else
                   f"it is {row.host}'s: acknowledge it there (agent-console ack {row.id})" if row.host else
                   "it was acknowledged" if row.acknowledged else f"it is {row.state_text}")
            self.notify(f"{row.id} {row.job}: nothing to acknowledge ({why}).", title="Nothing to acknowledge")
            return
        self.acknowledge_run(row)

    @work(thread=True, exit_on_error=False, group="acknowledge")
    def acknowledge_run(self, row: FleetRow) -> None:
        """Record the acknowledgement (console.engine.acknowledge: the run's log, then the jobs store); the next
        poll shows the row as it ended, no longer first."""
        from console.tui.acknowledging import acknowledge_run

        fleet = self.fleet
        said = acknowledge_run(JobPaths(row.path), f"{row.id} {row.job}", "fleet",
                               (lambda: open_store(fleet.url, fleet.store_path)) if fleet is not None else None)
        if said.title != "Acknowledged":  # done: the row says so at the next poll (a notice would cover columns)
            self.call_from_thread(self.notify, said.message, title=said.title, severity=said.severity)

    def _resume_if(self, yes: bool | None, row: FleetRow) -> None:
        if yes:
            self.resume_run(row)

    @work(thread=True, exit_on_error=False, group="resume")
    def resume_run(self, row: FleetRow) -> None:
        """Start a runner for ``row`` through the CLI (console.tui.resume): it returns once the run holds its lock,
        or says in one line why it did not start."""
        from console.tui import resume

        problem = resume.resume_in_background(row.path, "fleet")
        if problem is None:
            self.call_from_thread(self.notify, f"{row.id} {row.job} runs again, in the background.",
                                  title="Resumed")
        else:
            self.call_from_thread(self.notify, f"{row.id} {row.job}: {problem}", title="Not resumed",
                                  severity="error")

    @work(thread=True, exit_on_error=False, group="forget")
    def forget_runs(self, rows: list[FleetRow]) -> None:
        """Remove the rows of runs whose folder is gone (checked again now: a folder back in place is kept)."""
        assert self.fleet is not None
        gone = [r for r in rows if folder_gone(r.path)]
        kept = [r for r in rows if r not in gone]
        try:
            store = open_store(self.fleet.url, self.fleet.store_path)
            try:
                forgot = store.forget([r.path for r in gone]) if gone else 0
            finally:
                store.close()
        except (sqlite3.Error, OSError, StoreError) as exc:
            self.call_from_thread(self.notify, f"the jobs database: {exc}", title="Not forgotten", severity="error")
            return
        names = ", ".join(f"{r.id} {r.job}" for r in gone[:3]) + (" and more" if len(gone) > 3 else "")
        if forgot:
            self.call_from_thread(self.notify, f"Forgot {names}.", title="Forgotten")
        for r in kept:
            self.call_from_thread(self.notify, f"{r.id} {r.job}: its folder is back; kept.", title="Not forgotten")
