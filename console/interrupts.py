"""Ctrl+C while the command has no handling of its own: one KeyboardInterrupt, exit code 130, never a traceback.

Python's own handler raises KeyboardInterrupt wherever the code happens to be, and an uncaught one prints where that
was. :func:`take_interrupts` puts :func:`interrupt_once` in its place; the command's two ways in (the installed
``agent-console``, console.entry, and ``python -m console.cli``, console.cli.main) install it first thing, and
both end with exit code 130 on what :func:`is_interrupt` calls one.

Its own module, of the standard library only, below both: console.entry imports it before anything of the command
line (whose imports a Ctrl+C may land in), and the command line's commands import it to tell a Ctrl+C from an error.
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


def interrupted() -> bool:
    """Whether :func:`interrupt_once` took a Ctrl+C since the command began (even one Python swallowed)."""
    return _interrupted


def _quiet_unraisable(hook: Any) -> Any:
    """Python's hook for exceptions it cannot raise, silent for our KeyboardInterrupt: one that lands in a callback
    Python runs on its own (an import lock's weakref callback, a finaliser) is dropped there with a traceback, and
    the command goes on; console.entry's main still ends it as interrupted."""

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
