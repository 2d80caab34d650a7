"""The operator console: a Textual app over one job's event stream.

It renders only from engine events (and main_plan.md) and acts only through the
engine's control API: the supervisor's methods for a run in this process, the
job's control inbox for a run in another one. No agent logic lives here.

Data flow: the engine thread (or the log follower) pushes events into an
:class:`EventBridge`; the app drains it in batches (at most ~30 times a second),
folds the batch into :class:`ConsoleState`, hands it to the conversation pane and
refreshes only the panes whose aspect changed.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Input, TextArea
from textual.worker import get_current_worker

from console.engine import events as ev
from console.engine.job import JobPaths
from console.engine.store import JobStore, folder_gone
from console.engine.text import safe_text
from console.outcome import EXIT_FAILED, EXIT_OK, EXIT_USAGE, exit_code
from console.tui.bridge import EventBridge
from console.tui.commands import Controller, InboxController, RecordingController, SupervisorController
from console.tui.follow import follow_log, split_history, worker_sleep
from console.tui.keymap import OPERATOR_KEYS, check_keymap
from console.tui.messages import (
    EventsReady,
    FleetRows,
    HistoryFolded,
    HistoryReady,
    RunFinished,
    RunnerState,
    ThemeFileChanged,
)
from console.tui.screens.approval import RestartApprovalScreen
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.dialog import ARM_DELAY, Dialog
from console.tui.screens.fleet import FleetScreen
from console.tui.screens.guardrails import GuardrailsScreen
from console.tui.screens.help import HelpScreen
from console.tui.screens.main import MainScreen
from console.tui.screens.quit import QuitScreen
from console.tui.screens.rewind import RewindScreen
from console.tui.themes import DEFAULT_THEME, ThemeError, load_theme_file, load_themes, themes_dir, user_themes_dir
from console.tui.widgets.conversation import MAX_ITEMS, ConversationPane
from console.tui.widgets.experiences_pane import ExperiencesPane
from console.tui.widgets.feedback import FeedbackPane
from console.tui.widgets.gauge import ContextGauge
from console.tui.widgets.lines import ItemView
from console.tui.widgets.plan_pane import PlanPane
from console.tui.widgets.status import StatusLine
from console.tui.widgets.tabs import PaneTabs
from console.tui.widgets.todo_pane import TodoPane
from console.view.fleet import GONE, Fleet, FleetRow
from console.view.state import EXPERIENCES, FEEDBACK, GAUGE, GUARDS, PLAN, RESTART, STATUS, TODOS, ConsoleState

if TYPE_CHECKING:
    from console.engine.supervisor import RunResult, Supervisor

DRAIN_INTERVAL = 1 / 30  # the UI absorbs events in batches at most this often
# `resume` returns once its runner holds the run's lock (a few seconds); past this something is wrong, and said.
RESUME_TIMEOUT = 60.0
DRAIN_BUDGET = 0.008  # seconds of folding per batch; a backlog is absorbed in slices, keys act in between
DRAIN_CHUNK = 400
# The run's commands: offered only while they can act (see ConsoleApp.check_action).
RUN_ACTIONS = {"checkpoint", "rewind", "approve", "deny", "pause", "resume", "toggle_pause", "stop", "stop_now"}
FLEET_POLL = 1.0  # the fleet: how often the jobs store and the runs' logs are polled (its times are in seconds)
STOP_PATIENCE = 10.0  # leaving with "stop the run": seconds to wait for the stop to land before closing anyway


def utc_now() -> datetime:
    return datetime.now(UTC)


class ConsoleApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "agent-console"
    ALLOW_IN_MAXIMIZED_VIEW = "Footer, #status"
    # Ctrl+C and Ctrl+Q do what q does (ask first when the run is in this process): Textual's own quit would
    # skip the question and abort the run.
    BINDINGS = [Binding("ctrl+c", "quit_console", show=False, system=True),
                Binding("ctrl+q", "quit_console", show=False, system=True, priority=True)]

    def __init__(
        self,
        *,
        controller: Controller | None = None,
        paths: JobPaths | None = None,
        job_title: str = "",
        supervisor: Supervisor | None = None,
        follow: bool = False,
        theme: str | None = None,
        themes: Path | None = None,
        watch: bool = True,
        now: Callable[[], datetime] | None = None,
        keymap: Mapping[str, object] | None = None,
        notices: list[str] | None = None,
        max_items: int = MAX_ITEMS,
        animations: bool = True,
        provider: str = "",
        model: str = "",
        window: int = 0,
        soft: float = 0.70,
        hard: float = 0.85,
        fleet: Fleet | None = None,
        poll_interval: float = FLEET_POLL,
        dialog_delay: float = ARM_DELAY,
        dialog_clock: Callable[[], float] | None = None,
    ) -> None:
        """One run (``controller`` and ``paths``), or the fleet (``fleet``: the list of runs first, a run
        attached from it and left again with q). ``dialog_delay``: how long a dialog ignores keys once shown
        (``dialog_clock``: its clock, monotonic seconds)."""
        super().__init__()
        self.dialog_delay = dialog_delay
        self.dialog_clock = dialog_clock or time.monotonic
        self.requested_theme = theme
        self.themes_path = themes or themes_dir()
        self.watch = watch
        self.now = now or utc_now
        self.keymap_raw = dict(keymap or {})
        self.notices = list(notices or [])
        self.max_items = max_items
        self.animations = animations
        if not animations:
            self.animation_level = "none"
        self.fleet = fleet
        self.fleet_view: FleetScreen | None = None
        self.poll_interval = poll_interval
        self._rung: dict[Path, int] = {}  # the needs_operator seq the bell already rang for, per run
        self._stop_watch = asyncio.Event()
        self.theme_problems: list[str] = []
        self._gc_thresholds: tuple[int, ...] = ()
        self._generation = 0  # which run the workers and messages belong to (the fleet attaches several in turn)
        self._main: MainScreen | None = None
        self._bind_run(controller, paths, job_title=job_title, supervisor=supervisor, follow=follow,
                       provider=provider, model=model, window=window, soft=soft, hard=hard)
        if supervisor is not None:
            # Subscribe before the run starts, so not one event is missed.
            self._unsubscribe = supervisor.subscribe(self.bridge.push)

    def _bind_run(self, controller: Controller | None, paths: JobPaths | None, *, job_title: str = "",
                  supervisor: Supervisor | None = None, follow: bool = False, provider: str = "", model: str = "",
                  window: int = 0, soft: float = 0.70, hard: float = 0.85) -> None:
        """Everything that belongs to the run shown (a fresh fold, bridge and verdict for each run attached)."""
        self._generation += 1
        self.controller: Controller = controller or RecordingController()
        self.paths = paths or JobPaths(Path.cwd())
        self.plan_path = self.paths.main_plan
        self.supervisor = supervisor
        self.follow = follow
        title = job_title or (paths.root.name if paths is not None else "")
        self.run_id = self.paths.run_id if paths is not None else ""
        self.state = ConsoleState(title, provider=provider, model=model, window=window, soft=soft, hard=hard)
        self.bridge = EventBridge()
        self.exit_code: int | None = None
        self.run_result: RunResult | None = None
        self.run_finished = False
        self.quit_requested = False
        self.approval: RestartApprovalScreen | None = None
        self.guardrails_view: GuardrailsScreen | None = None
        self._approval_seq = -1
        self._approval_waits = -1  # the restart_pending seq whose dialog waits for another question to be answered
        self._drain_timer: Timer | None = None
        self._last_drain = 0.0
        self._unsubscribe: Callable[[], None] | None = None
        self.drains = 0
        self.events_seen = 0
        self._keys_state: tuple[bool, ...] = ()
        self._panes_ready = False
        self._folded_upto = 0  # a long log's exact fold covers the events up to this seq

    def notify(self, message: str, *, title: str = "", severity: str = "information",  # type: ignore[override]
               timeout: float | None = None, markup: bool = True) -> None:
        """Every toast of the console (a widget's ``notify`` comes here too): its words often carry a run's folder,
        a job's name or the engine's reason, so they are made safe for the terminal and never parsed as markup
        (``[/]`` in a folder name is text, not a closing tag that raises). ``markup`` is ignored for that reason."""
        super().notify(safe_text(str(message)), title=safe_text(str(title), one_line=True),
                       severity=severity, timeout=timeout, markup=False)  # type: ignore[arg-type]

    # -- construction helpers ---------------------------------------------------------------
    @classmethod
    def for_run(cls, supervisor: Supervisor, *, job_title: str = "", **kw: object) -> ConsoleApp:
        s = supervisor.settings
        return cls(controller=SupervisorController(supervisor), paths=supervisor.paths, job_title=job_title,
                   supervisor=supervisor, provider=supervisor.provider.name, model=supervisor.provider.model,
                   window=s.context_window, soft=s.soft_threshold, hard=s.hard_threshold, **kw)  # type: ignore[arg-type]

    @classmethod
    def for_attach(cls, paths: JobPaths, *, job_title: str = "", **kw: object) -> ConsoleApp:
        return cls(controller=InboxController(paths), paths=paths, job_title=job_title, follow=True,
                   **kw)  # type: ignore[arg-type]

    def get_default_screen(self) -> Screen:
        if self.fleet is not None:
            self.fleet_view = FleetScreen()
            return self.fleet_view
        return self._new_main()

    def _new_main(self) -> MainScreen:
        self._main = MainScreen(self.state, self.now, plan_path=self.plan_path, attached=self.controller.attached,
                                max_items=self.max_items, on_ready=self.main_ready, run_id=self.run_id)
        return self._main

    # -- the panes ---------------------------------------------------------------------------
    @property
    def main(self) -> MainScreen:
        assert self._main is not None, "no run is shown"
        return self._main

    @property
    def conversation(self) -> ConversationPane:
        return self.main.query_one(ConversationPane)

    @property
    def ui_alive(self) -> bool:
        """The main screen's panes exist (False while the app shuts down: timers may still fire)."""
        main = self._main
        return self._panes_ready and main is not None and main.is_attached and bool(main.children)

    def _status_refresh(self) -> None:
        if self.ui_alive:
            for line in self.main.query(StatusLine):  # none while the screen is being taken down
                line.refresh()

    # -- start-up ------------------------------------------------------------------------------
    def on_mount(self) -> None:
        self._tune_gc()
        self._setup_themes()
        self._setup_keymap()
        self.set_interval(1.0, self._tick)
        if self.watch:
            self.watch_themes()
        if self.fleet is not None:
            self.poll_fleet()

    def _tune_gc(self) -> None:
        """Keep the garbage collector from pausing the UI.

        A long run keeps many small objects alive (messages, rendered lines); a full collection
        over them stalls the event loop for tens of milliseconds, long enough to feel in a key
        press. What exists at start-up is frozen out of collection, and full collections are
        made rarer; reference counting still frees almost everything at once. Restored on exit.
        """
        self._gc_thresholds = gc.get_threshold()
        gc.set_threshold(20_000, 50, 100)
        gc.freeze()

    def main_ready(self) -> None:
        """Called by the main screen once its panes exist: start the event sources and the watchers."""
        self._panes_ready = True
        self.bridge.attach(self)
        if self.supervisor is not None:
            self.run_engine()
        elif self.follow:
            self.follow_log()
        if self.watch:
            self.main.query_one(PlanPane).watch()
        self.run_worker(self.main.query_one(PlanPane).reload(), group="plan-reload")

    def _tick(self) -> None:
        if self.ui_alive and not self.state.ended:
            self._status_refresh()
        if self.ui_alive and self._approval_waits >= 0:
            self._sync_approval()

    def _setup_themes(self) -> None:
        problems: list[str] = []
        for folder in (self.themes_path, user_themes_dir()):
            for theme in load_themes(folder, problems):
                self.register_theme(theme)
        self.theme_problems = problems
        for problem in problems:
            self.notify(problem, title="Theme file skipped", severity="warning", timeout=8)
        wanted = self.requested_theme or DEFAULT_THEME
        if wanted in self.available_themes:
            self.theme = wanted
        else:
            fallback = DEFAULT_THEME if DEFAULT_THEME in self.available_themes else "textual-dark"
            if self.requested_theme:
                names = ", ".join(sorted(n for n in self.available_themes if not n.startswith("textual")))
                self.notify(f"Unknown theme '{self.requested_theme}'; using {fallback}. Themes: {names}",
                            severity="warning", timeout=8)
            self.theme = fallback

    def _setup_keymap(self) -> None:
        keymap, problems = check_keymap(self.keymap_raw)
        for problem in self.notices + problems:
            self.notify(problem, title="Key map", severity="warning", timeout=8)
        if keymap:
            self.set_keymap(keymap)

    # -- workers -------------------------------------------------------------------------------
    @work(thread=True, exit_on_error=False, group="engine", name="engine")
    def run_engine(self) -> None:
        """Run the supervisor on this worker thread (it blocks until the run ends)."""
        from console.engine.loop import ShutdownReason
        from console.engine.supervisor import JobBusy

        sup = self.supervisor
        assert sup is not None
        # A job resumed in place has history: show it first (the new run's events follow, numbered after it).
        history, _ = ev.read_new(sup.paths.events, 0)
        older, history = split_history(history, self.max_items)
        if older:
            self.post_message(HistoryReady(older, self._generation))
        self.bridge.push_many(history)
        try:
            result = sup.run()
        except JobBusy as exc:
            self.post_message(RunFinished("failed", str(exc), EXIT_USAGE))
            return
        except Exception as exc:  # the engine has its own last line of defence; this is the view's
            self.post_message(RunFinished("failed", f"the engine crashed: {type(exc).__name__}: {exc}", EXIT_FAILED))
            return
        self.run_result = result
        outcome = "stopped" if result.reason is ShutdownReason.USER_SHUTDOWN else result.ended
        detail = result.detail if result.ok or outcome == "stopped" else f"{result.reason.value}: {result.detail}"
        # In the console every stop is the operator's (the stop key, quit-and-stop, a denied restart): exit 3.
        self.post_message(RunFinished(outcome, detail, exit_code(result)))

    @work(thread=True, exit_on_error=False, group="follow", name="follow")
    def follow_log(self) -> None:
        """Attached: replay events.jsonl from the start, then poll it for new lines."""
        gen = self._generation
        follow_log(self.paths.events, self.bridge, self.controller, get_current_worker(),
                   lambda pid: self.post_message(RunnerState(pid, gen)),
                   lambda older: self.post_message(HistoryReady(older, gen)), keep=self.max_items,
                   make_state=self._blank_state,
                   on_folded=lambda folded: self.post_message(HistoryFolded(folded, gen)))

    def _blank_state(self) -> ConsoleState:
        st = self.state
        return ConsoleState(st.job_title, provider=st.provider, model=st.model, window=st.gauge.window,
                            soft=st.gauge.soft, hard=st.gauge.hard)

    @work(thread=True, exit_on_error=False, group="fleet", name="fleet")
    def poll_fleet(self) -> None:
        """The fleet: poll the jobs store and every run's log; the view gets immutable rows."""
        fleet = self.fleet
        assert fleet is not None
        worker = get_current_worker()
        first = True
        while not worker.is_cancelled:
            started = time.monotonic()
            try:
                if first:  # the store's rows at once; every log folded next
                    self.post_message(FleetRows(fleet.poll(fold=False), fleet.error))
                    first = False
                rows = fleet.poll()
            except Exception as exc:  # the list must stay up whatever one run's files hold
                rows, fleet.error = fleet.rows, f"the fleet could not be read: {type(exc).__name__}: {exc}"
            self.post_message(FleetRows(rows, fleet.error))
            worker_sleep(worker, max(0.05, self.poll_interval - (time.monotonic() - started)))

    @work(group="theme-watch", exclusive=True)
    async def watch_themes(self) -> None:
        from watchfiles import awatch

        folders = [f for f in (self.themes_path, user_themes_dir()) if f.is_dir()]
        if not folders:
            return

        def only_themes(_change: object, path: str) -> bool:
            return path.endswith(".toml")

        try:
            async for changes in awatch(*folders, watch_filter=only_themes, recursive=False, debounce=150,
                                        step=50, stop_event=self._stop_watch):
                self.post_message(ThemeFileChanged(sorted({Path(p) for _c, p in changes})))
        except (OSError, RuntimeError) as exc:
            self.notify(f"Not watching theme files: {exc}", severity="warning")

    # -- events in -------------------------------------------------------------------------------
    def on_events_ready(self, message: EventsReady) -> None:
        wait = DRAIN_INTERVAL - (time.monotonic() - self._last_drain)
        if wait > 0:
            if self._drain_timer is None:
                self._drain_timer = self.set_timer(wait, self.drain_events)
            return
        self.drain_events()

    def on_history_ready(self, message: HistoryReady) -> None:
        """The older part of a long history: the state folds it (it needs all of it); the conversation only
        counts its messages as not shown (it keeps the newest ones, which come next through the bridge)."""
        if message.generation != self._generation:
            return
        self.events_seen += len(message.events)
        changed = self.state.apply_all(message.events)
        if self.ui_alive:
            self.conversation.trimmed += sum(1 for e in message.events if isinstance(e, ev.AssistantMessage))
            self.refresh_panes(changed)

    def on_history_folded(self, message: HistoryFolded) -> None:
        """A long log's exact fold replaces the state the newest events filled the panes with; events up to
        the seq it covers are not folded again (the conversation has them already)."""
        if message.generation != self._generation:
            return
        folded = message.folded
        for name, value in vars(folded.state).items():
            if name != "_handlers":  # its handlers are bound to the other object: keep this one's
                setattr(self.state, name, value)
        self._folded_upto = folded.upto_seq
        self.events_seen += folded.older_events - folded.seed
        if self.ui_alive:
            self.conversation.add_not_shown(folded.older_messages)
            self.refresh_panes({TODOS, GAUGE, STATUS, RESTART, FEEDBACK, GUARDS, PLAN, EXPERIENCES})

    def drain_events(self, *, everything: bool = False) -> None:
        """Fold what the bridge holds into the view, for at most ``DRAIN_BUDGET`` seconds.

        A backlog (a long log replayed, a burst of deltas) is absorbed in slices: the rest is
        scheduled behind whatever else is queued, so a key pressed meanwhile still acts at once.
        """
        self._drain_timer = None
        if not self.ui_alive:
            return
        started = time.perf_counter()
        self._last_drain = time.monotonic()
        changed: set[str] = set()
        while True:
            events = self.bridge.drain(DRAIN_CHUNK)
            if not events:
                break
            self.drains += 1
            self.events_seen += len(events)
            self._say_refused(events)
            fold = events if not self._folded_upto else [e for e in events if e.seq > self._folded_upto]
            changed |= self.state.apply_all(fold)
            self.conversation.ingest(events)
            if not everything and time.perf_counter() - started > DRAIN_BUDGET:
                break
        if changed:
            self.refresh_panes(changed)
        if self.quit_requested and self.controller.attached and self.state.ended:
            self.exit(EXIT_OK, return_code=EXIT_OK)  # the stop asked for on leaving has landed
            return
        if self.bridge.pending and self._drain_timer is None:
            self._drain_timer = self.set_timer(0.001, self.drain_events)

    def _say_refused(self, events: Iterable[ev.EventBase]) -> None:
        """A command this console sent and still waits for, refused by the engine (a rewind whose phase has
        ended, a pause of a paused run): said at once, also where the Feedback pane is not in sight."""
        for e in events:
            if isinstance(e, ev.OperatorCommand) and e.status == "rejected" and e.command in self.state.requested:
                what = e.command.replace("_", " ")
                self.notify(f"{what} not applied: {e.detail}", title=f"{what.capitalize()} refused",
                            severity="warning", timeout=10)

    def refresh_panes(self, changed: Iterable[str]) -> None:
        if not self.ui_alive:
            return
        changed = set(changed)
        main = self.main
        if TODOS in changed:
            main.query_one(TodoPane).show(self.state.todos)
        if changed & {GAUGE, STATUS, RESTART}:
            for gauge in main.query(ContextGauge):
                gauge.refresh()
        if changed & {STATUS, RESTART, GAUGE, TODOS}:
            for line in main.query(StatusLine):
                line.refresh()
            self._refresh_keys()
        if FEEDBACK in changed:
            main.query_one(FeedbackPane).show(list(self.state.feedback))
            tabs = main.query_one(PaneTabs)
            tabs.set_badge("feedback", f" {len(self.state.feedback)}" if self.state.feedback else "")
        if EXPERIENCES in changed:
            main.query_one(ExperiencesPane).show(list(self.state.experiences.values()))
            n = len(self.state.experiences)
            main.query_one(PaneTabs).set_badge("experiences", f" {n}" if n else "")
        if changed & {GUARDS, FEEDBACK} and self.guardrails_view is not None:
            self.guardrails_view.update_view()
        if PLAN in changed:
            self.run_worker(main.query_one(PlanPane).reload(), group="plan-reload", exclusive=True)
        if RESTART in changed or STATUS in changed:
            self._sync_approval()

    def _refresh_keys(self) -> None:
        """Re-check which keys apply (the footer rebuilds itself, so only when an answer changed): called on
        every change of the run's state and of what this console asked for (pause, resume, stop...)."""
        if not self.ui_alive:
            return
        st = self.state
        active = self.run_active
        key = (st.restart_pending is not None, *(self._applies(a, active) for a in sorted(RUN_ACTIONS)))
        if key != self._keys_state:
            self._keys_state = key
            self.main.set_class(st.restart_pending is not None, "-crowded")  # two more keys in the footer
            # The run's screen, not the top one: its footer must be right when a dialog over it closes.
            self.main.refresh_bindings()

    def _sync_approval(self) -> None:
        need = self.state.needs  # a new need rings once (a restart to approve rings with its dialog, below)
        if need is not None and self._rung.get(self.paths.root) != need.seq and self.run_active:
            self._rung[self.paths.root] = need.seq
            if need.reason != "restart_approval":
                self.bell()
        pending = self.state.restart_pending
        if pending is None:
            if self._approval_seq >= 0 or self._approval_waits >= 0:
                self.clear_notifications()  # "the restart still waits" is no longer true
                self._approval_seq = self._approval_waits = -1
            if self.approval is not None:
                screen, self.approval = self.approval, None
                if screen.is_current:
                    screen.dismiss(None)
            return
        if pending.seq == self._approval_seq or (self.controller.attached and self.controller.runner_pid() is None):
            return
        if isinstance(self.screen, Dialog) or isinstance(self.focused, (Input, TextArea)):
            # Another question is open (the rewind box being typed into, stop?): the approval must not take its
            # keys or its focus. It waits for that one to be answered (see ask), and says so once.
            if self._approval_waits != pending.seq:
                self._approval_waits = pending.seq
                self.bell()
                self.notify("A context restart waits for your approval: its dialog opens when this one is closed.",
                            title="Restart pending", severity="warning", timeout=10)
            return
        self._approval_seq = pending.seq
        self._approval_waits = -1
        self.bell()  # the dialog says the rest: a toast beside it would only cover its buttons
        self.clear_notifications()
        self.approval = RestartApprovalScreen(pending, str(self.paths.root))
        self.ask(self.approval, self._approval_decided)

    def ask(self, dialog: Dialog, done: Callable[[Any], None]) -> None:
        """Show a question; once it is answered, an approval that waited for it opens (see _sync_approval; a
        dialog pushed otherwise lets it open at the next tick)."""

        def answered(result: Any) -> None:
            done(result)
            if self._main is not None and self.ui_alive:
                self._sync_approval()

        self.push_screen(dialog, answered)

    def _approval_decided(self, decision: str | None) -> None:
        self.approval = None
        if decision in (None, "later") and self.state.restart_pending is not None:
            self.notify("The restart still waits: a approves, d denies.", title="Restart pending",
                        severity="warning", timeout=10)
        if decision == "approve":
            self.action_approve()
        elif decision == "deny":
            self.action_deny()

    def on_run_finished(self, message: RunFinished) -> None:
        self.drain_events(everything=True)  # the run's last events before its verdict
        self.run_finished = True
        if isinstance(self.controller, SupervisorController):
            self.controller.finished = True
        self.state.mark_finished(message.outcome, message.detail, None)
        self.state.requested.clear()
        if message.exit_code == EXIT_USAGE:
            self.notify(message.detail, title="Cannot run this job", severity="error", timeout=30)
        elif message.outcome == "failed":
            self.notify(message.detail, title="The run ended without completing", severity="error", timeout=15)
        # A completed run says so in the status line and the conversation: a toast would cover its last lines.
        self.exit_code = message.exit_code
        self.refresh_panes({STATUS, RESTART})
        if self.quit_requested:
            self.exit(self.exit_code, return_code=self.exit_code)

    def on_runner_state(self, message: RunnerState) -> None:
        if not self.ui_alive or message.generation not in (0, self._generation):
            return
        for status in self.main.query(StatusLine):
            status.runner_pid = message.pid
            status.refresh()
        self._keys_state = ()
        self._refresh_keys()

    def on_theme_file_changed(self, message: ThemeFileChanged) -> None:
        for path in message.paths:
            if not path.exists():
                continue
            try:
                theme = load_theme_file(path)
            except ThemeError as exc:
                self.notify(f"{exc}. Keeping the current theme.", title="Theme not applied", severity="error",
                            timeout=10)
                continue
            previous = self.available_themes.get(theme.name)
            self.register_theme(theme)
            if theme.name != self.theme:
                continue
            try:
                self.refresh_css(animate=False)
            except Exception as exc:  # e.g. a variable the CSS needs: put the working theme back
                if previous is not None:
                    self.register_theme(previous)
                    self.refresh_css(animate=False)
                self.notify(f"{path.name}: {exc}. Keeping the current theme.", title="Theme not applied",
                            severity="error", timeout=10)
                continue
            for view in self.main.query(ItemView):
                view.invalidate()
            self.notify(f"Theme {theme.name} reloaded from {path.name}.", timeout=3)

    # -- the fleet ---------------------------------------------------------------------------------
    def on_fleet_rows(self, message: FleetRows) -> None:
        if self.fleet_view is None or not self.fleet_view.is_attached:
            return
        self.fleet_view.update_rows(message.rows, message.error)
        newly = [r for r in message.rows if r.needs_seq and self._rung.get(r.path) != r.needs_seq]
        for row in newly:
            self._rung[row.path] = row.needs_seq
        if newly:
            # One notice at a time (the newest), also over an attached run's console: a run that restarts
            # often must not stack notices over the screen; the list's title keeps the count.
            self.bell()
            self.clear_notifications()
            names = ", ".join(f"{r.id} {r.job}" for r in newly[:3]) + (" and more" if len(newly) > 3 else "")
            approval = all(r.pending_seq for r in newly)
            what = "context full, the restart waits for approval" if approval else \
                f"needs you ({', '.join(sorted({r.needs_label for r in newly}))})"
            where = ("select it in the list: " + ("a approves, d denies" if approval else "enter attaches")) \
                if self.screen is self.fleet_view else "q returns to the list"
            self.notify(f"{names}: {what} ({where}).", title="Approval needed" if approval else "Needs you",
                        severity="warning", timeout=10)

    def on_fleet_screen_act(self, message: FleetScreen.Act) -> None:
        row = message.row
        if message.action == "attach":
            self.open_run(row.path)
            return
        if message.action in ("stop", "forget"):
            self._fleet_end(message.action, row)
            return
        if message.action == "resume":
            self._fleet_resume(row)
            return
        if not row.pending_seq:
            self.notify(f"{row.id} {row.job} has no restart waiting for approval ({row.state}).",
                        title=f"Nothing to {message.action}")
            return
        if message.action == "deny":  # it ends the run: asked first, naming the run
            self.ask(ConfirmScreen(f"Deny the restart of {row.id} {row.job}?",
                                   f"The run {row.name} ends here instead of starting a fresh session (it can be "
                                   f"resumed later: agent-console run --in-place {row.path}).", "Deny", "Keep it "
                                   "waiting"),
                     lambda yes: self._fleet_send(row, "deny") if yes else None)
            return
        self._fleet_send(row, message.action)

    def _fleet_send(self, row: FleetRow, action: str) -> None:
        command = {"approve": "approve_restart", "deny": "deny_restart"}.get(action, action)
        problem = InboxController(JobPaths(row.path), source="fleet").send(command)
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
            if row.pid is None:
                self.notify(f"{row.id} {row.job}: no process runs it ({row.state}).", title="Nothing to stop")
                return
            self.ask(ConfirmScreen(f"Stop {row.id} {row.job}?",
                                   f"The run {row.name} stops after its current turn (at once while it waits for "
                                   "the model, for approval or is paused); a second stop stops it at once. Resume "
                                   f"it later with: agent-console run --in-place {row.path}", "Stop",
                                   "Keep running"),
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

    def _fleet_resume(self, row: FleetRow) -> None:
        """``r``: a paused run unpauses (its inbox); a run no process runs starts again in the background, asked
        first, with the settings it was started with (``agent-console resume``: the one path every resume takes)."""
        if row.resume == "unpause":
            problem = InboxController(JobPaths(row.path), source="fleet").send("resume")
            if problem:
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
                 lambda yes: self.resume_run(row) if yes else None)

    @work(thread=True, exit_on_error=False, group="resume")
    def resume_run(self, row: FleetRow) -> None:
        """Start a runner for ``row`` through the CLI (the console never imports it): ``resume`` returns once the
        run holds its lock, or says in one line why it did not start."""
        command = [sys.executable, "-m", "console.cli", "resume", str(row.path)]
        env = {**os.environ, "AGENT_CONSOLE_RUNNER_BY": "fleet"}  # the run's launch_settings says who resumed it
        try:
            done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                                  timeout=RESUME_TIMEOUT, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.call_from_thread(self.notify, f"{row.id} {row.job}: {exc}", title="Not resumed", severity="error")
            return
        if done.returncode == 0:
            self.call_from_thread(self.notify, f"{row.id} {row.job} runs again, in the background.",
                                  title="Resumed")
            return
        lines = [line.removeprefix("agent-console: ") for line in done.stderr.splitlines() if line.strip()]
        self.call_from_thread(self.notify, safe_text("\n".join(lines[-3:]) or f"exit code {done.returncode}"),
                              title="Not resumed", severity="error")

    @work(thread=True, exit_on_error=False, group="forget")
    def forget_runs(self, rows: list[FleetRow]) -> None:
        """Remove the rows of runs whose folder is gone (checked again now: a folder back in place is kept)."""
        assert self.fleet is not None
        gone = [r for r in rows if folder_gone(r.path)]
        kept = [r for r in rows if r not in gone]
        try:
            forgot = JobStore(self.fleet.store_path).forget([r.path for r in gone]) if gone else 0
        except (sqlite3.Error, OSError) as exc:
            self.call_from_thread(self.notify, f"the jobs database: {exc}", title="Not forgotten", severity="error")
            return
        names = ", ".join(f"{r.id} {r.job}" for r in gone[:3]) + (" and more" if len(gone) > 3 else "")
        if forgot:
            self.call_from_thread(self.notify, f"Forgot {names}.", title="Forgotten")
        for r in kept:
            self.call_from_thread(self.notify, f"{r.id} {r.job}: its folder is back; kept.", title="Not forgotten")

    def open_run(self, path: Path) -> None:
        """The fleet: show one run's console (attached: keys go through its inbox); q comes back."""
        paths = JobPaths(path)
        self._bind_run(InboxController(paths), paths, follow=True)
        self.push_screen(self._new_main())

    def close_run(self) -> None:
        """The fleet: leave the run shown (its follower stops; the run goes on) and show the list again."""
        self.workers.cancel_group(self, "follow")
        self.bridge.close()
        self._panes_ready = False
        self._generation += 1
        while len(self.screen_stack) > 1 and self.screen is not self.fleet_view:
            self.pop_screen()
        self._main = None

    # -- the operator's commands ---------------------------------------------------------------
    @property
    def run_active(self) -> bool:
        if self.controller.attached:
            return self.controller.runner_pid() is not None and not self.state.ended
        return not self.run_finished

    def send(self, command: str, pending: str, **args: object) -> bool:
        problem = self.controller.send(command, **args)
        if problem:
            self.notify(problem, title=f"{command.replace('_', ' ')} not sent", severity="warning")
            return False
        self.state.requested[command] = pending
        self._status_refresh()
        self._refresh_keys()  # the footer at once: Resume after pause, Stop now after stop...
        return True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Which keys the footer offers: only what applies to the run now (Resume while paused, Stop now once
        a stop was asked; on a run that has ended, or an attached one nobody runs, none of the run's commands).

        While a dialog is open these keys never reach the run's screen (Textual stops keys at a modal screen),
        and a letter typed into a field is text (a key a focused Input takes is left out of every binding)."""
        if action not in RUN_ACTIONS or self._main is None:
            return True
        return self._applies(action, self.run_active)

    def _applies(self, action: str, active: bool) -> bool:
        """check_action for a run command, ``active`` being run_active (asked once: it may read the run lock)."""
        st = self.state
        if action in ("approve", "deny"):
            return st.restart_pending is not None and active
        if not active:
            return False
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
        if self.state.outcome == "completed":
            self.notify(f"The job is complete: there is nothing to {command}.", title=f"No {command}")
        elif self.state.ended:
            self.notify(f"The run has ended ({self.state.outcome}): nothing to {command}. Resume it with "
                        f"agent-console run --in-place {self.paths.root}", title=f"No {command}")
        else:
            self.notify(f"No process runs this job now (review only). Resume it with "
                        f"agent-console run --in-place {self.paths.root}", title=f"No {command}")
        return True

    def action_checkpoint(self) -> None:
        if self._ended_notice("checkpoint"):
            return
        self.send("checkpoint", "checkpoint requested")

    def action_rewind(self) -> None:
        if self._ended_notice("rewind"):
            return

        todos = self.state.todos
        # The phase the dialog names; the engine refuses the rewind if it has ended by the time it lands.
        number = todos.phase_number if todos is not None and todos.kind in ("phase", "transition") and \
            todos.phase_number > 0 else None

        def done(issue: str | None) -> None:
            if issue:
                self.send("rewind", "rewind requested", issue=issue, phase=number)

        self.ask(RewindScreen(self.state.phase, number=number, blink=self.animations), done)

    def action_approve(self) -> None:
        self.clear_notifications()  # "restart pending" is answered
        self.send("approve_restart", "approval sent")

    def action_deny(self) -> None:
        self.clear_notifications()
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
        if self._ended_notice("resume"):
            return
        self.state.requested.pop("pause", None)
        self.send("resume", "resuming")

    def action_stop(self) -> None:
        if self._ended_notice("stop"):
            return
        again = self.state.stopping or "stop" in self.state.requested

        def done(yes: bool | None) -> None:
            if yes:
                self.send("stop", "stopping now" if again else "stopping after this turn")

        if again:
            self.ask(ConfirmScreen("Stop now?", "The current turn is abandoned (its half-written reply is "
                                   "dropped); the run can be resumed with `agent-console run --in-place "
                                   f"{self.paths.root}`.", "Stop now", "Wait"), done)
        else:
            self.ask(ConfirmScreen("Stop the run?", "The run stops at once if it is waiting for the model "
                                   "(the reply in progress is asked again on resume), else after the "
                                   "current turn's tool calls. Resume it later with "
                                   f"`agent-console run --in-place {self.paths.root}`.", "Stop",
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
        self.push_screen(self.guardrails_view, closed)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.key_help(), attached=self.controller.attached))

    def stop_and_quit(self) -> None:
        """A signal (SIGTERM, SIGHUP): nobody may be watching; the run is stopped now and the console closes as
        soon as it has (at once if the run had already ended)."""
        if self.run_finished:
            code = self.exit_code if self.exit_code is not None else EXIT_OK
            self.exit(code, return_code=code)
            return
        self.quit_requested = True
        self.state.requested["stop"] = "stopping (signal), then quitting"
        self._status_refresh()

    def action_quit_console(self) -> None:
        if self.fleet is not None and self.screen is self.fleet_view:
            self.exit(EXIT_OK, return_code=EXIT_OK)
            return
        if self.fleet is not None:
            self.close_run()  # back to the list: the run goes on
            return
        if self.controller.attached:
            self._leave_attached()
            return
        if self.run_finished:
            code = self.exit_code if self.exit_code is not None else EXIT_OK
            self.exit(code, return_code=code)
            return
        if self.quit_requested:
            self.notify("Waiting for the run to stop…")
            return

        def done(yes: bool | None) -> None:
            if yes and self.run_finished:
                # The run ended while the dialog was open: nothing left to stop, nothing will report back.
                code = self.exit_code if self.exit_code is not None else EXIT_OK
                self.exit(code, return_code=code)
                return
            if yes:
                self.quit_requested = True
                self.controller.send("stop")
                self.controller.send("stop")  # the second stop abandons the current turn
                self.state.requested["stop"] = "stopping, then quitting"
                self._status_refresh()

        self.push_screen(ConfirmScreen("Quit and stop the run?", "The run lives in this process: quitting stops "
                                       "it. Everything so far is saved; resume with `agent-console run "
                                       f"--in-place {self.paths.root}`. (To watch a run you can leave, start it "
                                       "with --headless and use `agent-console attach`.)", "Stop and quit",
                                       "Stay"), done)

    def _leave_attached(self) -> None:
        """q on a run another process runs: detach (it goes on) or stop it; nothing to ask once it has ended."""
        if not self.run_active:
            self.exit(EXIT_OK, return_code=EXIT_OK)
            return
        if self.quit_requested:
            self.exit(EXIT_OK, return_code=EXIT_OK)  # q again while the stop lands: leave it to land alone
            return

        def done(answer: str | None) -> None:
            if answer == "detach" or (answer == "stop" and not self.run_active):
                self.exit(EXIT_OK, return_code=EXIT_OK)
            elif answer == "stop" and self.send("stop", "stopping, then quitting"):
                self.controller.send("stop")  # the second stop drops the turn in flight
                self.quit_requested = True
                self.set_timer(STOP_PATIENCE, lambda: self.exit(EXIT_OK, return_code=EXIT_OK))

        self.ask(QuitScreen(self.run_id or str(self.paths.root)), done)

    # -- help and palette ---------------------------------------------------------------------
    def key_for(self, key_id: str, default: str) -> str:
        key = self._keymap.get(key_id, default)
        return ", ".join(self.get_key_display(Binding(k.strip(), "")) for k in key.split(","))

    def key_help(self) -> list[tuple[str, str]]:
        rows: list[tuple[str, str]] = []
        for k in OPERATOR_KEYS:
            if k.help:  # a second action on the same key (Resume, Stop now) is in its first one's line
                rows.append((self.key_for(k.id, k.key), k.help))
        rows.append(("ctrl+p", "command palette (every action above, and the theme picker)"))
        return rows

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The palette: each action once, in the console's words. Not Textual's own Quit (it would skip the
        question and abort the run), nor its Keys panel (? is the help) or Maximize (m)."""
        if isinstance(screen, FleetScreen):
            yield SystemCommand("Attach", "Open the console of the selected run (q comes back)",
                                screen.action_attach)
            yield SystemCommand("Approve restart", "Approve the selected run's pending context restart",
                                screen.action_approve)
            yield SystemCommand("Deny restart", "Deny the selected run's pending restart (the run ends)",
                                screen.action_deny)
            yield SystemCommand("Filter runs", "Show only the runs matching some words", screen.action_filter)
        elif isinstance(screen, MainScreen):
            yield SystemCommand("Force checkpoint", "The agent re-orients; unfinished todos carry over",
                                self.action_checkpoint)
            yield SystemCommand("Rewind phase", "Re-plan the current phase around an issue", self.action_rewind)
            yield SystemCommand("Approve restart", "Approve a pending context restart", self.action_approve)
            yield SystemCommand("Deny restart", "Deny a pending context restart (the run ends)", self.action_deny)
            yield SystemCommand("Pause run", "Pause (at once while the model is asked, else after the turn)",
                                self.action_pause)
            yield SystemCommand("Resume run", "Resume a paused run", self.action_resume)
            yield SystemCommand("Stop run", "Stop after the current turn (asks first)", self.action_stop)
            yield SystemCommand("Guardrails", "Policies, feedback providers, completion checker, deadline, token "
                                "and money budgets", self.action_guardrails)
            yield SystemCommand("Next pane", "Focus the next pane", screen.action_next_pane)
            yield SystemCommand("Maximize pane", "Maximize or restore the focused pane", screen.action_toggle_maximize)
            yield SystemCommand("Help", "Keys and panes", self.action_help)
        yield SystemCommand("Theme", "Change the console's theme", self.action_change_theme)
        yield SystemCommand("Screenshot", "Save an SVG picture of the screen (the path is shown)",
                            self.action_save_screenshot)
        if self.fleet is not None and isinstance(screen, MainScreen):
            yield SystemCommand("Back to the fleet", "Leave this run's console (the run goes on)",
                                self.action_quit_console)
        else:
            yield SystemCommand("Quit", "Quit the console (asks first when the run is in this process)",
                                self.action_quit_console)

    def screenshots_dir(self) -> Path:
        """Where screenshots go: the run's harness folder (never the agent's files), or the fleet's data folder."""
        if self.fleet is not None and self._main is None:
            return self.fleet.store_path.parent / "screenshots"
        return self.paths.state / "screenshots"

    def action_save_screenshot(self) -> None:
        folder = self.screenshots_dir()
        name = f"agent-console-{self.now().strftime('%Y%m%d-%H%M%S')}.svg"
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            path = self.save_screenshot(name, str(folder))
        except OSError as exc:
            self.notify(f"{folder}: {exc}", title="Screenshot not saved", severity="error")
            return
        self.notify(path, title="Screenshot saved", timeout=8)

    # -- shutdown --------------------------------------------------------------------------------
    def on_unmount(self) -> None:
        self._stop_watch.set()
        if self._gc_thresholds:
            gc.set_threshold(*self._gc_thresholds)
            gc.unfreeze()
        if self.supervisor is not None and not self.run_finished:
            # Never leave the engine thread running: the process could not exit.
            self.supervisor.stop()
            self.supervisor.stop()
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.bridge.close()
