"""The whole-turn retry policy and the abandonable model call, alone."""

from __future__ import annotations

import queue
import random
import threading
import time

import pytest

from console.engine import model_call
from console.engine.clock import FakeClock
from console.engine.messages import ToolCall
from console.engine.model import (
    Notice,
    Progress,
    ProviderError,
    ReasoningDelta,
    Stop,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    Usage,
)
from console.engine.model_call import (
    TICK,
    CallLimits,
    Outage,
    ProviderUnreachable,
    _merged,
    is_unreachable,
    retrying,
    stream_abandonably,
)


class Flaky:
    def __init__(self, failures: list[ProviderError]) -> None:
        self.failures = list(failures)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "reply"


def transient(after: float | None = None) -> ProviderError:
    return ProviderError("x", kind="transient", cause="rate limited", retry_after=after)


def test_backoff_grows_with_jitter_and_honours_retry_after_up_to_the_cap() -> None:
    slept: list[float] = []
    policy = retrying(CallLimits(retry_total_wait=10_000, retry_after_cap=60), slept.append, lambda s: None,
                      random.Random(5))
    fn = Flaky([transient(), transient(), transient(), transient(after=45), transient(after=3600)])
    assert policy(fn) == "reply" and fn.calls == 6
    assert 0 <= slept[0] <= 2 and 0 <= slept[1] <= 4 and 0 <= slept[2] <= 8  # full jitter, doubling
    assert slept[3] >= 45 and slept[4] == 60  # retry-after honoured, capped


def test_retries_stop_before_the_total_wait_is_passed_and_reraise_the_last_failure() -> None:
    clock = FakeClock()
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.sleep(seconds)

    limits = CallLimits(retry_total_wait=100, retry_after_cap=300)
    outage = Outage(limits, now=clock.monotonic)
    policy = retrying(limits, sleep, lambda s: None, random.Random(1), outage)
    fn = Flaky([transient(after=40)] * 10)
    with pytest.raises(ProviderError):
        policy(fn)
    assert sum(slept) <= 100 and slept == [40, 40]
    assert outage.tries == 3 and outage.elapsed() == 80 and not outage.unreachable


class Slow(Flaky):
    """Each attempt takes ``took`` seconds of the clock before it fails (a server slow to say 503)."""

    def __init__(self, clock: FakeClock, took: float, failures: list[ProviderError]) -> None:
        super().__init__(failures)
        self.clock, self.took = clock, took

    def __call__(self) -> str:
        self.clock.advance(self.took)
        return super().__call__()


def test_the_bound_is_elapsed_time_since_the_first_failure_attempts_included() -> None:
    # Before: only the waits counted, so a server taking 60 s to fail each time held a turn for 8 attempts
    # (2+4+8+...+64 s of waits) and 10 minutes. Now the attempts count: an attempt starts only within 150 s of the
    # first failure, so the turn gives up after the 4th (the last may end one attempt's length past the bound).
    clock = FakeClock()
    limits = CallLimits(retry_total_wait=150)
    outage = Outage(limits, now=clock.monotonic)
    fn = Slow(clock, 60, [transient() for _ in range(50)])
    with pytest.raises(ProviderError):
        retrying(limits, clock.sleep, lambda s: None, random.Random(2), outage)(fn)
    assert fn.calls == 4 and outage.tries == 4
    assert 180 <= outage.elapsed() <= 150 + 60  # since the first failure (at 60 s)


def unreachable() -> ProviderError:
    return ProviderUnreachable("openai: cannot reach http://127.0.0.1:9 (connection refused)", "connection refused")


