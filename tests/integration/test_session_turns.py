"""A session's end counts its turns in all: a session resumed in a later process (after a stop, max_turns, a kill)
says the turns it had before too, as its last turn's number does."""

from __future__ import annotations

from console.engine import events as ev
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedProvider
from tests.conftest import run_settings


def test_a_resumed_session_ends_with_all_its_turns(make_job, clock) -> None:
    paths = make_job("quickstart")
    first = Supervisor(paths, run_settings(max_turns=12), ScriptedProvider(clock=clock), clock=clock).run()
    assert first.reason.value == "max_turns"
    done = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock).run()
    assert done.ok
    events = list(ev.read_events(paths.events))
    ends = [e for e in events if isinstance(e, ev.SessionEnded)]
    assert len(ends) == 2 and ends[0].turns == 12  # the first process: max_turns
    assert {e.session for e in ends} == {1}  # one session, resumed: its end says every turn it had
    replies = {e.turn for e in events if isinstance(e, ev.AssistantMessage)}
    assert ends[-1].turns == len(replies) == max(replies) > 12
