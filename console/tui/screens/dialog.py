"""What every question the console asks has in common: it never acts on a key meant for something else.

- Its keys are its own: a dialog is modal (the keys of the screen under it never reach it), and a letter typed
  into one of its fields is text (Textual leaves a key a focused ``Input`` takes out of every binding).
- None of its answers is taken in its first moment (``delay``, 0.5 s): a dialog that appears on its own (a restart
  waiting for approval) must not take the key the operator was already pressing for something else as its
  answer. The moment starts again each time it becomes the top screen. Clicks and Enter on its buttons wait too.

The delay and the clock are the app's (``dialog_delay``, ``dialog_clock``) unless given: tests move the clock by
hand, or set no delay.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar, TypeVar

from textual.screen import ModalScreen

ARM_DELAY = 0.5  # seconds a dialog ignores its keys after it appears

T = TypeVar("T")


class Dialog(ModalScreen[T]):
    """A modal question whose answers (its bindings, its buttons, Enter in its field) wait ``delay`` seconds."""

    ANSWERS: ClassVar[frozenset[str]] = frozenset()  # the actions of its bindings that answer it

    def __init__(self, *, delay: float | None = None, clock: Callable[[], float] | None = None) -> None:
        super().__init__(classes="modal")
        self._delay = delay
        self._clock = clock
        self.shown_at: float | None = None

    @property
    def delay(self) -> float:
        delay = self._delay if self._delay is not None else getattr(self.app, "dialog_delay", ARM_DELAY)
        return max(0.0, float(delay))

    def clock(self) -> float:
        clock = self._clock or getattr(self.app, "dialog_clock", None) or time.monotonic
        return float(clock())

    def on_screen_resume(self) -> None:
        """Shown (pushed, or the screen above it closed): its moment starts now."""
        self.shown_at = self.clock()

    @property
    def armed(self) -> bool:
        """True once the dialog has been the top screen for ``delay`` seconds: its answers are taken."""
        if self.delay <= 0:
            return True
        if self.shown_at is None:  # not shown yet
            return False
        return self.clock() - self.shown_at >= self.delay

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The dialog's answers do nothing in its first moment (the key is dropped, not kept for later)."""
        return self.armed if action in self.ANSWERS else True
