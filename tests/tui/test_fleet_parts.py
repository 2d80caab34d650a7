"""The console's parts, each built alone (no app, no screen): the held notices, the fleet's actions, the fleet's
bell. Each is given only narrow functions; these fakes record what it did with them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from textual.notifications import Notify

from console.engine.commands import AnyCommand
from console.tui.notices import HELD_MAX, HeldNotices
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.fleet_actions import FleetActions, FleetStore, Hands
from console.tui.screens.fleet_bell import NEEDS_TITLES, NeedsBell
from console.view.fleet import NEEDS, RUNNING, STOPPED, FleetRow, Listed

ROW = FleetRow(path=Path("/runs/job-20260101-000000"), id="95tbj", name="job-20260101-000000", job="job",
               state=RUNNING, kind="running", phase="1/3", phase_long="", ctx=None, cost=None, elapsed="1m", last="",
               detail="", pending_seq=0, started_at="", pid=4242)


class Screen:
    def __init__(self, dialog: bool) -> None:
        self.HOLDS_NOTICES = dialog


def test_held_notices_wait_for_the_question_and_come_back_once():
    posted: list[Any] = []
    cleared: list[int] = []
    top = [Screen(False)]
    toasts = HeldNotices(post=posted.append, later=lambda fn, *a, **k: fn(*a, **k),
                         clear_toasts=lambda: cleared.append(1), top_screen=lambda: top[0], clock=lambda: 0.0)
    toasts.notify("shown at once", title="One")
    assert [m.notification.title for m in posted] == ["One"] and isinstance(posted[0], Notify)
    top[0] = Screen(True)
    toasts.screen_changed(top[0])  # a question opens: the toast showing is taken off and held
    assert cleared and [n.title for n in toasts.held] == ["One"]
    for _ in range(HELD_MAX + 2):
        toasts.notify("same words", title="Two")  # identical ones: once
    toasts.notify("gone by then", title="Three")
    toasts.retract("Three")  # it stopped being true while held
    assert len(posted) == 1
    top[0] = Screen(False)
    toasts.screen_changed(top[0])
    assert [m.notification.title for m in posted[1:]] == ["One", "Two"] and toasts.held == []


class Hand:
    """What the fleet's actions did: questions asked, notices, runs shown, work started."""

    def __init__(self) -> None:
        self.asked: list[tuple[ConfirmScreen, Any]] = []
        self.said: list[tuple[str, str]] = []
        self.shown: list[Any] = []
        self.work: list[tuple[Any, str]] = []

    def hands(self) -> Hands:
        return Hands(ask=lambda d, done: self.asked.append((d, done)),
                     notify=lambda message, *, title="", severity="information": self.said.append((title, message)),
                     show_run=self.shown.append, in_thread=lambda work, group: self.work.append((work, group)),
                     from_thread=lambda fn, *a, **k: fn(*a, **k))


class Controllers:
    def __init__(self) -> None:
        self.sent: list[tuple[Path, str]] = []

    def remote(self, row: FleetRow) -> bool:
        return False

    def attach(self, row: FleetRow) -> str:
        return "the run's controller"

    def send(self, row: FleetRow, command: AnyCommand) -> str | None:
        self.sent.append((row.path, command.kind))
        return None


def test_the_fleet_actions_ask_before_a_stop_and_send_it_once_answered(tmp_path: Path):
    hand, controllers = Hand(), Controllers()
    actions = FleetActions(FleetStore(tmp_path / "jobs.db"), hand.hands(), controllers)  # type: ignore[arg-type]
    actions.act("stop", replace(ROW, state=STOPPED, pid=None))
    assert hand.said == [("Nothing to stop", "95tbj job: no process runs it (stopped).")] and not hand.asked
    actions.act("stop", ROW)
    (question, done), = hand.asked
    assert question.title_text == "Stop 95tbj job?" and controllers.sent == []
    done(True)
    assert controllers.sent == [(ROW.path, "stop")] and hand.said[-1][0] == "Stop sent"
    actions.act("pause", ROW)  # not asked first: r unpauses it
    assert controllers.sent[-1] == (ROW.path, "pause") and hand.said[-1][0] == "Pause sent"


def test_the_fleet_actions_attach_forget_and_acknowledge_through_their_hands(tmp_path: Path):
    hand = Hand()
    actions = FleetActions(FleetStore(tmp_path / "jobs.db"), hand.hands(), Controllers())  # type: ignore[arg-type]
    actions.act("attach", ROW)
    (run,) = hand.shown
    assert run.controller == "the run's controller" and run.follow and run.job_title == ROW.path.name
    actions.act("acknowledge", replace(ROW, state=NEEDS, kind="needs", needs="gave_up", pid=None))
    assert [group for _work, group in hand.work] == ["acknowledge"]
    here = tmp_path / "job-20260101-000000"
    here.mkdir()
    actions.forget_runs([replace(ROW, path=here)])  # its folder is back: kept (the worker's part, run here)
    assert hand.said[-1] == ("Not forgotten", "95tbj job: its folder is back; kept.")


def test_the_fleet_bell_rings_for_a_new_need_once_and_names_it_over_a_run():
    rung: dict[Path, int] = {}
    rings: list[int] = []
    said: list[str] = []
    taken: list[str] = []
    on_top: list[Path | None] = [None]
    bell = NeedsBell(rung, bell=lambda: rings.append(1), notify=lambda message, **_kw: said.append(message),
                     retract=taken.append, run_on_top=lambda: on_top[0])
    waiting = replace(ROW, state=NEEDS, kind="needs", needs="restart_approval", pending_seq=7, needs_seq=7)
    bell.seen(Listed([waiting], folded=True))  # needed before the list was read whole: no news
    assert bell.primed and rings == [] and rung == {ROW.path: 7}
    other = replace(waiting, path=Path("/runs/other"), id="x2", needs_seq=9, pending_seq=9)
    on_top[0] = ROW.path  # over the waiting run's own console: the other run's need is named
    bell.seen(Listed([waiting, other]))
    bell.seen(Listed([waiting, other]))  # rung once
    assert rings == [1] and said == ["x2 job: a restart to approve (q returns to the list)."]
    bell.list_back()
    assert taken == [*NEEDS_TITLES, NEEDS_TITLES[0]] and bell.told is None


def test_the_fleet_poller_lists_the_store_first_then_every_run_folded(tmp_path: Path):
    from console.tui.fleet_poll import FleetPoller
    from console.tui.messages import FleetRows
    from console.view.fleet import Fleet
    from tests.tui.conftest import FROZEN_NOW
    from tests.tui.fleet_runs import make_fleet

    fx = make_fleet(tmp_path)
    posted: list[FleetRows] = []

    class Worker:  # cancelled once every run was folded
        @property
        def is_cancelled(self) -> bool:
            return bool(posted) and posted[-1].rows.folded

    poller = FleetPoller(Fleet(fx.store_path, now=lambda: FROZEN_NOW, holder=fx.holder), posted.append, 0.05)
    first = poller.first_rows()
    assert len(first) == len(fx.runs) and not first.folded  # the store's rows alone, no log read
    poller.drawn.set()  # the first frame is drawn: the logs are folded
    poller.run(Worker())
    assert posted[-1].rows.folded and {r.path for r in posted[-1].rows} == set(fx.runs.values())
