"""The fold from events to what the console shows (no Textual involved)."""

from __future__ import annotations

from console.engine import events as ev
from console.tui.format import brief_args, duration, sparkline, tokens
from console.tui.state import ConsoleState
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
    assert any("awaits approval" in f.message for f in st.feedback)


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


def test_formatting_helpers():
    assert tokens(950) == "950" and tokens(1234) == "1.2k" and tokens(56_000) == "56k" and tokens(2_500_000) == "2.50M"
    assert duration(83) == "1:23" and duration(3723) == "1:02:03"
    assert brief_args('{"path": "notes/a.md"}') == "path=notes/a.md"
    assert brief_args('{"todos": [1, 2, 3]}') == "3 tasks" and brief_args("{bad") == "<invalid JSON>"
    assert sparkline([0, 50, 100], 100, 10) == "▁▅█"
