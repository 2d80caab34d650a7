"""A screen's frames: drawn at most ``MAX_FPS`` times a second, and at once when the last one is older than that
or when a key has just acted.

Textual draws a screen from a repeating timer that pauses itself after each frame and is resumed when a widget
needs repainting. In Textual 8.2, once that timer has been paused past a tick, it schedules the next frame one to
two whole periods (17-33 ms at 60 fps) after the late one (:meth:`textual.timer.Timer._run` skips to
``count = int(elapsed / interval + 1)``, then waits for ``count + 1``). A run's screen is repainted many times a
second and idles in between, so nearly every frame, including the one that shows a key's effect, waited for that
late tick: measured on an idle console, a key took up to 30 ms to show (p95 ~30 ms), doing nothing for most of it.

:class:`FrameTimer` keeps Textual's contract (the screen pauses it in its update and resumes it when something is
dirty) and its cap (one frame per period, so a flood of events costs at most ``MAX_FPS`` frames a second), but
counts the period from the last frame drawn: a repaint asked for after a quiet period is drawn on the next turn
of the event loop. For a moment after an operator's key acts (:meth:`FrameTimer.hurry`) the cap is lifted: what
the key changed is drawn as soon as it is ready, not up to a period later. Keys come at a human's pace, so this
costs a few frames per key press. :func:`frame_timer` makes one for a screen; a screen installs it by overriding
``_update_timer`` (see :class:`console.tui.screens.run.RunScreen`), and a test checks that Textual still draws
through it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual import _time
from textual.screen import UPDATE_PERIOD, Screen
from textual.timer import EventTargetGone, Timer

if TYPE_CHECKING:
    from textual.message_pump import MessagePump

HURRY_WINDOW = 0.1  # seconds after a key acts during which frames are not capped


class FrameTimer(Timer):
    """A repeating timer for a screen's updates that never waits more than one period after the last tick."""

    _hurry_until = float("-inf")

    @property
    def _wake(self) -> asyncio.Event:
        wake: asyncio.Event | None = self.__dict__.get("_wake_event")
        if wake is None:
            wake = self.__dict__["_wake_event"] = asyncio.Event()
        return wake

    def hurry(self) -> None:
        """Draw the frames of the next moment as soon as something is dirty (a key has acted)."""
        self._hurry_until = _time.get_time() + HURRY_WINDOW

    def resume(self) -> None:
        super().resume()
        if self._hurry_until > _time.get_time():
            self._wake.set()

    frames = 0  # ticks so far

    async def _run(self) -> None:
        last = float("-inf")
        while True:
            await self._active.wait()
            now = _time.get_time()
            wait = last + self._interval - now
            if wait > 0 and now >= self._hurry_until:
                await self._wait(wait)
                await self._active.wait()
            last = _time.get_time()
            self.frames += 1
            try:
                await self._tick(next_timer=last, count=self.frames)
            except EventTargetGone:
                break
            # A tick that did not pause the timer (the app is exiting: Textual skips the update) must not spin
            # without letting the event loop run, hurried or not.
            await asyncio.sleep(0)

    async def _wait(self, seconds: float) -> None:
        """What is left of the period, or less if a key acts meanwhile (see resume).

        Not asyncio.wait_for: on Python 3.11 it can swallow a cancellation that lands as its wait ends, and a
        timer that outlives its cancellation hangs the removal of its screen (Timer._stop_all awaits it)."""
        wake = self._wake
        wake.clear()
        ring = asyncio.get_running_loop().call_later(seconds, wake.set)
        try:
            await wake.wait()
        finally:
            ring.cancel()


def frame_timer(screen: Screen[Any]) -> FrameTimer:
    """A started, paused FrameTimer calling ``screen``'s update, owned by the screen (stopped with it)."""
    timer = FrameTimer(screen, UPDATE_PERIOD, name="screen_update", callback=screen._on_timer_update, pause=True)
    timer._start()
    screen._timers.add(timer)
    return timer


def one_shot(pump: MessagePump, delay: float, callback: Callable[[], object], *, name: str | None = None) -> Timer:
    """``pump.set_timer(delay, callback)``, except that the callback is always called.

    Textual's ``set_timer`` makes a timer that skips the ticks it is late for, and a one-shot timer has only one:
    if the delay has passed by the time its task first reads the clock (a delay under a millisecond, or another
    thread holding the GIL between two lines of :meth:`textual.timer.Timer._run`), it ends without calling back.
    A view that keeps its timer to know a call is due (the run screen's drain of the events, a pane's repaint)
    then waits for ever: the console stopped absorbing events in 1 run in 20 of ``benchmarks/tui.py``, with 18,696
    events left in the bridge and a 70-nanosecond timer that never fired. This one is late rather than never."""
    timer = Timer(pump, max(0.0, delay), name=name or f"one_shot#{Timer._timer_count}",
                  callback=functools.partial(pump.call_next, callback), repeat=0, skip=False)
    timer._start()
    pump._timers.add(timer)  # stopped with the widget, as set_timer's are
    return timer
