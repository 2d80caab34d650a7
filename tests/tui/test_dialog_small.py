"""Every dialog shows its buttons at 40x12 (issue 33, point 9: at 40x12 the quit question had none in sight): the
message scrolls, the buttons stay inside the screen, whole."""

from __future__ import annotations

import pytest
from textual.widgets import Button

from console.engine import events as ev
from console.tui.screens.approval import RestartApprovalScreen, deny_question
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.quit import QuitScreen
from console.tui.screens.rewind import RewindScreen
from tests.tui.conftest import drive, wait_for
from tests.tui.test_dialog_keys import Clock, Seq, recorded_app, started

PENDING = ev.RestartPending(seq=9, session=1, usage_pct=0.9, used_tokens=9_000, context_window=10_000,
                            next_session=2, carryover_messages=4, carryover_tokens=800, ts="2026-01-15T14:12:34Z")
ID = "20260115-141234-quickstart-7f3a"

DIALOGS = {
    "quit": lambda: QuitScreen(ID),
    "quit and stop": lambda: ConfirmScreen("Quit and stop the run?", "The run lives in this process: quitting "
                                           "stops it. Everything so far is saved; resume with `agent-console run "
                                           "--in-place /home/operator/jobs/quickstart`. (To watch a run you can "
                                           "leave, start it with --headless and use `agent-console attach`.)",
                                           "Stop and quit", "Stay", quits=True),
    "approval": lambda: RestartApprovalScreen(PENDING, ID),
    "deny": lambda: deny_question(ID),
    "rewind": lambda: RewindScreen("Write", number=2, blink=False, text=""),
}


@pytest.mark.parametrize("name", list(DIALOGS))
@pytest.mark.parametrize("size", [(40, 12), (80, 24)])
def test_a_dialog_s_buttons_are_on_the_screen(make_job, name, size):
    clock = Clock()
    app, _rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        dialog = DIALOGS[name]()
        app.push_screen(dialog)
        await wait_for(pilot, lambda: app.screen is dialog and bool(dialog.query(Button)), what="the dialog")
        await pilot.pause()
        await pilot.pause()
        screen = app.screen.region
        buttons = list(dialog.query(Button))
        assert buttons
        for button in buttons:
            region = button.region
            assert region.width > 0 and region.height > 0, (button.id, region)
            assert screen.contains_region(region), (button.id, region, screen)
            # Not hidden under the dialog's own scrolling: its whole label is in sight.
            assert region.width >= len(str(button.label)), (button.id, region, str(button.label))

    drive(app, body, size=size)
