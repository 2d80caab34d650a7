"""A run screen's toast lives exactly as long as what it says is true (issue 33, point 2): "Rewind refused ... r
offers it again" goes once the rewind tried again is applied; "Restart pending" goes once the restart is answered
(approved or denied, here or elsewhere); "Run interrupted" once the run runs again. The toasts are read where the
operator sees them (the Toast widgets on the screen), not only in the app's list."""

from __future__ import annotations

import pytest
from textual.widgets._toast import Toast

from console.engine import events as ev
from console.tui.screens.approval import NOTICE_TITLE, RestartApprovalScreen
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.rewind import RewindScreen
from console.tui.screens.run import RunScreen
from tests.tui.conftest import drive, pause, wait_for
from tests.tui.test_dialog_keys import Clock, Seq, pending, recorded_app, started


def shown(app) -> list[str]:
    """The titles of the toasts the operator sees, and of those about to be drawn (Textual's list)."""
    drawn = [t._notification.title for t in app.screen.query(Toast)]
    return sorted(set(drawn) | {n.title for n in app._notifications})


async def refused_rewind(pilot, app, rec, e: Seq, clock: Clock, text: str) -> None:
    await pilot.press("r", *text)
    clock.now += 1
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the rewind sent")
    app.bridge.push(e(ev.OperatorCommand, command="rewind", status="rejected", source="console",
                      detail="the phase has ended"))
    await wait_for(pilot, lambda: "rewind" not in app.state.requested, what="the refusal")
    await pause(pilot)


def test_rewind_refused_goes_once_the_rewind_tried_again_is_applied(make_job):
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        app.notify("something else", title="Other", timeout=60)
        await refused_rewind(pilot, app, rec, e, clock, "the digest misses the risks")
        await wait_for(pilot, lambda: "Rewind refused" in shown(app), what="the refusal's toast")
        await pilot.press("r")  # r offers the text again: sent as it is
        await wait_for(pilot, lambda: isinstance(app.screen, RewindScreen), what="the rewind box")
        clock.now += 1
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the rewind sent again")
        assert rec.sent[-1][0] == "rewind"
        app.bridge.push(e(ev.OperatorCommand, command="rewind", status="applied", source="console"))
        await wait_for(pilot, lambda: "rewind" not in app.state.requested, what="the rewind applied")
        await pause(pilot)
        await pause(pilot)
        assert shown(app) == ["Other"]  # the refusal is no longer true; the other notice is

    drive(app, body, size=(80, 24))


def test_a_refusal_and_the_apply_after_it_in_one_batch_leave_no_toast(make_job):
    """The two events folded in one drain: the toast raised for the first must not be drawn after the second took
    it back (Textual draws a notice a moment after it is raised)."""
    clock = Clock()
    app, _rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        await pilot.press("r", *"first words")
        clock.now += 1
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the rewind sent")
        app.bridge.push_many([
            e(ev.OperatorCommand, command="rewind", status="rejected", source="console", detail="a race"),
            e(ev.OperatorCommand, command="rewind", status="applied", source="console"),
        ])
        await wait_for(pilot, lambda: "rewind" not in app.state.requested, what="both events")
        await pause(pilot)
        await pause(pilot)
        assert shown(app) == []

    drive(app, body, size=(80, 24))


def later(pilot, app, e: Seq, clock: Clock):
    async def go() -> None:
        app.bridge.push(pending(e))
        await wait_for(pilot, lambda: isinstance(app.screen, RestartApprovalScreen), what="the approval")
        await wait_for(pilot, lambda: app.screen.shown_at is not None, what="the approval shown")
        clock.now += 1
        await pilot.press("escape")  # later: the restart still waits, and a toast says how to answer it
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the approval left for later")
        await wait_for(pilot, lambda: NOTICE_TITLE in shown(app), what="the 'still waits' toast")
    return go()


def test_restart_pending_goes_when_the_restart_is_denied_here(make_job):
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        await later(pilot, app, e, clock)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="deny?")
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="deny answered")
        await pause(pilot)
        await pause(pilot)
        assert rec.sent[-1][0] == "deny_restart"
        assert NOTICE_TITLE not in shown(app)
        app.bridge.push(e(ev.RestartDenied))
        await wait_for(pilot, lambda: app.state.restart_pending is None, what="the denial")
        await pause(pilot)
        assert NOTICE_TITLE not in shown(app)

    drive(app, body, size=(80, 24))


@pytest.mark.parametrize("answer", [ev.RestartDenied, ev.RestartApproved])
def test_restart_pending_goes_when_the_restart_is_answered_elsewhere(make_job, answer):
    """Denied or approved from another terminal (`agent-console deny ID`, the fleet): the fold says so."""
    clock = Clock()
    app, _rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        await later(pilot, app, e, clock)
        app.bridge.push(e(answer, by="operator"))
        await wait_for(pilot, lambda: app.state.restart_pending is None, what="the answer")
        await pause(pilot)
        await pause(pilot)
        assert NOTICE_TITLE not in shown(app)

    drive(app, body, size=(80, 24))