def test_an_unreachable_server_has_its_own_short_bound_then_the_long_one_applies_again() -> None:
    clock = FakeClock()
    limits = CallLimits(retry_total_wait=600, unreachable_wait=30)
    outage = Outage(limits, now=clock.monotonic)
    announced: list[float] = []
    fn = Flaky([unreachable() for _ in range(100)])
    with pytest.raises(ProviderUnreachable):
        retrying(limits, clock.sleep, lambda s: announced.append(s.upcoming_sleep), random.Random(3), outage)(fn)
    assert outage.unreachable and outage.limit() == 30
    assert clock.monotonic() <= 30 and outage.tries == fn.calls >= 3  # within ~30 s, with its tries
    # Refused for a while, then the server is back but overloaded: the long bound applies from then on,
    # counted from the turn's first failure.
    clock = FakeClock()
    outage = Outage(limits, now=clock.monotonic)
    fn = Flaky([unreachable(), unreachable(), transient(), transient(), transient()])
    assert retrying(limits, clock.sleep, lambda s: None, random.Random(4), outage)(fn) == "reply"
    assert not outage.unreachable and outage.limit() == 600 and outage.tries == 5


def test_unreachable_is_transient_and_says_why() -> None:
    exc = unreachable()
    assert exc.kind == "transient" and exc.cause == "connection refused" and is_unreachable(exc)
    assert not is_unreachable(transient()) and not is_unreachable(None)


def test_fatal_errors_are_not_retried() -> None:
    fn = Flaky([ProviderError("401", kind="fatal")])
    with pytest.raises(ProviderError):
        retrying(CallLimits(), lambda s: None, lambda s: None)(fn)
    assert fn.calls == 1


class Blocked:
    name, model = "blocked", "m"

    def __init__(self, first: bool) -> None:
        self.first = first
        self.release = threading.Event()

    def stream(self, request):
        if self.first:
            yield TextDelta("hi")
        self.release.wait(20)
        yield Stop("end_turn")


def test_a_silent_stream_fails_after_the_idle_limit_and_the_tick_keeps_running() -> None:
    # The watchdog's clock is injected (``now``): each tick is TICK seconds of it, so the stall is called after
    # exactly the ticks the idle limit holds, whatever the machine's speed. The provider would block for 20 s.
    provider = Blocked(first=True)
    clock = [0.0]
    ticks = []

    def tick() -> None:
        ticks.append(clock[0])
        clock[0] += TICK

    with pytest.raises(ProviderError) as err:
        list(stream_abandonably(provider, None, CallLimits(idle_timeout=0.6), tick, now=lambda: clock[0]))
    provider.release.set()
    assert err.value.kind == "transient" and err.value.cause == "stalled 0.6 s"
    # The last output came at some tick; the call was given up at the first look 0.6 s of the clock after it.
    assert len(ticks) >= 3 and clock[0] < 20


def test_the_tick_abandons_a_call_at_once() -> None:
    provider = Blocked(first=False)

    class Stop_(Exception):
        pass

    def tick() -> None:
        raise Stop_

    # The provider blocks for 20 s: the call is given up at its first tick (a silent one, after TICK), not then.
    started = time.monotonic()
    with pytest.raises(Stop_):
        list(stream_abandonably(provider, None, CallLimits(), tick))
    provider.release.set()
    assert time.monotonic() - started < 10


# -- the hand-over in batches (issue 37: the loop's thread is woken per batch, not per streamed chunk) ---------------


class Streaming:
    """A stand-in provider reading a socket: a server thread sends ``n`` text pieces ``gap`` seconds apart (0: at
    once) whether or not they are read (the kernel keeps them), then ``tail`` (the end of a reply, or an exception
    raised after the text). ``waits`` counts the reads that found nothing and had to wait; ``closed`` is set when
    the stream was closed (the worker ended it: finished, or abandoned and noticed); ``read`` counts the pieces read."""

    name, model = "streaming", "m"

    def __init__(self, n: int, gap: float = 0.0, tail: list[StreamEvent] | BaseException | None = None) -> None:
        self.n, self.gap = n, gap
        self.tail = [Usage(10, 5), Stop("end_turn")] if tail is None else tail
        self.buffer: queue.SimpleQueue[object] = queue.SimpleQueue()
        self.read = self.waits = 0
        self.closed = threading.Event()

    def send(self) -> None:
        for i in range(self.n):
            if self.gap:
                time.sleep(self.gap)
            if self.closed.is_set():
                return
            self.buffer.put(TextDelta(f"{i} "))
        self.buffer.put(self.tail)

    def stream(self, request):
        threading.Thread(target=self.send, daemon=True).start()
        try:
            while True:
                try:
                    item = self.buffer.get_nowait()
                except queue.Empty:
                    self.waits += 1
                    item = self.buffer.get()
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, list):
                    yield from item
                    return
                self.read += 1
                yield item
        finally:
            self.closed.set()


