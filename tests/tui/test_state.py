"""The fold from events to what the console shows (no Textual involved)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from console.engine import events as ev
from console.view import present
from console.view.format import duration, elapsed, sparkline, tokens
from console.view.state import ConsoleState
from tests.tui.conftest import make_supervisor


def fold(paths) -> ConsoleState:
    st = ConsoleState("job")
    st.apply_all(list(ev.read_events(paths.events)))
    return st


def test_a_completed_quickstart(make_job):
    paths = make_job("quickstart")
    make_supervisor(paths).run()
    st = fold(paths)
    assert st.status == "completed" and st.phase == "Job Completion" and st.ended
    assert st.turns_total == 45 and st.input_tokens > st.cached_tokens > 0
    assert st.provider == "scripted" and st.model == "scripted-agent"
    assert [f.seq for f in st.feedback] == sorted(f.seq for f in st.feedback)  # newest last
    assert st.feedback[-1].severity == "success" and st.feedback[-1].source == "job"
    assert st.run_started is not None and st.ended_at is not None and st.ended_at > st.run_started


def test_pressure_restarts_and_approval(make_job):
    paths = make_job("requirements-extraction")
    sup = make_supervisor(paths, context_window=10_000, auto_restart=False)
    sup.subscribe(lambda e: sup.deny_restart() if isinstance(e, ev.RestartPending) else None)
    sup.run()
    st = fold(paths)
    assert st.masked_total > 0 and len(st.gauge.trend) > 5
    assert st.gauge.window == 10_000 and st.gauge.soft == 0.7 and st.gauge.hard == 0.85
    assert st.outcome == "stopped" and st.restart_pending is None
    sources = {f.source for f in st.feedback}
    assert {"context", "operator · console"} <= sources
    assert any(f.kind == "restart-pending" and f.message.endswith("awaiting approval") for f in st.feedback)


def test_pause_and_requested_commands():
    from datetime import UTC, datetime

    t = datetime(2026, 1, 1, tzinfo=UTC)
    st = ConsoleState("job")
    st.apply(ev.SessionStarted(ts=t, seq=1, session=1))
    st.requested["pause"] = "pausing"
    st.apply(ev.OperatorCommand(ts=t, seq=2, session=1, command="pause", source="console", status="received"))
    assert st.requested and st.status == "running"
    st.apply(ev.OperatorCommand(ts=t, seq=3, session=1, command="pause", source="console", status="applied"))
    assert not st.requested and st.status == "paused"
    st.apply(ev.OperatorCommand(ts=t, seq=4, session=1, command="resume", source="cli", status="applied"))
    assert st.status == "running"


def test_a_stop_while_a_restart_waits_is_not_told_as_a_denial():
    from datetime import UTC, datetime

    t = datetime(2026, 1, 1, tzinfo=UTC)
    for by, said in (("operator", "restart denied by the operator"),
                     ("operator's stop", "stopped by the operator while a context restart waited for approval")):
        st = ConsoleState("job")
        st.apply(ev.SessionStarted(ts=t, seq=1, session=1))
        st.apply(ev.RestartDenied(ts=t, seq=2, session=1, by=by))
        st.apply(ev.RunEnded(ts=t, seq=3, session=1, reason="user_shutdown", outcome="incomplete", detail=said))
        assert (st.outcome, st.outcome_detail) == ("stopped", said)


def test_an_mcp_servers_sampling_is_spend_not_a_turn():
    t = datetime(2026, 1, 1, tzinfo=UTC)
    st = ConsoleState("job")
    st.apply(ev.SessionStarted(ts=t, seq=1, session=1))
    st.apply(ev.TokenUsage(ts=t, seq=2, session=1, turn=3, input_tokens=1000, output_tokens=50, context_tokens=1050,
                           context_window=8000, job_cost_usd=0.5))
    before = (st.turn, st.turns_total, st.gauge.used, list(st.gauge.trend))
    st.apply(ev.TokenUsage(ts=t, seq=3, session=1, turn=0, input_tokens=40, output_tokens=5, job_cost_usd=0.6,
                           source="mcp_sampling", mcp_server="muse", call_id="c1"))
    # Its tokens and cost are the run's; the turn, the context gauge and its trend are the agent's alone.
    assert (st.turn, st.turns_total, st.gauge.used, list(st.gauge.trend)) == before
    assert (st.input_tokens, st.output_tokens, st.job_cost) == (1040, 55, 0.6)


def test_formatting_helpers():
    assert tokens(950) == "950" and tokens(1234) == "1.2k" and tokens(56_000) == "56k" and tokens(2_500_000) == "2.50M"
    assert tokens is present.tokens  # one formatter for every view
    assert duration(83) == "1:23" and duration(3723) == "1:02:03"
    assert sparkline([0, 50, 100], 100, 10) == "▁▅█"


T0 = datetime(2026, 1, 15, 9, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_elapsed_counts_the_active_time_across_resumes():
    """Run 10 minutes, stopped; resumed in place a day later, 5 more minutes: 15 minutes, not a day."""
    st = ConsoleState("job")
    st.apply(ev.SessionStarted(ts=at(0), seq=1, session=1, reason="new"))
    st.apply(ev.TurnStarted(ts=at(10), seq=2, session=1, turn=1))
    st.apply(ev.SessionEnded(ts=at(10), seq=3, session=1, reason="user_shutdown"))
    st.apply(ev.RunEnded(ts=at(10), seq=4, session=1, reason="user_shutdown", sessions=1))
    assert st.ended and elapsed(st.run_started, st.ended_at) == "10:00"
    # A day later: the state files were repaired first (that belongs to the new process, not the old one).
    st.apply(ev.StateRecovered(ts=at(24 * 60), seq=5, session=1, file="todos.json", problem="torn", action="rebuilt"))
    st.apply(ev.SessionStarted(ts=at(24 * 60), seq=6, session=1, reason="resume", detail="after turn 1"))
    assert not st.ended and st.first_started == at(0)
    now = at(24 * 60 + 5)
    assert elapsed(st.run_started, now) == "15:00" and st.active_seconds(now) == 15 * 60
    # A context restart inside the process is no new start; the end stops the count.
    st.apply(ev.SessionStarted(ts=at(24 * 60 + 6), seq=7, session=2, reason="restart"))
    st.apply(ev.JobCompleted(ts=at(24 * 60 + 8), seq=8, session=2, summary="done", confidence=0.9))
    assert st.ended and elapsed(st.run_started, st.ended_at) == "18:00"
    assert st.active_seconds(at(48 * 60)) == 18 * 60


def test_elapsed_after_a_kill_counts_up_to_the_last_event_of_the_killed_process():
    st = ConsoleState("job")
    st.apply(ev.SessionStarted(ts=at(0), seq=1, session=1, reason="new"))
    st.apply(ev.TokenUsage(ts=at(3), seq=2, session=1, turn=1, input_tokens=10, output_tokens=1))
    # kill -9: no session_ended, no run_ended; resumed an hour later.
    st.apply(ev.SessionStarted(ts=at(63), seq=3, session=1, reason="resume"))
    assert st.active_seconds(at(64)) == 4 * 60


def test_the_last_event_is_the_newest_one_worth_a_fleet_row():
    st = ConsoleState("job")
    assert st.last_event is None
    st.apply(ev.SessionStarted(ts=at(0), seq=1, session=1, reason="new", provider="scripted", model="m"))
    assert present.brief(st.last_event) == "● session 1 started (scripted/m)"
    st.apply(ev.ToolDenied(ts=at(1), seq=2, session=1, turn=1, call_id="c1", tool="write_file", policy="rbw",
                           reason="read it first"))
    # A call and an ordinary result are what the agent does all the time: they do not replace it.
    st.apply(ev.ToolCalled(ts=at(2), seq=3, session=1, turn=2, call_id="c2", tool="read_file", arguments="{}"))
    st.apply(ev.ToolResult(ts=at(2), seq=4, session=1, turn=2, call_id="c2", tool="read_file", ok=True, content=""))
    assert st.last_event is not None and st.last_event.seq == 2
    assert present.brief(st.last_event, 30) == "⊗ denied write_file by rbw: r…"  # 30 characters
    st.apply(ev.TodosChanged(ts=at(3), seq=5, session=1, phase_name="P", phase_number=1, total_phases=2,
                             kind="phase", reason="todo_complete",
                             items=[ev.TodoItemRecord(text="Read a", done=True),
                                    ev.TodoItemRecord(text="Read b", done=False)]))
    assert present.brief(st.last_event) == "✓ 1/2 Read a"


def test_every_notice_is_in_the_shared_words():
    """The feedback pane's one-line notices are console.view.present's lines, icon included, nothing reworded."""
    from tests.tui.guardrail_events import spent_run

    log = spent_run()
    st = ConsoleState("job")
    st.apply_all(log.events)
    by_seq = {e.seq: e for e in log.events}
    notices = [f for f in st.feedback if f.kind != "feedback"]
    assert notices
    for item in notices:
        p = present.describe(by_seq[item.seq])
        assert p is not None and (item.message, item.icon, item.severity) == (p.line, p.icon, p.severity)
