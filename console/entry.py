"""The ``agent-console`` command's entry point: Ctrl+C is taken in hand before anything else is imported.

A Ctrl+C while the command starts (its imports, the settings, the provider, the console's own start) ends it with
exit code 130 and one line at most, never a traceback (console.interrupts). Importing the command line alone takes
tens of milliseconds, so this module imports nothing of it until the handler is in place (what comes before it is
the interpreter's own start, which no program can take over). The top of the package: nothing imports it.
"""

from __future__ import annotations

import signal

from console.interrupts import interrupted, is_interrupt, take_interrupts  # the standard library only


def main() -> int:
    try:
        # Inside the try: a Ctrl+C that lands while the handler is being put in place is still Python's own
        # KeyboardInterrupt, raised there (seen beside two busy loops: `run` printed a traceback ending in
        # take_interrupts), and is this command's interrupt like any later one.
        take_interrupts()
        from console.cli import main as cli_main

        code = cli_main()
        if interrupted():  # a Ctrl+C Python swallowed in a callback (console.interrupts): still an interrupt
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
