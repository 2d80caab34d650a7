"""One model call the loop can abandon, and the retries that make a turn survive an outage.

A provider's stream is read in a worker thread and handed over through a queue, so the loop keeps the
upper hand whatever the server does: it looks at the operator's commands every tick (a stop or a pause
acts within a second, even while the socket is silent), and it ends a call that has produced no model
output for ``idle_timeout`` seconds (keep-alive comments are not output: the SDKs never yield them) or
that has run longer than ``turn_timeout``. An abandoned call is hung up at once through its
:class:`~console.engine.model.CallHandle` (the adapter's closer), and left to its thread, which sees the cut
(or notices the cancel at its next item), closes the stream, and ends; the SDK's own read timeout bounds a
socket whose adapter registered no closer.

Transient failures (see :class:`~console.engine.model.ProviderError`) are retried for the whole turn with
tenacity: exponential backoff with full jitter, a server's retry-after honoured up to a cap, for at most
``retry_total_wait`` seconds of elapsed time since the turn's first failure (the attempts count, not only
the waits: a server that takes a minute to fail each time does not stretch the bound). A server that
cannot be reached at all (:class:`ProviderUnreachable`: connection refused, a name that does not resolve,
no route) has its own short bound, ``unreachable_wait`` (30 s): nobody is there to come back in a minute,
so the run asks its operator soon instead. The time is the run's injected clock (:class:`Outage`). Each
wait is announced first (``on_retry``) and spent in ticks that look at the operator's commands, so a stop
during a wait also acts at once.
"""

from __future__ import annotations

import contextlib
import os
import queue
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from tenacity import RetryCallState, Retrying, retry_if_exception
from tenacity.wait import wait_base

from console.engine.doorbell import CALL_LOOK  # a headless call's own looks, with a doorbell (see its bell)
from console.engine.messages import ModelRequest
from console.engine.model import (
    CallHandle,
    Progress,
    Provider,
    ProviderError,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    set_current_call,
)

TICK = 0.2  # seconds between looks at the operator's commands while a call is silent
# While a reply streams, the loop's thread is woken at most this often (seconds) to take what came, and the worker
# reads the socket again this long after it had to wait on it: a server sends a token a chunk, a chunk every few
# milliseconds, and waking a thread for each cost more CPU than the rest of the harness's turn (issue 37: ~0.05 ms
# a wake-up of the loop's thread, ~0.1 ms of the worker's read, ~500 chunks a reply). The end of a call is handed
# over at once; text reaches a view in steps of about this much, and a reply ends up to this much later than its
# server ended it (0.05 s cost 20% more CPU a turn at a token a chunk, docs/benchmarks.md). A reply nobody shows as it
# comes (a headless run) is read every UNSEEN_GATHER instead, and taken at the loop's looks (see stream_abandonably's
# ``shown``).
PACE = 0.1
# A reply nobody shows as it comes is read from its socket this often (seconds) while it streams: a wake-up of the
# worker's thread, with the caches it finds cold, costs ~0.5 ms of CPU on the shared 2-core VM (more than parsing the
# chunks it reads), so a 2-second stream read every 0.2 s cost ~5 ms a turn, every run of a fleet (issue 37). The
# price: such a reply ends up to this much (a quarter second on average) after its server ended it.
UNSEEN_GATHER = 0.5
# A streamed item that took this long (seconds) to come was waited for on the socket, not read from what had come.
READ_WAITED = 0.001
BACKOFF_START = 2.0  # the first retry waits up to this (jittered), doubling per attempt
BACKOFF_MAX = 120.0  # one backoff wait (not one retry-after) is at most this


@dataclass(frozen=True)
class CallLimits:
    idle_timeout: float = 120.0
    turn_timeout: float = 1800.0
    retry_total_wait: float = 600.0  # seconds since the turn's first failure
    retry_after_cap: float = 300.0
    unreachable_wait: float = 30.0  # the same, while the server cannot be reached at all


class ProviderUnreachable(ProviderError):
    """The provider's server cannot be reached at all: the connection was refused, its name does not resolve,
    there is no route to it, or it never answered the connection. Transient (it may come back), but with the
    short bound of ``unreachable_wait``: a dead endpoint is not an overloaded one."""

    def __init__(self, message: str, cause: str) -> None:
        super().__init__(message, kind="transient", cause=cause)


def is_unreachable(exc: BaseException | None) -> bool:
    return isinstance(exc, ProviderUnreachable)


