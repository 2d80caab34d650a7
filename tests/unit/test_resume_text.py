"""The resume question says how the run stands and what resuming does (console.view.liveness.resume_text); it said
"The run is stopped: it has stopped."."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from console.engine import events as ev
from console.view.format import clock_time
from console.view.liveness import resume_text
from console.view.state import ConsoleState

T0 = datetime(2026, 11, 26, 17, 0, tzinfo=UTC)


def folded(*events: ev.EventBase) -> ConsoleState:
    st = ConsoleState("requirements-extraction")
    st.apply_all(list(events))
    return st


def at(n: int, event_type: type[ev.EventBase], /, **fields: object) -> ev.EventBase:
    return event_type(ts=T0 + timedelta(seconds=n), seq=n, session=1, **fields)


def todos(n: int) -> ev.EventBase:
    return at(n, ev.TodosChanged, phase_name="Extraction", phase_number=2, total_phases=4, kind="phase",
              items=[ev.TodoItemRecord(text="extract lines 1-150", done=False)])


def test_a_run_stopped_by_a_denied_restart_says_so_where_and_what_resuming_does():
    st = folded(at(1, ev.SessionStarted), todos(2),
                at(3, ev.RunEnded, reason="user_shutdown", outcome="incomplete",
                   detail="restart denied (operator); the run ends"))
    text = resume_text(st, "7nw6q")
    assert text.startswith(f"The run stopped (it ended at {clock_time(T0 + timedelta(seconds=3))}): restart "
                           "denied (operator)"), text
    assert "It was in session 1, phase Extraction (2 of 4)." in text
    assert "Resuming starts it again in the background where it stopped" in text
    assert "agent-console resume 7nw6q" in text
    assert "it has stopped" not in text  # the state said twice, and nothing else


def test_a_run_whose_process_died_says_its_end_was_never_logged():
    text = resume_text(folded(at(1, ev.SessionStarted), todos(2)), "k3f9q")
    assert text.startswith("The run was interrupted: its process is gone and its end was never logged."), text
    assert "session 1" in text


def test_hostile_detail_is_one_safe_line():
    st = folded(at(1, ev.SessionStarted),
                at(2, ev.RunEnded, reason="x", outcome="failed", detail="boom\x1b[2J\nsecond line"))
    text = resume_text(st, "k3f9q")
    assert "\x1b" not in text and "\n" not in text and "The run failed" in text


def test_a_run_whose_agent_gave_up_needs_you_in_words_not_a_state_word_as_an_adjective():
    # It said "The run is needs you since 17:00:03".
    st = folded(at(1, ev.SessionStarted), todos(2),
                at(3, ev.RunEnded, reason="gave_up", outcome="gave_up", detail="job_complete with confidence 0"))
    text = resume_text(st, "ek5qc")
    assert text.startswith(f"The run needs you (it ended at {clock_time(T0 + timedelta(seconds=3))}): "
                           "job_complete with confidence 0."), text
    assert "is needs you" not in text


@pytest.mark.parametrize("state", ["needs you", "gave up", "agent stopped", "interrupted", "out of budget",
                                   "awaiting approval", "incomplete", "running", "paused", "starting", "gone",
                                   "completed", "failed", "stopped"])
def test_every_state_word_is_said_as_a_clause(state: str):
    from console.view.liveness import run_clause

    clause = run_clause(state)
    assert not clause.startswith(("is needs", "is gave", "is agent", "is failed", "is stopped", "is completed",
                                  "is incomplete", "is interrupted", "is in the state"))
