"""No toast covers a question (console/tui/notices.py): at 80x24 the toasts showing when a dialog opens are taken
off, those raised while it is up wait, and all of them are shown once it closes; clearing the notices (they stopped
being true) clears the waiting ones too. The dialogs' clock is the test's."""

from __future__ import annotations

import threading
from contextlib import ExitStack

from textual.widgets._toast import Toast

from console.engine import events as ev
from console.engine.control import RunLock
from console.engine.job import JobPaths
from console.tui.notices import HELD_MAX
from console.tui.screens.approval import RestartApprovalScreen
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.dialog import ARM_DELAY
from console.tui.screens.fleet import FleetScreen
from console.tui.screens.rewind import RewindScreen
from console.tui.screens.run import RunScreen
from tests.tui.conftest import drive, wait_for
from tests.tui.fleet_runs import listed, make_fleet
from tests.tui.test_dialog_keys import Clock, Seq, pending, recorded_app, started
from tests.tui.test_fleet_keys import fleet_app


def toasts(screen) -> list[str]:
    """The titles of the toasts drawn on ``screen``."""
    return [t._notification.title for t in screen.query(Toast)]


def titles(app) -> list[str]:
    return [n.title for n in app._notifications]


def test_toasts_wait_for_the_approval_and_come_back_after_it(make_job):
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        app.notify("the first", title="One", timeout=60)
        app.notify("the second", title="Two", timeout=60)
        await wait_for(pilot, lambda: toasts(app.screen) == ["One", "Two"], what="two toasts")
        app.bridge.push(pending(e))
        await wait_for(pilot, lambda: isinstance(app.screen, RestartApprovalScreen), what="the approval")
        approval = app.screen
        app.notify("the third", title="Three")  # raised while the question is up
        worker = threading.Thread(target=app.notify, args=("from a worker thread",), kwargs={"title": "Four"})
        worker.start()
        worker.join()
        await wait_for(pilot, lambda: len(app.held_notices) == 4, what="the worker's notice")
        await pilot.pause()
        assert toasts(approval) == [] and titles(app) == []
        assert [n.title for n in app.held_notices] == ["One", "Two", "Three", "Four"]
        # Nothing drawn over the dialog's box: no toast on its screen (the ones below are under it).
        assert not approval.query(Toast)
        clock.now += ARM_DELAY
        await pilot.press("escape")  # later
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the console")
        # Each is shown again for its whole time, the newest HELD_MAX, then the console's own "still waits".
        shown = ["One", "Two", "Three", "Four", "Restart pending"]
        await wait_for(pilot, lambda: toasts(app.screen) == shown, what="the toasts back")
        assert HELD_MAX == 4 and app.held_notices == [] and titles(app) == shown
        assert rec.sent == []

    drive(app, body, size=(80, 24))


def test_notices_that_stopped_being_true_do_not_come_back(make_job):
    """The restart is approved elsewhere while its dialog is up: the console clears its notices, the held ones
    with them; and the line the rewind box got about a waiting restart goes once it is answered."""
    clock = Clock()
    app, rec = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        app.bridge.push(pending(e))
        await wait_for(pilot, lambda: isinstance(app.screen, RestartApprovalScreen), what="the approval")
        app.notify("about the restart", title="Restart pending")
        await pilot.pause()
        assert [n.title for n in app.held_notices] == ["Restart pending"]
        app.bridge.push(e(ev.RestartApproved, by="cli"))
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the dialog closed")
        await pilot.pause()
        assert app.held_notices == [] and titles(app) == [] and toasts(app.screen) == []
        # The rewind box is open when the next restart waits: said on its border, not in a toast over it.
        await pilot.press("r", *"the order")
        rewind = app.screen
        assert isinstance(rewind, RewindScreen)
        app.bridge.push(e(ev.RestartPending, usage_pct=0.9, used_tokens=9_000, context_window=10_000,
                          next_session=3, carryover_messages=4, carryover_tokens=800))
        box = rewind.query_one("#dialog")
        await wait_for(pilot, lambda: "approval" in str(box.border_subtitle), what="the line on the box")
        assert titles(app) == [] and app.held_notices == []
        app.bridge.push(e(ev.RestartApproved, by="cli"))
        await wait_for(pilot, lambda: not str(box.border_subtitle), what="the line gone")
        assert app.screen is rewind and rec.sent == []

    drive(app, body, size=(80, 24))


