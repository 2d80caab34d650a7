"""A view fed off the run's thread (console.engine.events.feed): in order, when the run waits; never blocking it."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

from console.engine import events as ev
from console.engine.events import feed as feed_module
from console.engine.events.feed import DeferredView
from console.engine.events.stream import EventStream

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def event(n: int) -> ev.EventBase:
    return ev.TurnStarted(ts=T0, seq=n, session=1, turn=n)


def until(condition: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.005)


class Recorder:
    def __init__(self) -> None:
        self.seen: list[int] = []
        self.threads: set[int] = set()
        self.missed_counts: list[int] = []

    def __call__(self, e: ev.EventBase) -> None:
        self.threads.add(threading.get_ident())
        self.seen.append(e.seq)

    def missed(self, n: int) -> None:
        self.missed_counts.append(n)


def test_a_deferred_view_gets_every_event_in_order_on_its_own_thread_when_the_run_waits(monkeypatch) -> None:
    monkeypatch.setattr(feed_module, "MAX_LAG", 60.0)  # only the wake hands over here
    stream = EventStream(None)
    view = Recorder()
    stream.subscribe(view, deferred=True)
    for n in range(1, 6):
        stream.emit(ev.TurnStarted, turn=n)
    time.sleep(0.05)
    assert view.seen == []  # mid-turn: nothing handed over
    stream.quiet()  # the model is asked
    assert stream.settle_views(10.0)
    assert view.seen == [1, 2, 3, 4, 5] and threading.get_ident() not in view.threads
    stream.emit(ev.TurnStarted, turn=6)
    stream.close()  # what is left is handed over before close returns
    assert view.seen[-1] == 6
    stream.emit(ev.TurnStarted, turn=7)  # after close (the run's last words): at once, on the caller's thread
    assert view.seen[-1] == 7 and threading.get_ident() in view.threads


def test_without_a_wake_events_are_handed_over_after_the_lag(monkeypatch) -> None:
    monkeypatch.setattr(feed_module, "MAX_LAG", 0.05)
    view = Recorder()
    feed = DeferredView(view, lambda v, exc: None)
    feed(event(1))
    until(lambda: view.seen == [1])
    feed.close()


def test_a_view_whose_reader_stopped_never_blocks_the_run_and_is_told_what_it_missed(monkeypatch) -> None:
    """A terminal that stops reading (Ctrl+S, a stalled SSH session) blocks the view's writes: the run's emits
    still return at once, at most LIMIT events wait, the view is told how many it missed, and close() gives up
    on it after CLOSE_WAIT."""
    monkeypatch.setattr(feed_module, "LIMIT", 100)
    monkeypatch.setattr(feed_module, "CLOSE_WAIT", 0.2)
    reading = threading.Event()
    view = Recorder()

    def blocked(e: ev.EventBase) -> None:
        reading.wait()
        view(e)

    blocked.missed = view.missed  # type: ignore[attr-defined]
    feed = DeferredView(blocked, lambda v, exc: None)
    feed(event(1))
    feed.wake()
    time.sleep(0.05)  # its thread is stuck in the first event
    started = time.monotonic()
    for n in range(2, 1002):
        feed(event(n))
    assert time.monotonic() - started < 5.0  # the run's thread was never held (1,000 appends)
    assert feed.pending == 100
    started = time.monotonic()
    feed.close()
    assert time.monotonic() - started < 5.0  # gave up on the stuck view
    feed(event(1002))  # after close, with the view still stuck: not waited for either
    reading.set()  # the reader reads again
    until(lambda: view.seen and view.seen[-1] == 1002)
    assert view.seen[0] == 1 and view.missed_counts == [900]  # 2..901 dropped; 902..1001 then 1002 told
    assert view.seen[1:] == list(range(902, 1003))


def test_a_view_whose_output_is_gone_is_dropped_and_reported_once(capsys) -> None:
    stream = EventStream(None)
    calls: list[int] = []

    def gone(e: ev.EventBase) -> None:
        calls.append(e.seq)
        raise BrokenPipeError(32, "Broken pipe")

    stream.subscribe(gone, deferred=True)
    stream.emit(ev.TurnStarted, turn=1)
    stream.emit(ev.TurnStarted, turn=2)
    stream.quiet()
    stream.close()
    assert calls == [1]
    assert capsys.readouterr().err.count("stopped receiving events") == 1


def test_unsubscribing_a_deferred_view_hands_over_what_it_has() -> None:
    stream = EventStream(None)
    view = Recorder()
    unsubscribe = stream.subscribe(view, deferred=True)
    stream.emit(ev.TurnStarted, turn=1)
    unsubscribe()
    stream.emit(ev.TurnStarted, turn=2)
    assert view.seen == [1]


def test_a_headless_run_whose_terminal_stopped_reading_runs_to_its_end(monkeypatch, capsys) -> None:
    """The story's writes block (a terminal's Ctrl+S): the run does not wait for them. It completes, its log and
    state whole; the story is told once the terminal reads again."""
    import sys

    from console import cli
    from console.engine.events.log import read_events
    from tests.conftest import SAMPLES

    monkeypatch.setattr(feed_module, "CLOSE_WAIT", 0.2)
    reading = threading.Event()
    main = threading.get_ident()
    out = sys.stdout

    class Stalled:
        """stdout, whose writes from the story's thread wait for the terminal to read again."""

        def write(self, text: str) -> int:
            if threading.get_ident() != main:
                reading.wait()
            return out.write(text)

        def flush(self) -> None:
            out.flush()

        def isatty(self) -> bool:
            return False

    monkeypatch.setattr(sys, "stdout", Stalled())
    assert cli.main(["run", str(SAMPLES / "quickstart"), "--headless", "--speed", "0"]) == 0
    said = capsys.readouterr().out
    folder = said.split(": ", 1)[1].splitlines()[0]
    assert "done: job complete" in said and said.count("\n") == 2  # the command's lines; the story waits
    from pathlib import Path

    kinds = [e.type for e in read_events(Path(folder) / ".console" / "events.jsonl")]
    assert kinds[-1] == "run_ended"
    told: list[str] = []
    reading.set()  # the terminal reads again: the story comes, whole
    until(lambda: told.extend(capsys.readouterr().out.splitlines()) or len(told) > 10)
    assert told[0].startswith("run ")


