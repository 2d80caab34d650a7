"""The context engine on a real long job: masking, wind-down, restarts, approvals, operator commands."""

from __future__ import annotations

import threading

import pytest

from console.engine import events as ev
from console.engine.context.carryover import split_pairs
from console.engine.control import write_inbox
from console.engine.loop import ShutdownReason
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedProvider
from tests.conftest import Recording, run_settings

WINDOW = 10_000


def test_long_job_in_a_small_window_completes_after_restarts(make_job, clock) -> None:
    paths = make_job("requirements-extraction")
    provider = Recording(clock=clock)
    sup = Supervisor(paths, run_settings(context_window=WINDOW, max_restarts=10), provider, clock=clock)
    result = sup.run()
    assert result.ok, result.detail
    assert result.restarts >= 3
    evs = list(ev.read_events(paths.events))
    types = [e.type for e in evs]
    for t in ("context_masked", "wind_down", "restart_approved", "context_compacted"):
        assert t in types, t
    starts = [e for e in evs if isinstance(e, ev.SessionStarted)]
    assert [s.session for s in starts] == list(range(1, len(starts) + 1))
    assert all(s.reason == "restart" and s.carryover_messages > 0 for s in starts[1:])
    # protected layers in every prompt, per the log and per the requests themselves
    turns = [e for e in evs if isinstance(e, ev.TurnStarted)]
    assert turns and all({"system_prompt", "todo_list", "plan", "tools"} <= set(t.layers) for t in turns)
    assert all("ACTIVE TODO LIST" in r.protected for r in provider.requests)
    # the window is never exceeded and no request ever has a tool call without its result
    usage = [e for e in evs if isinstance(e, ev.TokenUsage)]
    # prompt + the reply it allows always fit the window
    assert max(u.input_tokens for u in usage) + WINDOW // 8 <= WINDOW
    assert all(split_pairs(r.messages) == 0 for r in provider.requests)
    # the restart marker opens every later session
    markers = [r for r in provider.requests if any(m.meta.get("kind") == "restart_marker" for m in r.messages)]
    assert markers and "Session restarted. Session #2." in next(
        m.content for m in markers[0].messages if m.meta.get("kind") == "restart_marker")
    # every requirement of the document was still extracted
    assert (paths.root / "requirements.md").read_text().count("\n- ") > 200


def test_system_prompt_is_reread_at_each_session(make_job, clock) -> None:
    paths = make_job("requirements-extraction")
    provider = Recording(clock=clock)
    sup = Supervisor(paths, run_settings(context_window=WINDOW), provider, clock=clock)

    def edit_prompt(e: ev.EventBase) -> None:
        if isinstance(e, ev.WindDown):
            paths.system_prompt.write_text(f"CUSTOM PROMPT v{e.seq}\nFocus on the todo list.\n")

    sup.subscribe(edit_prompt)
    assert sup.run().ok
    systems = [r.system for r in provider.requests]
    assert systems[0].startswith("You are an autonomous agent")
    assert any(s.startswith("CUSTOM PROMPT") for s in systems)
    assert any("This is session #2." in s for s in systems)


def test_max_restarts_ends_the_run_with_a_reason(make_job, clock) -> None:
    paths = make_job("requirements-extraction")
    sup = Supervisor(paths, run_settings(context_window=WINDOW, max_restarts=1), ScriptedProvider(clock=clock),
                     clock=clock)
    result = sup.run()
    assert result.reason is ShutdownReason.ERROR and "max_restarts (1) reached" in result.detail


def _run_in_thread(sup: Supervisor):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("result", sup.run()), daemon=True)
    t.start()
    return t, box


def _waiter(sup: Supervisor, event_type: str) -> threading.Event:
    hit = threading.Event()
    sup.subscribe(lambda e: hit.set() if e.type == event_type else None)
    return hit


