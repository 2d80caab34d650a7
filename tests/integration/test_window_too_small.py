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
