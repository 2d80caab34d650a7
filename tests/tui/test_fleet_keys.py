"""The fleet's keys never surprise (issue 18, point 6): ending a run (d denies its restart, s stops it) asks
first, naming the run; approving does not; a run whose folder is gone is shown as gone and x forgets it (asked
first); letters typed into the filter are text."""

from __future__ import annotations

import json
import shutil
from contextlib import ExitStack
from pathlib import Path

from textual.widgets._footer import FooterKey

from console.engine.control import RunLock
from console.engine.job import JobPaths
from console.engine.store import JobStore
from console.tui.launch import build_fleet_app
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.fleet import FleetScreen
from console.view.fleet import GONE, RUNNING, WAITING
from tests.tui.conftest import FROZEN_NOW, drive, record_notices, wait_for
from tests.tui.fleet_runs import listed, make_fleet


def fleet_app(fx, **kw):
    kw.setdefault("watch", False)
    kw.setdefault("animations", False)
    kw.setdefault("keymap", {})
    kw.setdefault("now", lambda: FROZEN_NOW)
    kw.setdefault("dialog_delay", 0)
    return build_fleet_app(fx.store_path, holder=fx.holder, **kw)


def sent(run: Path) -> list[str]:
    return sorted(json.loads(p.read_text())["command"] for p in (run / ".console" / "inbox").glob("*.json"))


def footer(app) -> list[str]:
    return [k.description for k in app.fleet_view.query(FooterKey)]


def test_deny_and_stop_ask_first_naming_the_run_and_approve_does_not(tmp_path):
    fx = make_fleet(tmp_path)
    app = fleet_app(fx)
    waiting, running = fx.runs["waiting"], fx.runs["running"]

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 7))
        row = app.fleet_view.selected
        assert row.state == WAITING
        await pilot.press("d")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, ConfirmScreen)
        assert row.id in dialog.title_text and "security-audit" in dialog.title_text
        await pilot.press("n")  # kept waiting: nothing sent
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen) and sent(waiting) == []
        await pilot.press("d", "y")
        await pilot.pause()
        assert sent(waiting) == ["deny_restart"]
        await pilot.press("a")  # approving ends nothing: no question
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen) and sent(waiting) == ["approve_restart", "deny_restart"]
        await pilot.press("down", "down")
        await pilot.pause()
        chosen = app.fleet_view.selected
        assert chosen.state == RUNNING and "Stop" in footer(app)
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and chosen.id in app.screen.title_text
        await pilot.press("escape")
        await pilot.pause()
        assert sent(running) == []
        await pilot.press("s", "y")
        await pilot.pause()
        assert sent(running) == ["stop"]
        assert any(n.title == "Stop sent" for n in app._notifications)

    with ExitStack() as stack:
        for run in (waiting, running):  # make-believe processes: the inbox is written only for a live run
            lock = RunLock(JobPaths(run))
            assert lock.acquire()
            stack.callback(lock.release)
        drive(app, body, size=(80, 24))


def test_stop_of_a_run_nobody_runs_says_so_and_asks_nothing(tmp_path):
    fx = make_fleet(tmp_path)
    app = fleet_app(fx)

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 7))
        view = app.fleet_view
        view.table.move_cursor(row=next(n for n, r in enumerate(view.shown) if r.state == "completed"))
        # Not offered for a run no process runs: the footer is recomposed a moment after the cursor moved (a bare
        # pause was not always that moment on a loaded machine; the key below is refused whatever the footer says).
        await wait_for(pilot, lambda: "Stop" not in footer(app), what="the footer without Stop")
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)  # nothing asked

    drive(app, body, size=(80, 24))


def test_a_gone_run_is_shown_as_gone_and_x_forgets_it_after_asking(tmp_path):
    fx = make_fleet(tmp_path)
    gone = fx.runs["stopped"]
    shutil.rmtree(gone)
    app = fleet_app(fx, poll_interval=0.05)

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 7))
        view = app.fleet_view
        await wait_for(pilot, lambda: any(r.state == GONE for r in view.rows), what="the gone run")
        assert "Forget" not in footer(app)  # the waiting run is selected: nothing to forget
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        view.table.move_cursor(row=next(n for n, r in enumerate(view.shown) if r.path == gone))
        await pilot.pause(0.1)
        row = view.selected
        assert row.state == GONE and "its folder no longer exists" in row.detail
        assert "x forgets this run" in str(view.query_one("#fleet-detail").render())
        assert "Forget" in footer(app)
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and row.id in app.screen.title_text
        await pilot.press("n")
        await pilot.pause()
        assert JobStore(fx.store_path).get(gone) is not None
        await pilot.press("x", "y")
        await wait_for(pilot, lambda: JobStore(fx.store_path).get(gone) is None, what="the row forgotten")
        await wait_for(pilot, lambda: len(view.rows) == 6, what="the list without it")
        assert any(n.title == "Forgotten" for n in app._notifications)

    drive(app, body, size=(120, 40))
    assert len(JobStore(fx.store_path).list()) == 6  # the others are kept


