"""The operator console: a thin Textual shell around one run's screen, or the fleet of runs.

The app holds what is the console's, not a run's: the themes (and their hot reload), the operator's key map,
the signals' way in (``stop_and_quit``), the palette's common entries and screenshots. Its parts: the console's
notices (:class:`console.tui.notices.HeldNotices`, which holds them while a question is up), the run screens
(:class:`console.tui.run_screens.RunScreens`: built, and the one shown found) and, for the fleet, its list and
poller (:class:`console.tui.fleet_home.FleetHome`). A run is a :class:`console.tui.screens.run.RunScreen`, which
owns it (controller, bridge, fold, workers, keys): the app's default screen for one run, or pushed fresh by the
fleet for each run attached and popped by q. The fleet's list is a :class:`console.tui.screens.fleet.FleetScreen`,
whose parts act on its runs (approve, deny, stop, resume, forget: :mod:`console.tui.screens.fleet_actions`) and
ring for a run that needs its operator (:mod:`console.tui.screens.fleet_bell`).

It renders only from engine events (and main_plan.md) and acts only through the engine's control API (a run's
control inbox, or the shared store's command queue). No agent logic lives here.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.theme import Theme

from console.engine.job_files import JobPaths
from console.engine.text import safe_text
from console.outcome import EXIT_OK
from console.tui import messages
from console.tui.commands import Controller, InboxController, RecordingController
from console.tui.keymap import OPERATOR_KEYS, check_keymap
from console.tui.messages import FleetRows, ThemeFileChanged
from console.tui.notices import HeldNotices, Notice
from console.tui.pacing import one_shot
from console.tui.run_screens import RunScreens
from console.tui.screens.dialog import ARM_DELAY
from console.tui.theme_choice import save_theme
from console.tui.themes import DEFAULT_THEME, ThemeError, load_theme_file, load_themes, themes_dir, user_themes_dir

# What is imported here is what every console's first frame needs. A run's screen (its panes, Markdown, the
# sandbox's words) is imported when the first one is built, the fleet's list when the fleet is shown, and its model
# and poller when the app is built for the fleet: the fleet would wait ~70 ms for the one, an attached run ~15 ms
# for the others, before anything is drawn.
if TYPE_CHECKING:
    from console.tui.bridge import EventBridge
    from console.tui.fleet_home import FleetHome
    from console.tui.fleet_poll import FleetPoller
    from console.tui.screens.fleet import FleetScreen
    from console.tui.screens.run import Run, RunScreen
    from console.tui.screens.run_intake import EventSource
    from console.view.fleet import Fleet
    from console.view.state import ConsoleState


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
        source: EventSource | None = None,
        follow: bool = False,
        theme: str | None = None,
        themes: Path | None = None,
        watch: bool = True,
        now: Callable[[], datetime] | None = None,
        keymap: Mapping[str, object] | None = None,
        notices: list[str] | None = None,
        max_items: int | None = None,
        animations: bool = True,
        provider: str = "",
        model: str = "",
        window: int = 0,
        soft: float = 0.70,
        hard: float = 0.85,
        fleet: Fleet | None = None,
        poll_interval: float | None = None,
        dialog_delay: float = ARM_DELAY,
        dialog_clock: Callable[[], float] | None = None,
        data_dir: Path | None = None,
    ) -> None:
        """One run (``controller`` and ``paths``), or the fleet (``fleet``: the list of runs first, a run
        attached from it and left again with q). ``dialog_delay``: how long a dialog ignores keys once shown
        once shown, when it opened on its own (``dialog_clock``: its clock, monotonic seconds; the toasts held
        while a dialog is up are timed by it too). ``data_dir``: where the theme picked in the palette is kept
        (default: the settings' data dir)."""
        super().__init__()
        self.dialog_delay = dialog_delay
        self.dialog_clock = dialog_clock or time.monotonic
        self.requested_theme = theme
        self.data_dir = data_dir
        self._theme_kept = ""  # the theme last kept for the next start (or started with)
        self.themes_path = themes or themes_dir()
        self.watch_files = watch  # the theme and plan files are watched (tests turn the watchers off)
        self.now = now or utc_now
        self.keymap_raw = dict(keymap or {})
        self.notices = list(notices or [])
        if not animations:
            self.animation_level = "none"
        self.fleet = fleet
        rung: dict[Path, int] = {}  # the needs_operator seq the bell already rang for, per run
        # The runs' screens (the fleet pushes a fresh one for each run it attaches to).
        self.runs = RunScreens(self.now, stack=lambda: self.screen_stack, top=lambda: self.screen,
                               watch_files=self.watch_files, animations=animations, max_items=max_items, rung=rung,
                               key_help=self.key_help)
        # The fleet's list and its poller (which runs in a worker once the app is up).
        self.home: FleetHome | None = None
        if fleet is not None:
            from console.tui.fleet_home import FleetHome
            from console.tui.fleet_poll import FLEET_POLL

            self.home = FleetHome(fleet, self.post_message, FLEET_POLL if poll_interval is None else poll_interval,
                                  show_run=self.show_run, run_on_top=self.runs.on_top, rung=rung)
        # Every notice of the console: held while a question is up (console.tui.notices).
        self.toasts = HeldNotices(post=self.post_message, later=self.call_later,
                                  clear_toasts=super().clear_notifications, top_screen=lambda: self.screen,
                                  clock=self.dialog_clock, default_timeout=self.NOTIFICATION_TIMEOUT)
        self._stop_watch = asyncio.Event()
        self._themes_read_at = 0.0
        self.theme_problems: list[str] = []
        self._theme_notices = self._setup_themes()
        self._gc_thresholds: tuple[int, ...] = ()
        if fleet is None:
            from console.tui.screens.run import Run

            self.runs.keep(Run(
                controller=controller or RecordingController(), paths=paths or JobPaths(Path.cwd()),
                job_title=job_title or (paths.root.name if paths is not None else ""), source=source,
                follow=follow, provider=provider, model=model, window=window, soft=soft, hard=hard,
                run_id=paths.run_id if paths is not None else ""))

    def notify(self, message: str, *, title: str = "", severity: str = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every toast of the console (a widget's ``notify`` comes here too): its words often carry a run's folder,
        a job's name or the engine's reason, so they are made safe for the terminal and never parsed as markup
        (``[/]`` in a folder name is text, not a closing tag that raises). ``markup`` is ignored for that reason.
        While a dialog is up it waits for it to close (console.tui.notices)."""
        self.toasts.notify(safe_text(str(message)), title=safe_text(str(title), one_line=True),
                           severity=severity, timeout=timeout, markup=False)  # type: ignore[arg-type]

    def clear_notifications(self) -> None:
        """Every notice, shown or held: the console clears them when they are no longer true."""
        self.toasts.clear()

    def retract_notices(self, title: str) -> None:
        """Take back the notices titled ``title`` (console.tui.notices.retract)."""
        self.toasts.retract(title)

    @property
    def held_notices(self) -> list[Notice]:
        """The notices waiting for a question to close."""
        return self.toasts.held

    # -- construction helpers ---------------------------------------------------------------
    @classmethod
    def for_attach(cls, paths: JobPaths, *, job_title: str = "", **kw: object) -> ConsoleApp:
        return cls(controller=InboxController(paths), paths=paths, job_title=job_title, follow=True,
                   **kw)  # type: ignore[arg-type]

    def get_default_screen(self) -> FleetScreen | RunScreen:
        if self.home is not None:
            return self.home.screen()
        assert self.runs.own is not None
        return self.runs.own

    @property
    def fleet_view(self) -> FleetScreen | None:
        """The fleet's list (None: no fleet, or not shown yet)."""
        return self.home.view if self.home is not None else None

    @property
    def poller(self) -> FleetPoller | None:
        return self.home.poller if self.home is not None else None

    @property
    def run_screen(self) -> RunScreen | None:
        """The run shown: the top-most run's screen in the stack (None: the fleet's list, no run attached)."""
        return self.runs.shown()

    # The run shown, as the snapshot tests and the benchmarks read it (the run's screen owns all three).
    @property
    def main(self) -> RunScreen:
        run = self.run_screen
        assert run is not None, "no run is shown"
        return run

    @property
    def state(self) -> ConsoleState:
        return self.main.state

    @property
    def bridge(self) -> EventBridge:
        return self.main.bridge

    @property
    def exit_code(self) -> int | None:
        """The exit code the run's verdict asks for (None: no verdict yet, or no run of this process)."""
        run = self.runs.own
        return run.exit_code if run is not None else None

    # -- start-up ------------------------------------------------------------------------------
    def on_mount(self) -> None:
        self._tune_gc()
        for title, message in self._theme_notices:
            self.notify(message, title=title, severity="warning", timeout=8)
        self._theme_kept = self.theme
        self.theme_changed_signal.subscribe(self, self._keep_theme)
        self._setup_keymap()
        if self.watch_files:
            one_shot(self, messages.WATCH_AFTER, self.watch_themes, name="theme-watch")  # late rather than never
        if self.home is not None:
            self.home.start(self.call_after_refresh, self._fleet_worker)
        self.toasts.started()
        self.screen_change_signal.subscribe(self, self.toasts.screen_changed, immediate=True)

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
        gc.enable()  # `attach` and the fleet start with it off (console.cli.views.console_start)

    def _setup_themes(self) -> list[tuple[str, str]]:
        """The theme files registered and the theme chosen; what to tell the operator about them (title, message:
        said once the app runs). Called from __init__, before the stylesheet is first parsed: a theme set in
        on_mount (as it was) had Textual parse the whole stylesheet a third time before the first frame (~5 ms of
        CPU; benchmarks/tui.py --only processes)."""
        self._themes_read_at = time.time()  # a theme file changed after this is read again (watch_themes)
        problems: list[str] = []
        for folder in (self.themes_path, user_themes_dir()):
            for theme in load_themes(folder, problems):
                self.register_theme(theme)
        self.theme_problems = problems
        said = [("Theme file skipped", problem) for problem in problems]
        wanted = self.requested_theme or DEFAULT_THEME
        if wanted not in self.available_themes:
            fallback = DEFAULT_THEME if DEFAULT_THEME in self.available_themes else "textual-dark"
            if self.requested_theme:
                names = ", ".join(sorted(n for n in self.available_themes if not n.startswith("textual")))
                said.append(("", f"Unknown theme '{self.requested_theme}'; using {fallback}. Themes: {names}"))
            wanted = fallback
        self.theme = wanted
        return said

    def _keep_theme(self, theme: Theme) -> None:
        """A theme picked (the palette's picker): kept for the next start (console.tui.theme_choice)."""
        if theme.name == self._theme_kept:
            return
        self._theme_kept = theme.name
        try:
            data_dir = self.data_dir
            if data_dir is None:
                from console.settings import load_settings

                data_dir = load_settings().data_dir
            save_theme(data_dir, theme.name)
        except Exception as exc:  # a full disk, a config gone bad since the start: the theme still applies now
            self.notify(f"{theme.name} applies until the console closes; it could not be kept: {exc}",
                        title="Theme not kept", severity="warning", timeout=8)

    def _setup_keymap(self) -> None:
        keymap, problems = check_keymap(self.keymap_raw)
        for problem in self.notices + problems:
            self.notify(problem, title="Key map", severity="warning", timeout=8)
        if keymap:
            self.set_keymap(keymap)

    # -- workers -------------------------------------------------------------------------------
    @work(group="theme-watch", exclusive=True)
    async def watch_themes(self) -> None:
        from watchfiles import awatch

        folders = [f for f in (self.themes_path, user_themes_dir()) if f.is_dir()]
        if not folders:
            return

        def only_themes(_change: object, path: str) -> bool:
            return path.endswith(".toml")

        caught_up = False
        try:
            # yield_on_timeout: an empty set comes after the first quiet spell, when the watcher is certainly up.
            async for changes in awatch(*folders, watch_filter=only_themes, recursive=False, debounce=150,
                                        step=50, stop_event=self._stop_watch, yield_on_timeout=True,
                                        rust_timeout=messages.WATCH_QUIET_MS):
                if not changes and not caught_up:
                    # The files changed between their first read (on_mount) and the watcher's start.
                    caught_up = True
                    changed = await asyncio.to_thread(self._themes_changed_since_read, folders)
                    if changed:
                        self.post_message(ThemeFileChanged(changed))
                if changes:
                    self.post_message(ThemeFileChanged(sorted({Path(p) for _c, p in changes})))
        except (OSError, RuntimeError) as exc:
            self.notify(f"Not watching theme files: {exc}", severity="warning")

    def _themes_changed_since_read(self, folders: list[Path]) -> list[Path]:
        out: list[Path] = []
        for folder in folders:
            for path in sorted(folder.glob("*.toml")):
                with contextlib.suppress(OSError):
                    # A second's margin: a file's time is the kernel's coarse clock, which may lag time.time() a
                    # little; a file read again for nothing is harmless, one changed and missed is not.
                    if path.stat().st_mtime >= self._themes_read_at - 1.0:
                        out.append(path)
        return out

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
            from console.tui.widgets.lines import ItemView

            for screen in self.screen_stack:
                for view in screen.query(ItemView):
                    view.invalidate()
            self.notify(f"Theme {theme.name} reloaded from {path.name}.", timeout=3)

    def _fleet_worker(self, poll: Callable[[], None]) -> None:
        self.run_worker(poll, thread=True, exit_on_error=False, group="fleet", name="fleet")

    def on_fleet_rows(self, message: FleetRows) -> None:
        if self.home is not None:
            self.home.rows(message, self.call_after_refresh)

    def show_run(self, run: Run) -> None:
        """The fleet: show one run's console (attached from the list); q comes back."""
        self.push_screen(self.runs.build(run, in_fleet=True))

    # -- leaving -------------------------------------------------------------------------------------
    def action_quit_console(self) -> None:
        """q on the fleet's list, Ctrl+C or Ctrl+Q anywhere: the run shown decides (it may ask first, or go back
        to the list); with no run shown the console closes."""
        run = self.run_screen
        if run is not None:
            run.action_quit_console()
            return
        self.exit(EXIT_OK, return_code=EXIT_OK)

    def stop_and_quit(self) -> None:
        """A signal (SIGTERM, SIGHUP): the run in this process is stopped now and the console closes once it has."""
        if self.runs.own is not None:
            self.runs.own.stop_and_quit()
        else:
            self.exit(EXIT_OK, return_code=EXIT_OK)

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

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The palette: each action once, in the console's words. Not Textual's own Quit (it would skip the
        question and abort the run), nor its Keys panel (? is the help) or Maximize (m)."""
        if self.fleet_view is not None and screen is self.fleet_view:
            yield from self.fleet_view.system_commands()
        elif self.runs.is_run(screen):
            yield from screen.system_commands()
        yield SystemCommand("Theme", "Change the console's theme", self.action_change_theme)
        yield SystemCommand("Screenshot", "Save an SVG picture of the screen (the path is shown)",
                            self.action_save_screenshot)
        if self.runs.is_run(screen) and screen.in_fleet:
            yield SystemCommand("Back to the fleet", "Leave this run's console (the run goes on)",
                                self.action_quit_console)
        else:
            yield SystemCommand("Quit", "Quit the console (asks first when the run is in this process)",
                                self.action_quit_console)

    def screenshots_dir(self) -> Path:
        """Where screenshots go: the run's harness folder (never the agent's files), or the fleet's data folder."""
        run = self.run_screen
        if run is None and self.fleet is not None:
            return self.fleet.store_path.parent / "screenshots"
        if run is not None and (elsewhere := run.controller.screenshots) is not None:
            return Path(elsewhere)  # a run of another machine: its folder is there, not here
        return (run.paths if run is not None else JobPaths(Path.cwd())).state / "screenshots"

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
    def exit(self, result: int | None = None, return_code: int = 0, message: RenderableType | None = None) -> None:
        """Every way out (q, a signal, a test's pilot) lets go of the run first: its engine thread is stopped now,
        on this thread. Unmount handlers alone were not enough: under load the app's shutdown could end without
        them (a screen's pump closed with its Unmount unprocessed), and asyncio's close then waited forever on the
        engine's worker thread, held at a gated model or a restart awaiting approval."""
        if self.runs.own is not None:
            self.runs.own.close()
        super().exit(result, return_code, message)

    def on_unmount(self) -> None:
        self._stop_watch.set()
        if self._gc_thresholds:
            gc.set_threshold(*self._gc_thresholds)
            gc.unfreeze()
        if self.runs.own is not None:
            self.runs.own.close()  # the engine thread must never outlive the console (the process could not exit)
