"""From the engine thread to the UI: a queue and one wake-up message per batch.

The engine calls :meth:`EventBridge.push` on its own thread for every event. That
must stay cheap (the engine waits for it), so it only appends to a deque and, when
the queue was idle, posts one :class:`EventsReady` message to the run's screen (Textual's
``post_message`` is thread-safe). The screen drains everything queued since, so a
burst of thousands of text deltas costs one UI update, not thousands.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from typing import TYPE_CHECKING

from console.engine import events as ev
from console.tui.messages import EventsReady

if TYPE_CHECKING:
    from textual.message_pump import MessagePump


class EventBridge:
    def __init__(self) -> None:
        self._queue: deque[ev.EventBase] = deque()
        self._lock = threading.Lock()
        self._wake_posted = False
        self._target: MessagePump | None = None
        self._closed = False
        self.pushed = 0

    def attach(self, target: MessagePump) -> None:
        """Start waking ``target`` (the run's screen), and wake it now if events arrived before it ran."""
        with self._lock:
            self._target = target
            pending = bool(self._queue)
            self._wake_posted = pending
        if pending:
            target.post_message(EventsReady())

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._target = None

    def push(self, event: ev.EventBase) -> None:
        """Called on the engine (or log follower) thread."""
        if self._closed:
            return
        self._queue.append(event)
        self.pushed += 1
        if self._wake_posted:
            return
        with self._lock:
            if self._wake_posted or self._target is None:
                return
            self._wake_posted = True
            target = self._target
        with contextlib.suppress(Exception):  # the app is shutting down: the engine must never fail for the view
            target.post_message(EventsReady())

    def push_many(self, events: list[ev.EventBase]) -> None:
        for e in events:
            self.push(e)

    def drain(self, limit: int | None = None) -> list[ev.EventBase]:
        """Called on the UI thread: what is queued, in order (at most ``limit`` events).

        While events are left over the caller is responsible for draining again (no new
        wake-up is posted); once the queue is empty the next push wakes the screen again.
        """
        out: list[ev.EventBase] = []
        pop = self._queue.popleft
        n = limit if limit is not None else len(self._queue) + 1_000_000
        with self._lock:
            self._wake_posted = False  # set before popping: a push racing with the drain wakes the screen again
        while n > 0:
            try:
                out.append(pop())
            except IndexError:
                break
            n -= 1
        if self._queue:
            with self._lock:
                self._wake_posted = True
        return out

    @property
    def pending(self) -> int:
        return len(self._queue)