def test_restart_waits_for_approval_and_deny_ends_cleanly(make_job, clock) -> None:
    paths = make_job("requirements-extraction")
    sup = Supervisor(paths, run_settings(context_window=WINDOW, auto_restart=False), ScriptedProvider(clock=clock),
                     clock=clock)
    pending = _waiter(sup, "restart_pending")
    started = []
    sup.subscribe(lambda e: started.append(e.session) if e.type == "session_started" else None)
    t, box = _run_in_thread(sup)
    assert pending.wait(30)
    assert started == [1]  # nothing moves until the operator decides
    pending.clear()
    sup.approve_restart()
    assert pending.wait(30)  # session 2 ran and filled up in its turn
    assert started == [1, 2]
    write_inbox(paths, "deny_restart")  # from "another shell"
    t.join(30)
    result = box["result"]
    assert result.reason is ShutdownReason.USER_SHUTDOWN and result.detail == "restart denied by the operator"
    evs = list(ev.read_events(paths.events))
    assert [e.by for e in evs if isinstance(e, ev.RestartApproved)] == ["operator"]
    assert [e.by for e in evs if isinstance(e, ev.RestartDenied)] == ["operator"]
    cmds = [(e.command, e.source, e.status) for e in evs if isinstance(e, ev.OperatorCommand)]
    assert ("approve_restart", "console", "applied") in cmds and ("deny_restart", "cli", "applied") in cmds


def test_a_denied_restart_goes_on_where_it_was_when_resumed(make_job, clock) -> None:
    """`deny --help` says `resume ID` goes on with the run later (it said `run --in-place`): resume starts the
    run's folder again with its settings, and its engine picks the run up where the denial left it."""
    paths = make_job("requirements-extraction")
    sup = Supervisor(paths, run_settings(context_window=WINDOW, auto_restart=False), ScriptedProvider(clock=clock),
                     clock=clock)
    pending = _waiter(sup, "restart_pending")
    t, box = _run_in_thread(sup)
    assert pending.wait(30)
    write_inbox(paths, "deny_restart")
    t.join(30)
    assert box["result"].reason is ShutdownReason.USER_SHUTDOWN
    again = Supervisor(paths, run_settings(context_window=WINDOW), ScriptedProvider(clock=clock), clock=clock)
    assert again.run().ok
    reasons = [e.reason for e in ev.read_events(paths.events) if isinstance(e, ev.SessionStarted)]
    assert reasons[0] == "new" and "resume" in reasons[1:], reasons


def _on(sup: Supervisor, predicate, action) -> None:
    fired = []

    def hook(e: ev.EventBase) -> None:
        if not fired and predicate(e):
            fired.append(e)
            action()

    sup.subscribe(hook)


def test_operator_checkpoint_carries_unfinished_todos(make_job, clock) -> None:
    paths = make_job("quickstart")
    sup = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock)
    _on(sup, lambda e: isinstance(e, ev.TodosChanged) and e.kind == "phase" and sum(i.done for i in e.items) == 2,
        lambda: sup.force_checkpoint("re-check the notes folder"))
    assert sup.run().ok
    evs = list(ev.read_events(paths.events))
    cp = [e for e in evs if isinstance(e, ev.PhaseTransition) and e.kind == "checkpoint"]
    assert [e.stage for e in cp] == ["started", "completed"]
    assert (paths.archive / cp[0].archive).exists()
    after = next(e for e in evs
                 if isinstance(e, ev.TodosChanged) and e.seq > cp[1].seq - 3 and e.reason == "todo_write")
    assert [i.text for i in after.items][:1] == ["Read notes/2026-03-09-design-review.md"]
    assert any(isinstance(e, ev.OperatorCommand) and e.command == "checkpoint" and e.status == "applied" for e in evs)


def test_operator_rewind_replans_with_the_issue(make_job, clock) -> None:
    paths = make_job("quickstart")
    sup = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock)
    _on(sup, lambda e: isinstance(e, ev.TodosChanged) and e.kind == "phase" and sum(i.done for i in e.items) == 1,
        lambda: sup.rewind("the digest must be one paragraph per meeting"))
    assert sup.run().ok
    archives = sorted(p.name for p in paths.archive.glob("*rewind*.json"))
    assert archives == ["phase-01-review-inputs-rewind.json"]
    assert "(operator) the digest must be one paragraph" in (paths.archive / archives[0]).read_text()
    mem = (paths.state / "memory.json").read_text()
    assert "Failed: (operator) the digest" in mem


