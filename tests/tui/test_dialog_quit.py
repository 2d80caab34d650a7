"""The way out is there in every dialog, and no answer that ends the run is a key another dialog gives another
meaning (console/tui/screens/dialog.py, approval.deny_question).

The trial: a restart's approval opened on its own on an attached console; the operator pressed q (the footer under
the dialog offers it) and nothing happened, then d (Detach, in the quit question they expected): the restart was
denied and the run ended. Here q and Ctrl+C open the quit question over whatever question is open, and d there
detaches; d on the approval itself only asks whether to deny."""

from __future__ import annotations

import pytest
from textual.widgets import Input

from console.engine import events as ev
from console.outcome import EXIT_OK
from console.tui.app import ConsoleApp
from console.tui.commands import RecordingController
from console.tui.screens.approval import RestartApprovalScreen
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.dialog import ARM_DELAY
from console.tui.screens.help import HelpScreen
from console.tui.screens.quit import QuitScreen
from console.tui.screens.rewind import RewindScreen
from console.tui.screens.run import RunScreen
from tests.tui.conftest import FROZEN_NOW, drive, wait_for
from tests.tui.test_dialog_keys import Clock, Seq, pending, started


class AttachedRecorder(RecordingController):
    """An attached console's commands (another process runs the run, pid 1), kept."""

    attached = True


def attached_app(make_job, clock: Clock) -> tuple[ConsoleApp, AttachedRecorder]:
    rec = AttachedRecorder()
    app = ConsoleApp(controller=rec, paths=make_job("quickstart"), job_title="quickstart", watch=False,
                     animations=False, keymap={}, now=lambda: FROZEN_NOW, dialog_clock=clock)
    return app, rec


async def approval_open(pilot, app: ConsoleApp, e: Seq, clock: Clock) -> RestartApprovalScreen:
    await started(pilot, app, e)
    app.bridge.push(pending(e))
    await wait_for(pilot, lambda: isinstance(app.screen, RestartApprovalScreen), what="the approval")
    approval = app.screen
    assert isinstance(approval, RestartApprovalScreen)
    await wait_for(pilot, lambda: approval.shown_at is not None, what="its moment started")
    return approval


@pytest.mark.parametrize("key", ["q", "ctrl+c"])
def test_the_trial_q_then_d_over_the_approval_detaches_and_denies_nothing(make_job, key):
    """The trial's keys, on an attached console: q (or Ctrl+C) in the approval's first moment and after it opens
    the quit question over it; d there detaches; the restart still waits, unanswered (nothing was sent)."""
    clock = Clock()
    app, rec = attached_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        approval = await approval_open(pilot, app, e, clock)
        await pilot.press(key)  # in its first moment too: q is no answer, and the way out is never held back
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="the quit question")
        assert approval in app.screen_stack and rec.sent == []
        await pilot.press("d")
        await wait_for(pilot, lambda: app.return_code is not None, what="the console to close")

    drive(app, body, size=(80, 24))
    assert app.return_code == EXIT_OK and rec.sent == []


def test_stay_in_the_quit_question_brings_the_approval_back_unanswered(make_job):
    """Esc in the quit question: the approval is there again, its answers waiting their moment once more; q on the
    quit question itself does nothing (it is open already; a second Ctrl+C leaves: see below)."""
    clock = Clock()
    app, rec = attached_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        approval = await approval_open(pilot, app, e, clock)
        clock.now += ARM_DELAY
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="the quit question")
        quit_screen = app.screen
        await pilot.press("q")
        await pilot.pause()
        assert app.screen is quit_screen and len(app.screen_stack) == 3
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is approval, what="the approval again")
        assert not approval.armed  # shown again: a new first moment
        await pilot.press("a")
        await pilot.pause()
        assert app.screen is approval and rec.sent == []
        clock.now += ARM_DELAY
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the approval answered")
        assert [c for c, _ in rec.sent] == ["approve_restart"]

    drive(app, body, size=(80, 24))


