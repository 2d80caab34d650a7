"""The ``agent-console`` command's entry point: Ctrl+C is taken in hand before anything else is imported.

A Ctrl+C while the command starts (its imports, the settings, the provider, the console's own start) ends it with
exit code 130 and one line at most, never a traceback: Python's own handler raises KeyboardInterrupt wherever the
code happens to be, and an uncaught one prints where that was. Importing the command line alone takes tens of
milliseconds, so this module imports nothing of it until the handler is in place (what comes before it is the
interpreter's own start, which no program can take over).
"""

from __future__ import annotations

import contextlib  # already imported by Python's start (site), as signal's enum is
import signal


def interrupt_once(signum: int, frame: object) -> None:
    """SIGINT while the command has no handling of its own: one KeyboardInterrupt, then Ctrl+C is ignored (a second
    one would interrupt the first one's unwinding, and print where that was)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def take_interrupts() -> None:
    """Install :func:`interrupt_once`, unless SIGINT is ignored (``nohup``, a shell's background job) or already
    someone else's."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        with contextlib.suppress(ValueError):  # not the main thread (a test calling the command from one)
            signal.signal(signal.SIGINT, interrupt_once)


def main() -> int:
    take_interrupts()
    try:
        from console.cli import main as cli_main

        return cli_main()
    except KeyboardInterrupt:
        from console.outcome import EXIT_INTERRUPTED

        return EXIT_INTERRUPTED
    finally:
        # The command is done: a Ctrl+C while Python tears down would end the process by the signal (its
        # handlers are gone by then) instead of with the exit code the command chose.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
