"""The fleet's list as a console's first screen: :class:`FleetHome`, a part of :class:`console.tui.app.ConsoleApp`.

It holds the poller (:class:`console.tui.fleet_poll.FleetPoller`: the store's rows, read on a worker once the app is
up) and the list they are drawn on (:class:`console.tui.screens.fleet.FleetScreen`, whose own parts act on its runs
and ring for a run that needs its operator). The list's module is imported when it is first shown: an attached run's
console never waits for it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from console.tui.fleet_poll import FleetPoller
from console.tui.messages import FleetRows
from console.view.fleet import Fleet

if TYPE_CHECKING:
    from console.tui.screens.fleet import FleetScreen
    from console.tui.screens.run import Run

# Call a function once the next frame is drawn (Textual's call_after_refresh).
AfterRefresh = Callable[[Callable[[], object]], object]


class FleetHome:
    """The fleet's poller and its list (see the module's docstring)."""

    def __init__(self, fleet: Fleet, post: Callable[[Message], object], poll_interval: float, *,
                 show_run: Callable[[Run], None], run_on_top: Callable[[], Path | None],
                 rung: dict[Path, int]) -> None:
        """``post``: a message to the app (the poller's rows: FleetRows); ``show_run``: a run attached from the list
        is shown; ``run_on_top``: the folder of the run whose console is on top; ``rung``: the needs_operator seq
        the bell already rang for, per run (shared with the runs' screens, so a need rings once)."""
        self.fleet = fleet
        self.poller = FleetPoller(fleet, post, poll_interval)
        self.show_run = show_run
        self.run_on_top = run_on_top
        self.rung = rung
        self.view: FleetScreen | None = None

    def screen(self) -> FleetScreen:
        """The list, its first frame with the store's rows (the poller starts once it shows)."""
        from console.tui.screens.fleet import FleetScreen
        from console.tui.screens.fleet_actions import FleetStore

        first, store = self.poller.first_rows(), FleetStore(self.fleet.store_path, self.fleet.url)
        self.view = FleetScreen(first, self.fleet.error, store=store, show_run=self.show_run,
                                run_on_top=self.run_on_top, rung=self.rung)
        return self.view

    def start(self, after_refresh: AfterRefresh, worker: Callable[[Callable[[], None]], object]) -> None:
        """The app is up: the poller runs on ``worker`` (a thread), once the list's first frame is drawn."""
        after_refresh(self.poller.drawn.set)  # the store's rows are in the first frame
        worker(self.poller.run)

    def rows(self, message: FleetRows, after_refresh: AfterRefresh) -> None:
        """The poller's rows: drawn on the list, then its bell hears of them (console.tui.screens.fleet_bell)."""
        view, drawn = self.view, self.poller.drawn
        if view is None or not view.is_attached:
            drawn.set()  # nothing to draw them on: the poller need not wait
            return
        view.update_rows(message.rows, message.error)
        if not drawn.is_set():
            after_refresh(drawn.set)
        view.needs.seen(message.rows)
