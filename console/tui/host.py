"""What the console's screens may ask of the app that shows them, declared: the console's own app answers all of
it; a screen shown by another app (a test's, a benchmark's) finds it is not one and does without."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable


@runtime_checkable
class ConsoleHost(Protocol):
    # How long a dialog that opened on its own ignores keys, and its clock (monotonic seconds).
    dialog_delay: float
    dialog_clock: Callable[[], float]

    def action_quit_console(self) -> None:
        """q or Ctrl+C: quit the console (asking first where a run would stop)."""

    def key_for(self, key_id: str, default: str) -> str:
        """The key the operator's key map gives ``key_id`` (``default`` where it gives none)."""
        ...
