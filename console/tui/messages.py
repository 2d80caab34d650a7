"""Typed messages between the console's workers, widgets, screens and app. A run's messages go to its screen
(a screen taken down drops them: no run's message reaches another one's screen)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.message import Message


class EventsReady(Message):
    """Engine events are queued in the bridge (posted from the engine thread)."""


# The theme and plan files are watched from this many seconds after the console's start (the app's mount, a run's
# panes), not from its first moment: watchfiles imports anyio, whose start (it reads its own source) and asyncio
# backend cost ~30 ms of CPU that an attach or the fleet would otherwise spend before its first frame
# (benchmarks/tui.py --only processes). Each watcher reads its files once more when it is up: a change made in
# between is shown too, once the watcher's first quiet WATCH_QUIET_MS have passed (the watcher is certainly up then).
# Read at the time of use (tests shorten them).
WATCH_AFTER = 2.0
WATCH_QUIET_MS = 5_000  # watchfiles' own default for awatch


class PlanFileChanged(Message):
    """main_plan.md changed on disk (the watcher saw it, or it is up and the file is to be read once more)."""


class ThemeFileChanged(Message):
    def __init__(self, paths: list[Path]) -> None:
        super().__init__()
        self.paths = paths


class RunFinished(Message):
    """The engine's run() returned (in-process) or the run's process went away (attached)."""

    def __init__(self, outcome: str, detail: str, exit_code: int) -> None:
        super().__init__()
        self.outcome = outcome
        self.detail = detail
        self.exit_code = exit_code


class RunnerState(Message):
    """Attached console: whether a process holds the job's run lock."""

    def __init__(self, pid: int | None) -> None:
        super().__init__()
        self.pid = pid


class FleetRows(Message):
    """The fleet poller's latest rows (an immutable list, most urgent first), and why the store cannot be read."""

    def __init__(self, rows: list[Any], error: str = "") -> None:
        super().__init__()
        self.rows = rows
        self.error = error


class HistoryFolded(Message):
    """A long log's exact fold, made on the follower's thread (a ``follow.Folded``): the state adopts it."""

    def __init__(self, folded: Any) -> None:
        super().__init__()
        self.folded = folded


class HistoryReady(Message):
    """The older part of a long log replayed: folded into the console's state only; the conversation shows the
    newest messages, which follow through the bridge."""

    def __init__(self, events: list[Any]) -> None:
        super().__init__()
        self.events = events