def test_deny_asks_first_and_no_leaves_the_restart_waiting(make_job):
    """d on the approval only asks (it ends the run): n (or esc) brings the approval back, nothing sent; d then y
    denies."""
    clock = Clock()
    app, rec = attached_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        approval = await approval_open(pilot, app, e, clock)
        clock.now += ARM_DELAY
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="deny asks first")
        question = app.screen
        assert "The run ends" in question.title_text and "agent-console resume" in question.message
        await pilot.press("d")  # d means nothing here: no second deny, no detach
        await pilot.pause()
        assert app.screen is question and rec.sent == []
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is approval, what="the approval again")
        assert rec.sent == []
        clock.now += ARM_DELAY
        await pilot.press("d", "y")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the restart denied")
        assert [c for c, _ in rec.sent] == ["deny_restart"]

    drive(app, body, size=(80, 24))


def test_an_approval_answered_elsewhere_under_the_deny_question_closes_and_sends_nothing(make_job):
    """The restart is approved from another shell while the operator reads "Deny the restart?": a yes then denies
    nothing, and the approval under it closes (it no longer waits)."""
    clock = Clock()
    app, rec = attached_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await approval_open(pilot, app, e, clock)
        clock.now += ARM_DELAY
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="deny asks first")
        app.bridge.push(e(ev.RestartApproved, by="operator"))
        await wait_for(pilot, lambda: app.state.restart_pending is None, what="the restart answered elsewhere")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)  # the question is the operator's to close
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="both closed")
        assert rec.sent == []

    drive(app, body, size=(80, 24))


@pytest.mark.parametrize("key", ["q", "ctrl+c"])
def test_every_question_lets_the_operator_out(make_job, key):
    """Each dialog the run screen asks (stop?, rewind, resume-like confirms) and the help: q or Ctrl+C opens the quit
    question over it. In the rewind box q is text; Ctrl+C (nothing selected) still gets out. The help is a view:
    q closes it, Ctrl+C closes it and asks."""
    clock = Clock()
    app, rec = attached_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        for opener, kind in (("s", ConfirmScreen), ("r", RewindScreen), ("question_mark", HelpScreen)):
            await pilot.press(opener)
            await wait_for(pilot, lambda kind=kind: isinstance(app.screen, kind), what=f"{kind.__name__}")
            if kind is HelpScreen and key == "q":  # a view, not a question: q closes it, as the guardrails view
                await pilot.press("q")
                await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the help closed")
                continue
            if kind is RewindScreen and key == "q":
                await pilot.press("q")
                await pilot.pause()
                assert app.screen.query_one(Input).value == "q"  # text, as every letter typed there
                await pilot.press("escape")
                continue
            await pilot.press(key)
            await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="the quit question")
            await pilot.press("escape")  # stay
            await pilot.pause()
            if kind is not HelpScreen:  # the question is still open, unanswered; the help was closed
                assert isinstance(app.screen, kind)
                await pilot.press("escape")
            await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="back to the run")
        assert rec.sent == []

    drive(app, body, size=(80, 24))


@pytest.mark.parametrize("over_approval", [False, True])
def test_a_second_ctrl_c_in_the_quit_question_detaches(make_job, over_approval):
    """Ctrl+C asks (detach or stop); a second Ctrl+C leaves as detach: the console closes, nothing is sent to the
    run (it goes on), a restart waiting for approval stays unanswered. It used to do nothing."""
    clock = Clock()
    app, rec = attached_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        if over_approval:
            await approval_open(pilot, app, e, clock)
        else:
            await started(pilot, app, e)
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="the quit question")
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: app.return_code is not None, what="the console to close")

    drive(app, body, size=(80, 24))
    assert app.return_code == EXIT_OK and rec.sent == []


def test_a_second_ctrl_c_quits_a_run_of_this_process_by_stopping_it(make_job):
    """A run in this process cannot go on without its console: the quit question is "Quit and stop the run?", and
    a second Ctrl+C is its yes (the run is stopped, everything saved; resumable)."""
    clock = Clock()
    rec = RecordingController()
    app = ConsoleApp(controller=rec, paths=make_job("quickstart"), job_title="quickstart", watch=False,
                     animations=False, keymap={}, now=lambda: FROZEN_NOW, dialog_clock=clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the quit question")
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the question answered")
        assert [c for c, _ in rec.sent] == ["stop", "stop"] and app.run_screen.quit_requested

    drive(app, body, size=(80, 24))
