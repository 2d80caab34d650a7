"""The fleet's actions on the runs it lists: attach, approve, deny, stop, pause, resume, acknowledge, forget.

A part of the fleet's screen (:class:`console.tui.screens.fleet.FleetScreen`, which says what the operator asked
for): it asks before anything that ends, starts or forgets a run, and acts through the run's inbox, the shared
store for another machine's run, or ``agent-console resume`` for a run no process runs. What a key offers for a
row, and what it says when it does not apply, is decided apart, from the row's facts
(:mod:`console.view.fleet_offers`). It is given only the narrow things it needs: the store, how to reach a run
(:class:`FleetControllers`) and the console's hands (:class:`Hands`: ask, notify, show a run, work in a thread)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from console.engine.command_specs import PAUSE_WHEN
from console.engine.job_files import JobPaths
from console.engine.store import Store, StoreError, folder_gone, open_store
from console.tui.commands import Controller, InboxController
from console.tui.screens.confirm import ConfirmScreen
from console.view.fleet import FleetRow
from console.view.fleet_offers import refusal

if TYPE_CHECKING:
    from console.engine.commands import AnyCommand
    from console.tui.screens.dialog import Dialog
    from console.tui.screens.run import Run  # imported when a run is attached (the fleet's first frame never is)


class Notify(Protocol):
    def __call__(self, message: str, *, title: str = ..., severity: str = ...) -> None: ...


T = TypeVar("T")


class Ask(Protocol):
    """Put a question up: ``done`` is given its answer, of the dialog's type (None: closed without one)."""

    def __call__(self, dialog: Dialog[T], done: Callable[[T | None], None], /) -> None: ...


@dataclass(frozen=True)
class FleetStore:
    """The jobs store the fleet lists: the embedded one at ``path``, or a shared one at ``url``."""

    path: Path
    url: str | None = None

    def open(self) -> Store:
        return open_store(self.url, self.path)

    @property
    def screenshots(self) -> Path:
        """Where a run of another machine's screenshots go (its folder is there, not here)."""
        return self.path.parent / "screenshots"


class FleetControllers:
    """How the fleet reaches a run: the controller of its console once attached, and one command sent from the list
    (a run of this machine through its inbox, another machine's through the shared store)."""

    def __init__(self, store: FleetStore) -> None:
        self.store = store

    def remote(self, row: FleetRow) -> bool:
        return bool(row.host and self.store.url)

    def attach(self, row: FleetRow) -> Controller:
        if self.remote(row):  # another machine's: fed from the store (keys through it)
            from console.tui.store_follow import StoreController

            assert self.store.url is not None
            return StoreController(self.store.url, row.key, row.host, row.id, source="fleet",
                                   screenshots=self.store.screenshots)
        return InboxController(JobPaths(row.path))

    def send(self, row: FleetRow, command: AnyCommand) -> str | None:
        """Send a live run one of the operator's commands. What went wrong, or None."""
        if self.remote(row):
            from console.view.jobs import send_remote

            assert self.store.url is not None
            return send_remote(self.store.url, self.store.path, row.key, command, "fleet")
        return InboxController(JobPaths(row.path), source="fleet").send(command)


@dataclass(frozen=True)
class Hands:
    """What the fleet's actions need of the console, each one function: ``ask`` a question (its answer to ``done``),
    ``notify`` the operator (the app's thread), ``show_run`` (push a run's console), ``in_thread`` (run work in a
    worker thread of a group), ``from_thread`` (call something on the app's thread from that work)."""

    ask: Ask
    notify: Notify
    show_run: Callable[[Run], None]
    in_thread: Callable[[Callable[[], None], str], object]
    from_thread: Callable[..., object]