@dataclass
class Outage:
    """One turn's run of failures, timed on the run's clock (``now``: its monotonic seconds).

    ``first`` is when the turn's first failure came, ``unreachable_since`` when the current unbroken run of
    unreachable failures began (None while the last failure was another kind), ``tries`` the attempts that
    failed. The retry policy asks :meth:`out_of_time` after each failure, with the wait that would come next."""

    limits: CallLimits
    now: Callable[[], float] = time.monotonic
    first: float | None = None
    unreachable_since: float | None = None
    tries: int = 0
    last: BaseException | None = None

    def failed(self, exc: BaseException | None) -> None:
        t = self.now()
        self.tries += 1
        self.last = exc
        if self.first is None:
            self.first = t
        if is_unreachable(exc):
            if self.unreachable_since is None:
                self.unreachable_since = t
        else:
            self.unreachable_since = None

    @property
    def unreachable(self) -> bool:
        return self.unreachable_since is not None

    def elapsed(self) -> float:
        """Seconds since the turn's first failure (0 before it)."""
        return 0.0 if self.first is None else max(0.0, self.now() - self.first)

    def limit(self) -> float:
        """The bound that applies now: unreachable_wait while the server is not reached, else retry_total_wait."""
        return min(self.limits.unreachable_wait, self.limits.retry_total_wait) if self.unreachable \
            else self.limits.retry_total_wait

    def out_of_time(self, upcoming: float) -> bool:
        """Whether waiting ``upcoming`` seconds more before the next attempt would pass the bound."""
        t = self.now()
        if self.unreachable_since is not None and t - self.unreachable_since + upcoming > self.limits.unreachable_wait:
            return True
        return self.first is not None and t - self.first + upcoming > self.limits.retry_total_wait