def test_the_fleet_s_notices_never_cover_its_stop_question(tmp_path):
    """The fleet at 80x24 says something ("Resumed"); the stop question for a run takes it off while it is asked,
    and it is back once answered. A need that comes meanwhile adds no notice over the list (its row and the title
    say it: issue 33), and leaves the others alone."""
    fx = make_fleet(tmp_path)
    app = fleet_app(fx, dialog_clock=Clock(), poll_interval=0.05)
    running = fx.runs["running"]

    async def body(pilot):
        await wait_for(pilot, lambda: listed(app, 7))
        await wait_for(pilot, lambda: app.fleet_view.needs.primed, what="the list read whole")
        app.notify("95tbj runs again, in the background.", title="Resumed")
        await wait_for(pilot, lambda: toasts(app.screen) == ["Resumed"], what="the fleet's toast")
        view = app.fleet_view
        view.table.move_cursor(row=next(n for n, r in enumerate(view.shown) if r.path == running))
        await pilot.pause()
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the stop question")
        question = app.screen
        await pilot.pause()
        assert toasts(question) == [] and titles(app) == []
        assert [n.title for n in app.held_notices] == ["Resumed"]
        app.notify("95tbj: exit code 1", title="Not resumed", severity="error")
        rung = dict(app.fleet_view.needs.rung)
        # The waiting run needs its operator anew (a new pending seq): the next poll says so.
        app.fleet_view.needs.rung.clear()
        await wait_for(pilot, lambda: app.fleet_view.needs.rung == rung, what="the new need seen")
        assert [n.title for n in app.held_notices] == ["Resumed", "Not resumed"]
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), what="the list")
        await wait_for(pilot, lambda: toasts(app.screen) == ["Resumed", "Not resumed"], what="the toasts back")

    with ExitStack() as stack:
        lock = RunLock(JobPaths(running))
        assert lock.acquire()
        stack.callback(lock.release)
        drive(app, body, size=(80, 24))


def test_a_toast_raised_as_a_question_opens_is_not_drawn_over_it(make_job):
    """Textual posts a toast to the screen: one raised in the same tick as a question opens arrives after it, and
    is taken off it too. A notice retracted while a question is up goes; the others still wait for it."""
    clock = Clock()
    app, _ = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        answers: list[bool | None] = []
        app.notify("raised as the question opens", title="Race")
        app.push_screen(ConfirmScreen("Go on?", "A question."), answers.append)
        question = app.screen
        for _ in range(3):
            await pilot.pause()
        assert toasts(question) == [] and titles(app) == []
        app.notify("will not be true by the end", title="Restart pending")
        app.notify("[b]not markup[/b] \x1b[31m", title="Other")  # hostile text: shown as text, later
        app.retract_notices("Restart pending")
        await pilot.pause()
        assert toasts(question) == [] and [n.title for n in app.held_notices] == ["Race", "Other"]
        await pilot.press("n")
        await wait_for(pilot, lambda: toasts(app.screen) == ["Race", "Other"], what="the toasts after it")
        other = next(n for n in app._notifications if n.title == "Other")
        assert not other.markup and "\x1b" not in other.message and "[b]not markup[/b]" in other.message
        assert answers == [False]

    drive(app, body, size=(80, 24))


def test_a_question_left_open_keeps_a_bounded_number_of_notices(make_job):
    from console.tui.notices import HELD_KEEP

    clock = Clock()
    app, _ = recorded_app(make_job, clock)
    e = Seq()

    async def body(pilot):
        await started(pilot, app, e)
        app.push_screen(ConfirmScreen("Go on?", "A question."))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        for n in range(HELD_KEEP * 3):
            app.notify(f"notice {n}", title=f"N{n}")
        assert len(app.held_notices) == HELD_KEEP and app.held_notices[-1].title == f"N{HELD_KEEP * 3 - 1}"
        await pilot.press("n")
        newest = [f"N{n}" for n in range(HELD_KEEP * 3 - HELD_MAX, HELD_KEEP * 3)]
        await wait_for(pilot, lambda: toasts(app.screen) == newest, what="the newest few")

    drive(app, body, size=(80, 24))
