"""The fleet resumes a stopped run (issue 18, point 2: "whatever the path ... the fleet"): `r` asks first, then
the run starts again in the background through `agent-console resume`, with the settings it was started with
(here --no-auto-restart and a 10,000-token window: it asks for approval again instead of restarting on its own)."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from console import cli
from console.cli import main
from console.engine import events as ev
from console.engine.control import RunLock
from console.engine.job import JobPaths
from console.settings import load_settings
from console.tui.launch import build_fleet_app
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.fleet import FleetScreen
from console.view.fleet import STOPPED
from tests.conftest import SAMPLES
from tests.tui.conftest import drive, record_notices, wait_for


def test_r_in_the_fleet_resumes_a_stopped_run_with_its_recorded_settings(tmp_path: Path, capsys) -> None:
    job = tmp_path / "requirements-extraction"
    shutil.copytree(SAMPLES / "requirements-extraction", job)
    paths = JobPaths(job)
    assert main(["run", "--in-place", str(job), "--detach", "--speed", "0", "--context-window", "10000",
                 "--no-auto-restart"]) == 0
    try:
        assert main(["wait", str(job), "--timeout", "120"]) == cli.WAIT_NEEDS
        assert main(["stop", str(job), "--wait", "10"]) == 0
        assert main(["wait", str(job), "--timeout", "60"]) == cli.WAIT_STOPPED
        capsys.readouterr()
        app = build_fleet_app(load_settings().store_path, watch=False, animations=False, keymap={},
                              dialog_delay=0, poll_interval=0.05)
        notices = record_notices(app)

        async def body(pilot) -> None:
            await wait_for(pilot, lambda: app.fleet_view is not None and any(
                r.path == job and r.state == STOPPED for r in app.fleet_view.shown), what="the stopped run")
            view = app.fleet_view
            view.table.move_cursor(row=next(n for n, r in enumerate(view.shown) if r.path == job))
            await pilot.pause(0.1)
            assert view.selected.resume == "start"
            await pilot.press("r")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen) and paths.run_id in app.screen.title_text
            await pilot.press("n")  # asked first: no, and nothing starts
            await pilot.pause(0.3)
            assert isinstance(app.screen, FleetScreen) and RunLock(paths).holder() is None
            await pilot.press("r", "y")
            await wait_for(pilot, lambda: any(title in ("Resumed", "Not resumed") for title, _ in notices),
                           timeout=60, what="the resume's answer")
            assert [message for title, message in notices if title == "Not resumed"] == []
            await wait_for(pilot, lambda: any(r.path == job and r.pid is not None for r in view.rows),
                           timeout=30, what="the run live again in the list")

        drive(app, body, size=(100, 30))
        # It went on with the recorded settings: no auto restart, so it asks for approval again.
        assert main(["wait", str(job), "--timeout", "120"]) == cli.WAIT_NEEDS
        starts = [e for e in ev.read_events(paths.events) if isinstance(e, ev.LaunchSettings)]
        assert [s.source for s in starts] == ["start", "resume"] and not starts[-1].changes
        assert starts[-1].by == "fleet"
        assert starts[-1].context_window == 10000 and starts[-1].auto_restart is False
    finally:
        with contextlib.suppress(Exception):
            main(["stop", str(job), "--wait", "10"])
            main(["wait", str(job), "--timeout", "60"])
