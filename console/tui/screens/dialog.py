"""What every question the console asks has in common: it never acts on a key meant for something else.

- Its keys are its own: a dialog is modal (the keys of the screen under it never reach it), and a letter typed
  into one of its fields is text (Textual leaves a key a focused ``Input`` takes out of every binding).
- A dialog that appears on its own (``ON_ITS_OWN``: a restart waiting for approval, opened when the run asks,
  maybe while the operator is typing) takes none of its answers in its first moment (``ARM_DELAY``): the key the
  operator was already pressing for the screen below is dropped, not taken as the answer to a question never
  read. The moment starts again each time it becomes the top screen; its buttons are dimmed until it is over.
  Clicks and Enter on its buttons wait too: the pointer may rest where a button appears, and a click aimed at the
  pane below is no more an answer than a key is (browsers delay their permission buttons for the same reason).
- A dialog the operator opened with a key (stop?, quit, rewind, the fleet's questions) answers at once: it was
  asked for, and ``s`` ``y`` typed in one go means what it says.
- No toast covers it: the console holds its notices while a dialog is the top screen (console.tui.notices).
- The way out is always there: q (the quit key, remapped with it) and Ctrl+C leave the question unanswered and open
  the quit question over it (detach or stop; in the fleet, back to the list), as they do on the screen below,
  whose footer stays in sight under the dialog and offers them. A modal screen takes none of the keys of the
  screens under it, the app's Ctrl+C included, so each dialog binds them itself; they are no answer (the quit
  question answers nothing of the one under it) and work at once. On the quit question itself q does nothing
  (``QUITS``): it is on screen already; a second Ctrl+C there leaves as a terminal's second Ctrl+C does, by the
  answer that leaves (``LEAVES``: detach, the run goes on; for a run in this process, which cannot go on without
  it, stop and quit). Before, q did nothing in a dialog and the operator's next key, meant for
  the quit question (d: detach), answered the dialog instead (d: deny the restart, ending the run).
- An answer that ends or stops the run is never one key that means something else in another dialog: where a
  key would (d denies a restart, d detaches), the answer asks first (console.tui.screens.approval).

The delay and the clock are the app's (``dialog_delay``, ``dialog_clock``) unless given: tests move the clock by
hand, or set no delay.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from textual.binding import Binding
from textual.content import Content
from textual.screen import ModalScreen
from textual.timer import Timer

from console.tui.host import ConsoleHost
from console.tui.pacing import one_shot

# Seconds a dialog that appeared on its own ignores its answers. A key already on its way when the dialog is
# drawn was decided before it could be seen: reacting to something unexpected takes a person ~0.25 s, and a
# typist's next keys are often already under way by then. Reading even the dialog's title takes longer than
# 0.5 s, so no answer given with intent is ever dropped, only slightly delayed for the fastest readers.
ARM_DELAY = 0.5
# The dimmed buttons are looked at again this often at least while the delay runs (the clock may be a test's).
ARM_RECHECK = 0.05

T = TypeVar("T")


class Dialog(ModalScreen[T]):
    """A modal question. ``on_its_own`` (default: the class's ``ON_ITS_OWN``): it opened without the operator
    asking for it, so its answers (its bindings, its buttons, Enter in its field) wait ``delay`` seconds."""

    # Its subclasses' bindings are added to these (Textual merges BINDINGS along the classes). The quit key has the
    # run screen's id: remapped in [keys], it is remapped here too.
    BINDINGS = [
        Binding("q", "quit_console", "Quit", show=False, id="quit"),
        Binding("ctrl+c", "interrupt", show=False, system=True),
    ]

    ANSWERS: ClassVar[frozenset[str]] = frozenset()  # the actions of its bindings that answer it
    ON_ITS_OWN: ClassVar[bool] = False  # opened by the run, not by one of the operator's keys
    # A terminal too narrow for the buttons side by side (40 columns) stacks them (app.tcss: -cramped).
    HORIZONTAL_BREAKPOINTS = [(0, "-cramped"), (60, "-roomy")]
    HOLDS_NOTICES: ClassVar[bool] = True  # no toast over it: they wait for it to close (console.tui.notices)
    QUITS: ClassVar[bool] = False  # it is the quit question: q does nothing more on it, Ctrl+C leaves
    LEAVES: ClassVar[Any] = None  # the quit question's answer that leaves (a second Ctrl+C gives it)

    def __init__(self, *, on_its_own: bool | None = None, delay: float | None = None,
                 clock: Callable[[], float] | None = None, quits: bool | None = None) -> None:
        """``quits``: this question is the quit question (default: the class's ``QUITS``)."""
        super().__init__(classes="modal")
        self.quits = self.QUITS if quits is None else quits
        self.on_its_own = self.ON_ITS_OWN if on_its_own is None else on_its_own
        self._delay = delay
        self._clock = clock
        self.shown_at: float | None = None
        self._arming: Timer | None = None

    @property
    def delay(self) -> float:
        """How long its answers wait: none for a dialog the operator asked for."""
        if not self.on_its_own:
            return 0.0
        host = self.app if isinstance(self.app, ConsoleHost) else None
        delay = self._delay if self._delay is not None else host.dialog_delay if host is not None else ARM_DELAY
        return max(0.0, float(delay))

    def clock(self) -> float:
        clock = self._clock or (self.app.dialog_clock if isinstance(self.app, ConsoleHost) else time.monotonic)
        return float(clock())

    def on_screen_resume(self) -> None:
        """Shown (pushed, or the screen above it closed): its moment starts now."""
        self.shown_at = self.clock()
        self._show_armed()

    @property
    def armed(self) -> bool:
        """True once the dialog has been the top screen for ``delay`` seconds: its answers are taken."""
        if self.delay <= 0:
            return True
        if self.shown_at is None:  # not shown yet
            return False
        return self.clock() - self.shown_at >= self.delay

    def _show_armed(self) -> None:
        """Dim the buttons while the answers wait (class ``-arming``); look again when the moment should be over."""
        armed = self.armed
        self.set_class(not armed, "-arming")
        if self._arming is not None:
            self._arming.stop()
            self._arming = None
        if not armed and self.shown_at is not None:
            left = self.delay - (self.clock() - self.shown_at)
            self._arming = one_shot(self, max(ARM_RECHECK, left), self._show_armed, name="dialog-arming")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The dialog's answers do nothing in its first moment (the key is dropped, not kept for later)."""
        if action not in self.ANSWERS:
            return True
        if self.armed and self.has_class("-arming"):
            self.remove_class("-arming")
        return self.armed

    def action_quit_console(self) -> None:
        """q or Ctrl+C: what they do on the screen below (the app's quit, which asks), this question left open
        under the quit question, unanswered."""
        if self.quits:
            return
        if isinstance(self.app, ConsoleHost):
            self.app.action_quit_console()
        else:  # an app of its own (a test's): no question to ask
            self.app.exit()

    def action_interrupt(self) -> None:
        """Ctrl+C: as q, except on the quit question, where it is the second one: the console leaves."""
        if self.quits:
            self.dismiss(self.LEAVES)
            return
        self.action_quit_console()

    def note(self, text: str) -> None:
        """A line on the dialog's lower border: news that must not cover the question (see console.tui.notices)."""
        for box in self.query("#dialog"):
            box.border_subtitle = Content(text)  # text, never markup
