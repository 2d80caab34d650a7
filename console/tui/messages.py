"""Typed messages between the console's workers, widgets and app."""

from __future__ import annotations

from pathlib import Path

from textual.message import Message


class EventsReady(Message):
    """Engine events are queued in the bridge (posted from the engine thread)."""


class PlanFileChanged(Message):
    """main_plan.md changed on disk (the watcher saw it)."""


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