class FleetActions:
    """The fleet's keys acting on a run (see the module's docstring)."""

    def __init__(self, store: FleetStore, hands: Hands, controllers: FleetControllers | None = None) -> None:
        self.store = store
        self.hands = hands
        self.controllers = controllers or FleetControllers(store)

    def act(self, action: str, row: FleetRow) -> None:
        """The operator asked for ``action`` on ``row`` (:data:`console.view.fleet_offers.ROW_ACTIONS`)."""
        from console.engine import commands  # the typed commands (pydantic): at the first, not in the first frame

        if (no := refusal(action, row)) is not None:
            self.hands.notify(no.message, title=no.title)
            return
        if action == "attach":
            self.attach(row)
        elif action == "stop":
            self._stop(row)
        elif action == "forget":
            self._forget(row)
        elif action == "resume":
            self._resume(row)
        elif action == "pause":
            self._pause(row)
        elif action == "acknowledge":
            self.hands.in_thread(lambda: self.acknowledge_run(row), "acknowledge")
        elif action == "deny":  # it ends the run: asked first, naming the run
            self.hands.ask(ConfirmScreen(f"Deny the restart of {row.id} {row.job}?",
                                         f"The run {row.name} ends here instead of starting a fresh session (it can "
                                         f"be resumed later: agent-console resume {row.id}).", "Deny",
                                         "Keep it waiting"),
                           lambda yes: self._send(row, "deny", commands.DenyRestart()) if yes else None)
        elif action == "approve":
            self._send(row, "approve", commands.ApproveRestart())

    def attach(self, row: FleetRow) -> None:
        """Show the run's console (attached: keys through its inbox, or the store for another machine's); q comes
        back."""
        from console.tui.screens.run import Run

        controller = self.controllers.attach(row)
        if self.controllers.remote(row):
            run = Run(controller=controller, paths=JobPaths(row.path), job_title=row.name, follow=True, run_id=row.id)
        else:
            paths = JobPaths(row.path)
            run = Run(controller=controller, paths=paths, job_title=row.path.name, follow=True, run_id=paths.run_id)
        self.hands.show_run(run)

    def _send(self, row: FleetRow, action: str, command: AnyCommand) -> None:
        """Send ``command`` (the fleet's ``action``: approve, deny, stop) and say it went, or why not."""
        problem = self.controllers.send(row, command)
        if problem:
            self.hands.notify(problem, title=f"{action} not sent", severity="warning")
        elif action == "stop":
            self.hands.notify(f"{row.id} {row.job}: stop sent (after its current turn; at once if it waits or is "
                              "paused).", title="Stop sent")
        else:
            what = "approved" if action == "approve" else "denied (the run ends; it can be resumed)"
            self.hands.notify(f"{row.id} {row.job}: restart {what}.", title=f"{action.capitalize()} sent")

    def _stop(self, row: FleetRow) -> None:
        """Asked first, naming the run."""
        # The short form (a dialog wraps a long folder): `resume ID` finds the run wherever this is typed.
        from console.engine import commands

        later = f"agent-console resume {row.id}" + (f" on {row.host}" if row.host else "")
        self.hands.ask(ConfirmScreen(f"Stop {row.id} {row.job}?",
                                     f"The run {row.name} stops after its current turn (at once while it waits for "
                                     "the model, for approval or is paused); a second stop stops it at once. Resume "
                                     f"it later with: {later}", "Stop", "Keep running"),
                       lambda yes: self._send(row, "stop", commands.Stop()) if yes else None)

    def _forget(self, row: FleetRow) -> None:
        """A run whose folder is gone: asked first, naming the run."""

        def forget(yes: bool | None) -> None:
            if yes:
                self.hands.in_thread(lambda: self.forget_runs([row]), "forget")

        self.hands.ask(ConfirmScreen(f"Forget {row.id} {row.job}?",
                                     f"Its folder {row.path} no longer exists. Its row is removed from the jobs list "
                                     "(agent-console jobs and this list); nothing else is touched.", "Forget", "Keep"),
                       forget)

    def _pause(self, row: FleetRow) -> None:
        """``p``: a run at work pauses (:data:`console.engine.command_specs.PAUSE_WHEN`; not asked first: ``r``
        unpauses it)."""
        from console.engine import commands

        if problem := self.controllers.send(row, commands.Pause()):
            self.hands.notify(problem, title="pause not sent", severity="warning")
        else:
            self.hands.notify(f"{row.id} {row.job}: pause sent (it pauses {PAUSE_WHEN}; r resumes it).",
                              title="Pause sent")

    def _resume(self, row: FleetRow) -> None:
        """``r``: a paused run unpauses (its inbox); a run no process runs starts again in the background, asked
        first, with the settings it was started with (``agent-console resume``: the one path every resume takes)."""
        from console.engine import commands

        if row.resume == "unpause":
            if problem := self.controllers.send(row, commands.Resume()):
                self.hands.notify(problem, title="resume not sent", severity="warning")
            else:
                self.hands.notify(f"{row.id} {row.job}: resume sent.", title="Resume sent")
            return

        def resume(yes: bool | None) -> None:
            if yes:
                self.hands.in_thread(lambda: self.resume_run(row), "resume")

        self.hands.ask(ConfirmScreen(f"Resume {row.id} {row.job}?",
                                     f"The run {row.name} starts again in the background, with the provider, model "
                                     "and settings it was started with; it comes back where it stopped. Enter "
                                     "attaches to it once it runs.", "Resume", "Leave it"),
                       resume)

    # -- the work done in a worker thread (its notices on the app's thread) ------------------------------------
    def acknowledge_run(self, row: FleetRow) -> None:
        """``k``: record the acknowledgement (console.engine.acknowledge: the run's log, then the jobs store); the
        next poll shows the row as it ended, no longer first. Not asked first: it ends nothing, ``r`` still
        resumes it."""
        from console.view.answering import acknowledge_run

        said = acknowledge_run(JobPaths(row.path), f"{row.id} {row.job}", "fleet", self.store.open)
        if said.title != "Acknowledged":  # done: the row says so at the next poll (a notice would cover columns)
            self.hands.from_thread(self.hands.notify, said.message, title=said.title, severity=said.severity)

    def resume_run(self, row: FleetRow) -> None:
        """Start a runner for ``row`` through the CLI (console.view.answering): it returns once the run holds its lock,
        or says in one line why it did not start."""
        from console.view.answering import resume_in_background

        problem = resume_in_background(row.path, "fleet")
        if problem is None:
            self.hands.from_thread(self.hands.notify, f"{row.id} {row.job} runs again, in the background.",
                                   title="Resumed")
        else:
            self.hands.from_thread(self.hands.notify, f"{row.id} {row.job}: {problem}", title="Not resumed",
                                   severity="error")

    def forget_runs(self, rows: list[FleetRow]) -> None:
        """Remove the rows of runs whose folder is gone (checked again now: a folder back in place is kept)."""
        gone = [r for r in rows if folder_gone(r.path)]
        kept = [r for r in rows if r not in gone]
        try:
            store = self.store.open()
            try:
                forgot = store.forget([r.path for r in gone]) if gone else 0
            finally:
                store.close()
        except (sqlite3.Error, OSError, StoreError) as exc:
            self.hands.from_thread(self.hands.notify, f"the jobs database: {exc}", title="Not forgotten",
                                   severity="error")
            return
        names = ", ".join(f"{r.id} {r.job}" for r in gone[:3]) + (" and more" if len(gone) > 3 else "")
        if forgot:
            self.hands.from_thread(self.hands.notify, f"Forgot {names}.", title="Forgotten")
        for r in kept:
            self.hands.from_thread(self.hands.notify, f"{r.id} {r.job}: its folder is back; kept.",
                                   title="Not forgotten")
