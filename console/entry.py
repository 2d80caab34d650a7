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
import sys
from typing import Any

_interrupted = False


def interrupt_once(signum: int, frame: object) -> None:
    """SIGINT while the command has no handling of its own: one KeyboardInterrupt, then Ctrl+C is ignored (a second
    one would interrupt the first one's unwinding, and print where that was)."""
    global _interrupted
    _interrupted = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _quiet_unraisable(hook: Any) -> Any:
    """Python's hook for exceptions it cannot raise, silent for our KeyboardInterrupt: one that lands in a callback
    Python runs on its own (an import lock's weakref callback, a finaliser) is dropped there with a traceback, and
    the command goes on; :func:`main` still ends it as interrupted."""

    def hook_(unraisable: Any) -> None:
        if not (_interrupted and isinstance(unraisable.exc_value, KeyboardInterrupt)):
            hook(unraisable)

    return hook_


def is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is the command's Ctrl+C: a KeyboardInterrupt, or any error raised after one landed.

    The KeyboardInterrupt :func:`interrupt_once` raises lands in whatever Python code runs, and code called from a
    compiled library may come back as that library's own error: seen once, pydantic-core building a model's
    serializer while ``console.settings`` was imported turned it into a SchemaError ("... KeyboardInterrupt:"),
    and the command ended with a traceback. Once a Ctrl+C was taken, whatever fails is the interrupt's doing."""
    return isinstance(exc, KeyboardInterrupt) or (_interrupted and isinstance(exc, Exception))


def take_interrupts() -> None:
    """Install :func:`interrupt_once`, unless SIGINT is ignored (``nohup``, a shell's background job) or already
    someone else's."""
    global _interrupted
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        with contextlib.suppress(ValueError):  # not the main thread (a test calling the command from one)
            signal.signal(signal.SIGINT, interrupt_once)
            _interrupted = False  # a new command (in-process, a test's): an earlier one's Ctrl+C is not its own
            sys.unraisablehook = _quiet_unraisable(sys.unraisablehook)


def main() -> int:
    take_interrupts()
    try:
        from console.cli import main as cli_main

        code = cli_main()
        if _interrupted:  # a Ctrl+C Python swallowed in a callback (see _quiet_unraisable): still an interrupt
            raise KeyboardInterrupt
        return code
    except BaseException as exc:  # KeyboardInterrupt, or what a library made of it (see is_interrupt)
        if not is_interrupt(exc):
            raise
        from console.outcome import EXIT_INTERRUPTED

        return EXIT_INTERRUPTED
    finally:
        # The command is done: a Ctrl+C while Python tears down would end the process by the signal (its
        # handlers are gone by then) instead of with the exit code the command chose.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
