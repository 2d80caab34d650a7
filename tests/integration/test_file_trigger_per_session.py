"""Seed 002's file-created trigger fires once per session: a context restart starts a new session, in which it
fires again; a kill and resume within one session never fires it twice."""

from __future__ import annotations

import pytest

from console.engine import events as ev
from console.engine.guardrails.feedback import (
    Feedback,
    FeedbackContext,
    FeedbackProviderConfig,
    FeedbackRunner,
    FeedbackState,
    FeedbackTrigger,
    FileCreatedTrigger,
)
from console.engine.guardrails.feedback_providers import StaticFeedbackProvider
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedProvider
from tests.conftest import run_settings

WINDOW = 10_000
# The seed's own example: a file the job has from its start, so the trigger fires at each session's first call.
SEEN = "instructions.md"


def file_trigger() -> FeedbackProviderConfig:
    return FeedbackProviderConfig(StaticFeedbackProvider(f"{SEEN} detected. Follow the conventions defined within.",
                                                         name="Seen"),
                                  FeedbackTrigger(on_file_created=FileCreatedTrigger(SEEN)))


def fired_by_session(paths) -> dict[int, int]:
    out: dict[int, int] = {}
    for e in ev.read_events(paths.events):
        if isinstance(e, ev.Feedback) and e.source == "Seen":
            out[e.session] = out.get(e.session, 0) + 1
    return out


def test_a_file_trigger_fires_once_in_each_session(make_job, clock) -> None:
    """Seed 002: "Triggers when a specified file is created on the filesystem. Fires exactly once per
    session--after initial detection, subsequent tool calls will not re-trigger even if the file is deleted and
    recreated." A context restart is a new session (seed 004's session_number): the trigger fires in it again."""
    paths = make_job("requirements-extraction")
    sup = Supervisor(paths, run_settings(context_window=WINDOW, max_restarts=3), ScriptedProvider(clock=clock),
                     clock=clock)
    sup.guardrails.feedback = FeedbackRunner([file_trigger()])
    result = sup.run()
    assert result.sessions == 3, result.detail
    assert fired_by_session(paths) == {1: 1, 2: 1, 3: 1}


class Interrupted(BaseException):
    """A kill in the middle of a step (a BaseException: the engine's `except Exception` must not eat it)."""


class DieInSession:
    """Raises (a kill) a few calls into session ``session``, after the file trigger fired there."""

    kind, name = "die", "Die"

    def __init__(self, session: int, after: int) -> None:
        self.session, self.after = session, after
        self.first: int | None = None

    def should_run(self, context: FeedbackContext) -> bool:
        if context.session == self.session:
            self.first = context.tool_call_count if self.first is None else self.first
            if context.tool_call_count - self.first >= self.after:
                raise Interrupted
        return False

    def provide(self, context: FeedbackContext) -> Feedback:  # pragma: no cover - never due
        raise AssertionError


def test_a_resume_in_the_same_session_does_not_fire_it_again(make_job, clock) -> None:
    """Seed 002: "Trigger state persists in session via `FileCreatedTriggerState` slice; reset clears it": killed
    in session 2 after the trigger fired there, the run resumes session 2 (the same number) and it stays fired."""
    paths = make_job("requirements-extraction")
    first = Supervisor(paths, run_settings(context_window=WINDOW, max_restarts=3), ScriptedProvider(clock=clock),
                       clock=clock)
    first.guardrails.feedback = FeedbackRunner([
        file_trigger(), FeedbackProviderConfig(DieInSession(2, after=3), FeedbackTrigger(every_n_calls=1))])
    with pytest.raises(Interrupted):
        first.run()
    assert fired_by_session(paths) == {1: 1, 2: 1}
    again = Supervisor(paths, run_settings(context_window=WINDOW, max_restarts=3), ScriptedProvider(clock=clock),
                       clock=clock)
    again.guardrails.feedback = FeedbackRunner([file_trigger()])
    result = again.run()
    assert result.sessions == 3, result.detail
    started = [(e.session, e.reason) for e in ev.read_events(paths.events) if isinstance(e, ev.SessionStarted)]
    assert (2, "resume") in started  # the kill was inside session 2, and the resume went on with it
    assert fired_by_session(paths) == {1: 1, 2: 1, 3: 1}


def test_a_record_from_before_triggers_were_per_session_keeps_what_fired_in_the_session_it_resumes() -> None:
    """An older run's record (no fired_session): what fired belongs to the session it resumes, not re-fired."""
    old = FeedbackState.model_validate({"tool_call_count": 3, "fired_file_triggers": ["Seen"]})
    assert old.fired_session is None
    runner = FeedbackRunner([file_trigger()])
    runner.restore(old)
    assert runner.session_started(4) is True  # recorded from now on, with the session it belongs to
    assert runner.state.fired_file_triggers == {"Seen"} and runner.state.fired_session == 4
    assert runner.session_started(4) is False  # the same session again (a resume): nothing changes
    assert runner.session_started(5) is True  # a restart: a new session, the trigger may fire once more
    assert runner.state.fired_file_triggers == set()
