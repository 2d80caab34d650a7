"""A window too small for a session's first prompt ends the run with the command that goes on: the window it
needs, which the run then completes with."""

from __future__ import annotations

import re

from console.engine import events as ev
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedProvider
from tests.conftest import run_settings


def test_a_window_too_small_says_the_window_that_goes_on_and_that_one_does(make_job, clock) -> None:
    paths = make_job("quickstart")
    failed = Supervisor(paths, run_settings(context_window=2_000), ScriptedProvider(clock=clock), clock=clock).run()
    assert failed.reason.value == "error"
    said = next(e.message for e in ev.read_events(paths.events) if isinstance(e, ev.ErrorEvent))
    assert said.startswith("context window too small: the first prompt of session 1 already needs ~")
    assert "of the prompt budget (a session restarts at 85%)" in said
    found = re.search(rf"agent-console resume {paths.run_id} --context-window (\d+)$", said)
    assert found is not None, said
    window = int(found.group(1))
    assert window > 2_000 and window % 1000 == 0
    done = Supervisor(paths, run_settings(context_window=window), ScriptedProvider(clock=clock), clock=clock).run()
    assert done.ok, done.detail


def test_a_restart_that_could_not_fit_is_not_made_nor_asked_for(make_job, clock, monkeypatch, tmp_path) -> None:
    """A window where the first session runs but the restart's session would start past the hard threshold: the
    run ends when the context fills, saying so, instead of asking the operator to approve a restart that ends the
    run in its first step. The estimate is the one that session would make: made anyway, it fails on it."""
    paths = make_job("quickstart")
    ended = Supervisor(paths, run_settings(context_window=3_600, auto_restart=False), ScriptedProvider(clock=clock),
                       clock=clock).run()
    events = list(ev.read_events(paths.events))
    said = next(e.message for e in events if isinstance(e, ev.ErrorEvent))
    assert ended.reason.value == "error" and ended.detail == said
    assert said.startswith("a restart would not help: context window too small: the first prompt of session 2 ")
    assert not [e for e in events if isinstance(e, ev.RestartPending | ev.NeedsOperator)]  # nobody was asked
    assert {e.session for e in events} == {1}
    needs = re.search(r"needs ~([\d,]+) tokens", said)
    assert needs is not None
    # Made anyway (the check taken out), the restart's session fails at its start on the same estimate.
    from tests.conftest import job_factory

    other = job_factory(tmp_path / "other")("quickstart")
    monkeypatch.setattr(Supervisor, "_restart_too_small", lambda self, result: None)
    made = Supervisor(other, run_settings(context_window=3_600), ScriptedProvider(clock=clock), clock=clock).run()
    failed = next(e.message for e in ev.read_events(other.events) if isinstance(e, ev.ErrorEvent))
    assert made.reason.value == "error"
    assert failed.startswith(f"context window too small: the first prompt of session 2 already needs ~{needs[1]} ")