def test_streamed_text_is_made_only_for_a_subscriber_that_takes_it(make_job) -> None:
    """A runner's subscribers (its log, its notifier, the jobs table's) take no text_delta: none is made for them
    (a reply streams in hundreds of pieces); an in-process console takes them, and gets each."""
    from console.engine.clock import FakeClock
    from console.engine.loop import SessionDeps
    from console.engine.messages import ModelRequest
    from console.engine.model import Stop, TextDelta, Usage
    from console.engine.operator import OperatorState
    from console.engine.runtime import Runtime
    from console.engine.tools import default_registry
    from console.engine.turn import stream_turn
    from tests.conftest import run_settings

    class Provider:
        name, model, runs_inline = "p", "m", True

        def stream(self, request: object) -> Any:
            yield from [TextDelta("Hel"), TextDelta("lo"), Usage(1, 1), Stop("end_turn")]

    request = ModelRequest(system="s", messages=[], tools=[])
    paths = make_job("quickstart")
    for text, made in ((False, 0), (True, 2)):
        clock = FakeClock()
        rt = Runtime(paths, clock, EventStream(paths.events, clock))
        seen: list[ev.EventBase] = []
        rt.events.subscribe(seen.append, text=text)
        deps = SessionDeps(rt, Provider(), default_registry(), run_settings(), OperatorState())  # type: ignore[arg-type]
        out = stream_turn(deps, 1, request)
        assert out.text == "Hello"
        assert len([e for e in seen if isinstance(e, ev.TextDelta)]) == made


def test_a_feed_with_nothing_to_hand_over_sleeps_until_an_event_comes(monkeypatch) -> None:
    """Its timer woke it MAX_LAG apart whether or not anything had come: every view of every idle run of a fleet,
    4 times a second. Now it sleeps while it has nothing; the first event of a batch wakes it, and every event is
    handed over, in order, within the timer (or at once when the run waits)."""
    monkeypatch.setattr(feed_module, "MAX_LAG", 0.02)
    looks: list[int] = []
    original = DeferredView._hand_over

    def counted(self: DeferredView, timeout: float = -1) -> None:
        looks.append(len(self._items))
        original(self, timeout)

    monkeypatch.setattr(DeferredView, "_hand_over", counted)
    rec = Recorder()
    view = DeferredView(rec, lambda v, exc: None)
    try:
        time.sleep(0.3)  # fifteen of its timers: none of them woke it
        assert looks == []
        view(event(1))
        view(event(2))
        until(lambda: rec.seen == [1, 2])
        time.sleep(0.3)
        assert all(n > 0 for n in looks[:1]) and len(looks) <= 3, looks  # the batch, then asleep again
        view(event(3))
        view.wake()  # the run waits: at once
        until(lambda: rec.seen == [1, 2, 3])
    finally:
        view.close()



def test_a_signal_given_twice_before_it_is_taken_is_one_signal() -> None:
    """The run may say it waits more than once in a turn (its model asked, then its operator): the view's thread
    wakes once for them, and the next turn's events still wait for the next wake (or the timer), as with an Event
    set twice."""
    signal = threading.Lock()
    signal.acquire()  # not given
    assert not signal.acquire(timeout=0)
    feed_module._give(signal)
    feed_module._give(signal)
    assert signal.acquire(timeout=0)  # taken, and cleared by the taking
    assert not signal.acquire(timeout=0)
    feed_module._give(signal)
    assert signal.acquire(timeout=0)
