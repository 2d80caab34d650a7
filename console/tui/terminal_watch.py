"""A console whose terminal went away without a hangup signal closes as if it had one.

A terminal that goes away sends SIGHUP to its session; a console started outside that session (``setsid``, a
supervisor's pty, some SSH and container wrappers) gets no signal at all. Textual's input thread then reads 0
bytes from the dead terminal in a loop (its selector says "readable" for ever) and its writer thread dies on EIO:
the process spins a core, unseen, for ever. The console looks at its terminal once a second (one ``isatty``, a
thread asleep in between) and, once the terminal is gone, sends itself the SIGHUP it was owed: the one way a
hangup is handled (``console.tui.launch.viewer_signals``), so a silent one closes it the same way."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator

LOOK_EVERY = 1.0  # seconds: at most this long of a spinning input thread before the console closes


def _terminal_fd() -> int | None:
    """The descriptor Textual reads keys from (``sys.__stdin__``), if it is a terminal."""
    stdin = sys.__stdin__
    try:
        fd = stdin.fileno() if stdin is not None else -1
    except (OSError, ValueError):  # closed, or not a real file (a test's stand-in)
        return None
    return fd if fd >= 0 and os.isatty(fd) else None


@contextlib.contextmanager
def hangup_when_terminal_gone(every: float = LOOK_EVERY) -> Iterator[None]:
    """While the block runs, SIGHUP this process once its terminal stops being one (its other side closed)."""
    fd = _terminal_fd()
    if fd is None:  # no terminal to lose (headless, a pipe, a test)
        yield
        return
    done = threading.Event()

    def look() -> None:
        while not done.wait(every):
            if not os.isatty(fd):  # EIO from the line discipline: the other side is gone
                os.kill(os.getpid(), signal.SIGHUP)
                return

    threading.Thread(target=look, name="terminal-watch", daemon=True).start()
    try:
        yield
    finally:
        done.set()
