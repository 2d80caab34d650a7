"""How a run's end becomes an exit code: one rule for the command line and the console.

0 the job completed; 1 the run ended without completing; 2 bad input; 3 stopped by the operator (a `stop`,
the console's stop or quit-and-stop, a denied restart); 130 interrupted (a signal: Ctrl+C, SIGTERM, SIGHUP
in a headless run; or the model stayed unreachable longer than the retries allow).
"""

from __future__ import annotations

from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_STOPPED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def exit_code(result: Any, interrupted_by: str | None = None) -> int:
    """The exit code of a run that ended with ``result`` (the supervisor's RunResult; None: it never started).

    The engine ends a run stopped by a signal and one stopped by the operator alike (user_shutdown): the
    signal (``interrupted_by``) is what tells an interrupt from the operator's decision."""
    if result is None:
        return EXIT_INTERRUPTED
    return exit_code_for(result.reason.value, result.ok, interrupted_by)


def exit_code_for(reason: str, ok: bool = False, interrupted_by: str | None = None) -> int:
    """The same rule from a run's end reason (a run_ended event's ``reason``; ``ok``: the job completed)."""
    if ok or reason == "job_complete":
        return EXIT_OK
    if reason == "user_shutdown":
        return EXIT_INTERRUPTED if interrupted_by else EXIT_STOPPED
    if reason == "model_unavailable":
        return EXIT_INTERRUPTED
    return EXIT_FAILED
