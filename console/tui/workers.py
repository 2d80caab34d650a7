"""What a console's worker threads share: a worker that can be cancelled, and a sleep that wakes when it is.

Apart from :mod:`console.tui.follow` (which imports the typed events) so that the fleet's poller, started with the
fleet's first frame, imports nothing of a log's fold until it reads one."""

from __future__ import annotations

import time
from typing import Protocol


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
