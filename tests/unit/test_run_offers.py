"""What a run's keys offer now, and why one does nothing: console.view.run_offers decides it from plain facts, with
no Textual (the run's screen only asks it)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

from console.engine import events as ev
from console.view.run_offers import RUN_ACTIONS, RunFacts, ended_refusal, offered, offers, phase_refused, resume_way
from console.view.state import ConsoleState

TS = datetime(2026, 1, 1, tzinfo=UTC)
PENDING = ev.RestartPending(ts=TS, seq=9, session=1, usage_pct=0.9, used_tokens=9_000, context_window=10_000)


PHASE_1 = ev.TodosChanged(ts=TS, seq=4, session=1, phase_name="Alpha", phase_number=1, total_phases=2, kind="phase",
                          items=[])


def running(**kw: object) -> ConsoleState:
    """A run in its first phase (a run with no todo list yet offers no checkpoint or rewind: below)."""
    st = ConsoleState("job")
    st.session = 1
    st.todos = PHASE_1
    for name, value in kw.items():
        setattr(st, name, value)
    return st


def offered_now(facts: RunFacts) -> set[str]:
    return {a for a in RUN_ACTIONS if offered(a, facts)}


def test_a_running_run_offers_pause_and_stop_not_resume_stop_now_or_the_restart_keys() -> None:
    facts = RunFacts(running(), attached=False, runner_pid=1)
    assert offered_now(facts) == {"checkpoint", "rewind", "pause", "stop", "toggle_pause"}
    assert offered("guardrails", facts)  # not a run command: always offered


def test_what_this_console_asked_for_turns_the_keys_at_once() -> None:
    st = running(paused=True)
    assert offered("resume", RunFacts(st, False, 1)) and not offered("pause", RunFacts(st, False, 1))
    st.requested["resume"] = "resuming"  # asked, not yet applied: p pauses again
    assert offered("pause", RunFacts(st, False, 1)) and not offered("resume", RunFacts(st, False, 1))
    st.requested["stop"] = "stopping after this turn"
    facts = RunFacts(st, False, 1)
    assert offered_now(facts) == {"stop_now", "toggle_pause"}  # ending: nothing but stop now (and p's one key)


def test_a_pending_restart_offers_approve_and_deny_only_while_a_process_runs_it() -> None:
    st = running(restart_pending=PENDING)
    assert {"approve", "deny"} <= offered_now(RunFacts(st, attached=True, runner_pid=4321))
    assert not {"approve", "deny"} & offered_now(RunFacts(st, attached=True, runner_pid=None))
    assert offers(RunFacts(st, True, 4321))[0] is True  # the footer is rebuilt when a restart starts waiting


def test_the_bootstrap_refuses_checkpoint_and_rewind_and_says_why() -> None:
    st = running(todos=ev.TodosChanged(ts=TS, seq=3, session=1, phase_name="bootstrap", phase_number=0,
                                       total_phases=0, kind="bootstrap", items=[]))
    facts = RunFacts(st, False, 1)
    assert not offered("checkpoint", facts) and not offered("rewind", facts) and offered("pause", facts)
    refusal = phase_refused("rewind", st)
    assert refusal is not None and refusal.title == "No rewind now" and "bootstrapping" in refusal.message
    assert phase_refused("rewind", running()) is None


def test_a_run_with_no_todo_list_yet_offers_no_checkpoint_or_rewind() -> None:
    """Found by a new operator's trial: a console on a run whose first list had not come yet (it starts, or it is
    another machine's and its events are on their way) offered the rewind; the engine's first list is the
    bootstrap's, which refuses it, and the dialog named no phase. Every view asks this one function."""
    for todos in (None, ev.TodosChanged(ts=TS, seq=1, session=1, phase_name="", phase_number=0, total_phases=0,
                                        kind="empty", items=[])):
        st = running(todos=todos)
        facts = RunFacts(st, False, 1)
        assert not offered("checkpoint", facts) and not offered("rewind", facts) and offered("pause", facts)
        refusal = phase_refused("rewind", st)
        assert refusal is not None and "no todo list yet" in refusal.message, refusal


def test_an_attached_run_no_process_runs_offers_resume_here_and_acknowledge_when_it_failed() -> None:
    st = running()
    st.mark_finished("failed", "the provider is down", None)
    facts = RunFacts(st, attached=True, runner_pid=None, startable=True, local=True)
    assert offered_now(facts) == {"resume", "acknowledge"}
    st.acknowledged = True
    assert offered_now(RunFacts(st, True, None, startable=True, local=True)) == {"resume"}
    # Another machine's run: started and acknowledged there, nothing here.
    assert offered_now(RunFacts(st, True, None)) == set()


def test_a_refusal_names_the_way_on() -> None:
    st = running()
    st.mark_finished("stopped", "", None)
    here = RunFacts(st, True, None, startable=True, local=True)
    refusal = ended_refusal("pause", here, resume_way(here, "k3f9q", "", "p"))
    assert refusal is not None and refusal.title == "No pause"
    assert refusal.message == ("The run has ended (stopped): nothing to pause. Resume it with p here (or "
                               "agent-console resume k3f9q)")
    there = RunFacts(st, True, None)
    assert resume_way(there, "k3f9q", "ssh box agent-console resume k3f9q", "p") == \
        "ssh box agent-console resume k3f9q"
    assert ended_refusal("pause", RunFacts(running(), False, 1), "") is None  # it runs: nothing to refuse
    done = running(outcome="completed")
    said = ended_refusal("stop", RunFacts(done, True, None), "")
    assert said is not None and said.message == "The job is complete: there is nothing to stop."
    starting = running()
    starting.requested["start"] = "starting again"
    said = ended_refusal("stop", RunFacts(starting, True, None), "")
    assert said is not None and said.title == "No stop yet"
    # A run whose process died unlogged: its state said as a clause ("The run is interrupted" / "is needs you").
    said = ended_refusal("pause", RunFacts(running(), True, None), "agent-console resume k3f9q")
    assert said is not None and said.message == ("The run was interrupted: its process is gone, nothing to pause. "
                                                 "Resume it with agent-console resume k3f9q")


def test_the_module_needs_no_textual() -> None:
    code = "import sys, console.view.run_offers; assert not [m for m in sys.modules if m.startswith('textual')]"
    subprocess.run([sys.executable, "-c", code], check=True)
