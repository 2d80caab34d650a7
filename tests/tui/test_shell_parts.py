"""The parts of the console's shell and of a run's intake, each built alone (no ConsoleApp, no RunScreen running):
the run's events in (EventIntake, fed by a source: LogFollower), the run screens (RunScreens) and the fleet's
list with its poller (FleetHome). Each gets plain functions: a test stands in for every one of them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from console.engine import events as ev
from console.engine.job import JobPaths
from console.tui.bridge import EventBridge
from console.tui.commands import RecordingController
from console.tui.messages import EventsReady, FleetRows, HistoryReady, RunnerState
from console.tui.screens import run_intake
from console.tui.screens.run_context import RunContext
from console.tui.screens.run_intake import EventIntake, Feed, LogFollower
from console.view.state import STATUS, ConsoleState

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seq: int) -> dict[str, Any]:
    return {"ts": T0 + timedelta(seconds=seq), "seq": seq, "session": 1}


def turn(seq: int, n: int) -> list[ev.EventBase]:
    return [ev.TurnStarted(turn=n, prompt_tokens_est=100, **at(seq)),
            ev.AssistantMessage(turn=n, text=f"reply {n}", **at(seq + 1))]


class Conversation:
    def __init__(self) -> None:
        self.trimmed = 0
        self.ingested: list[ev.EventBase] = []
        self.not_shown = 0

    def ingest(self, events: list[ev.EventBase]) -> None:
        self.ingested += events

    def add_not_shown(self, count: int) -> None:
        self.not_shown += count


class Source:
    """A source that records what the intake tells it, and pushes ``events`` when fed."""

    name = "test"

    def __init__(self, events: list[ev.EventBase]) -> None:
        self.events = events
        self.told: list[str] = []
        self.bridge: EventBridge | None = None

    def open(self, bridge: EventBridge) -> None:
        self.told.append("open")
        self.bridge = bridge

    def feed(self, feed: Feed) -> None:
        self.told.append(f"feed keep={feed.keep} cancelled={feed.worker.is_cancelled}")
        feed.bridge.push_many(self.events)

    def ended(self) -> None:
        self.told.append("ended")

    def close(self) -> None:
        self.told.append("close")


class Hands:
    """Stands in for the functions the intake is given."""

    def __init__(self) -> None:
        self.later: list[tuple[float, Any]] = []
        self.changed: list[set[str]] = []
        self.said: list[list[ev.EventBase]] = []
        self.closed: list[int] = []
        self.conversation = Conversation()
        self.alive = True

    def call_later(self, delay: float, then: Any) -> object:
        self.later.append((delay, then))
        return object()  # its timer


class NotCancelled:
    is_cancelled = False


class Pump:
    """A message pump's post_message (the run's screen)."""

    def __init__(self) -> None:
        self.posted: list[Any] = []

    def post_message(self, message: Any) -> bool:
        self.posted.append(message)
        return True


def intake(tmp_path: Path, source: Source | None = None) -> tuple[EventIntake, Hands, RunContext]:
    hands = Hands()
    ctx = RunContext(ConsoleState("job"), RecordingController(), JobPaths(tmp_path), "k3f9q")
    part = EventIntake(ctx, source, keep=50, later=hands.call_later,
                       alive=lambda: hands.alive, conversation=lambda: hands.conversation,
                       changed=hands.changed.append, said=hands.said.append, close=hands.closed.append)
    return part, hands, ctx


def test_the_intake_opens_its_source_at_once_and_feeds_it_on_a_worker(tmp_path: Path) -> None:
    source = Source(turn(1, 1))
    part, _hands, _ctx = intake(tmp_path, source)
    assert source.told == ["open"] and source.bridge is part.bridge  # before anything runs: no event missed
    pump, started = Pump(), []
    part.start(pump, lambda job, name: started.append((job, name)))  # type: ignore[arg-type]
    assert [name for _, name in started] == ["test"] and source.told == ["open"]
    started[0][0](NotCancelled())  # the worker runs it
    assert source.told == ["open", "feed keep=50 cancelled=False"] and part.bridge.pending == 2
    assert [type(m) for m in pump.posted] == [EventsReady]  # the bridge woke the screen
    part.ended()
    part.close()
    assert source.told[-2:] == ["ended", "close"]
    part.bridge.push(turn(3, 2)[0])
    assert part.bridge.pending == 2  # closed: it takes no more


def test_the_intake_folds_a_batch_says_it_and_hands_it_to_the_conversation(tmp_path: Path) -> None:
    part, hands, ctx = intake(tmp_path)
    part.bridge.push_many(turn(1, 1))
    part.drain()
    assert ctx.state.turn == 1 and part.events_seen == 2 and part.drains == 1
    assert [e.seq for e in hands.conversation.ingested] == [1, 2] and [len(b) for b in hands.said] == [2]
    assert hands.changed and STATUS in hands.changed[0]
    assert hands.later == [] and part.bridge.pending == 0


def test_the_intake_waits_for_a_key_s_frames_then_drains(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(run_intake, "KEY_FIRST", 3600.0)  # held for good: nothing here depends on timing
    part, hands, ctx = intake(tmp_path)
    assert part.key_first() == 3600.0
    part.bridge.push_many(turn(1, 1))
    part.ready()
    assert len(hands.later) == 1 and hands.later[0][0] > 3000  # a drain is due once the key's frames are drawn
    part.ready()
    assert len(hands.later) == 1  # one is due already
    part.drain(everything=True)  # what the run's end does, held or not
    assert ctx.state.turn == 1 and part.events_seen == 2


def test_the_intake_does_nothing_once_the_panes_are_gone(tmp_path: Path) -> None:
    part, hands, ctx = intake(tmp_path)
    hands.alive = False
    part.bridge.push_many(turn(1, 1))
    part.drain()
    assert part.bridge.pending == 2 and part.events_seen == 0 and ctx.state.turn == 0


def test_a_long_history_is_folded_apart_and_its_exact_fold_is_not_folded_twice(tmp_path: Path) -> None:
    from console.tui.follow import Folded

    part, hands, ctx = intake(tmp_path)
    part.history(turn(1, 1) + turn(3, 2))  # the older part: folded, its messages counted as not shown
    assert ctx.state.turn == 2 and hands.conversation.trimmed == 2 and part.events_seen == 4
    exact = ConsoleState("job")
    exact.apply_all(turn(1, 1) + turn(3, 2) + turn(5, 3))
    part.folded(Folded(exact, upto_seq=6, older_events=6, older_messages=3, seed=0))
    assert ctx.state.turn == 3 and part.folded_upto == 6 and hands.conversation.not_shown == 3
    part.bridge.push_many(turn(5, 3) + turn(7, 4))  # seq 5 and 6 are in the fold already
    part.drain()
    assert ctx.state.turn == 4 and [e.seq for e in hands.conversation.ingested] == [5, 6, 7, 8]


def test_an_attached_console_closes_once_the_stop_asked_on_leaving_has_landed(tmp_path: Path) -> None:
    from tests.tui.test_dialog_quit import AttachedRecorder

    part, hands, ctx = intake(tmp_path)
    ctx.controller = AttachedRecorder()
    ctx.quit_requested = True
    part.bridge.push_many([*turn(1, 1), ev.RunEnded(reason="user_shutdown", outcome="incomplete", **at(3))])
    part.drain()
    assert hands.closed == [0]


def test_the_log_follower_replays_the_run_s_log_and_says_who_runs_it(tmp_path: Path) -> None:
    paths = JobPaths(tmp_path)
    paths.state.mkdir(parents=True, exist_ok=True)
    events = turn(1, 1) + turn(3, 2)
    paths.events.write_text("".join(e.model_dump_json() + "\n" for e in events))
    bridge, posted = EventBridge(), []

    class Worker:  # cancelled once the log is replayed
        @property
        def is_cancelled(self) -> bool:
            return bridge.pending >= len(events)

    source = LogFollower(paths.events, RecordingController())
    source.feed(Feed(bridge, posted.append, Worker(), 50, lambda: ConsoleState("job")))
    assert [e.seq for e in bridge.drain()] == [1, 2, 3, 4]
    assert all(isinstance(m, RunnerState | HistoryReady) for m in posted)


def test_the_run_screens_build_each_run_and_find_the_one_shown(tmp_path: Path) -> None:
    from textual.screen import Screen

    from console.tui.run_screens import RunScreens
    from console.tui.screens.run import Run, RunScreen
    from tests.tui.conftest import FROZEN_NOW

    stack: list[Screen[Any]] = []
    screens = RunScreens(lambda: FROZEN_NOW, stack=lambda: stack, top=lambda: stack[-1], watch_files=False,
                         animations=False, max_items=7, rung={}, key_help=lambda: [("q", "quit")])
    other = Screen[Any]()
    assert not screens.is_run(other) and screens.shown() is None and screens.kind is None  # nothing built yet
    own = screens.keep(Run(RecordingController(), JobPaths(tmp_path / "a"), "a"))
    assert isinstance(own, RunScreen) and screens.shown() is own and not own.in_fleet
    assert own.max_items == 7 and own.key_help() == [("q", "quit")]
    attached = screens.build(Run(RecordingController(), JobPaths(tmp_path / "b"), "b"), in_fleet=True)
    stack[:] = [other, attached]
    assert attached.in_fleet and screens.shown() is attached and screens.on_top() == tmp_path / "b"
    stack.append(Screen[Any]())  # a question over it
    assert screens.shown() is attached and screens.on_top() is None


def test_the_fleet_home_lists_the_store_first_then_draws_the_poller_s_rows(tmp_path: Path) -> None:
    from console.tui.fleet_home import FleetHome
    from console.view.fleet import Fleet
    from tests.tui.conftest import FROZEN_NOW
    from tests.tui.fleet_runs import make_fleet

    fx = make_fleet(tmp_path)
    posted: list[Any] = []
    shown: list[Any] = []
    home = FleetHome(Fleet(fx.store_path, now=lambda: FROZEN_NOW, holder=fx.holder), posted.append, 0.05,
                     show_run=shown.append, run_on_top=lambda: None, rung={})
    later: list[Any] = []
    home.rows(FleetRows([]), later.append)  # no list yet: nothing to draw on, the poller need not wait
    assert home.poller.drawn.is_set() and later == []
    home.poller.drawn.clear()
    view = home.screen()
    assert home.view is view and len(view.rows) == len(fx.runs)  # the first frame has the store's rows
    workers: list[Any] = []
    home.start(later.append, workers.append)
    assert later == [home.poller.drawn.set] and workers == [home.poller.run]  # polled once the frame is drawn
