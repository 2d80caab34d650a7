"""A dialog that opens on its own never takes the key the operator was already pressing as its answer; one the
operator asked for answers at once (console/tui/screens/dialog.py). The dialogs' clock is the test's, moved by
hand: nothing here waits for the 0.5 s to pass."""

from __future__ import annotations

from contextlib import ExitStack

from textual.widgets import Button

from console.engine.control import RunLock
from console.engine.job import JobPaths
from console.tui.screens.approval import RestartApprovalScreen
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.dialog import ARM_DELAY
from console.tui.screens.fleet import FleetScreen
from console.tui.screens.rewind import RewindScreen
from console.tui.screens.run import RunScreen
from tests.tui.conftest import drive, wait_for
from tests.tui.fleet_runs import listed, make_fleet
from tests.tui.test_dialog_keys import Clock, Seq, pending, recorded_app, started
from tests.tui.test_fleet_keys import fleet_app, sent


def dimmed(screen) -> bool:
    """The dialog's buttons are dimmed (its answers still wait)."""
    buttons = list(screen.query(Button))
    return screen.has_class("-arming") and len(buttons) >= 2 and all(b.styles.text_opacity < 1 for b in buttons)


def test_a_key_pressed_as_the_approval_appears_does_not_answer_it(make_job):
    """The operator is pressing keys for the screen below when the run asks for approval: those keys land on the
    dialog in its first moment and answer nothing; the same key once the moment is over approves."""
    clock = Clock()
    app, rec = recorded_app(make_job, clock)  # the console's own delay (ARM_DELAY), the test's clock
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        app.bridge.push(pending(e))
        # Keys pressed as the event arrives: whether the screen below takes them (nothing to approve there yet)
        # or the dialog as it appears, they answer nothing.
        await pilot.press("d", "a", "enter", "escape", "space")
        await wait_for(pilot, lambda: isinstance(app.screen, RestartApprovalScreen), what="the approval")
        approval = app.screen
        assert approval.delay == ARM_DELAY and 0.2 <= ARM_DELAY <= 1.0
        await pilot.press("d", "a", "enter", "escape", "space")
        await pilot.click("#approve")
        await pilot.pause()
        assert app.screen is approval and rec.sent == []
        assert dimmed(approval)  # it shows that it does not answer yet
        clock.now += ARM_DELAY - 0.01
        await pilot.press("a")
        await pilot.pause()
        assert app.screen is approval and rec.sent == [] and dimmed(approval)
        clock.now += 0.01  # its moment is over
        await wait_for(pilot, lambda: not approval.has_class("-arming"), timeout=10, what="the buttons lit")
        assert all(b.styles.text_opacity == 1 for b in approval.query(Button))
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the approval answered")
        assert [c for c, _ in rec.sent] == ["approve_restart"]

    drive(app, body, size=(80, 24))


def test_a_click_on_the_approval_waits_too_then_denies(make_job):
    """A click is where the pointer was: aimed at the pane below, it answers nothing in the first moment; then
    Deny asks first (it ends the run) and y denies."""
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        app.bridge.push(pending(e))
        await wait_for(pilot, lambda: isinstance(app.screen, RestartApprovalScreen), what="the approval")
        await wait_for(pilot, lambda: bool(app.screen.query("#deny")), what="its buttons")
        deny = app.screen.query_one("#deny", Button)
        await pilot.click("#deny")
        await pilot.pause()
        assert isinstance(app.screen, RestartApprovalScreen) and rec.sent == []
        clock.now += ARM_DELAY
        # Textual's Button takes no click while it shows the last one (0.2 s of its own clock): not ours to test.
        await wait_for(pilot, lambda: not deny.has_class("-active"), timeout=10, what="the press shown")
        await pilot.click("#deny")
        # Deny ends the run: it asks first (console.tui.screens.approval.deny_question), and the answer is y.
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="deny asks first")
        assert rec.sent == []
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the approval answered")
        assert [c for c, _ in rec.sent] == ["deny_restart"]

    drive(app, body, size=(80, 24))


def test_questions_the_operator_asked_for_answer_at_once(make_job):
    """s y, r + text + enter, typed in one go with the clock frozen: each question was asked for, each answers."""
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        await pilot.press("r", *"wrong order", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the rewind sent")
        await pilot.press("s")
        stop = app.screen
        assert isinstance(stop, ConfirmScreen) and stop.armed and not stop.has_class("-arming")
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the stop sent")
        assert [c for c, _ in rec.sent] == ["rewind", "stop"]
        assert clock.now == 100.0  # not a moment passed on the dialogs' clock
        # A question pushed by the console on its own (not by a key) can say so: it waits like the approval.
        answers: list[bool | None] = []
        app.push_screen(ConfirmScreen("Go on?", "A question nobody asked for.", on_its_own=True), answers.append)
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and answers == []
        clock.now += ARM_DELAY
        await pilot.press("y")
        await wait_for(pilot, lambda: answers == [True], what="the answer")

    drive(app, body, size=(80, 24))


def test_the_rewind_box_opened_with_r_takes_enter_at_once(make_job):
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        await pilot.press("r")
        assert isinstance(app.screen, RewindScreen) and app.screen.armed
        await pilot.press(*"the digest misses the risks", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the rewind sent")
        assert rec.sent == [("rewind", {"issue": "the digest misses the risks", "phase": 2})]

    drive(app, body, size=(80, 24))


def test_the_fleet_enter_that_attaches_does_not_approve(tmp_path):
    """Enter attaches to the run waiting for approval; its dialog opens at once, on its own. A second Enter (a
    double press, a held key) lands on its focused Approve button in its first moment: nothing is sent. The
    fleet's deny question, asked for with d, answers at once."""
    fx = make_fleet(tmp_path)
    clock = Clock()
    app = fleet_app(fx, dialog_delay=ARM_DELAY, dialog_clock=clock)
    waiting = fx.runs["waiting"]

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 7))
        assert app.fleet_view.selected.path == waiting
        await pilot.press("enter", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RestartApprovalScreen), what="the approval")
        approval = app.screen
        await pilot.press("enter", "a")
        await pilot.pause()
        assert app.screen is approval and sent(waiting) == []
        clock.now += ARM_DELAY
        await pilot.press("escape")  # later: the run's console, the restart still waiting
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the run's console")
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), what="the list")
        await pilot.press("d", "y")  # asked for: answered at once, the clock unmoved
        await wait_for(pilot, lambda: sent(waiting) == ["deny_restart"], what="the denial")

    with ExitStack() as stack:
        lock = RunLock(JobPaths(waiting))  # a make-believe process: its approval is asked for, its inbox read
        assert lock.acquire()
        stack.callback(lock.release)
        drive(app, body, size=(80, 24))
