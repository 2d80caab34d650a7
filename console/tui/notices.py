"""No toast covers a question: while a dialog is the top screen, the console's notices wait for it to close.

Textual shows a notification (``App.notify``) as a toast at the bottom right of the top screen; at 80x24 two of
them cover much of a dialog's text, or its buttons. A question must stay readable, and what the notices say must
not be lost either: some say it nowhere else (a resume that failed, a screenshot's path, a theme file refused).
So, with the console's dialogs (console.tui.screens.dialog.Dialog: screens whose ``HOLDS_NOTICES`` is true):

- a notice raised while a dialog is the top screen is held, not shown;
- the toasts showing when a dialog opens are taken off and held too;
- once no dialog is the top screen, the held notices are shown again, each for its whole time (identical ones
  once, the newest ``HELD_MAX``);
- clearing the notices clears the held ones too; the console takes back only those that stopped being true
  ("the restart still waits", once it is answered: ``retract_notices``), so a notice held during the approval
  (a refused rewind, say) is still shown after it.

Only Textual's public API: its ``Notification`` and ``Notify`` message (what ``App.notify`` makes and posts: the
console keeps the Notification, so that it can take back that one), ``clear_notifications`` and the app's
``screen_change_signal``. A notice is taken back by expiring its Notification: Textual adds a notice to its list
when its message is handled, a moment after it was raised, and an expired one is dropped wherever it is (drawn,
or still on its way: clearing the list then was not enough, the toast came after the clear). A toast the operator
clicked away is not known here: it comes back after a dialog if its time had not run out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from textual.app import App, ScreenStackError
from textual.message import Message
from textual.notifications import Notification, Notify, SeverityLevel
from textual.screen import Screen

HELD_MAX = 4  # notices shown again after a dialog: the newest (a long wait must not bury the screen in toasts)
HELD_KEEP = 64  # notices kept while a dialog is up (an approval left open for hours must not grow without end)


# Screen[Any]: any screen of the stack, whatever it dismisses with (a Dialog[bool], the fleet's Screen[None]):
# Screen's result type is invariant, so Screen[object] would refuse them.
def holds_notices(screen: Screen[Any]) -> bool:
    """A question is up (a Dialog: the screens' package depends on this one, not the other way round)."""
    return bool(getattr(screen, "HOLDS_NOTICES", False))


@dataclass(frozen=True)
class Notice:
    message: str
    title: str
    severity: SeverityLevel
    timeout: float
    markup: bool


class HeldNotices:
    """The console's toasts: a part of :class:`console.tui.app.ConsoleApp`, which sends every ``notify`` here.

    It is given the narrow things it needs of the app: ``post`` a toast's Notify message (to the app's queue),
    ``later`` call something on the app's thread, ``clear_toasts`` (Textual's own clearing of the toasts: the app's
    ``clear_notifications`` clears the held ones too, through :meth:`clear`), ``top_screen`` (raises
    ScreenStackError before the app starts), the dialogs' ``clock`` and the ``default_timeout`` of a toast."""

    def __init__(self, *, post: Callable[[Message], object], later: Callable[..., object],
                 clear_toasts: Callable[[], None], top_screen: Callable[[], Screen[object]],
                 clock: Callable[[], float] = time.monotonic, default_timeout: float = 5.0) -> None:
        self._post = post
        self._later = later
        self._default_timeout = default_timeout
        self._clear_toasts = clear_toasts
        self._top_screen = top_screen
        self._clock = clock
        # Toasts raised and not run out: what, when (the dialogs' clock) and Textual's notification of it.
        self._shown: list[tuple[Notice, float, Notification]] = []
        self._held: list[Notice] = []
        self._notices_thread: int | None = None

    def started(self) -> None:
        """The app runs: notices from other threads are decided on this one."""
        self._notices_thread = threading.get_ident()

    def _dialog_up(self) -> bool:
        try:
            return holds_notices(self._top_screen())
        except ScreenStackError:  # not started yet
            return False

    @property
    def held(self) -> list[Notice]:
        return list(self._held)

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        if self._notices_thread is not None and threading.get_ident() != self._notices_thread:
            # Another thread's (Textual's notify is thread-safe): decided on the app's thread, by this method (the
            # app's, which rewrites the text, has run already).
            self._later(self.notify, message, title=title, severity=severity, timeout=timeout, markup=markup)
            return
        timeout = self._default_timeout if timeout is None else timeout
        self._route(Notice(message, title, severity, timeout, markup))

    def _route(self, notice: Notice) -> None:
        if self._dialog_up():
            self._held.append(notice)
            del self._held[:-HELD_KEEP]
            return
        self._show(notice)

    def _show(self, notice: Notice) -> None:
        now = self._clock()
        self._shown = [s for s in self._shown if now - s[1] < s[0].timeout]
        # What App.notify does, keeping the notification (retract expires it).
        note = Notification(notice.message, notice.title, notice.severity, notice.timeout, markup=notice.markup)
        self._shown.append((notice, now, note))
        self._post(Notify(note))

    @staticmethod
    def _expire(notes: list[Notification]) -> None:
        """Textual drops an expired notification wherever it is: drawn (at the toasts' next refresh) or still on
        its way (its Notify message not handled yet: added, then reaped before it is ever drawn)."""
        for note in notes:
            note.timeout = 0

    def clear(self) -> None:
        """Every notice, shown or held: the console clears them when they are no longer true."""
        self._expire([s[2] for s in self._shown])
        self._shown.clear()
        self._held.clear()
        self._clear_toasts()

    def retract(self, title: str) -> None:
        """Take back the notices titled ``title``, shown, on their way or held (they stopped being true); the
        others stay as they are."""
        self._held = [n for n in self._held if n.title != title]
        gone = [s[2] for s in self._shown if s[0].title == title]
        if not gone:
            return
        self._shown = [s for s in self._shown if s[0].title != title]
        self._expire(gone)
        # The toasts are drawn again from Textual's list once this message is handled (handled after any notice
        # still on its way): the expired ones are left out, this one with them.
        self._post(Notify(gone[0]))

    def screen_changed(self, screen: Screen[Any]) -> None:
        """The top screen changed (the app's ``screen_change_signal``)."""
        if holds_notices(screen):
            self._hold()
        else:
            self._release()

    def _hold(self) -> None:
        now = self._clock()
        live = [n for n, at, _note in self._shown if now - at < n.timeout]
        self._expire([s[2] for s in self._shown])  # shown again once it closes
        self._shown.clear()
        if not live:
            return
        self._held[:0] = live  # older than any raised while the dialog is up
        self._clear_toasts()
        # A toast raised just before the dialog may still be on its way to the screen (Textual posts it): taken off
        # once it has arrived, if a dialog is still up.
        self._later(self._clear_under_dialog)

    def _clear_under_dialog(self) -> None:
        if self._dialog_up():
            self._clear_toasts()

    def _release(self) -> None:
        if not self._held:
            return
        newest: dict[tuple[str, str, str], Notice] = {}
        for notice in self._held:  # identical ones once, where the last of them was
            key = (notice.title, notice.message, notice.severity)
            newest.pop(key, None)
            newest[key] = notice
        self._held.clear()
        for notice in list(newest.values())[-HELD_MAX:]:
            self._show(notice)


@runtime_checkable
class RetractsNotices(Protocol):
    """An app whose notices can be taken back one title at a time (the console's)."""

    def retract_notices(self, title: str) -> None: ...


def retract(app: App[Any], title: str) -> None:
    """Take back ``app``'s notices titled ``title`` (all of them in an app without held notices)."""
    if isinstance(app, RetractsNotices):
        app.retract_notices(title)
    else:
        app.clear_notifications()