class _Workers:
    """Reused daemon threads for model calls. Starting a thread per call costs ~0.2 ms, more than the rest of
    the harness's turn; concurrent.futures' pool would do, but its threads are joined at exit, and a thread
    stuck on a silent socket must never hold up a stop. An abandoned call keeps its thread until its hang-up
    ends the read (or, without a closer, the SDK's read timeout); a new call meanwhile gets another thread."""

    def __init__(self) -> None:
        self._idle: queue.SimpleQueue[queue.SimpleQueue[Callable[[], None]]] = queue.SimpleQueue()

    def submit(self, fn: Callable[[], None]) -> None:
        try:
            inbox = self._idle.get_nowait()
        except queue.Empty:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name="model-call", daemon=True).start()
        inbox.put(fn)

    def _serve(self, inbox: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            inbox.get()()
            self._idle.put(inbox)


_WORKERS = _Workers()
# A forked child has only the forking thread: the idle workers it inherited are not there to serve it.
os.register_at_fork(after_in_child=lambda: setattr(_WORKERS, "_idle", queue.SimpleQueue()))


class Bell(Protocol):
    """What the loop's thread waits on while a call runs: rung by the worker (at the end, or to hand over), and,
    for a run's doorbell (console.engine.doorbell.Doorbell), by the operator's commands."""

    def ring(self) -> None: ...

    def wait(self, timeout: float) -> None: ...


class _QueueBell:
    """A bell of the call's own: a ring wakes one wait (a ring left over wakes the next one early, once)."""

    __slots__ = ("_queue",)

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[None] = queue.SimpleQueue()

    def ring(self) -> None:
        self._queue.put(None)

    def wait(self, timeout: float) -> None:
        with contextlib.suppress(queue.Empty):
            self._queue.get(timeout=timeout)


class _Failed:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_DONE = object()


def stream_abandonably(provider: Provider, request: ModelRequest, limits: CallLimits,
                       tick: Callable[[], None], now: Callable[[], float] = time.monotonic, *,
                       shown: bool = True, bell: Bell | None = None) -> Iterator[StreamEvent]:
    """The provider's stream, read in a worker thread; ``tick`` runs at least every :data:`TICK` seconds
    and may raise to abandon the call. A silent stream past ``idle_timeout``, or a call past
    ``turn_timeout``, raises a transient :class:`ProviderError`.

    ``shown`` False: nobody shows the reply's text as it comes (a headless run: no view of it takes text_delta
    events), so what came is taken at the loop's ticks (every :data:`TICK`) and at the call's end, not every
    :data:`PACE`, and read from the socket every :data:`UNSEEN_GATHER`: a fraction of the wake-ups of both threads
    while a reply streams, the same looks at the operator.

    ``bell``: what the loop waits on, when the run has a doorbell its operator's commands ring: a call nobody
    shows then looks by itself every :data:`CALL_LOOK`, not every :data:`TICK` (the commands wake it at once).

    The watchdog runs on real time (``now``), not the run's injected clock: it measures a real socket."""
    if getattr(provider, "runs_inline", False):
        # In-process models (the scripted one) never block on a socket: no thread needed.
        for item in provider.stream(request):
            tick()
            yield item
        return

    # Nobody shown the text: the chunks gather for UNSEEN_GATHER between reads (a fifth of the wake-ups of the worker's
    # thread and of the passes of the SDK's reader; a reply ends up to UNSEEN_GATHER after its server ended it instead
    # of PACE), and the loop takes them at its looks.
    gather = PACE if shown else UNSEEN_GATHER

    def produce(put: Callable[[Any], None], handle: CallHandle) -> None:
        stream = provider.stream(request)
        try:
            asked = time.monotonic()
            first = True
            for item in stream:
                if handle.cancelled:
                    break
                put(item)
                if first:
                    # The reply has begun: from now on a read of its socket that finds nothing waits a gather first
                    # (the adapter's transport, where it can tell: console/providers/hang_up.py), so the chunks that
                    # came meanwhile are read in one pass, and this thread wakes once for them, not twice.
                    handle.gather = gather
                if handle.gathers_at_socket:
                    first = False
                    continue
                if (came := time.monotonic()) - asked >= READ_WAITED and not first:
                    # The socket had nothing when asked (the item was waited for): the server sends a token a
                    # chunk, so let its next chunks gather before reading again, and read them at once (one
                    # wake-up of this thread and one pass of the SDK's reader for all of them, not one each).
                    # Not after the first item, which waited for the server to start: a reply sent whole (a
                    # local server, a short answer) is then read to its end at once, not a gather later.
                    time.sleep(gather)
                    came = time.monotonic()
                asked, first = came, False
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()  # ends the HTTP response (the SDK's context manager exits)

    yield from _watched(provider.name, produce, limits, tick, now, PACE if shown else None, bell=bell,
                        look=CALL_LOOK if bell is not None and not shown else TICK)


def call_abandonably(provider: Provider, fn: Callable[[], None], limits: CallLimits, tick: Callable[[], None],
                     now: Callable[[], float] = time.monotonic) -> None:
    """``fn``, one short request of the provider's (its readiness check), made as a model call is: on a worker
    thread, ``tick`` at least every :data:`TICK` seconds (it may raise to abandon the call, which is hung up through
    its :class:`CallHandle`), a transient :class:`ProviderError` past ``idle_timeout`` without an answer."""
    if getattr(provider, "runs_inline", False):
        fn()
        return
    for _ in _watched(provider.name, lambda put, handle: fn(), limits, tick, now):
        pass  # the call yields nothing: it ends, fails or is abandoned


def _watched(name: str, produce: Callable[[Callable[[Any], None], CallHandle], None], limits: CallLimits,
             tick: Callable[[], None], now: Callable[[], float], pace: float | None = PACE, *,
             bell: Bell | None = None, look: float = TICK) -> Iterator[Any]:
    """What ``produce`` puts, made on a worker thread under the watchdog: the one way a provider's call is made,
    a stream (:func:`stream_abandonably`) or a single request (:func:`call_abandonably`). ``tick`` at least every
    :data:`TICK` seconds and the limits checked on every hand-over and every tick; a call left (abandoned, or
    failed here) is hung up through its :class:`CallHandle`, so the server stops working for nobody.

    Items are handed over in batches (see :data:`PACE`): the worker appends each as it comes, and wakes the loop's
    thread only when it waits and has taken nothing for ``pace`` seconds (None: never, the loop's ticks take
    them), or at the end (done or failed); the loop takes everything queued at each wake-up, in order, with
    consecutive text merged (:func:`_merged`). The loop's thread waits on ``bell`` (one of the call's own by
    default) at most ``look`` seconds at a time."""
    items: deque[Any] = deque()  # appended by the worker, taken by the loop's thread (deque's ends are thread-safe)
    bell = bell if bell is not None else _QueueBell()
    # Shared by the two threads without a lock: each read or write is one step under the GIL, and a race costs at
    # most one early wake-up (a ring left in the bell) or one late one (an item taken at the next tick).
    parked = [False]  # the loop's thread waits on the bell
    # When the loop's thread last took items (real time: it paces wake-ups); the first item wakes it at once. An
    # item that came within PACE of it is taken at the next wake-up: a later item's, the end's, or the tick's.
    handed = [-PACE]
    handle = CallHandle()

    def put(item: Any) -> None:
        items.append(item)
        if pace is not None and parked[0] and time.monotonic() - handed[0] >= pace:
            parked[0] = False
            bell.ring()

    def end(item: Any) -> None:
        items.append(item)
        bell.ring()  # the end is handed over at once: the turn goes on without waiting for a tick

    def work() -> None:
        set_current_call(handle)  # the adapter registers how to hang up what it opens
        try:
            produce(put, handle)
            end(_DONE)
        except BaseException as exc:  # handed to the loop's thread, which decides
            end(_Failed(exc))
        finally:
            set_current_call(None)

    started = last = now()
    _WORKERS.submit(work)
    finished = False
    try:
        while True:
            if not items:
                parked[0] = True
                if not items:  # looked at again once parked: the worker reads the flag after it appends
                    bell.wait(look)
                parked[0] = False
            batch = [items.popleft() for _ in range(len(items))]
            if not batch:  # a silent tick (the wait ran out, or a ring was left over)
                tick()
                _check(name, limits, now(), started, last)
                continue
            handed[0] = time.monotonic()
            end_item = batch.pop() if batch[-1] is _DONE or isinstance(batch[-1], _Failed) else None
            if batch:
                last = now()
                tick()
                # Checked on every hand-over too: a model stuck repeating itself streams for ever without a pause.
                _check(name, limits, last, started, last)
                yield from _merged(batch)
            if end_item is _DONE:
                finished = True
                return
            if isinstance(end_item, _Failed):
                finished = True
                raise end_item.exc
    finally:
        if not finished:
            handle.cancel()  # abandoned: hang up now


def _merged(batch: list[Any]) -> list[Any]:
    """The batch with each run of consecutive text (or reasoning) pieces as one piece, and of progress as one:
    the order kept, a reply's text the same, and one event for a view where the stream had tens. A run is joined
    once at its end (a hand-over holds tens of pieces at a token a chunk: one object a run, not one a piece)."""
    out: list[Any] = []
    run: list[Any] = []  # the pieces of the current run of text, reasoning or progress (one kind)

    def close() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run and isinstance(run[0], Progress):
            out.append(Progress(sum(p.chars for p in run)))
        elif run:
            out.append(type(run[0])("".join(p.text for p in run)))
        run.clear()

    for item in batch:
        kind = type(item)
        if kind is TextDelta or kind is ReasoningDelta or kind is Progress:
            if run and type(run[0]) is not kind:
                close()
            run.append(item)
        else:
            close()
            out.append(item)
    close()
    return out


def _check(name: str, limits: CallLimits, at: float, started: float, last: float) -> None:
    if at - last >= limits.idle_timeout:
        raise ProviderError(
            f"{name}: no model output for {limits.idle_timeout:g} s (the server keeps the request open without "
            "progress)", kind="transient", cause=f"stalled {limits.idle_timeout:g} s") from None
    if at - started >= limits.turn_timeout:
        raise ProviderError(f"{name}: the reply took longer than {limits.turn_timeout:g} s", kind="transient",
                            cause=f"reply over {limits.turn_timeout:g} s") from None


class wait_retry_after(wait_base):  # named like tenacity's own wait strategies
    """Exponential backoff with full jitter, or the server's retry-after when it asks for longer (capped)."""

    def __init__(self, cap: float, rng: random.Random | None = None) -> None:
        self.cap = cap
        # One formula for every run: tenacity's wait_random_exponential draws from the module's random, and a
        # seeded generator (tests, replays) must give the same bounds, so the draw is made here.
        self.rng = rng or random.Random()

    def __call__(self, retry_state: RetryCallState) -> float:
        high = min(BACKOFF_MAX, BACKOFF_START * 2 ** (retry_state.attempt_number - 1))
        delay = self.rng.uniform(0, high)
        exc = retry_state.outcome.exception() if retry_state.outcome is not None else None
        after = getattr(exc, "retry_after", None)
        if isinstance(after, int | float) and after > 0:
            delay = max(delay, min(float(after), self.cap))
        return round(delay, 3)


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and exc.kind == "transient"


def retrying(limits: CallLimits, sleep: Callable[[float], None], on_retry: Callable[[RetryCallState], None],
             rng: random.Random | None = None, outage: Outage | None = None) -> Retrying:
    """The whole-turn retry policy: transient failures only, until the next wait would take the turn past its
    bound in elapsed time (see :class:`Outage`; give one built on the run's clock to read its figures)."""
    watch = outage if outage is not None else Outage(limits)

    def out_of_time(state: RetryCallState) -> bool:
        watch.failed(state.outcome.exception() if state.outcome is not None else None)
        return watch.out_of_time(state.upcoming_sleep or 0.0)

    return Retrying(retry=retry_if_exception(is_transient), wait=wait_retry_after(limits.retry_after_cap, rng),
                    stop=out_of_time, sleep=sleep, before_sleep=on_retry, reraise=True)
