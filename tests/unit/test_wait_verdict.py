"""`wait`'s verdict is liveness's answer (the fleet's and `jobs`'s) with an exit code: every way a log can end."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from console.cli.wait import (
    WAIT_COMPLETED,
    WAIT_ENDED,
    WAIT_FAILED,
    WAIT_INTERRUPTED,
    WAIT_NEEDS,
    WAIT_STOPPED,
    _wait_verdict,
    _WaitFold,
)
from console.engine import events as ev
from console.engine import runs
from console.engine.run_end import ended_status

T = datetime(2026, 11, 26, 6, 0, tzinfo=UTC)


def _fold(*events: ev.Event) -> _WaitFold:
    fold = _WaitFold()
    fold.apply(ev.SessionStarted(ts=T, seq=0, session=1, reason="new"))
    for e in events:
        fold.apply(e)
    return fold


def _end(reason: str, outcome: str | None) -> ev.RunEnded:
    return ev.RunEnded(ts=T, seq=9, session=1, reason=reason, outcome=outcome)  # type: ignore[arg-type]


@pytest.mark.parametrize(("reason", "outcome", "code", "said"), [
    ("job_complete", "completed", WAIT_COMPLETED, "completed"),
    ("agent_stopped", "completed", WAIT_COMPLETED, "completed"),  # a free stop the record bears out
    ("job_complete", None, WAIT_COMPLETED, "completed"),  # a log from before outcomes
    ("job_complete", "incomplete", WAIT_ENDED, "ended without completing"),  # the agent's say-so alone
    ("agent_stopped", "incomplete", WAIT_ENDED, "ended without completing"),
    ("user_shutdown", "incomplete", WAIT_STOPPED, "stopped"),
    ("user_shutdown", "completed", WAIT_COMPLETED, "completed"),  # stopped after the work was done
    ("max_turns", "incomplete", WAIT_ENDED, "max_turns"),
    ("budget_exhausted", "incomplete", WAIT_ENDED, "budget_exhausted"),
    ("error", "failed", WAIT_FAILED, "failed (error)"),
    ("context_full", None, WAIT_FAILED, "failed (context_full)"),
    ("model_unavailable", "incomplete", WAIT_INTERRUPTED, "model could not be reached"),
    ("gave_up", "gave_up", WAIT_NEEDS, "the agent gave up"),
    ("a_reason_from_a_newer_version", "completed", WAIT_COMPLETED, "completed"),
    ("a_reason_from_a_newer_version", None, WAIT_ENDED, "ended without completing"),
])
def test_an_ended_run_gets_the_fleets_state_as_an_exit_code(reason: str, outcome: str | None, code: int,
                                                             said: str) -> None:
    end = _end(reason, outcome)
    verdict = _wait_verdict(_fold(end), "k3f9q", alive=False)
    assert verdict is not None and verdict[0] == code and said in verdict[1], verdict
    # The fleet reads the same log with its store's word: the same state.
    seen = runs.Seen(outcome=(outcome or "").replace("_", " "), ended=True)
    fleet = runs.liveness(ended_status(end), None, seen=seen)
    assert (fleet.state == runs.COMPLETED) == (code == WAIT_COMPLETED)
    assert (fleet.kind == "needs") == (code == WAIT_NEEDS)


def test_a_process_still_holding_the_run_after_its_end_runs_on() -> None:
    # The process that logged its end is exiting, or a resume started anew: not decided yet.
    assert _wait_verdict(_fold(_end("user_shutdown", "incomplete")), "k3f9q", alive=True) is None


def test_a_need_is_told_while_the_run_lives_and_a_crash_after_it_dies() -> None:
    stuck = ev.NeedsOperator(ts=T, seq=3, session=1, reason="stuck", message="the same call 5 times")
    verdict = _wait_verdict(_fold(stuck), "k3f9q", alive=True)
    assert verdict is not None and verdict[0] == WAIT_NEEDS and "the same call 5 times" in verdict[1]
    # Dead without its end: the grace period decides (interrupted), not the stale need.
    assert _wait_verdict(_fold(stuck), "k3f9q", alive=False) is None
    crashed = ev.NeedsOperator(ts=T, seq=3, session=1, reason="crashed", message="a bug: resume it")
    verdict = _wait_verdict(_fold(crashed), "k3f9q", alive=False)
    assert verdict is not None and verdict[0] == WAIT_NEEDS and "resume it" in verdict[1]


def test_nothing_logged_that_decides_leaves_it_to_the_grace_periods() -> None:
    assert _wait_verdict(_fold(), "k3f9q", alive=False) is None
    assert _wait_verdict(_fold(), "k3f9q", alive=True) is None


def test_a_completion_logged_before_a_kill_is_completed_once_the_process_is_gone() -> None:
    done = ev.JobCompleted(ts=T, seq=5, session=1, summary="all five done", confidence=0.9)
    assert _wait_verdict(_fold(done), "k3f9q", alive=True) is None
    verdict = _wait_verdict(_fold(done), "k3f9q", alive=False)
    assert verdict == (WAIT_COMPLETED, "run k3f9q completed: all five done")


def test_a_restart_pending_before_its_need_says_what_the_need_will_say() -> None:
    """`wait` may read the restart_pending line before its needs_operator (or a log from before needs): it said a
    short "approve or deny the restart" where `logs` and the notification gave the figures."""
    from console.engine.needs import restart_message

    fold = _fold(ev.RestartPending(ts=T, seq=1, session=1, used_tokens=7424, next_session=2))
    assert fold.need is not None and fold.need.message == restart_message(7424, 2)
    assert "7,424 tokens" in fold.need.message and "session 2" in fold.need.message


def test_an_answered_question_is_not_told_by_a_wait_that_follows_the_answer() -> None:
    """`answer RUN ...; wait RUN`: the answer's "applied" may come before the need's clearing; a resume is no
    answer to a question (it is refused), so only the answer (or a stop) takes it off."""
    asked = ev.NeedsOperator(ts=T, seq=3, session=1, reason="mcp_question", paused=False,
                             message="MCP server asker asks (question q1a2b3c, during ask): Who are you?")

    def applied(command: str) -> ev.OperatorCommand:
        return ev.OperatorCommand(ts=T, seq=4, session=1, command=command, status="applied", source="cli")

    verdict = _wait_verdict(_fold(asked, applied("resume")), "k3f9q", alive=True)
    assert verdict is not None and verdict[0] == WAIT_NEEDS and "Who are you?" in verdict[1]
    assert _wait_verdict(_fold(asked, applied("answer")), "k3f9q", alive=True) is None
