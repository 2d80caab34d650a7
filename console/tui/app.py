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
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import get_current_worker

from console.engine import events as ev
from console.engine.job import JobPaths
from console.tui.bridge import EventBridge
from console.tui.commands import Controller, InboxController, SupervisorController
from console.tui.keymap import OPERATOR_KEYS, check_keymap
from console.tui.messages import EventsReady, RunFinished, RunnerState, ThemeFileChanged
from console.tui.screens.approval import RestartApprovalScreen
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.guardrails import GuardrailsScreen
from console.tui.screens.help import HelpScreen
from console.tui.screens.main import MainScreen
from console.tui.screens.rewind import RewindScreen
from console.tui.state import FEEDBACK, GAUGE, GUARDS, PLAN, RESTART, STATUS, TODOS, ConsoleState
from console.tui.themes import DEFAULT_THEME, ThemeError, load_theme_file, load_themes, themes_dir, user_themes_dir
from console.tui.widgets.conversation import MAX_ITEMS, ConversationPane
from console.tui.widgets.feedback import FeedbackPane
from console.tui.widgets.gauge import ContextGauge
from console.tui.widgets.lines import ItemView
from console.tui.widgets.plan_pane import PlanPane
from console.tui.widgets.status import StatusLine
from console.tui.widgets.tabs import PaneTabs
from console.tui.widgets.todo_pane import TodoPane

if TYPE_CHECKING:
    from console.engine.supervisor import RunResult, Supervisor

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
DRAIN_INTERVAL = 1 / 30  # the UI absorbs events in batches at most this often
DRAIN_BUDGET = 0.008  # seconds of folding per batch; a backlog is absorbed in slices, keys act in between
DRAIN_CHUNK = 400
FOLLOW_INTERVAL = 0.15  # attached: how often the log is polled


def utc_now() -> datetime:
    return datetime.now(UTC)


class ConsoleApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "agent-console"
    ALLOW_IN_MAXIMIZED_VIEW = "Footer, #status"
    BINDINGS = [Binding("ctrl+c", "help_quit", show=False, system=True)]

    def __init__(
        self,
        *,
        controller: Controller,
        paths: JobPaths,
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
    ) -> None:
        super().__init__()
        self.controller = controller
        self.paths = paths
        self.plan_path = paths.main_plan
        self.supervisor = supervisor
        self.follow = follow
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
        self.state = ConsoleState(job_title or paths.root.name, provider=provider, model=model, window=window,
                                  soft=soft, hard=hard)
        self.bridge = EventBridge()
        self.exit_code: int | None = None
        self.run_result: RunResult | None = None
        self.run_finished = False
        self.quit_requested = False
        self.approval: RestartApprovalScreen | None = None
        self.guardrails_view: GuardrailsScreen | None = None
        self._approval_seq = -1
        self._drain_timer: Timer | None = None
        self._last_drain = 0.0
        self._unsubscribe: Callable[[], None] | None = None
        self._stop_watch = asyncio.Event()
        self.drains = 0
        self.events_seen = 0
        self.theme_problems: list[str] = []
        self._main: MainScreen
        self._keys_state: tuple[bool, ...] = ()
        self._gc_thresholds: tuple[int, ...] = ()
        self._panes_ready = False
        if supervisor is not None:
            # Subscribe before the run starts, so not one event is missed.
            self._unsubscribe = supervisor.subscribe(self.bridge.push)

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
        self._main = MainScreen(self.state, self.now, plan_path=self.plan_path, attached=self.controller.attached,
                                max_items=self.max_items, on_ready=self.main_ready)
        return self._main

    # -- the panes ---------------------------------------------------------------------------
    @property
    def main(self) -> MainScreen:
        return self._main

    @property
    def conversation(self) -> ConversationPane:
        return self.main.query_one(ConversationPane)

    @property
    def ui_alive(self) -> bool:
        """The main screen's panes exist (False while the app shuts down: timers may still fire)."""
        return self._panes_ready and self._main.is_attached and bool(self._main.children)

    def _status_refresh(self) -> None:
        if self.ui_alive:
            self.main.query_one(StatusLine).refresh()

    # -- start-up ------------------------------------------------------------------------------
    def on_mount(self) -> None:
        self._tune_gc()
        self._setup_themes()
        self._setup_keymap()

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
            self.watch_themes()
        self.run_worker(self.main.query_one(PlanPane).reload(), group="plan-reload")
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        if not self.state.ended:
            self._status_refresh()

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
        if result.ok:
            self.post_message(RunFinished("completed", result.detail, EXIT_OK))
        elif result.reason is ShutdownReason.USER_SHUTDOWN:
            self.post_message(RunFinished("stopped", result.detail, EXIT_INTERRUPTED))
        else:
            self.post_message(RunFinished("failed", f"{result.reason.value}: {result.detail}", EXIT_FAILED))

    @work(thread=True, exit_on_error=False, group="follow", name="follow")
    def follow_log(self) -> None:
        """Attached: replay events.jsonl from the start, then poll it for new lines."""
        worker = get_current_worker()
        path = self.paths.events
        offset = 0
        pid: int | None = -1
        checked = 0.0
        while not worker.is_cancelled:
            try:
                events, offset = ev.read_new(path, offset)
            except OSError:
                events = []
            if events:
                self.bridge.push_many(events)
            now = time.monotonic()
            if now - checked >= 1.0:
                checked = now
                current = self.controller.runner_pid()
                if current != pid:
                    pid = current
                    self.post_message(RunnerState(pid))
            time.sleep(FOLLOW_INTERVAL)

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
            changed |= self.state.apply_all(events)
            self.conversation.ingest(events)
            if not everything and time.perf_counter() - started > DRAIN_BUDGET:
                break
        if changed:
            self.refresh_panes(changed)
        if self.bridge.pending and self._drain_timer is None:
            self._drain_timer = self.set_timer(0.001, self.drain_events)

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
            main.query_one(StatusLine).refresh()
            self._refresh_keys()
        if FEEDBACK in changed:
            main.query_one(FeedbackPane).show(list(self.state.feedback))
            tabs = main.query_one(PaneTabs)
            tabs.set_badge("feedback", f" {len(self.state.feedback)}" if self.state.feedback else "")
        if changed & {GUARDS, FEEDBACK} and self.guardrails_view is not None:
            self.guardrails_view.update_view()
        if PLAN in changed:
            self.run_worker(main.query_one(PlanPane).reload(), group="plan-reload", exclusive=True)
        if RESTART in changed or STATUS in changed:
            self._sync_approval()

    def _refresh_keys(self) -> None:
        """Re-check which keys apply (the footer rebuilds itself, so only when the answer changed)."""
        st = self.state
        key = (st.restart_pending is not None, st.ended)
        if key != self._keys_state:
            self._keys_state = key
            self.main.set_class(st.restart_pending is not None, "-crowded")  # two more keys in the footer
            self.refresh_bindings()

    def _sync_approval(self) -> None:
        pending = self.state.restart_pending
        if pending is None:
            if self.approval is not None:
                screen, self.approval = self.approval, None
                if screen.is_current:
                    screen.dismiss(None)
            return
        if pending.seq == self._approval_seq or (self.controller.attached and self.controller.runner_pid() is None):
            return
        self._approval_seq = pending.seq
        self.bell()
        self.notify(f"Context {pending.usage_pct:.0%} full: session {pending.next_session} waits for approval. "
                    "a approves, d denies.", title="Restart pending", severity="warning", timeout=15)
        self.approval = RestartApprovalScreen(pending)
        self.push_screen(self.approval, self._approval_decided)

    def _approval_decided(self, decision: str | None) -> None:
        self.approval = None
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
        elif message.outcome == "completed":
            self.notify("The job is complete. q quits.", title="Done", timeout=10)
        self.exit_code = EXIT_INTERRUPTED if self.quit_requested and message.exit_code != EXIT_OK else message.exit_code
        self.refresh_panes({STATUS, RESTART})
        if self.quit_requested:
            self.exit(self.exit_code, return_code=self.exit_code)

    def on_runner_state(self, message: RunnerState) -> None:
        if not self.ui_alive:
            return
        status = self.main.query_one(StatusLine)
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
        return True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("approve", "deny"):
            return self.state.restart_pending is not None
        if action in ("checkpoint", "rewind", "stop"):
            return True if not self.state.ended else None
        return True

    def action_checkpoint(self) -> None:
        self.send("checkpoint", "checkpoint requested")

    def action_rewind(self) -> None:
        def done(issue: str | None) -> None:
            if issue:
                self.send("rewind", "rewind requested", issue=issue)

        self.push_screen(RewindScreen(self.state.phase, blink=self.animations), done)

    def action_approve(self) -> None:
        self.send("approve_restart", "approval sent")

    def action_deny(self) -> None:
        self.send("deny_restart", "denial sent")

    def action_toggle_pause(self) -> None:
        """One key (the footer never has to change): resume when paused or pausing, pause otherwise."""
        if self.state.paused or "pause" in self.state.requested:
            self.action_resume()
        else:
            self.action_pause()

    def action_pause(self) -> None:
        self.state.requested.pop("resume", None)
        self.send("pause", "pausing after this turn")

    def action_resume(self) -> None:
        self.state.requested.pop("pause", None)
        self.send("resume", "resuming")

    def action_stop(self) -> None:
        if self.state.ended:
            self.notify("The run has already ended.")
            return
        again = self.state.stopping or "stop" in self.state.requested

        def done(yes: bool | None) -> None:
            if yes:
                self.send("stop", "stopping now" if again else "stopping after this turn")

        if again:
            self.push_screen(ConfirmScreen("Stop now?", "The current turn is abandoned (its half-written reply is "
                                           "dropped); the run can be resumed with run --in-place.", "Stop now",
                                           "Wait"), done)
        else:
            self.push_screen(ConfirmScreen("Stop the run?", "The run stops at once if it is waiting for the model "
                                           "(the reply in progress is asked again on resume), else after the "
                                           "current turn's tool calls. Resume it later with "
                                           f"`agent-console run --in-place {self.paths.root}`.", "Stop",
                                           "Keep running"), done)

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

    def action_quit_console(self) -> None:
        if self.controller.attached:
            self.exit(EXIT_OK, return_code=EXIT_OK)  # detach: the run goes on
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
                                       "--in-place`. (To watch a run you can leave, start it with --headless "
                                       "and use `agent-console attach`.)", "Stop and quit", "Stay"), done)

    def action_help_quit(self) -> None:
        self.notify("Press q to quit.", title="Quit?")

    # -- help and palette ---------------------------------------------------------------------
    def key_for(self, key_id: str, default: str) -> str:
        key = self._keymap.get(key_id, default)
        return ", ".join(self.get_key_display(Binding(k.strip(), "")) for k in key.split(","))

    def key_help(self) -> list[tuple[str, str]]:
        rows: list[tuple[str, str]] = []
        for k in OPERATOR_KEYS:
            rows.append((self.key_for(k.id, k.key), k.help))
        rows.append(("ctrl+p", "command palette (every action above, and the theme picker)"))
        return rows

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        main = self.main
        yield SystemCommand("Force checkpoint", "The agent re-orients; unfinished todos carry over",
                            self.action_checkpoint)
        yield SystemCommand("Rewind phase", "Re-plan the current phase around an issue", self.action_rewind)
        yield SystemCommand("Approve restart", "Approve a pending context restart", self.action_approve)
        yield SystemCommand("Deny restart", "Deny a pending context restart (the run ends)", self.action_deny)
        yield SystemCommand("Pause run", "Pause after the current turn", self.action_pause)
        yield SystemCommand("Resume run", "Resume a paused run", self.action_resume)
        yield SystemCommand("Stop run", "Stop after the current turn", self.action_stop)
        yield SystemCommand("Guardrails", "Policies, feedback providers, completion checker, deadline, token and "
                            "money budgets", self.action_guardrails)
        yield SystemCommand("Next pane", "Focus the next pane", main.action_next_pane)
        yield SystemCommand("Maximize pane", "Maximize or restore the focused pane", main.action_toggle_maximize)
        yield SystemCommand("Help", "Keys and panes", self.action_help)
        yield SystemCommand("Quit console", "Quit (asks first when the run is in this process)",
                            self.action_quit_console)

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