def test_a_folder_back_in_place_is_not_forgotten(tmp_path):
    fx = make_fleet(tmp_path)
    gone = fx.runs["stopped"]
    moved = tmp_path / "elsewhere"
    shutil.move(gone, moved)
    app = fleet_app(fx, poll_interval=60)  # no poll sees the folder back
    notices = record_notices(app)

    async def body(pilot):
        await wait_for(pilot, lambda: app.fleet_view is not None and any(r.state == GONE
                                                                        for r in app.fleet_view.shown))
        view = app.fleet_view
        view.table.move_cursor(row=next(n for n, r in enumerate(view.shown) if r.path == gone))
        await pilot.pause()
        await pilot.press("x")
        await pilot.pause()
        shutil.move(moved, gone)  # put back while the question is open
        await pilot.press("y")
        await wait_for(pilot, lambda: any(title == "Not forgotten" for title, _ in notices))
        assert JobStore(fx.store_path).get(gone) is not None

    drive(app, body, size=(80, 24))


def test_letters_typed_into_the_filter_are_text(tmp_path):
    fx = make_fleet(tmp_path)
    app = fleet_app(fx)
    waiting = fx.runs["waiting"]

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 7))
        await pilot.press("slash", *"adsxq", "enter")  # enter: back to the list, the filter kept
        await pilot.pause()
        box = app.fleet_view.query_one("#fleet-filter")
        assert box.value == "adsxq" and isinstance(app.screen, FleetScreen) and app.is_running
        assert sent(waiting) == []

    lock = RunLock(JobPaths(waiting))
    assert lock.acquire()
    try:
        drive(app, body, size=(80, 24))
    finally:
        lock.release()


def test_r_unpauses_a_paused_run_and_is_offered_only_where_it_acts(tmp_path):
    """r: a paused live run unpauses through its inbox (no question: it ends nothing); a restart waiting for
    approval is a/d's, a running or completed run has nothing to resume, and r is not in their footer."""
    fx = make_fleet(tmp_path)
    app = fleet_app(fx)
    paused = fx.runs["paused"]

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 7))
        view = app.fleet_view
        resumes = {r.state: r.resume for r in view.rows}
        assert resumes == {WAITING: "", RUNNING: "", "paused": "unpause", "completed": "", "failed": "start",
                           "interrupted": "start", "stopped": "start"}
        assert "Resume" not in footer(app)  # the waiting run is selected
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen) and sent(fx.runs["waiting"]) == []
        view.table.move_cursor(row=next(n for n, r in enumerate(view.shown) if r.path == paused))
        await pilot.pause(0.1)
        assert "Resume" in footer(app)
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen) and sent(paused) == ["resume"]
        assert any(n.title == "Resume sent" for n in app._notifications)
        view.table.move_cursor(row=next(n for n, r in enumerate(view.shown) if r.state == "completed"))
        await pilot.pause(0.1)
        assert "Resume" not in footer(app)

    with ExitStack() as stack:
        for run in (fx.runs["waiting"], fx.runs["running"], paused):
            lock = RunLock(JobPaths(run))
            assert lock.acquire()
            stack.callback(lock.release)
        drive(app, body, size=(80, 24))


def test_p_pauses_a_run_at_work_and_is_offered_only_where_it_acts(tmp_path):
    """p: a live run at work pauses through its inbox (no question: r unpauses it); a run waiting for approval is
    a/d's, a paused one r's, one nobody runs has nothing to pause, and p is not in their footer."""
    fx = make_fleet(tmp_path)
    app = fleet_app(fx)
    running = fx.runs["running"]

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 7))
        view = app.fleet_view
        assert {r.state: r.pausable for r in view.rows} == {
            WAITING: False, RUNNING: True, "paused": False, "completed": False, "failed": False,
            "interrupted": False, "stopped": False}
        await pilot.pause(0.1)
        assert "Pause" not in footer(app)  # the waiting run is selected
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen) and sent(fx.runs["waiting"]) == []
        view.table.move_cursor(row=next(n for n, r in enumerate(view.shown) if r.path == running))
        await pilot.pause(0.1)
        assert "Pause" in footer(app)
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen) and sent(running) == ["pause"]
        assert any(n.title == "Pause sent" for n in app._notifications)
        view.table.move_cursor(row=next(n for n, r in enumerate(view.shown) if r.state == "paused"))
        await pilot.pause(0.1)
        assert "Pause" not in footer(app) and "Resume" in footer(app)

    with ExitStack() as stack:
        for run in (fx.runs["waiting"], running, fx.runs["paused"]):
            lock = RunLock(JobPaths(run))
            assert lock.acquire()
            stack.callback(lock.release)
        drive(app, body, size=(80, 24))
