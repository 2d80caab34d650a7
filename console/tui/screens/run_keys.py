"""The operator's keys on one run's screen: the actions of :data:`console.tui.keymap.OPERATOR_KEYS`, which of them
the footer offers now, what the palette lists, and leaving the run (q).

:class:`RunKeys` is the half of :class:`console.tui.screens.run.RunScreen` that acts: every command goes through
the run's controller (the supervisor for a run in this process, the job's inbox for one attached), and what this
console asked for shows at once in the status line and the footer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import SystemCommand

from console.engine.command_specs import SPECS
from console.outcome import EXIT_OK
from console.tui.commands import InboxController, SupervisorController
from console.tui.notices import retract
from console.tui.pacing import one_shot
from console.tui.resume import resume_in_background
from console.tui.screens.approval import NOTICE_TITLE, deny_question
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.guardrails import GuardrailsScreen
from console.tui.screens.help import HelpScreen
from console.tui.screens.main import MainScreen
from console.tui.screens.quit import QuitScreen
from console.tui.screens.rewind import RewindScreen
from console.view.liveness import PROCESS_GONE, phase_refusal, resume_text, run_liveness

if TYPE_CHECKING:
    from console.engine.job import JobPaths
    from console.tui.commands import Controller
    from console.tui.screens.dialog import Dialog
    from console.view.state import ConsoleState

STOP_PATIENCE = 10.0  # leaving with "stop the run": seconds to wait for the stop to land before closing anyway


class RunKeys(MainScreen):
    """The actions of a run's screen (the state, controller and flags are :class:`RunScreen`'s)."""

    # The run's commands: offered only while they can act (see check_action).
    RUN_ACTIONS: ClassVar[frozenset[str]] = frozenset({*(spec.action for spec in SPECS), "toggle_pause", "stop_now",
                                                       "acknowledge"})

    if TYPE_CHECKING:  # set by RunScreen
        state: ConsoleState
        controller: Controller
        paths: JobPaths
        run_id: str
        run_finished: bool
        quit_requested: bool
        exit_code: int | None
        in_fleet: bool
        animations: bool
        guardrails_view: GuardrailsScreen | None
        key_help: Callable[[], list[tuple[str, str]]]

        def ask(self, dialog: Dialog, done: Callable[[Any], None]) -> None: ...
        def _status_refresh(self) -> None: ...
        def _refresh_keys(self) -> None: ...
        def _runner_changed(self) -> None: ...
        @property
        def ui_alive(self) -> bool: ...
        def hurry_frames(self) -> None: ...

    # The text of the last rewind sent (kept while it may be refused: r offers it again; "" once applied).
    rewind_text: str = ""

    # -- what applies now ----------------------------------------------------------------------------
    @property
    def run_active(self) -> bool:
        if self.controller.attached:
            return self.controller.runner_pid() is not None and not self.state.ended
        return not self.run_finished

    @property
    def can_start_again(self) -> bool:
        """An attached run no process runs, with its folder here, that has not completed: resume starts it again in
        the background (``agent-console resume``, as the fleet's r does) and this console follows it. A run of
        another machine is started there (its controller's resume_hint says how)."""
        if not isinstance(self.controller, InboxController) or self.run_active or "start" in self.state.requested:
            return False
        if self.controller.runner_pid() is not None or not (self.state.session or self.state.ended):
            return False  # a process holds the run (its end is being logged), or none ever ran it: nothing to start
        return run_liveness(self.state, None).kind in ("interrupted", "stopped", "failed", "needs")

    @property
    def can_acknowledge(self) -> bool:
        """A run of this machine no process runs that gave up, crashed or failed and was not acknowledged: ``k``
        makes it ask no more (console.engine.acknowledge; as the fleet's k and ``agent-console ack``)."""
        if not isinstance(self.controller, InboxController | SupervisorController) or \
                self.controller.runner_pid() is not None:
            return False  # another machine's run is acknowledged there; a live one is answered instead
        st = self.state
        if st.acknowledged or not (st.session or st.ended) or "start" in st.requested:
            return False
        return run_liveness(st, None).kind in ("needs", "failed")

    def action_acknowledge(self) -> None:
        if not self.can_acknowledge:
            self.notify("Only a run that gave up, crashed or failed, and that no process runs, is acknowledged.",
                        title="Nothing to acknowledge")
            return
        self._acknowledge(self.paths, f"{self.run_id} {self.paths.root.name}")

    @work(thread=True, exit_on_error=False, group="acknowledge")
    def _acknowledge(self, paths: JobPaths, name: str) -> None:
        from console.settings import load_settings
        from console.tui.acknowledging import acknowledge_run

        said = acknowledge_run(paths, name, "console", lambda: load_settings().open_store())
        self.app.call_from_thread(self.notify, said.message, title=said.title, severity=said.severity)

    def resume_key(self) -> str:
        """The key that resumes the run (``p``, as the operator's key map has it)."""
        key_for = getattr(self.app, "key_for", None)
        return str(key_for("pause", "p")) if key_for is not None else "p"

    def resume_key_hint(self) -> str:
        """The status line's hint for a run this console can start again (``p resumes``)."""
        return f"{self.resume_key()} resumes"

    def send(self, command: str, pending: str, **args: object) -> bool:
        problem = self.controller.send(command, **args)
        if problem:
            self.notify(problem, title=f"{command.replace('_', ' ')} not sent", severity="warning")
            return False
        self.state.requested[command] = pending
        self.hurry_frames()  # drawn as soon as it is ready, not at the next capped frame
        self._status_refresh()
        self._refresh_keys()  # the footer at once: Resume after pause, Stop now after stop...
        return True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Which keys the footer offers: only what applies to the run now (Resume while paused, Stop now once
        a stop was asked; on a run that has ended, or an attached one nobody runs, none of the run's commands).

        While a dialog is open these keys never reach the run's screen (Textual stops keys at a modal screen),
        and a letter typed into a field is text (a key a focused Input takes is left out of every binding)."""
        if action not in self.RUN_ACTIONS:
            return True
        return self._applies(action, self.run_active)

    def _applies(self, action: str, active: bool) -> bool:
        """check_action for a run command, ``active`` being run_active (asked once: it may read the run lock)."""
        st = self.state
        if action == "acknowledge":
            return not active and self.can_acknowledge
        if action in ("approve", "deny"):
            return st.restart_pending is not None and active
        if not active:
            return action == "resume" and self.can_start_again  # the run starts again (asked first)
        if action in ("checkpoint", "rewind") and phase_refusal(st):
            return False  # the engine would refuse it (bootstrap, the final review): not offered
        stopping = st.stopping or "stop" in st.requested
        if action == "stop":
            return not stopping
        if action == "stop_now":
            return stopping
        if stopping and action != "toggle_pause":
            return False  # the run is ending: pausing, re-planning or a checkpoint would never apply
        # What the run will be once what this console asked for applies (the footer changes with the key).
        pausing = "pause" in st.requested or (st.paused and "resume" not in st.requested)
        if action == "pause":
            return not pausing
        if action == "resume":
            return pausing
        return True

    def _ended_notice(self, command: str) -> bool:
        """Say why a run command does nothing now (palette, or a key the footer no longer shows); True if so."""
        if self.run_active:
            return False
        # A run of another machine is resumed there (its controller says how), not from this one's folder.
        resume = getattr(self.controller, "resume_hint", "") or f"agent-console resume {self.run_id}"
        if self.can_start_again:  # the way on is here: the same key as the footer's, as the fleet's r
            resume = f"{self.resume_key()} here (or {resume})"
        if self.state.outcome == "completed":
            self.notify(f"The job is complete: there is nothing to {command}.", title=f"No {command}")
        elif self.state.ended:
            self.notify(f"The run has ended ({self.state.outcome}): nothing to {command}. Resume it with "
                        f"{resume}", title=f"No {command}")
        elif "start" in self.state.requested:
            self.notify(f"The run is starting again: {command} once it runs.", title=f"No {command} yet")
        else:
            state = run_liveness(self.state, None).state
            self.notify(f"The run is {state}: {PROCESS_GONE}, nothing to {command}. Resume it with {resume}",
                        title=f"No {command}")
        return True

    def _phase_refused(self, command: str) -> bool:
        """Say why a checkpoint or rewind cannot apply in this phase (the engine would refuse it); True if so."""
        why = phase_refusal(self.state)
        if why:
            self.notify(f"{command.capitalize()} not available: {why}.", title=f"No {command} now")
        return bool(why)

    # -- the run's commands ----------------------------------------------------------------------------
    def action_checkpoint(self) -> None:
        if self._ended_notice("checkpoint") or self._phase_refused("checkpoint"):
            return
        self.send("checkpoint", "checkpoint requested")

    def action_rewind(self) -> None:
        if self._ended_notice("rewind") or self._phase_refused("rewind"):
            return

        todos = self.state.todos
        # The phase the dialog names; the engine refuses the rewind if it has ended by the time it lands.
        number = todos.phase_number if todos is not None and todos.kind in ("phase", "transition") and \
            todos.phase_number > 0 else None

        def done(issue: str | None) -> None:
            if issue and self.send("rewind", "rewind requested", issue=issue, phase=number):
                self.rewind_text = issue  # kept until the engine applies it: a refused rewind's words are not lost

        self.ask(RewindScreen(self.state.phase, number=number, blink=self.animations, text=self.rewind_text), done)

    def action_approve(self) -> None:
        retract(self.app, NOTICE_TITLE)  # "restart pending" is answered (the other notices stay)
        self.send("approve_restart", "approval sent")

    def action_deny(self) -> None:
        """d (the restart's banner), the palette: it ends the run, so it asks first (deny_question says why)."""
        host = getattr(self.controller, "host", "")
        self.ask(deny_question(self.run_id or str(self.paths.root), host),
                 lambda yes: self.deny_restart() if yes else None)

    def deny_restart(self) -> None:
        retract(self.app, NOTICE_TITLE)
        self.send("deny_restart", "denial sent")

    def action_toggle_pause(self) -> None:
        """One key (the footer never has to change): resume when paused or pausing, pause otherwise."""
        st = self.state
        if "pause" in st.requested or (st.paused and "resume" not in st.requested):
            self.action_resume()
        else:
            self.action_pause()

    def action_pause(self) -> None:
        if self._ended_notice("pause"):
            return
        self.state.requested.pop("resume", None)
        self.send("pause", "pausing after this turn")

    def action_resume(self) -> None:
        if self.can_start_again:
            self._start_again()
            return
        if self._ended_notice("resume"):
            return
        self.state.requested.pop("pause", None)
        self.send("resume", "resuming")

    def _start_again(self) -> None:
        """Resume a run no process runs: asked first, then ``agent-console resume`` in the background (the fleet's
        way); this console follows the run once its new process holds it."""
        name = self.run_id or str(self.paths.root)

        def done(yes: bool | None) -> None:
            if yes and self.can_start_again:
                self.state.requested["start"] = "starting again"
                self._runner_changed()
                self.start_again()

        self.ask(ConfirmScreen(f"Resume {name}?", resume_text(self.state, name), "Resume", "Leave it"), done)

    @work(thread=True, exit_on_error=False, group="start-again")
    def start_again(self) -> None:
        problem = resume_in_background(self.paths.root, "console")
        self.app.call_from_thread(self._started_again, problem)

    def _started_again(self, problem: str | None) -> None:
        if problem is None:
            self.notify("The run runs again, in the background: this console follows it.", title="Resumed")
            return
        self.state.requested.pop("start", None)
        self.notify(problem, title="Not resumed", severity="error", timeout=15)
        if self.ui_alive:
            self._runner_changed()

    def action_stop(self) -> None:
        if self._ended_notice("stop"):
            return
        again = self.state.stopping or "stop" in self.state.requested

        def done(yes: bool | None) -> None:
            if yes:
                self.send("stop", "stopping now" if again else "stopping after this turn")

        resume = getattr(self.controller, "resume_hint", "") or f"agent-console resume {self.run_id}"
        if again:
            self.ask(ConfirmScreen("Stop now?", "The current turn is abandoned (its half-written reply is "
                                   f"dropped); the run can be resumed with `{resume}`.", "Stop now", "Wait"), done)
        else:
            self.ask(ConfirmScreen("Stop the run?", "The run stops at once if it is waiting for the model "
                                   "(the reply in progress is asked again on resume), else after the "
                                   f"current turn's tool calls. Resume it later with `{resume}`.", "Stop",
                                   "Keep running"), done)

    def action_stop_now(self) -> None:
        """The stop key once a stop was asked (the footer reads Stop now): asks, then abandons the turn."""
        self.action_stop()

    def action_guardrails(self) -> None:
        if self.guardrails_view is not None:
            if self.guardrails_view.is_current:
                self.guardrails_view.dismiss(None)
            return

        def closed(_: None) -> None:
            self.guardrails_view = None

        self.guardrails_view = GuardrailsScreen(self.state, self.now)
        self.app.push_screen(self.guardrails_view, closed)

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.key_help(), attached=self.controller.attached))

    # -- leaving ---------------------------------------------------------------------------------------
    def _exit(self, code: int | None = None) -> None:
        code = code if code is not None else (self.exit_code if self.exit_code is not None else EXIT_OK)
        self.app.exit(code, return_code=code)

    def stop_and_quit(self) -> None:
        """A signal (SIGTERM, SIGHUP): nobody may be watching; the run is stopped now and the console closes as
        soon as it has (at once if the run had already ended)."""
        if self.run_finished:
            self._exit()
            return
        self.quit_requested = True
        self.state.requested["stop"] = "stopping (signal), then quitting"
        self._status_refresh()

    def action_quit_console(self) -> None:
        """q: back to the fleet's list (the run goes on); attached alone, detach or stop; a run in this process
        asks, then stops it and quits."""
        if self.in_fleet:
            self.leave()
            return
        if self.controller.attached:
            self._leave_attached()
            return
        if self.run_finished:
            self._exit()
            return
        if self.quit_requested:
            self.notify("Waiting for the run to stop…")
            return

        def done(yes: bool | None) -> None:
            if yes and self.run_finished:
                # The run ended while the dialog was open: nothing left to stop, nothing will report back.
                self._exit()
                return
            if yes:
                self.quit_requested = True
                self.controller.send("stop")
                self.controller.send("stop")  # the second stop abandons the current turn
                self.state.requested["stop"] = "stopping, then quitting"
                self._status_refresh()

        self.app.push_screen(ConfirmScreen("Quit and stop the run?", "The run lives in this process: quitting "
                                           "stops it. Everything so far is saved; resume with `agent-console run "
                                           f"--in-place {self.paths.root}`. (To watch a run you can leave, start "
                                           "it with --headless and use `agent-console attach`.)", "Stop and quit",
                                           "Stay", quits=True), done)

    def leave(self) -> None:
        """Back to the screen under this one (the fleet's list): dialogs over it close with it; the run goes on.
        Its workers stop with the screen."""
        stack = self.app.screen_stack
        if self not in stack:
            return
        for _ in range(len(stack) - stack.index(self)):
            self.app.pop_screen()

    def _leave_attached(self) -> None:
        """q on a run another process runs: detach (it goes on) or stop it; nothing to ask once it has ended."""
        if not self.run_active:
            self._exit(EXIT_OK)
            return
        if self.quit_requested:
            self._exit(EXIT_OK)  # q again while the stop lands: leave it to land alone
            return

        def done(answer: str | None) -> None:
            if answer == "detach" or (answer == "stop" and not self.run_active):
                self._exit(EXIT_OK)
            elif answer == "stop" and self.send("stop", "stopping, then quitting"):
                self.controller.send("stop")  # the second stop drops the turn in flight
                self.quit_requested = True
                one_shot(self, STOP_PATIENCE, lambda: self._exit(EXIT_OK))

        self.ask(QuitScreen(self.run_id or str(self.paths.root)), done)

    # -- the palette -----------------------------------------------------------------------------------
    def system_commands(self) -> Iterable[SystemCommand]:
        """This run's entries of the command palette, in the console's words (the app adds its own)."""
        for spec in SPECS:  # the run's commands, from the engine's command specs
            help_text = spec.palette_help
            if spec.action == "resume" and self.can_start_again:
                help_text = "Start this run again in the background (asks first; as the fleet's r)"
            yield SystemCommand(spec.title, help_text, getattr(self, f"action_{spec.action}"))
        yield SystemCommand("Guardrails", "Policies, feedback providers, completion checker, deadline, token "
                            "and money budgets", self.action_guardrails)
        yield SystemCommand("Next pane", "Focus the next pane", self.action_next_pane)
        yield SystemCommand("Maximize pane", "Maximize or restore the focused pane", self.action_toggle_maximize)
        yield SystemCommand("Help", "Keys and panes", self.action_help)
