"""A view fed off the run's thread: what it does with an event never takes the agent's time, and never stops it.

A view subscribed to the event stream (the headless log: a line of story per turn) would otherwise run on the
run's own thread, in the middle of a turn: its formatting is a seventh of a turn's harness time (benchmarks/
overhead.py), and its write blocks the run when its reader stops reading (a terminal's Ctrl+S, a stalled SSH
session). A :class:`DeferredView` takes each event with one append and hands it over on a thread of its own: when
the run says it waits (:meth:`wake`: the model is asked, the run holds for its operator) or at most ``MAX_LAG``
seconds after it came; in order, one at a time. Its thread wakes on its own only on that timer, not per event:
waking it mid-turn would make the turn wait for the interpreter's lock. With nothing to hand over it sleeps until
an event comes (the first of a batch wakes it once, to start the timer): a run waiting minutes on its model costs
no wake-ups (the timer alone woke it 4 times a second, every view of every run of a fleet).

A view that stops reading holds at most ``LIMIT`` events; beyond them the oldest are dropped, and the view is told
how many (its ``missed(n)``, if it has one) before the next. :meth:`close` hands over what is left and waits for
the view at most ``CLOSE_WAIT`` seconds (a process that must end is not held by a reader that went away); events
after that are handed over at once, on the caller's thread (the run's last words, after its log is closed).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

from console.engine.events.base import EventBase

MAX_LAG = 0.25
LIMIT = 20_000
CLOSE_WAIT = 2.0


class DeferredView:
    def __init__(self, view: Callable[[EventBase], None], on_error: Callable[[DeferredView, Exception], None]) -> None:
        self.view = view
        self.on_error = on_error
        self._items: collections.deque[EventBase] = collections.deque()
        self._dropped = 0
        # Two signals, each a lock held while it is not given: the run gives it by releasing the lock, the view's
        # thread takes it (and clears it at once) by acquiring it. A threading.Event is a Python Condition, whose
        # set, wait and clear cost ~0.07 M instructions a turn together (every view of every run); a lock's release
        # and acquire are one C call each. Only the view's thread ever waits on them.
        self._wake = threading.Lock()  # given by wake() (the run waits) or close()
        self._arrived = threading.Lock()  # given by the first event after the view had everything, or close()
        self._wake.acquire()
        self._arrived.acquire()
        self._closed = False
        self._gone = False  # the view failed with OSError: its output is gone, it gets nothing more
        self._handing = threading.Lock()  # one hand-over at a time: the thread's, or the caller's after close
        self._thread = threading.Thread(target=self._serve, name="view-feed", daemon=True)
        self._thread.start()

    def __call__(self, event: EventBase) -> None:
        if self._closed:
            self._items.append(event)
            # At once, unless the view's thread is still stuck in it (then it would never be this event's turn).
            self._hand_over(timeout=0.0 if self._thread.is_alive() else -1)
            return
        if len(self._items) >= LIMIT:
            self._items.popleft()
            self._dropped += 1
        if not self._items:
            self._items.append(event)
            _give(self._arrived)
            return
        self._items.append(event)

    def wake(self) -> None:
        """The run waits (its model is asked, or its operator): hand over what came."""
        if self._items:
            _give(self._wake)

    def settle(self, timeout: float = CLOSE_WAIT) -> bool:
        """Wake the feed and wait until the view has everything (a benchmark's turns back to back, a test);
        False if it had not within ``timeout`` seconds."""
        self.wake()
        deadline = time.monotonic() + timeout
        while self._items or self._handing.locked():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.0005)  # seldom called, never by the run: a poll is simpler than a second event
        return True

    def close(self) -> None:
        """Hand over what is left (waiting for the view at most CLOSE_WAIT seconds); later events at once."""
        self._closed = True
        _give(self._wake)
        _give(self._arrived)
        self._thread.join(CLOSE_WAIT)
        self._hand_over(timeout=0.0 if self._thread.is_alive() else CLOSE_WAIT)

    @property
    def pending(self) -> int:
        return len(self._items)

    def _serve(self) -> None:
        while not self._closed:
            if not self._items:  # nothing to hand over: asleep until an event comes (or the feed closes)
                self._arrived.acquire()
            self._wake.acquire(timeout=MAX_LAG)
            self._hand_over()

    def _hand_over(self, timeout: float = -1) -> None:
        if not self._handing.acquire(timeout=timeout):
            return  # the view's thread is stuck in it (its reader stopped reading): not this caller's wait
        try:
            while self._items and not self._gone:
                if self._dropped:
                    dropped, self._dropped = self._dropped, 0
                    missed = getattr(self.view, "missed", None)
                    if missed is not None:
                        self._call(missed, dropped)
                self._call(self.view, self._items.popleft())
        finally:
            self._handing.release()

    def _call(self, fn: Callable[..., None], arg: object) -> None:
        try:
            fn(arg)
        except Exception as exc:  # a broken view must never stop the agent, nor this feed
            if isinstance(exc, OSError):
                self._gone = True
                self._items.clear()
            self.on_error(self, exc)


def _give(signal: threading.Lock) -> None:
    """Give a signal (see DeferredView.__init__): its waiter wakes, or the next wait returns at once. Given twice
    before it is taken, it is still one signal, as an Event set twice is."""
    if signal.locked():
        # Not contextlib.suppress: a context manager written in Python, entered and left at every give.
        try:  # noqa: SIM105
            signal.release()
        except RuntimeError:  # given by another thread in between: released already
            pass