def test_stop_and_pause_act_at_once_while_the_model_is_asked(make_job, clock) -> None:
    # A pause or a stop while the model is asked acts within a tick: the reply in progress is dropped
    # (nothing of it was recorded) and the paused turn is asked again, under the same number.
    paths = make_job("quickstart")
    sup = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock)
    turns = []
    sup.subscribe(lambda e: turns.append(e.turn) if isinstance(e, ev.TurnStarted) else None)

    def pause_then_resume_later() -> None:
        sup.pause()
        threading.Timer(0.3, sup.resume).start()

    _on(sup, lambda e: isinstance(e, ev.TurnStarted) and e.turn == 3, pause_then_resume_later)
    _on(sup, lambda e: isinstance(e, ev.TurnStarted) and e.turn == 6, sup.stop)
    result = sup.run()
    assert result.reason is ShutdownReason.USER_SHUTDOWN
    assert turns == [1, 2, 3, 3, 4, 5, 6]  # turn 3 asked again after the resume; no turn after the stop
    evs = list(ev.read_events(paths.events))
    replies = [e.turn for e in evs if isinstance(e, ev.AssistantMessage)]
    assert replies == [1, 2, 3, 4, 5]  # one reply per turn: the dropped attempts left nothing
    statuses = [(e.command, e.status) for e in evs if isinstance(e, ev.OperatorCommand)]
    assert ("pause", "applied") in statuses and ("resume", "applied") in statuses and ("stop", "applied") in statuses
    stop = next(e for e in evs if isinstance(e, ev.OperatorCommand) and e.command == "stop" and e.status == "applied")
    assert "stopping now" in stop.detail


def test_second_stop_aborts_the_turn_in_flight(make_job, clock) -> None:
    paths = make_job("quickstart")
    sup = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock)

    def two_stops() -> None:
        sup.stop()
        sup.stop()

    _on(sup, lambda e: isinstance(e, ev.TextDelta) and e.turn == 4, two_stops)
    result = sup.run()
    assert result.reason is ShutdownReason.USER_SHUTDOWN and "during a turn" in result.detail
    evs = list(ev.read_events(paths.events))
    assert not any(isinstance(e, ev.AssistantMessage) and e.turn == 4 for e in evs)


@pytest.mark.parametrize("command", ["approve_restart", "deny_restart", "resume"])
def test_commands_that_do_not_apply_are_rejected(make_job, clock, command) -> None:
    paths = make_job("quickstart")
    sup = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock)
    _on(sup, lambda e: isinstance(e, ev.TurnStarted) and e.turn == 2, lambda: sup.command(command))
    assert sup.run().ok
    (rej,) = [e for e in ev.read_events(paths.events) if isinstance(e, ev.OperatorCommand) and e.status == "rejected"]
    assert rej.command == command and rej.detail in ("no restart is pending", "not paused")


def test_invalid_inbox_file_is_reported_not_applied(make_job, clock) -> None:
    paths = make_job("quickstart")
    paths.inbox.mkdir(parents=True)
    (paths.inbox / "0001-bad.json").write_text('{"command": "explode"}')
    sup = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock)
    assert sup.run().ok
    (rej,) = [e for e in ev.read_events(paths.events) if isinstance(e, ev.OperatorCommand)]
    assert rej.command == "invalid" and rej.status == "rejected" and "0001-bad.json" in rej.detail
    assert (paths.inbox / "0001-bad.rejected").exists()


def test_llm_summary_option_adds_the_models_summary_to_the_facts(make_job, clock) -> None:
    paths = make_job("quickstart")
    provider = Recording(clock=clock)
    sup = Supervisor(paths, run_settings(summary="llm"), provider, clock=clock)
    assert sup.run().ok
    summaries = [r for r in provider.requests if r.system.startswith("SUMMARIZE")]
    assert len(summaries) == 3 and all(not r.tools for r in summaries)
    firsts = [r.messages[0].content for r in provider.requests if r.messages and r.messages[0].meta.get("kind") ==
              "summary"]
    assert any("written by the model:\nIn this stretch the agent made" in t for t in firsts)
    assert all(t.startswith("PREVIOUS SUMMARY") for t in firsts)  # the facts stay first


def test_a_stop_while_a_restart_waits_ends_the_run_as_a_stop_not_a_denial(make_job, clock) -> None:
    paths = make_job("requirements-extraction")
    sup = Supervisor(paths, run_settings(context_window=WINDOW, auto_restart=False), ScriptedProvider(clock=clock),
                     clock=clock)
    pending = _waiter(sup, "restart_pending")
    t, box = _run_in_thread(sup)
    assert pending.wait(30)
    write_inbox(paths, "stop")  # `agent-console stop` from another shell
    t.join(30)
    result = box["result"]
    assert result.reason is ShutdownReason.USER_SHUTDOWN
    assert result.detail == "stopped by the operator while a context restart waited for approval"
    assert [e.by for e in ev.read_events(paths.events) if isinstance(e, ev.RestartDenied)] == ["operator's stop"]
