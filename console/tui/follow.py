"""Following a run's event log from another process (an attached console): replay, then poll for new lines.

Runs on a worker thread. Everything it touches is handed in when it starts (the log, the bridge, the
controller), so a worker of a run the fleet has left can never feed the run shown next.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from console.engine import events as ev
from console.tui.bridge import EventBridge
from console.tui.commands import Controller

FOLLOW_INTERVAL = 0.15  # how often the log is polled
RUNNER_INTERVAL = 1.0  # how often the run lock is asked whether a process runs the job


class Cancellable(Protocol):
    @property
    def is_cancelled(self) -> bool: ...


def worker_sleep(worker: Cancellable, seconds: float, step: float = 0.05) -> None:
    """Sleep ``seconds``, waking early when the worker is cancelled (closing never waits a whole poll)."""
    end = time.monotonic() + seconds
    while not worker.is_cancelled:
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(step, left))


def split_history(events: list[ev.EventBase], keep: int) -> tuple[list[ev.EventBase], list[ev.EventBase]]:
    """A long history cut in two: the older part (for the state's fold only) and the part that holds the
    newest ``keep`` assistant messages (which the conversation shows; it keeps no more than that anyway)."""
    seen = 0
    for i in range(len(events) - 1, -1, -1):
        if isinstance(events[i], ev.AssistantMessage):
            seen += 1
            if seen >= keep:
                return events[:i], events[i:]
    return [], events


def follow_log(path: Path, bridge: EventBridge, controller: Controller, worker: Cancellable,
               on_runner: Callable[[int | None], None],
               on_history: Callable[[list[ev.EventBase]], None] | None = None, keep: int = 0) -> None:
    """Push every event of ``path`` into ``bridge`` (from the first line), then each new one, until cancelled;
    call ``on_runner`` with the pid of the process running the job whenever it changes (None: nobody).

    ``on_history``: the first read's older part, beyond the newest ``keep`` messages, goes there instead of
    the bridge (replaying 100,000 events through the conversation would cost seconds it throws away)."""
    offset = 0
    pid: int | None = -1
    checked = 0.0
    first = True
    while not worker.is_cancelled:
        try:
            events, offset = ev.read_new(path, offset)
        except OSError:
            events = []
        if first and events and on_history is not None and keep > 0:
            older, events = split_history(events, keep)
            if older and not worker.is_cancelled:
                on_history(older)
        first = False
        if events and not worker.is_cancelled:
            bridge.push_many(events)
        now = time.monotonic()
        if now - checked >= RUNNER_INTERVAL:
            checked = now
            current = controller.runner_pid()
            if current != pid:
                pid = current
                on_runner(pid)
        worker_sleep(worker, FOLLOW_INTERVAL)
