"""Entry points for the command line: the console of a run, of a run of another machine, or of the fleet.

``attach_console``: the console of a job another process runs (its runner, or ``run --headless``):
rebuilt from ``events.jsonl`` from the first line, then following it; keys go
through the job's control inbox. Closing it never stops the run; a finished job
can be attached for review. Exit code 0.

The console never runs a run in its own process (tests do, through tests/tui/inprocess.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.engine.job_files import JobPaths

if TYPE_CHECKING:
    from textual.pilot import Pilot

    from console.engine.seal import Seal
    from console.tui.app import ConsoleApp

# What App.run takes: a coroutine function (an async def), given the app's pilot.
AutoPilot = Callable[["Pilot[object]"], Coroutine[Any, Any, None]]


def with_keymap(keymap: Mapping[str, str] | None) -> dict[str, Any]:
    """The keymap given, or the config file's ``[keys]`` table. Problems are shown in the console
    (a notification), so a typo in the config file never blocks a run."""
    if keymap is not None:
        return {"keymap": keymap}
    from console.tui.keymap import load_keymap

    loaded, problems = load_keymap()
    return {"keymap": loaded, "notices": problems}


def build_attach_app(paths: JobPaths, *, theme: str | None = None, job_title: str = "",
                     keymap: Mapping[str, str] | None = None, **kw: Any) -> ConsoleApp:
    from console.tui.app import ConsoleApp

    return ConsoleApp.for_attach(paths, job_title=job_title, theme=theme, **with_keymap(keymap), **kw)


def attach_console(paths: JobPaths, *, theme: str | None = None, job_title: str = "",
                   keymap: Mapping[str, str] | None = None, headless: bool = False,
                   auto_pilot: AutoPilot | None = None, quit_asks: bool = True) -> int:
    """Open the console on a job run by another process (or a finished one, for review).

    The console never holds the run: a hangup (SIGHUP: the terminal or the SSH session is gone) or SIGTERM
    closes it and nothing else, and the process is gone within 2 s whatever the terminal does."""
    app = build_attach_app(paths, theme=theme, job_title=job_title, keymap=keymap)
    with viewer_signals(app):
        app.run(headless=headless, auto_pilot=auto_pilot)
    return 0 if app.return_code in (None, 0) else 1


def build_remote_app(url: str, row: Any, *, theme: str | None = None, keymap: Mapping[str, str] | None = None,
                     data_dir: Path | None = None, **kw: Any) -> ConsoleApp:
    """The console of a run of another machine (``row``: the shared store's row of it), fed from the store."""
    from console.engine.runs import run_id
    from console.tui.app import ConsoleApp
    from console.tui.store_follow import StoreController

    rid = run_id(row.path)
    controller = StoreController(url, row.key, row.host, rid,
                                 screenshots=data_dir / "screenshots" if data_dir is not None else None)
    return ConsoleApp(controller=controller, paths=JobPaths(Path(row.path)), job_title=Path(row.path).name,
                      follow=True, theme=theme, **with_keymap(keymap), **kw)


def attach_remote_console(url: str, row: Any, *, theme: str | None = None, keymap: Mapping[str, str] | None = None,
                          headless: bool = False, auto_pilot: AutoPilot | None = None,
                          data_dir: Path | None = None) -> int:
    """:func:`attach_console` for a run of another machine sharing the store: the same console, its events from
    the store (LISTEN/NOTIFY), its keys through the store's command queue. Exit code 0."""
    app = build_remote_app(url, row, theme=theme, keymap=keymap, data_dir=data_dir)
    with viewer_signals(app):
        app.run(headless=headless, auto_pilot=auto_pilot)
    return 0 if app.return_code in (None, 0) else 1


@contextlib.contextmanager
def viewer_signals(app: ConsoleApp) -> Iterator[None]:
    """SIGHUP and SIGTERM close a viewer at once (and a terminal that went away without sending SIGHUP: see
    console.tui.terminal_watch); if its screen cannot be taken down (a terminal that is gone
    may block a write), the process leaves anyway after a moment: a viewer holds nothing worth waiting for.

    SIGINT (a Ctrl+C before the console has the terminal: there it is a key) closes it too, then raises
    KeyboardInterrupt, so the command ends as interrupted: asked before Textual starts, it never takes the
    screen; asked after, it gives the screen back (a KeyboardInterrupt amid Textual's start would leave the
    terminal in the console's screen and modes)."""
    import signal

    from console.runner import HardExit, drop_output
    from console.tui.pacing import one_shot

    hard = HardExit(after=1.5, code=129)
    interrupted = False

    def on_signal(signum: int, _frame: object) -> None:
        if signum == signal.SIGHUP:
            # No more writes to a dead terminal (a write there fails, or blocks), and none to the run's log
            # either: what Textual writes as it closes is the terminal's (its screen and mouse modes' sequences).
            drop_output()
        hard.arm()
        with contextlib.suppress(Exception):  # the app may be starting or closing
            app.call_later(app.exit, 0)

    def leave(tries: int = 0) -> None:
        # An exit while the first screen is still being built fails in it: once its panes exist (or soon anyway).
        run = app.run_screen
        if app.fleet is None and (run is None or not run.ui_alive) and tries < 40:
            one_shot(app, 0.05, lambda: leave(tries + 1))
        else:
            app.exit(None, 130)

    def on_interrupt(_signum: int, _frame: object) -> None:
        nonlocal interrupted
        interrupted = True
        with contextlib.suppress(Exception):  # the app may be closing
            if not app.is_running:
                app.exit(None, 130)  # before Textual starts: it never takes the screen
            else:
                app.call_later(leave)

    from console.tui.terminal_watch import hangup_when_terminal_gone

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, on_interrupt)
    try:
        with hangup_when_terminal_gone():  # a terminal gone without its SIGHUP is handled as one
            yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if interrupted:
        raise KeyboardInterrupt


def build_fleet_app(store_path: Path, *, theme: str | None = None, keymap: Mapping[str, str] | None = None,
                    **kw: Any) -> ConsoleApp:
    from console.tui.app import ConsoleApp
    from console.view.fleet import Fleet

    holder = kw.pop("holder", None)
    fleet = Fleet(store_path, now=kw.get("now") or _utc_now, holder=holder, url=kw.pop("url", None),
                  seal=kw.pop("seal", None))
    return ConsoleApp(fleet=fleet, theme=theme, **with_keymap(keymap), **kw)


def fleet_console(store_path: Path, *, theme: str | None = None, keymap: Mapping[str, str] | None = None,
                  headless: bool = False, auto_pilot: AutoPilot | None = None, url: str | None = None,
                  seal: Seal | None = None) -> int:
    """The fleet view: every run of the jobs store (``url``: a shared one's), live; enter attaches to one, q comes
    back. Exit code 0. ``seal``: the operator's key (each run's first fold starts from its kept view fold)."""
    app = build_fleet_app(store_path, theme=theme, keymap=keymap, url=url, seal=seal)
    with viewer_signals(app):
        app.run(headless=headless, auto_pilot=auto_pilot)
    return 0 if app.return_code in (None, 0) else 1


def _utc_now() -> datetime:
    return datetime.now(UTC)
