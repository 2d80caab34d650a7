"""The fleet's bell: a run that needs its operator anew, while the list is open, rings once; over a run's console a
short notice names it too, and goes when the list is back or the need is gone.

A part of the fleet's screen, given the narrow things it needs: the needs already rung for (shared with the run
screens the fleet opens, so that a need rings once), the terminal's bell, the console's notices (notify and take
back by title) and which run's console is on top (a run's own need is said by its console)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from console.view.fleet import FleetRow, Listed

NEEDS_TITLES = ("Approval needed", "Needs you")  # the fleet's notices of runs that need their operator
# Seconds a needs notice stays: long enough to be read, short enough not to sit over the list's columns (the row and
# the title keep saying it).
NEEDS_TIMEOUT = 5.0


class Notify(Protocol):
    def __call__(self, message: str, *, title: str = ..., severity: str = ..., timeout: float | None = ...) -> None:
        ...


class NeedsBell:
    """See the module's docstring. ``run_on_top``: the folder of the run whose console is the top screen (None: the
    list, a question, anything else)."""

    def __init__(self, rung: dict[Path, int], *, bell: Callable[[], None], notify: Notify,
                 retract: Callable[[str], None], run_on_top: Callable[[], Path | None]) -> None:
        self.rung = rung  # the needs_operator seq the bell already rang for, per run
        self.primed = False  # the list was read whole once: a need seen after that is new (it rings, a notice says it)
        # The needs notice shown over a run's console: its title, the needs it told of.
        self.told: tuple[str, dict[Path, int]] | None = None
        self._bell = bell
        self._notify = notify
        self._retract = retract
        self._run_on_top = run_on_top

    def seen(self, rows: list[FleetRow]) -> None:
        """A poll's rows (shown already)."""
        self._retract_stale(rows)
        newly = [r for r in rows if r.needs_seq and self.rung.get(r.path) != r.needs_seq]
        for row in newly:
            self.rung[row.path] = row.needs_seq
        if not self.primed:
            # What needed the operator before the list was first read whole is no news: the list's title counts
            # it and its rows come first, highlighted. The bell (and a notice over a run's console) is for a need
            # that comes while the list is open: a notice on every start covered the columns and said nothing new.
            self.primed = rows.folded if isinstance(rows, Listed) else True
            return
        on_top = self._run_on_top()
        if on_top is not None:  # that run's own need: its console says it (and rings) itself
            newly = [r for r in newly if r.path != on_top]
        if not newly:
            return
        self._bell()
        if on_top is None:
            # Over the list (or a question over it), the run's row says it, first and highlighted, and the title
            # counts it: a notice there would only cover the columns it is in (at 80x24, the state, phase, ctx and
            # cost of the rows under it).
            return
        # Over a run's console, a short notice names the other run (one at a time, the newest: a run that restarts
        # often must not stack notices over the screen). It goes when the list is back or the need is gone.
        for title in NEEDS_TITLES:
            self._retract(title)
        names = ", ".join(f"{r.id} {r.job}" for r in newly[:2]) + (" and more" if len(newly) > 2 else "")
        approval = all(r.pending_seq for r in newly)
        what = "a restart to approve" if approval else \
            f"needs you ({', '.join(sorted({r.needs_label for r in newly}))})"
        title = NEEDS_TITLES[0 if approval else 1]
        self.told = (title, {r.path: r.needs_seq for r in newly})
        self._notify(f"{names}: {what} (q returns to the list).", title=title, severity="warning",
                     timeout=NEEDS_TIMEOUT)

    def _retract_stale(self, rows: list[FleetRow]) -> None:
        """Take back the needs notice once none of the needs it told of is still there (approved, denied, resumed,
        acknowledged, ended)."""
        if self.told is None:
            return
        title, told = self.told
        now = {r.path: r.needs_seq for r in rows}
        if not any(now.get(path) == seq for path, seq in told.items()):
            self.told = None
            self._retract(title)

    def list_back(self) -> None:
        """The list is back (q from a run's console): a needs notice told over that console is done with (it said
        "q returns to the list"; the list's row and title say the rest)."""
        if self.told is not None:
            title = self.told[0]
            self.told = None
            self._retract(title)
