"""The run screens of one console: :class:`RunScreens`, a part of :class:`console.tui.app.ConsoleApp`.

It builds each run's screen as the console is set up (its clock, watchers, animations, the conversation's bound,
the fleet's bell and the keys' help rows), keeps the run shown when there is no fleet, and finds the run shown in
a stack of screens. A run's screen module (its panes, Markdown, the sandbox's words) is imported when the first one
is built: the fleet's first frame never waits for it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from textual.screen import Screen

if TYPE_CHECKING:
    from console.tui.screens.run import Run, RunScreen


class RunScreens:
    """Builds the run screens and finds the one shown; ``stack``: the app's screens, bottom first; ``top``: the
    screen on top (Textual's ``App.screen``)."""

    def __init__(self, now: Callable[[], datetime], *, stack: Callable[[], list[Screen[Any]]],
                 top: Callable[[], Screen[Any]], watch_files: bool,
                 animations: bool, max_items: int | None, rung: dict[Path, int],
                 key_help: Callable[[], list[tuple[str, str]]]) -> None:
        """``max_items``: the conversation's bound (None: the run screen's default); ``rung``: the needs_operator
        seq the bell already rang for, per run (shared with the fleet's list, so a need rings once)."""
        self.now = now
        self.stack = stack
        self.top = top
        self.watch_files = watch_files
        self.animations = animations
        self.max_items = max_items
        self.rung = rung
        self.key_help = key_help
        self.kind: type[RunScreen] | None = None  # set when the first run's screen is built
        self.own: RunScreen | None = None  # the run shown when there is no fleet (the fleet pushes one per run)

    def build(self, run: Run, *, in_fleet: bool = False) -> RunScreen:
        from console.tui.screens.run import RunScreen

        self.kind = RunScreen
        bound = {} if self.max_items is None else {"max_items": self.max_items}
        return RunScreen(run, self.now, watch_files=self.watch_files, animations=self.animations,
                         in_fleet=in_fleet, rung=self.rung, key_help=self.key_help, **bound)

    def keep(self, run: Run) -> RunScreen:
        """The console's one run (no fleet): built now, shown first."""
        self.own = self.build(run)
        return self.own

    # Screen[Any]: any screen of the stack, whatever it dismisses with. Screen's result type is invariant, so
    # Screen[object] would refuse a Screen[bool] (a dialog).
    def is_run(self, screen: Screen[Any]) -> TypeGuard[RunScreen]:
        # No run's screen was built yet: none is in the stack (and its module need not be imported to say so).
        return self.kind is not None and isinstance(screen, self.kind)

    def on_top(self) -> Path | None:
        """The folder of the run whose console is the top screen (None: the fleet's list, a question...)."""
        top = self.top()
        return top.paths.root if self.is_run(top) else None

    def shown(self) -> RunScreen | None:
        """The top-most run's screen in the stack; else the console's own run (None with a fleet: its list)."""
        for screen in reversed(self.stack()):
            if self.is_run(screen):
                return screen
        return self.own
