"""The fleet's poller: the jobs store and every run's log, polled in a worker thread; the list gets immutable rows.

A part of :class:`console.tui.app.ConsoleApp` (it runs it in a worker once the app is up), given only the fleet to
poll, where to post its rows (:class:`console.tui.messages.FleetRows`, on the app's queue) and how often."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from textual.message import Message
from textual.worker import get_current_worker

from console.tui.messages import FleetRows
from console.tui.workers import Cancellable, worker_sleep
from console.view.fleet import Fleet, Listed

FLEET_POLL = 1.0  # the fleet: how often the jobs store and the runs' logs are polled (its times are in seconds)
# The fleet's first fold of every log is done in slices of this many seconds, each slice's rows shown: the most
# urgent runs are shown folded first, and the rows are never older than this while a few hundred logs are read.
FOLD_SLICE = 0.15
# The longest the poller waits for the store's rows to be drawn before it folds the logs (it would take the
# GIL from the first frame): the frame is drawn well before; this is only a bound for a screen that never shows.
FIRST_PAINT_WAIT = 2.0


class FleetPoller:
    """See the module's docstring. ``drawn`` is set once the store's rows are on the screen: the poller folds the
    logs after that."""

    def __init__(self, fleet: Fleet, post: Callable[[Message], object], interval: float = FLEET_POLL) -> None:
        self.fleet = fleet
        self.interval = interval
        self.drawn = threading.Event()
        self._post = post

    def first_rows(self) -> Listed:
        """What the first frame lists: the store's rows (no log read: ~20 ms for a few hundred runs, before anything
        is drawn; a frame without them would be drawn for nothing)."""
        try:
            return self.fleet.poll(fold=False)
        except Exception:  # the poller's first slice says what is wrong
            return Listed(folded=False)

    def run(self, worker: Cancellable | None = None) -> None:
        """Poll until ``worker`` (default: the Textual worker running this, in its thread) is cancelled."""
        fleet = self.fleet
        worker = worker or get_current_worker()
        first = True
        while not worker.is_cancelled:
            started = time.monotonic()
            try:
                if first:  # the store's rows are drawn before any log is read (folding takes the GIL)
                    first = False
                    self.drawn.wait(FIRST_PAINT_WAIT)
                # Every log folded, a slice at a time: each slice's rows are shown, the most urgent runs first.
                rows = fleet.poll(budget=FOLD_SLICE)
                while not rows.folded and not worker.is_cancelled:
                    self._post(FleetRows(rows, fleet.error))
                    rows = fleet.poll(budget=FOLD_SLICE)
            except Exception as exc:  # the list must stay up whatever one run's files hold
                rows, fleet.error = fleet.rows, f"the fleet could not be read: {type(exc).__name__}: {exc}"
            self._post(FleetRows(rows, fleet.error))
            worker_sleep(worker, max(0.05, self.interval - (time.monotonic() - started)))
        fleet.close()  # a shared store's connections (opened again by the next poll, if any)
