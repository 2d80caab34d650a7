"""A test harness: the console over a run in this process, its engine on a worker thread of the run's screen.

The command line never does this (``agent-console run`` starts a runner and attaches a console to it; issue 34
point 6): these were ``console.tui.launch.run_console``, ``console.tui.commands.SupervisorController`` and
``ConsoleApp.for_run``. The console's tests keep them because a run at speed 0 on a thread, frozen at a known turn by
a gated model (tests/tui/conftest.py), is what the snapshots and the key tests need; the console sees it through its
ordinary seams: a :class:`console.tui.commands.Controller` for its keys and an
:class:`console.tui.screens.run_intake.EventSource` for its events.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from console.engine import events as ev
from console.engine.commands import AnyCommand
from console.engine.control import RunLock
from console.engine.supervisor import RunResult, Supervisor
from console.outcome import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, exit_code
from console.tui.app import ConsoleApp
from console.tui.bridge import EventBridge
from console.tui.follow import split_history
from console.tui.launch import AutoPilot, with_keymap
from console.tui.messages import HistoryReady, RunFinished
from console.tui.screens.run_intake import Feed


class SupervisorController:
    """A run in this process: the supervisor's thread-safe control methods."""

    attached = False
    host = resume_hint = ""
    local, startable = True, False  # the run's folder is this machine's; this process runs it
    problem: str | None = None
    screenshots: Path | None = None
    follower: Callable[..., None] | None = None
    plan_source: Callable[[], str] | None = None

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.finished = False

    def send(self, command: AnyCommand) -> str | None:
        if self.finished:
            return "the run has ended"
        self.supervisor.submit(command)
        return None

    def runner_pid(self) -> int | None:
        return None if self.finished else os.getpid()


class InProcess:
    """The run's events as its supervisor emits them (subscribed before it starts), and the run itself: the
    supervisor runs on the screen's worker thread and blocks it until the run ends."""

    name = "engine"

    def __init__(self, supervisor: Supervisor, controller: SupervisorController) -> None:
        self.supervisor = supervisor
        self.controller = controller
        self.finished = False
        self.result: RunResult | None = None
        self._unsubscribe: Callable[[], None] | None = None

    def open(self, bridge: EventBridge) -> None:
        # Before the run starts (its worker starts once the panes exist), so not one event is missed.
        self._unsubscribe = self.supervisor.subscribe(bridge.push)

    def feed(self, feed: Feed) -> None:
        from console.engine.loop import ShutdownReason
        from console.engine.supervisor import JobBusy

        sup = self.supervisor
        # A job resumed in place has history: show it first (the new run's events follow, numbered after it).
        history, _ = ev.read_new(sup.paths.events, 0)
        older, history = split_history(history, feed.keep)
        if older:
            feed.post(HistoryReady(older))
        feed.bridge.push_many(history)
        try:
            result = sup.run()
        except JobBusy as exc:
            feed.post(RunFinished("failed", str(exc), EXIT_USAGE))
            return
        except Exception as exc:  # the engine has its own last line of defence; this is the view's
            feed.post(RunFinished("failed", f"the engine crashed: {type(exc).__name__}: {exc}", EXIT_FAILED))
            return
        self.result = result
        outcome = {ShutdownReason.USER_SHUTDOWN: "stopped", ShutdownReason.INTERRUPTED: "interrupted"}.get(
            result.reason, result.ended)
        detail = result.detail if result.ok or outcome in ("stopped", "interrupted") else \
            f"{result.reason.value}: {result.detail}"
        # In the console every stop is the operator's (the stop key, quit-and-stop, a denied restart): exit 3.
        feed.post(RunFinished(outcome, detail, exit_code(result)))

    def ended(self) -> None:
        self.finished = True
        self.controller.finished = True

    def close(self) -> None:
        """Never leave the engine thread running (the process could not exit): the run is stopped (the second stop
        abandons the turn in flight); the bridge hears no more of it."""
        if not self.finished:
            self.supervisor.stop()
            self.supervisor.stop()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None


def in_process_app(supervisor: Supervisor, *, job_title: str = "", **kw: Any) -> ConsoleApp:
    """The console over ``supervisor``'s run (what ``ConsoleApp.for_run`` was)."""
    s = supervisor.settings
    controller = SupervisorController(supervisor)
    return ConsoleApp(controller=controller, paths=supervisor.paths, job_title=job_title,
                      source=InProcess(supervisor, controller), provider=supervisor.provider.name,
                      model=supervisor.provider.model, window=s.context_window, soft=s.soft_threshold,
                      hard=s.hard_threshold, **kw)


def run_console(supervisor: Supervisor, *, theme: str | None = None, job_title: str = "",
                keymap: Mapping[str, str] | None = None, headless: bool = False,
                auto_pilot: AutoPilot | None = None, signals: list[str] | None = None) -> int:
    """Open the console on a run in this process; returns the exit code (0, 1, 3 or 130).

    ``signals``: when given, SIGTERM and SIGHUP (a `kill`, the SSH session closed) stop the run at once and
    close the console once it has stopped, as in a headless run; the signal's name is appended to the list.

    Raises ``console.engine.supervisor.JobBusy`` before opening anything if another
    process holds the job's run lock.
    """
    from console.engine.supervisor import JobBusy

    holder = RunLock(supervisor.paths).holder()
    if holder is not None and holder != os.getpid():
        raise JobBusy(f"{supervisor.paths.root} is already being run by process {holder}")
    app = in_process_app(supervisor, theme=theme, job_title=job_title, **with_keymap(keymap))
    previous: dict[int, Any] = {}
    if signals is not None:
        import signal

        def on_signal(signum: int, _frame: object) -> None:
            name = signal.Signals(signum).name
            signals.append(name)
            # Sent as the signal's stop: the run ends interrupted (130 in every view), not stopped by its operator.
            supervisor.command("stop", source=name)
            supervisor.command("stop", source=name)  # the second stop abandons the turn in flight: nobody watches
            with contextlib.suppress(Exception):  # the app may not run yet, or be closing
                app.call_later(app.stop_and_quit)

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        app.run(headless=headless, auto_pilot=auto_pilot)
    finally:
        if previous:
            import signal

            for sig, handler in previous.items():
                signal.signal(sig, handler)
    if app.exit_code is not None:
        return app.exit_code
    if app.return_code not in (None, 0):
        return EXIT_FAILED  # the console itself failed (Textual printed why)
    return EXIT_INTERRUPTED  # closed while the run was still going: it was stopped