def text_of(items: list[StreamEvent]) -> str:
    return "".join(i.text for i in items if isinstance(i, TextDelta))


def test_a_fast_stream_is_handed_over_whole_in_order_in_fewer_pieces() -> None:
    provider = Streaming(300)
    items = list(stream_abandonably(provider, None, CallLimits(), lambda: None))
    assert text_of(items) == "".join(f"{i} " for i in range(300))
    assert items[-2:] == [Usage(10, 5), Stop("end_turn")]
    # Everything queued at a wake-up is taken at once, its text as one piece (the stream came faster than the
    # loop's thread took it): one text_delta event for a view, not 300.
    assert len(items) < 300
    assert provider.closed.wait(10)


def test_a_steady_stream_wakes_the_loop_per_batch_not_per_chunk_and_still_ticks() -> None:
    # 300 chunks 2 ms apart (a server's token a chunk): the loop's thread takes them every PACE (0.1 s), looking at
    # the operator's commands each time, not 300 times.
    provider = Streaming(300, gap=0.002)
    ticks = []
    items = list(stream_abandonably(provider, None, CallLimits(), lambda: ticks.append(1)))
    assert text_of(items) == "".join(f"{i} " for i in range(300))
    assert 1 <= len(ticks) < 150
    assert len([i for i in items if isinstance(i, TextDelta)]) == len(ticks)  # one look per hand-over


@pytest.mark.parametrize("shown", [True, False])
def test_a_stop_during_a_fast_stream_acts_and_the_stream_is_closed(shown: bool) -> None:
    # The stream never falls silent (a chunk every millisecond for up to 30 s): the stop must act between its
    # chunks, not wait for a silence, and the worker must end the stream it reads. The same bound for a stream
    # nobody shows (shown=False): the loop's thread looks at the operator every TICK, streaming or silent.
    provider = Streaming(30_000, gap=0.001)
    stop = threading.Event()

    class Stopped(Exception):
        pass

    def tick() -> None:
        if stop.is_set():
            raise Stopped

    got: list[StreamEvent] = []
    threading.Timer(0.3, stop.set).start()
    with pytest.raises(Stopped):
        for item in stream_abandonably(provider, None, CallLimits(), tick, shown=shown):
            got.append(item)
    assert provider.closed.wait(10)  # the worker saw the cancel at its next chunk and closed the stream
    assert provider.read < 30_000
    assert text_of(got) == "".join(f"{i} " for i in range(len(text_of(got).split())))  # what came, in order


def test_an_error_after_text_surfaces_after_all_the_text_before_it() -> None:
    for gap in (0.0, 0.002):
        provider = Streaming(200, gap=gap, tail=ProviderError("cut mid-way", kind="transient", cause="cut"))
        got: list[StreamEvent] = []
        with pytest.raises(ProviderError) as err:
            for item in stream_abandonably(provider, None, CallLimits(), lambda: None):
                got.append(item)
        assert err.value.cause == "cut"
        assert text_of(got) == "".join(f"{i} " for i in range(200))


def test_a_steady_stream_is_read_in_gathered_batches_not_a_wake_up_a_chunk() -> None:
    # A server sending a token a chunk, a chunk every 2 ms: once a read had to wait, the worker lets the next
    # chunks gather (PACE) and reads them together, so its thread wakes per batch, not per chunk.
    provider = Streaming(300, gap=0.002)
    items = list(stream_abandonably(provider, None, CallLimits(), lambda: None))
    assert text_of(items) == "".join(f"{i} " for i in range(300)) and items[-1] == Stop("end_turn")
    assert provider.waits < 100


