"""How a run's end becomes an exit code: one rule for the command line, the console and `wait`.

A run ends in one of four outcomes (console.engine.events.Outcome), each with its own code:

0 completed (the harness's record shows the plan done); 1 incomplete (a turn limit, refused stops, out of budget:
the work is not done and the run can go on); 3 incomplete because the operator stopped it (a `stop`, the console's
stop or quit-and-stop, a denied restart); 4 the agent gave up (job_complete with a low confidence and notes: the
operator is asked; `wait` gives 4 to every run that needs its operator); 7 failed (an internal error, a restart
loop); 130 interrupted (a signal: Ctrl+C, SIGTERM, SIGHUP in a headless run; or a stop answering the run's
`provider down` question, asked once the model stayed unreachable longer than the retries allow). 2 is bad
input, before any run; `wait` adds 5 (its timeout) and 6 (no process runs the run any more).
"""

from __future__ import annotations

from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_STOPPED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_GAVE_UP, EXIT_RUN_FAILED = 4, 7


def exit_code(result: Any, interrupted_by: str | None = None) -> int:
    """The exit code of a run that ended with ``result`` (the supervisor's RunResult; None: it never started).

    The engine ends a run stopped by a signal and one stopped by the operator alike (user_shutdown): the
    signal (``interrupted_by``) is what tells an interrupt from the operator's decision."""
    if result is None:
        return EXIT_INTERRUPTED
    return exit_code_for(result.reason.value, result.ok, interrupted_by, getattr(result, "ended", None))


def exit_code_for(reason: str, ok: bool = False, interrupted_by: str | None = None,
                  outcome: str | None = None) -> int:
    """The same rule from a run's end reason and outcome (a run_ended event's ``reason`` and ``outcome``; ``ok``:
    the job completed). Without an outcome (a log from before outcomes), the reason alone decides."""
    if outcome == "completed" or (outcome is None and (ok or reason == "job_complete")):
        return EXIT_OK
    if outcome == "gave_up" or reason == "gave_up":
        return EXIT_GAVE_UP
    if outcome == "failed":
        return EXIT_RUN_FAILED
    if reason == "user_shutdown":
        return EXIT_INTERRUPTED if interrupted_by else EXIT_STOPPED
    if reason in ("model_unavailable", "interrupted"):
        return EXIT_INTERRUPTED
    return EXIT_FAILED
