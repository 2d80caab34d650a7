"""One run's screen: its panes and everything that belongs to the run shown.

A :class:`RunScreen` owns its run: the controller its keys act through, the fold of its events
(:class:`console.view.state.ConsoleState`) and its parts, each handed the run (:class:`RunContext`) and the few
functions it needs, never the screen: how its events reach the panes (:class:`console.tui.screens.run_intake.
EventIntake`: the bridge, the source that feeds it, the batches), the panes (:class:`console.tui.screens.main.
RunPanes`), the restart's question (:class:`console.tui.screens.restart_prompt.RestartPrompt`), the run's commands
(:class:`console.tui.screens.run_keys.RunCommands`) and leaving (:class:`console.tui.screens.run_leave.Leaving`).
What each key offers now is decided without Textual (:mod:`console.view.run_offers`).

The fleet attaches to a run by pushing a fresh RunScreen and leaves it by popping it: Textual cancels the workers
of a screen taken down, and a message posted to it is dropped, so nothing of one run reaches the next one shown.

Data flow: the run's source (the log follower of an attached run, or an
:class:`console.tui.screens.run_intake.EventSource` given) pushes events into an :class:`EventBridge` from the
screen's worker; the intake drains it in batches (at most ~30 times a second), folds each batch into the state and
hands it to the conversation pane; the screen refreshes only the panes whose aspect changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.events import Resize
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.worker import get_current_worker

from console.engine import events as ev
from console.engine.command_specs import SPECS
from console.engine.job_files import JobPaths
from console.outcome import EXIT_OK, EXIT_USAGE
from console.tui import messages
from console.tui.bridge import EventBridge
from console.tui.commands import Controller, RecordingController
from console.tui.follow import Cancellable
from console.tui.host import ConsoleHost
from console.tui.keymap import OPERATOR_KEYS
from console.tui.messages import EventsReady, HistoryFolded, HistoryReady, RunFinished, RunnerState
from console.tui.notices import retract
from console.tui.pacing import FrameTimer, frame_timer, one_shot
from console.tui.screens.dialog import Dialog
from console.tui.screens.guardrails import GuardrailsScreen
from console.tui.screens.help import HelpScreen
from console.tui.screens.main import RunPanes
from console.tui.screens.restart_prompt import RestartPrompt
from console.tui.screens.run_context import RunContext
from console.tui.screens.run_intake import EventIntake, EventSource, LogFollower
from console.tui.screens.run_keys import RunCommands
from console.tui.screens.run_leave import Leaving
from console.tui.widgets.conversation import MAX_ITEMS, ConversationPane
from console.tui.widgets.experiences_pane import ExperiencesPane
from console.tui.widgets.feedback import FeedbackPane
from console.tui.widgets.gauge import ContextGauge
from console.tui.widgets.plan_pane import PlanPane
from console.tui.widgets.status import StatusLine
from console.tui.widgets.tabs import PaneTabs
from console.tui.widgets.todo_pane import TodoPane
from console.view.liveness import PROCESS_GONE, run_liveness
from console.view.run_offers import RUN_ACTIONS, offered, offers
from console.view.state import EXPERIENCES, FEEDBACK, GAUGE, GUARDS, PLAN, RESTART, STATUS, TODOS, ConsoleState

GONE_TITLE = "Run interrupted"  # the notice of a run whose process died under this console


def refused_title(command: str) -> str:
    """The title of the notice of a command the engine refused (taken back once the same command is applied)."""
    return f"{command.replace('_', ' ').capitalize()} refused"


@dataclass
class Run:
    """Which run a screen shows, and how: one followed from its log (``follow``, keys through its controller), or
    fed by a ``source`` of its events (tests; nothing feeds a screen given neither: its bridge is pushed to)."""

    controller: Controller = field(default_factory=RecordingController)
    paths: JobPaths = field(default_factory=lambda: JobPaths(Path.cwd()))
    job_title: str = ""
    source: EventSource | None = None
    follow: bool = False
    provider: str = ""
    model: str = ""
    window: int = 0
    soft: float = 0.70
    hard: float = 0.85
    run_id: str = ""


class RunScreen(Screen[Any]):
    """One run, its panes and its keys (see the module's docstring)."""

    AUTO_FOCUS = "#conversation"
    BINDINGS = [Binding(k.key, k.action, k.label, show=k.show, id=k.id, tooltip=k.help, key_display=k.key_display)
                for k in OPERATOR_KEYS]
    RUN_ACTIONS = RUN_ACTIONS  # the run's commands: offered only while they can act (see check_action)

    def __init__(self, run: Run, now: Callable[[], datetime], *, max_items: int = MAX_ITEMS, watch_files: bool = True,
                 animations: bool = True, in_fleet: bool = False, rung: dict[Path, int] | None = None,
                 key_help: Callable[[], list[tuple[str, str]]] | None = None) -> None:
        """``in_fleet``: attached from the fleet's list (q goes back to it); ``rung``: the needs_operator seq the
        bell already rang for, per run (shared with the fleet, so a need rings once); ``key_help``: the keys as
        the operator's key map has them (the help screen's rows)."""
        super().__init__(id="main")
        self.now = now
        self.max_items = max_items
        state = ConsoleState(run.job_title or run.paths.root.name, provider=run.provider, model=run.model,
                             window=run.window, soft=run.soft, hard=run.hard)
        self.run = RunContext(state, run.controller, run.paths, run.run_id)
        self.panes = RunPanes(state, now, plan_path=run.paths.main_plan, attached=run.controller.attached,
                              max_items=max_items, run_id=run.run_id)
        self.watch_files = watch_files  # follow main_plan.md on disk (tests turn the watchers off)
        self.animations = animations
        self.in_fleet = in_fleet
        self.key_help = key_help or (lambda: [])
        self.prompt = RestartPrompt(self.run, stage=lambda: self.app, notify=self.notify, retract=self._retract,
                                    approve=lambda: self.commands.approve(),
                                    deny=lambda: self.commands.deny_restart(),
                                    alive=lambda: self.ui_alive, rung=rung)
        self.commands = RunCommands(self.run, notify=self.notify, ask=self.prompt.ask, sent=self._sent,
                                    runner_changed=self._runner_changed, retract=self._retract,
                                    resume_key=self.resume_key, in_background=self._in_background,
                                    ui_alive=lambda: self.ui_alive, animations=animations)
        self.leaving = Leaving(self.run, in_fleet=in_fleet, exit=self._exit, back=self.leave, ask=self.prompt.ask,
                               push=self._push, notify=self.notify,
                               send=self.commands.send, status_refresh=self._status_refresh,
                               later=self._later)
        source = run.source or (LogFollower(run.paths.events, run.controller) if run.follow else None)
        self.intake = EventIntake(self.run, source, keep=max_items, later=self._later, alive=lambda: self.ui_alive,
                                  conversation=lambda: self.conversation, changed=self.refresh_panes,
                                  said=self._say_refused, close=self._exit)
        self.guardrails_view: GuardrailsScreen | None = None
        self._keys_state: tuple[bool, ...] = ()
        self._panes_ready = False
        self._runner_pid: int | None = None  # the process running the run, as last seen (attached)

    # -- the run (its shared object is the parts'; these are the screen's public face) -------------------
    @property
    def state(self) -> ConsoleState:
        return self.run.state

    @property
    def controller(self) -> Controller:
        return self.run.controller

    @property
    def paths(self) -> JobPaths:
        return self.run.paths

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def run_finished(self) -> bool:
        return self.run.finished

    @property
    def quit_requested(self) -> bool:
        return self.run.quit_requested

    @property
    def exit_code(self) -> int | None:
        return self.run.exit_code

    # -- the layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield self.panes

    def on_mount(self) -> None:
        self.panes.ready(self.size)
        self.pane("conversation").focus()
        self._ready()

    def on_resize(self, event: Resize) -> None:
        self.panes.fit(event.size)

    @property
    def layout_mode(self) -> str:
        return self.panes.layout_mode

    @property
    def active(self) -> str:
        return self.panes.active

    def pane(self, name: str) -> Widget:
        return self.panes.pane(name)

    def pane_of(self, widget: Widget | None) -> str | None:
        return self.panes.pane_of(widget)

    def show_pane(self, name: str) -> None:
        pane = self.panes.show(name)
        if self.maximized is not None:
            self.minimize()
        pane.focus()

    def action_next_pane(self) -> None:
        self.show_pane(self.panes.step(1))

    def action_previous_pane(self) -> None:
        self.show_pane(self.panes.step(-1))

    def action_toggle_maximize(self) -> None:
        if self.maximized is not None:
            self.minimize()
        else:
            self.maximize(self.pane(self.active), container=False)

    def on_pane_tabs_selected(self, message: PaneTabs.Selected) -> None:
        self.show_pane(message.pane)

    # -- the panes ---------------------------------------------------------------------------
    @property
    def _update_timer(self) -> FrameTimer:
        """Textual's frame timer for this screen, replaced by one that draws a frame asked for after a quiet
        period at once (see console.tui.pacing: a key's effect used to wait 17-33 ms for Textual's next tick)."""
        timer: FrameTimer | None = self.__dict__.get("_frames")
        if timer is None:
            timer = self.__dict__["_frames"] = frame_timer(self)
        return timer

    def hurry_frames(self) -> None:
        """A key has acted: draw what it changed (the status line, the footer) as soon as it is ready, not at the
        next capped frame, and before the events streaming in and the conversation's repaints, which wait
        ``KEY_FIRST`` (a flood would otherwise put a fold and a repaint of the conversation between the key and
        each of its frames: the status line's, then the footer's layout)."""
        self._update_timer.hurry()
        held = self.intake.key_first()
        if self.ui_alive:
            self.conversation.hold(held)

    @property
    def conversation(self) -> ConversationPane:
        return self.query_one(ConversationPane)

    @property
    def ui_alive(self) -> bool:
        """The panes exist (False while the screen is taken down: timers may still fire)."""
        return self._panes_ready and self.is_attached and bool(self.children)

    def _status_refresh(self) -> None:
        if self.ui_alive:
            for line in self.query(StatusLine):  # none while the screen is being taken down
                line.refresh()

    # -- start-up and shut-down ----------------------------------------------------------------
    def _ready(self) -> None:
        """Called once the panes exist: start the event sources and the watchers."""
        self._panes_ready = True
        self.intake.start(self, self._worker)
        plan_text = self.controller.plan_source
        if plan_text is not None:  # a run of another machine: its plan file is there, not here
            self.query_one(PlanPane).source = plan_text
        elif self.watch_files:
            # After the first frames (console.tui.messages.WATCH_AFTER); the pane reads the file again once it
            # watches it (PlanPane.follow_plan).
            one_shot(self, messages.WATCH_AFTER, self.query_one(PlanPane).follow_plan, name="plan-watch")
        self.query_one(PlanPane).reload_soon()
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        if self.ui_alive and not self.state.ended:
            self._status_refresh()
        if self.ui_alive and self.prompt.waits >= 0:
            self.prompt.sync()

    def on_unmount(self) -> None:
        self.close()

    def close(self) -> None:
        """Let go of the run: its source stops (a source that runs the run must never outlive the console: the
        process could not exit), and the bridge takes no more."""
        self._panes_ready = False
        self.intake.close()

    def _later(self, delay: float, then: Callable[[], None]) -> Timer:
        """Call ``then`` once, after ``delay`` seconds (console.tui.pacing.one_shot: late rather than never)."""
        return one_shot(self, delay, then)

    def _worker(self, job: Callable[[Cancellable], None], name: str) -> None:
        """``job`` on a worker thread of this screen (cancelled when the screen is taken down), given its worker."""
        self.run_worker(lambda: job(get_current_worker()), thread=True, exit_on_error=False, group=name, name=name)

    # -- events in (the intake's) ---------------------------------------------------------------------
    @property
    def bridge(self) -> EventBridge:
        return self.intake.bridge

    @property
    def events_seen(self) -> int:
        return self.intake.events_seen

    @property
    def drains(self) -> int:
        return self.intake.drains

    def drain_events(self, *, everything: bool = False) -> None:
        self.intake.drain(everything=everything)

    def on_events_ready(self, message: EventsReady) -> None:
        message.stop()
        self.intake.ready()

    def on_history_ready(self, message: HistoryReady) -> None:
        message.stop()
        self.intake.history(message.events)

    def on_history_folded(self, message: HistoryFolded) -> None:
        message.stop()
        self.intake.folded(message.folded)

    def _say_refused(self, events: list[ev.EventBase]) -> None:
        """A command this console sent and still waits for, refused by the engine (a rewind whose phase has
        ended, a pause of a paused run): said at once, also where the Feedback pane is not in sight."""
        for e in events:
            if not isinstance(e, ev.OperatorCommand):
                continue
            if e.status == "applied":
                if e.command == "rewind":
                    self.run.rewind_text = ""
                if e.command == "answer":
                    self.run.answer_values = {}
                retract(self.app, refused_title(e.command))  # tried again and applied: the refusal is past
            if e.status == "rejected" and e.command in self.state.requested:
                kept = ""
                if e.command == "rewind" and self.run.rewind_text:  # the operator's words, said back (r offers them)
                    kept = f"\nYour text, kept (r offers it again): {self.run.rewind_text}"
                if e.command == "answer" and self.run.answer_values:
                    kept = "\nYour values are kept: the command palette's Answer question offers them again."
                self.notify(f"{e.command.replace('_', ' ')} not applied: {e.detail}{kept}",
                            title=refused_title(e.command), severity="warning", timeout=10)

    def refresh_panes(self, changed: Iterable[str]) -> None:
        if not self.ui_alive:
            return
        changed = set(changed)
        if TODOS in changed:
            self.query_one(TodoPane).show(self.state.todos)
        if changed & {GAUGE, STATUS, RESTART}:
            for gauge in self.query(ContextGauge):
                gauge.refresh()
        if changed & {STATUS, RESTART, GAUGE, TODOS}:
            for line in self.query(StatusLine):
                line.refresh()
            self._refresh_keys()
        if FEEDBACK in changed:
            self.query_one(FeedbackPane).show(list(self.state.feedback))
            tabs = self.query_one(PaneTabs)
            tabs.set_badge("feedback", f" {len(self.state.feedback)}" if self.state.feedback else "")
        if EXPERIENCES in changed:
            self.query_one(ExperiencesPane).show(list(self.state.experiences.values()))
            n = len(self.state.experiences)
            self.query_one(PaneTabs).set_badge("experiences", f" {n}" if n else "")
        if changed & {GUARDS, FEEDBACK} and self.guardrails_view is not None:
            self.guardrails_view.update_view()
        if PLAN in changed:
            self.query_one(PlanPane).reload_soon()
        if RESTART in changed or STATUS in changed:
            self.prompt.sync()

    def _refresh_keys(self) -> None:
        """Re-check which keys apply (the footer rebuilds itself, so only when an answer changed): called on
        every change of the run's state and of what this console asked for (pause, resume, stop...)."""
        if not self.ui_alive:
            return
        facts = self.run.facts()
        key = offers(facts)
        if key != self._keys_state:
            self._keys_state = key
            # The status line's "p resumes" follows the same facts: set when the runner's state came, before an
            # attach's replay had reached the run's end, it stayed on a completed run ("completed · read-only │ p
            # resumes", and p did nothing).
            hint = self.resume_key_hint() if facts.can_start_again else ""
            for status in self.query(StatusLine):
                if status.resume_hint != hint:
                    status.resume_hint = hint
                    status.refresh()
            self.panes.crowd(self.state.restart_pending is not None)  # two more keys in the footer
            # This screen's, not the top one's: its footer must be right when a dialog over it closes.
            self.refresh_bindings()

    # -- the keys (the run's commands are RunCommands'; what a key offers now is console.view.run_offers') ----
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Which keys the footer offers: only what applies to the run now (Resume while paused, Stop now once
        a stop was asked; on a run that has ended, or an attached one nobody runs, none of the run's commands).

        While a dialog is open these keys never reach the run's screen (Textual stops keys at a modal screen),
        and a letter typed into a field is text (a key a focused Input takes is left out of every binding)."""
        if action not in RUN_ACTIONS:
            return True
        return offered(action, self.run.facts())

    def resume_key(self) -> str:
        """The key that resumes the run (``p``, as the operator's key map has it)."""
        return self.app.key_for("pause", "p") if isinstance(self.app, ConsoleHost) else "p"

    def resume_key_hint(self) -> str:
        """The status line's hint for a run this console can start again (``p resumes``)."""
        return f"{self.resume_key()} resumes"

    def _sent(self) -> None:
        """A command went out: draw it at once (the status line, then the footer: Resume after pause...)."""
        self.hurry_frames()  # drawn as soon as it is ready, not at the next capped frame
        self._status_refresh()
        self._refresh_keys()

    def _push(self, dialog: Dialog[Any], done: Callable[[Any], None]) -> None:
        self.app.push_screen(dialog, done)

    def _retract(self, title: str) -> None:
        retract(self.app, title)

    def _in_background(self, job: Callable[[], Any], done: Callable[[Any], None], group: str) -> None:
        """``job`` on a worker thread of this screen (cancelled with it), then ``done`` with its result here."""
        def run() -> None:
            result = job()
            self.app.call_from_thread(done, result)

        self.run_worker(run, thread=True, exit_on_error=False, group=group)

    def action_acknowledge(self) -> None:
        self.commands.acknowledge()

    def action_checkpoint(self) -> None:
        self.commands.checkpoint()

    def action_rewind(self) -> None:
        self.commands.rewind()

    def action_answer(self) -> None:
        self.commands.answer()

    def action_approve(self) -> None:
        self.commands.approve()

    def action_deny(self) -> None:
        self.commands.deny()

    def action_toggle_pause(self) -> None:
        self.commands.toggle_pause()

    def action_pause(self) -> None:
        self.commands.pause()

    def action_resume(self) -> None:
        self.commands.resume_run()

    def action_stop(self) -> None:
        self.commands.stop()

    def action_stop_now(self) -> None:
        """The stop key once a stop was asked (the footer reads Stop now): asks, then abandons the turn."""
        self.commands.stop()

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

    # -- leaving (Leaving's) ---------------------------------------------------------------------------
    def _exit(self, code: int | None = None) -> None:
        code = code if code is not None else (self.exit_code if self.exit_code is not None else EXIT_OK)
        self.app.exit(code, return_code=code)

    def stop_and_quit(self) -> None:
        self.leaving.stop_and_quit()

    def action_quit_console(self) -> None:
        self.leaving.quit()

    def leave(self) -> None:
        """Back to the screen under this one (the fleet's list): dialogs over it close with it; the run goes on.
        Its workers stop with the screen."""
        stack = self.app.screen_stack
        if self not in stack:
            return
        for _ in range(len(stack) - stack.index(self)):
            self.app.pop_screen()

    # -- the palette -----------------------------------------------------------------------------------
    def system_commands(self) -> Iterable[SystemCommand]:
        """This run's entries of the command palette, in the console's words (the app adds its own)."""
        for spec in SPECS:  # the run's commands, from the engine's command specs
            help_text = spec.palette_help
            if spec.action == "resume" and self.run.facts().can_start_again:
                help_text = "Start this run again in the background (asks first; as the fleet's r)"
            yield SystemCommand(spec.title, help_text, getattr(self, f"action_{spec.action}"))
        yield SystemCommand("Guardrails", "Policies, feedback providers, completion checker, deadline, token "
                            "and money budgets", self.action_guardrails)
        yield SystemCommand("Next pane", "Focus the next pane", self.action_next_pane)
        yield SystemCommand("Maximize pane", "Maximize or restore the focused pane", self.action_toggle_maximize)
        yield SystemCommand("Help", "Keys and panes", self.action_help)

    # -- the run's end, and its runner --------------------------------------------------------------
    def on_run_finished(self, message: RunFinished) -> None:
        message.stop()
        self.intake.drain(everything=True)  # the run's last events before its verdict
        self.run.finished = True
        self.intake.ended()
        self.state.mark_finished(message.outcome, message.detail, None)
        self.state.requested.clear()
        if message.exit_code == EXIT_USAGE:
            self.notify(message.detail, title="Cannot run this job", severity="error", timeout=30)
        elif message.outcome == "failed":
            self.notify(message.detail, title="The run ended without completing", severity="error", timeout=15)
        # A completed run says so in the status line and the conversation: a toast would cover its last lines.
        self.run.exit_code = message.exit_code
        self.refresh_panes({STATUS, RESTART})
        if self.quit_requested:
            self._exit(message.exit_code)

    def on_runner_state(self, message: RunnerState) -> None:
        message.stop()
        if not self.ui_alive:
            return
        was = self._runner_pid
        self._runner_pid = message.pid
        if was is not None and message.pid is None and not self.state.ended and self.run.facts().can_start_again:
            # Its process died under this console (kill -9, a crash): said once, at any width (the status line may
            # have room only for the state).
            state = run_liveness(self.state, None).state
            self.notify(f"The run is {state}: {PROCESS_GONE} (its end was never logged); "
                        f"{self.resume_key_hint()} it here.", title=GONE_TITLE, severity="warning", timeout=15)
        if message.pid is not None:
            retract(self.app, GONE_TITLE)  # it runs again
        for status in self.query(StatusLine):
            status.runner_pid = message.pid
            status.runner_host = self.controller.host  # a run of another machine (the store's)
            status.store_problem = self.controller.problem
            status.runner_known = True
        if message.pid is not None:
            self.state.requested.pop("start", None)  # a resume started here runs: the follower shows it
        self._runner_changed()

    def _runner_changed(self) -> None:
        """Whether a process runs the run changed (or what this console asked of it): the status line's state and
        resume hint, and the footer's keys."""
        hint = self.resume_key_hint() if self.run.facts().can_start_again else ""
        for status in self.query(StatusLine):
            status.resume_hint = hint
            status.refresh()
        self._keys_state = ()
        self._refresh_keys()