def test_the_merge_keeps_the_order_and_joins_only_neighbours_of_a_kind() -> None:
    call = ToolCallEvent(ToolCall(id="c1", name="read", arguments="{}"))
    batch = [TextDelta("a"), TextDelta("b"), ReasoningDelta("r1"), ReasoningDelta("r2"), TextDelta("c"),
             Progress(3), Progress(4), Notice("n"), Notice("m"), call, TextDelta("d"), Usage(1, 2), Stop("end_turn")]
    assert _merged(batch) == [TextDelta("ab"), ReasoningDelta("r1r2"), TextDelta("c"), Progress(7), Notice("n"),
                              Notice("m"), call, TextDelta("d"), Usage(1, 2), Stop("end_turn")]
    assert _merged([]) == []


def test_a_stream_nobody_shows_is_taken_at_the_ticks_not_every_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    # A headless run shows no reply as it comes (shown=False): the worker never wakes the loop's thread for what
    # came, its ticks take it (and the end at once). With the ticks 2 s apart, a reply streamed over ~0.5 s (a
    # chunk every 2 ms, several PACE) reaches the loop in at most two hand-overs (a tick's, the end's).
    monkeypatch.setattr(model_call, "TICK", 2.0)
    provider = Streaming(250, gap=0.002)
    ticks = []
    items = list(stream_abandonably(provider, None, CallLimits(), lambda: ticks.append(1), shown=False))
    assert text_of(items) == "".join(f"{i} " for i in range(250)) and items[-1] == Stop("end_turn")
    assert len([i for i in items if isinstance(i, TextDelta)]) == len(ticks) <= 2
    # Shown (a view takes the text as it comes), the same stream is handed over every PACE: more often.
    provider, ticks = Streaming(250, gap=0.002), []
    items = list(stream_abandonably(provider, None, CallLimits(), lambda: ticks.append(1)))
    assert len([i for i in items if isinstance(i, TextDelta)]) == len(ticks) > 2


def test_a_stream_nobody_shows_is_read_in_batches_a_tick_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its chunks gather for UNSEEN_GATHER (here 2 s) once a read had to wait, not for PACE: a reply of 200 chunks sent
    # over ~0.2 s is read in one wait for its first chunk, one for the next (no gather follows the first: a reply sent
    # whole is read at once) and at most one more, then handed over whole at its end.
    monkeypatch.setattr(model_call, "UNSEEN_GATHER", 2.0)
    provider = Streaming(200, gap=0.001)
    items = list(stream_abandonably(provider, None, CallLimits(), lambda: None, shown=False))
    assert text_of(items) == "".join(f"{i} " for i in range(200)) and items[-1] == Stop("end_turn")
    assert provider.waits <= 3


def test_a_reply_sent_whole_is_read_to_its_end_without_a_gather(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its first piece waited for the server to start; the rest had come by then (a local server, a short answer):
    # no gather is slept after that first wait, so the call ends as soon as it is read (PACE, UNSEEN_GATHER made 30 s
    # here: a gather would hold the call that long).
    monkeypatch.setattr(model_call, "PACE", 30.0)
    monkeypatch.setattr(model_call, "UNSEEN_GATHER", 30.0)
    monkeypatch.setattr(model_call, "TICK", 30.0)
    slept: list[float] = []
    real_sleep = time.sleep
    monkeypatch.setattr(model_call.time, "sleep", lambda s: (slept.append(s), real_sleep(min(s, 0.01)))[1])

    class Whole(Streaming):
        def send(self) -> None:
            real_sleep(0.05)  # the server's time to start; then the whole reply is there to read
            self.buffer.put([*(TextDelta(f"{i} ") for i in range(self.n)), *self.tail])

    for shown in (True, False):
        slept.clear()
        provider = Whole(50)
        items = list(stream_abandonably(provider, None, CallLimits(), lambda: None, shown=shown))
        assert text_of(items) == "".join(f"{i} " for i in range(50)) and items[-1] == Stop("end_turn")
        assert 30.0 not in slept
