"""The console end to end: a whole run in it, attaching to a run elsewhere, and long runs."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

from console.engine import events as ev
from console.engine.control import RunLock
from console.tui.follow import QUICK_KEEP
from console.tui.launch import attach_console
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.quit import QuitScreen
from console.tui.widgets.conversation import MAX_ITEMS, TRIM_SLACK
from console.tui.widgets.todo_pane import TodoPane
from tests.tui.conftest import attach_app, drive, make_supervisor, run_app, settle, wait_for
from tests.tui.inprocess import run_console


def test_quickstart_completes_in_the_console_like_headless(make_job):
    sup = make_supervisor(make_job("quickstart"))
    seen: dict[str, object] = {}

    async def pilot_body(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: app.run_screen.run_finished, what="the run to finish")
        await settle(pilot, app)
        seen["status"] = app.state.status
        seen["phase"] = app.state.phase
        await pilot.press("shift+tab")  # 80x24: one pane at a time; the todo list is before the conversation
        await pilot.pause()
        seen["todo"] = app.main.query_one(TodoPane).plain_lines()
        seen["conversation"] = "\n".join(app.run_screen.conversation.plain_lines())
        seen["plan"] = app.main.query_one("#plan").text
        await pilot.press("q")

    code = run_console(sup, job_title="quickstart", keymap={}, headless=True, auto_pilot=pilot_body)
    assert code == 0
    assert seen["status"] == "completed" and seen["phase"] == "Job Completion"
    assert any("Call job_complete()" in line and "[x]" in line for line in seen["todo"]), seen["todo"]
    assert "job complete (confidence 0.85)" in seen["conversation"]
    assert "✓ COMPLETE" in seen["plan"]
    assert (sup.paths.root / "digest.md").exists()


def test_run_console_refuses_a_job_another_process_runs(make_job, monkeypatch):
    import pytest

    from console.engine.supervisor import JobBusy

    sup = make_supervisor(make_job("quickstart"))
    monkeypatch.setattr(RunLock, "holder", lambda self: 1)  # pid 1 holds it
    with pytest.raises(JobBusy):
        run_console(sup, keymap={}, headless=True)


def test_attach_rebuilds_a_finished_job_for_review(make_job):
    paths = make_job("quickstart")
    make_supervisor(paths).run()

    async def body(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: app.state.ended and app.bridge.pending == 0, what="the replay")
        await settle(pilot, app)
        assert app.state.status == "completed"
        assert app.state.turns_total == 45 and app.state.session == 1
        text = "\n".join(app.run_screen.conversation.plain_lines())
        assert "✔ job complete" in text and "▸ job_complete" in text
        assert app.run_screen.conversation.streaming is None  # the log has no deltas: whole messages only
        await pilot.press("c")  # not running: nothing is queued
        assert not list(paths.inbox.glob("*.json")) if paths.inbox.exists() else True
        await pilot.press("q")  # detach at once, no question
        assert not isinstance(app.screen, ConfirmScreen)

    code = attach_console(paths, keymap={}, headless=True, auto_pilot=body)
    assert code == 0


def test_attached_console_follows_a_live_run_and_commands_go_through_the_inbox(make_job):
    paths = make_job("quickstart")
    sup = make_supervisor(paths, gate_at=10)
    runner = threading.Thread(target=sup.run, daemon=True)
    app = attach_app(paths)

    async def body(pilot):
        runner.start()
        await wait_for(pilot, lambda: app.state.turn >= 10, what="the follower to see turn 10")
        await wait_for(pilot, lambda: app.main.query_one("#status").runner_pid is not None, what="the run lock")
        await pilot.press("p")
        sup.provider.gate.set()  # the engine reads its inbox at the next turn boundary
        await wait_for(pilot, lambda: app.state.paused, what="the pause, applied via the inbox")
        pause = [e for e in ev.read_events(paths.events) if isinstance(e, ev.OperatorCommand)
                 and e.command == "pause" and e.status == "applied"]
        assert pause and pause[0].source == "console"
        await pilot.press("p")
        await wait_for(pilot, lambda: app.state.ended, timeout=30, what="the run to finish")
        await pilot.press("q")

    drive(app, body)
    runner.join(10)
    assert app.return_code == 0 and not runner.is_alive()


def synthetic_log(path, messages: int) -> None:
    """A log of ``messages`` assistant messages, each with a tool call and its result."""
    t0 = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)
    seq = 0
    lines = []

    def add(kind: type[ev.EventBase], **fields):
        nonlocal seq
        seq += 1
        lines.append(kind(ts=t0 + timedelta(seconds=seq), seq=seq, session=1, **fields).model_dump_json())

    add(ev.SessionStarted, reason="new", provider="scripted", model="scripted-agent")
    for n in range(1, messages + 1):
        add(ev.TurnStarted, turn=n, prompt_tokens_est=1000 + n)
        add(ev.AssistantMessage, turn=n, text=f"Step **{n}**: reading chunk {n}.",
            tool_calls=[ev.ToolCallRecord(id=f"c{n}", name="read_file", arguments=json.dumps({"path": f"f{n}"}))])
        add(ev.ToolCalled, turn=n, call_id=f"c{n}", tool="read_file", arguments=json.dumps({"path": f"f{n}"}))
        add(ev.ToolResult, turn=n, call_id=f"c{n}", tool="read_file", ok=True, content="x" * 300)
        add(ev.TokenUsage, turn=n, input_tokens=1000 + n, output_tokens=20, context_window=64000,
            context_tokens=1000 + n)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_long_log_is_trimmed_in_the_view_but_counted_in_full(make_job):
    paths = make_job("quickstart")
    synthetic_log(paths.events, 3000)
    app = attach_app(paths)

    async def body(pilot):
        await wait_for(pilot, lambda: app.state.turns_total == 3000 and app.bridge.pending == 0, timeout=60)
        await settle(pilot, app)
        conv = app.run_screen.conversation
        # Replayed, the older part of the log is folded into the state only: the conversation gets the newest
        # messages (a long log's newest QUICK_KEEP: they are drawn first) and counts the others as not shown.
        assert conv.messages_seen < 6000 and conv.trimmed + conv.item_count >= 3000
        assert 2 * QUICK_KEEP <= conv.item_count <= MAX_ITEMS + TRIM_SLACK and conv.trimmed > 0
        assert conv.plain_lines()[0].startswith(f"⋯ {conv.trimmed:,} earlier messages")
        assert app.state.input_tokens == sum(1000 + n for n in range(1, 3001))
        assert conv.scroll_y == conv.max_scroll_y  # following the tail

    drive(app, body)


def test_the_conversation_follows_the_tail_until_the_operator_scrolls_up(make_job):
    paths = make_job("quickstart")
    synthetic_log(paths.events, 200)
    app = attach_app(paths)

    async def body(pilot):
        await wait_for(pilot, lambda: app.state.turns_total == 200 and app.bridge.pending == 0)
        await settle(pilot, app)
        conv = app.run_screen.conversation
        assert conv.scroll_y == conv.max_scroll_y > 0
        await pilot.press("pageup")
        held = conv.scroll_y
        assert held < conv.max_scroll_y
        more = [ev.Feedback(ts=datetime(2026, 1, 16, tzinfo=UTC), seq=10_000 + i, session=1, source="test",
                            message=f"note {i}") for i in range(20)]
        app.bridge.push_many(more)
        await settle(pilot, app)
        assert conv.scroll_y == held  # not yanked to the bottom while reading
        await pilot.press("end")
        await pilot.pause()
        assert conv.scroll_y == conv.max_scroll_y

    drive(app, body)


def test_masked_observations_and_restart_markers_are_marked(make_job):
    sup = make_supervisor(make_job("requirements-extraction"), context_window=10_000)
    app = run_app(sup)

    async def body(pilot):
        await wait_for(pilot, lambda: app.run_screen.run_finished, timeout=60)
        await settle(pilot, app)
        text = "\n".join(app.run_screen.conversation.plain_lines())
        assert "⊘ masked" in text and "⊘ masked the" in text
        assert "↻ session 2 started after a context restart" in text and "wind-down sent" in text
        assert app.state.session >= 2 and app.state.ended
        assert app.state.gauge.last_action

    drive(app, body)


def test_streamed_text_is_shown_before_the_message_is_complete(make_job):
    app = attach_app(make_job("quickstart"))
    t = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)

    async def body(pilot):
        conv = app.run_screen.conversation
        app.bridge.push_many([ev.SessionStarted(ts=t, seq=1, session=1),
                              ev.TextDelta(ts=t, seq=2, session=1, turn=1, text="Reading the "),
                              ev.TextDelta(ts=t, seq=3, session=1, turn=1, text="**notes** now")])
        await settle(pilot, app)
        await pilot.pause(0.2)  # the throttled re-render
        assert conv.streaming is not None and any("Reading the notes now" in ln for ln in conv.plain_lines())
        app.bridge.push(ev.AssistantMessage(ts=t, seq=4, session=1, turn=1, text="Reading the **notes** now."))
        await settle(pilot, app)
        assert conv.streaming is None and any("Reading the notes now." in ln for ln in conv.plain_lines())
        assert sum(1 for i in conv.items if type(i).__name__ == "AssistantItem") == 1

    drive(app, body)


def test_a_resumed_run_shows_its_history_first(make_job):
    paths = make_job("quickstart")
    first = make_supervisor(paths, max_turns=12).run()
    assert first.reason.value == "max_turns"
    sup = make_supervisor(paths)
    app = run_app(sup)

    async def body(pilot):
        await wait_for(pilot, lambda: app.run_screen.run_finished, what="the resumed run")
        await settle(pilot, app)
        text = "\n".join(app.run_screen.conversation.plain_lines())
        # A resume continues the same session (the same conversation), and says where it picks up.
        assert "session 1 started" in text and "session 1 resumed" in text and "after turn 12" in text
        assert text.index("session 1 started") < text.index("session 1 resumed")
        assert app.state.outcome == "completed" and app.state.session == 1

    drive(app, body)


def test_q_on_a_live_attached_run_asks_and_detach_leaves_it_running(make_job):
    """Quitting the console of a live run asks: detach (the run goes on, nothing sent) or stop it."""
    paths = make_job("quickstart")
    sup = make_supervisor(paths, gate_at=5)
    runner = threading.Thread(target=sup.run, daemon=True)
    app = attach_app(paths)

    async def body(pilot):
        runner.start()
        await wait_for(pilot, lambda: app.main.query_one("#status").runner_pid is not None, what="the run lock")
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="the question")
        await pilot.press("escape")  # stay
        await wait_for(pilot, lambda: not isinstance(app.screen, QuitScreen), what="the question to go")
        assert app.is_running
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="the question again")
        await pilot.press("d")  # detach

    drive(app, body)
    assert app.return_code == 0
    sent = [e for e in ev.read_events(paths.events) if isinstance(e, ev.OperatorCommand)]
    assert sent == [] and (not paths.inbox.exists() or not any(paths.inbox.iterdir()))  # detach sends nothing
    sup.provider.gate.set()
    sup.stop()
    sup.stop()
    runner.join(15)
    assert sup.result is not None and sup.result.reason.value == "user_shutdown"


def test_q_then_stop_the_run_stops_it_and_closes_once_it_has(make_job):
    paths = make_job("quickstart")
    sup = make_supervisor(paths, gate_at=5)
    runner = threading.Thread(target=sup.run, daemon=True)
    app = attach_app(paths)

    async def body(pilot):
        runner.start()
        await wait_for(pilot, lambda: app.main.query_one("#status").runner_pid is not None, what="the run lock")
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), what="the question")
        await pilot.press("s")
        await wait_for(pilot, lambda: app.run_screen.quit_requested, what="the stop to be sent")
        sup.provider.gate.set()
        await wait_for(pilot, lambda: not app.is_running, timeout=30, what="the console to close on the run's end")

    drive(app, body)
    runner.join(15)
    assert not runner.is_alive()
    assert sup.result is not None and sup.result.reason.value == "user_shutdown"
    stops = [e for e in ev.read_events(paths.events) if isinstance(e, ev.OperatorCommand) and e.command == "stop"
             and e.status == "applied"]
    assert stops and stops[0].source == "console"


def test_a_long_log_is_shown_newest_first_then_folded_exactly_once(make_job, monkeypatch):
    """Attaching to a long log fills the panes from its newest events first, then adopts the exact fold of the
    whole log: the totals are those of every event, each counted once, and what comes after is folded once."""
    from console.tui import follow
    from console.view.state import ConsoleState

    monkeypatch.setattr(follow, "QUICK_BYTES", 10_000)
    monkeypatch.setattr(follow, "DRAW_FIRST", 0.0)
    paths = make_job("quickstart")
    synthetic_log(paths.events, 400)
    expected = ConsoleState("x")
    expected.apply_all(list(ev.read_events(paths.events)))
    app = attach_app(paths)
    seen: list[int] = []

    async def body(pilot):
        await wait_for(pilot, lambda: app.run_screen.intake.folded_upto > 0, what="the exact fold")
        seen.append(app.run_screen.conversation.trimmed)
        with paths.events.open("a", encoding="utf-8") as fh:  # the run goes on: one more turn
            fh.write(ev.TokenUsage(ts=datetime(2026, 1, 15, 16, 0, tzinfo=UTC), seq=10**6, session=1, turn=401,
                                   input_tokens=7, output_tokens=1, context_window=64000).model_dump_json() + "\n")
        await wait_for(pilot, lambda: app.state.turns_total == expected.turns_total + 1, what="the new turn")
        await pilot.press("q")

    drive(app, body)
    st = app.state
    assert (st.input_tokens, st.output_tokens) == (expected.input_tokens + 7, expected.output_tokens + 1)
    assert st.tool_calls == expected.tool_calls and st.session == expected.session
    assert seen == [400 - follow.QUICK_KEEP]  # the older messages are counted as not shown, not lost
    assert app.run_screen.events_seen == expected.last_seq + 1


def test_an_attached_finished_run_says_read_only_and_explains_it(make_job):
    """The status line said "completed · review", and nothing said what "review" meant."""
    paths = make_job("quickstart")
    make_supervisor(paths).run()

    async def body(pilot):
        app = pilot.app
        await wait_for(pilot, lambda: app.state.ended and app.bridge.pending == 0, what="the replay")
        await settle(pilot, app)
        status = app.main.query_one("#status")
        line = status.last_plain
        assert "completed · read-only" in line and "review" not in line, line
        # Where the operator points at it: what it means.
        assert status.tooltip is not None and "no process runs this job now" in str(status.tooltip)
        await pilot.press("q")

    assert attach_console(paths, keymap={}, headless=True, auto_pilot=body) == 0
