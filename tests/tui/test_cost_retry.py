"""Cost, model retries, reasoning text, discarded commands and the window's source, in both views: the fold, the
status line (80, 120, 200 columns), the conversation, the token-pressure pane, the guardrails view, the headless
log, and an attached console rebuilding them from events.jsonl."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from textual.content import Content

from console.engine import events as ev
from console.headless import HeadlessLog
from console.tui.screens.guardrails import cost_line, plain_text
from console.tui.widgets.gauge import ContextGauge
from console.tui.widgets.status import StatusLine, fit
from console.view import present
from console.view.state import ConsoleState
from tests.tui.conftest import FROZEN_NOW, attach_app, drive, settle, wait_for
from tests.tui.guardrail_events import Log, guarded_run
from tests.tui.test_guardrails import fed_app, flat

HAS_COST_STATUS = "budget_usd" in ev.GuardrailsStatus.model_fields


def fold(events: list[ev.EventBase]) -> ConsoleState:
    st = ConsoleState("job")
    st.apply_all(events)
    return st


def lines_of(events: list[ev.EventBase]) -> list[str]:
    out = io.StringIO()
    log = HeadlessLog(out)
    for e in events:
        log(e)
    return out.getvalue().splitlines()


def retry_run(priced: bool = True) -> Log:
    """Turn 7 streams some thinking and half a reply, is rate limited twice, then answers in full."""
    log = Log()
    log.add(ev.SessionStarted, reason="new", provider="anthropic", model="claude-sonnet-4-5",
            context_window=200_000, context_window_source="registry: claude-sonnet-4-5", priced=priced)
    log.add(ev.TurnStarted, turn=6, prompt_tokens_est=3000)
    log.add(ev.AssistantMessage, turn=6, text="Listing the files first.",
            reasoning="The instructions mention a notes folder; I should see what is in it before planning.",
            tool_calls=[ev.ToolCallRecord(id="c1", name="list_files", arguments=json.dumps({"path": "."}))])
    log.add(ev.ToolCalled, turn=6, call_id="c1", tool="list_files", arguments=json.dumps({"path": "."}))
    log.add(ev.ToolResult, turn=6, call_id="c1", tool="list_files", ok=True, content="notes/\ninstructions.md")
    log.add(ev.TokenUsage, turn=6, input_tokens=3000, output_tokens=80, context_window=200_000,
            context_tokens=3200, prompt_budget=180_000, cost_usd=0.0102 if priced else None,
            job_cost_usd=0.4117 if priced else None)
    log.add(ev.TurnStarted, turn=7, prompt_tokens_est=3200)
    log.add(ev.TextDelta, turn=7, text="The notes name three ", reasoning=True)
    log.add(ev.TextDelta, turn=7, text="HALF A REPLY that is dropped")
    log.add(ev.ModelRetry, turn=7, attempt=2, delay_s=8.0, cause="rate limited", message="429 Too Many Requests",
            waited_s=8.0, max_wait_s=600.0, discarded_chars=28)
    log.add(ev.ModelRetry, turn=7, attempt=3, delay_s=32.0, cause="rate limited", message="429 Too Many Requests",
            waited_s=40.0, max_wait_s=600.0, at=290)  # 10 s before the console's frozen clock: 22 s left
    return log


def answered(log: Log) -> Log:
    log.add(ev.TextDelta, turn=7, text="The notes name three owners.", reasoning=True, at=330)
    log.add(ev.TextDelta, turn=7, text="Reading the kickoff notes.", at=331)
    log.add(ev.AssistantMessage, turn=7, text="Reading the kickoff notes.", reasoning="The notes name three owners.",
            tool_calls=[ev.ToolCallRecord(id="c2", name="read_file",
                                          arguments=json.dumps({"path": "notes/kickoff.md"}))], at=332)
    log.add(ev.TokenUsage, turn=7, input_tokens=3300, output_tokens=120, context_window=200_000,
            context_tokens=3500, prompt_budget=180_000, cost_usd=0.0100, job_cost_usd=0.4217, at=333)
    return log


# -- wording ------------------------------------------------------------------------------------------------------
def test_the_shared_wording():
    log = retry_run()
    first, second = (e for e in log.events if isinstance(e, ev.ModelRetry))
    assert present.retry_text(first) == "rate limited; retrying in 8 s, attempt 2"  # the first wait says no more
    assert present.retry_text(second) == "rate limited; retrying in 32 s, attempt 3 (waited 40 s of max 600 s)"
    assert present.retry_text(second, message=80).endswith("(waited 40 s of max 600 s): 429 Too Many Requests")
    assert present.retry_badge(second, 21.2) == "waiting: rate limited, retry in 22 s"
    assert present.retry_badge(second, None) == "waiting: rate limited, retry in 32 s"
    assert present.retry_badge(second, -1) == "retrying: attempt 3"
    stop = ev.OperatorCommand(ts=FROZEN_NOW, seq=1, session=1, command="stop", source="cli", status="discarded")
    assert present.discarded_text(stop) == "discarded stop from an earlier run"
    assert present.unpriced_text("my-model\n") == ("no price known for my-model\\n: costs are not shown; add it under "
                                                   "[prices] in the config (see docs/operators-guide.md)")
    assert present.window_text(200_000, "registry: claude-sonnet-4-5") == "window 200k (registry: claude-sonnet-4-5)"
    assert present.window_text(1_000_000, "job.toml") == "window 1M (job.toml)"
    assert present.window_text(131_072, "") == "window 131k" and present.window_text(0, "default") == ""
    assert present.cost(None) == "" and present.cost(0.4217) == "$0.42" and present.cost(0.0042) == "$0.0042"


# -- the fold -----------------------------------------------------------------------------------------------------
def test_the_fold_waits_while_a_retry_waits_and_goes_on_with_the_turn():
    log = retry_run()
    st = fold(log.events)
    assert st.status == "waiting" and st.retry is not None and st.retry.attempt == 3
    assert st.job_cost == 0.4117 and st.priced is True
    assert (st.gauge.window, st.gauge.window_source) == (200_000, "registry: claude-sonnet-4-5")
    # A reasoning delta of the retried call is an answer too: the wait is over.
    assert st.apply(ev.TextDelta(ts=FROZEN_NOW, seq=99, session=1, turn=7, text="x", reasoning=True)) == {"status"}
    assert st.retry is None and st.status == "running"
    st = fold(answered(retry_run()).events)
    assert st.retry is None and st.status == "running" and st.job_cost == 0.4217
    # A pause while waiting: paused says more than waiting; the turn asked again ends the wait.
    st = fold(retry_run().events)
    st.apply(ev.OperatorCommand(ts=FROZEN_NOW, seq=50, session=1, command="pause", status="applied"))
    assert st.status == "paused" and st.retry is not None
    st.apply(ev.OperatorCommand(ts=FROZEN_NOW, seq=51, session=1, command="resume", status="applied"))
    assert st.status == "waiting"
    st.apply(ev.TurnStarted(ts=FROZEN_NOW, seq=52, session=1, turn=7))
    assert st.status == "running"
    # The session ends while waiting (a stop): nothing waits any more.
    st = fold(retry_run().events)
    st.apply(ev.SessionEnded(ts=FROZEN_NOW, seq=60, session=1, reason="user_shutdown"))
    assert st.retry is None and st.status == "stopped"


def test_no_price_is_said_once_and_cost_is_left_out():
    log = retry_run(priced=False)
    log.add(ev.SessionStarted, reason="restart", provider="anthropic", model="claude-sonnet-4-5", priced=False,
            context_window=200_000, context_window_source="registry: claude-sonnet-4-5")
    st = fold(log.events)
    told = [f for f in st.feedback if f.source == "cost"]
    assert [f.message for f in told] == [present.unpriced_text("claude-sonnet-4-5")]
    assert st.priced is False and st.job_cost is None
    status = StatusLine(st, lambda: FROZEN_NOW)
    plain = fit(status.parts(), 200).plain
    assert "$" not in plain and "n/a" not in plain and "cost" not in plain
    # A log written before prices were known says nothing about them: nothing is said either.
    old = Log()
    old.events = [ev.SessionStarted.model_validate_json(
        '{"type": "session_started", "ts": "2026-01-15T14:00:00Z", "seq": 1, "session": 1, "reason": "new"}')]
    st = fold(old.events)
    assert st.priced is None and not st.feedback


def test_a_discarded_command_is_one_line_and_does_not_answer_this_consoles_request():
    st = fold(retry_run().events)
    st.requested["stop"] = "stopping after this turn"
    st.apply(ev.OperatorCommand(ts=FROZEN_NOW, seq=70, session=1, command="stop", source="inbox",
                                status="discarded"))
    assert st.feedback[-1].message == "discarded stop from an earlier run"
    assert st.requested == {"stop": "stopping after this turn"} and not st.stopping


def test_a_cost_budget_spent_is_said_in_words():
    log = retry_run()
    # Built without validation: the event's budget field learns "cost" in events.py.
    log.events.append(ev.BudgetExhausted.model_construct(ts=FROZEN_NOW, seq=80, session=1, budget="cost", limit=5.0,
                                                         used=5.01, detail="", type="budget_exhausted", v=1))
    st = fold(log.events)
    assert st.feedback[-1].message == "money budget spent ($5.01 of $5.00); the run pauses and asks its operator"


# -- the status line ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("width", [40, 78, 118, 198])  # the line at 80, 120 and 200 columns (less its padding)
def test_the_status_line_keeps_run_state_phase_context_and_cost_first_and_never_overflows(width):
    log = guarded_run()
    log.events.append(ev.TodosChanged(ts=FROZEN_NOW, seq=len(log.events) + 1, session=1, kind="phase",
                                      phase_name="Produce Deliverables", phase_number=2, total_phases=2,
                                      items=[ev.TodoItemRecord(text="Write digest.md", done=False)]))
    st = fold(log.events)
    st.job_title = "quickstart-20260115-141234"  # a run folder's name
    status = StatusLine(st, lambda: FROZEN_NOW)
    line = fit(status.parts(), width)
    plain = line.plain
    assert line.cell_length <= width
    assert plain.startswith("quickstart-2026") and " running " in plain
    if width >= 78:
        for part in ("Produce Deliv", "ctx 3%", "$0.42"):
            assert part in plain, (width, plain)
        # The offline model says it is a demo right after the cost, at every width from 80 columns.
        assert "demo, no AI" in plain or present.DEMO in plain, (width, plain)
    if width >= 118:
        assert "Produce Deliverables (2 of 2)" in plain
    if width >= 198:
        assert "session 1" in plain and "⏱ 4:59" in plain and "turn 7" in plain and "4.1k in · 120 out" in plain
        assert present.DEMO in plain
    # Most important first: whatever is shown whole at a width is shown at every wider one.
    wider = fit(status.parts(), width + 40).plain
    assert all(piece in wider or (piece == "demo, no AI" and present.DEMO in wider)  # its short form, grown
               for piece in plain.split(" │ ") if "…" not in piece)
    # A long job name and a pending command: still one line, the name and the phase cut rather than dropped.
    st.job_title = "a-rather-long-job-folder-name-2026-01-15-141234"
    st.requested["checkpoint"] = "checkpoint requested"
    line = fit(status.parts(), width)
    assert line.cell_length <= width
    assert line.plain.startswith("a-rather-long") and " running " in line.plain
    if width >= 78:
        assert "checkpoint requested…" in line.plain and "Produce Deli" in line.plain and "ctx 3%" in line.plain


def test_the_status_line_counts_the_retry_down():
    st = fold(retry_run().events)
    now = [FROZEN_NOW]
    status = StatusLine(st, lambda: now[0])
    assert status.state_badge() == " waiting: rate limited, retry in 22 s "
    now[0] = FROZEN_NOW + timedelta(seconds=12)
    assert status.state_badge() == " waiting: rate limited, retry in 10 s "
    now[0] = FROZEN_NOW + timedelta(seconds=30)
    assert status.state_badge() == " retrying: attempt 3 "
    assert " retrying: attempt 3 " in fit(status.parts(), 80).plain


# -- the token pressure pane ----------------------------------------------------------------------------------------
def test_the_gauge_says_where_the_window_figure_came_from():
    st = fold(retry_run().events)
    gauge = ContextGauge(st)
    text = gauge._full().plain  # 40 columns, as at 120x40: a long source is cut, never wrapped
    assert "\nWindow 200k (registry: claude-sonnet-4-…\n" in text
    st.gauge.window_source = "job.toml"
    assert "\nWindow 200k (job.toml)\n" in gauge._full().plain
    assert "Window" not in ContextGauge(ConsoleState("job"))._full().plain  # nothing known yet, nothing said


# -- the guardrails view ---------------------------------------------------------------------------------------------
def test_the_guardrails_view_shows_cost():
    text = plain_text(fold(guarded_run().events), FROZEN_NOW)
    assert "Cost       none ($0.42 spent)" in text
    st = fold(retry_run(priced=False).events)
    assert "Cost       not counted: no price is known for the model" in plain_text(st, FROZEN_NOW)


@pytest.mark.skipif(not HAS_COST_STATUS, reason="events.GuardrailsStatus has no budget_usd/cost_usd yet (the lead "
                                                "adds them)")
def test_the_guardrails_view_shows_cost_of_its_budget():
    log = guarded_run()
    log.add(ev.GuardrailsStatus, budget_usd=5.0, cost_usd=0.4217)
    st = fold(log.events)
    line = cost_line(st.guards, st.job_cost, st.priced)
    assert line.plain.startswith("$4.58 left (92%) of $5.00") and line.plain.endswith("$0.42 spent")
    st.priced, st.job_cost = False, None
    log.events[-1] = ev.GuardrailsStatus(ts=FROZEN_NOW, seq=99, session=1, budget_usd=5.0)
    st.apply(log.events[-1])
    assert cost_line(st.guards, None, False).plain.startswith("budget $5.00 can never be reached")


def test_the_cost_line_without_a_status():
    st = ConsoleState("job")
    assert isinstance(cost_line(st.guards, None, None), Content)
    assert cost_line(st.guards, None, None).plain == "none"


# -- the headless log -------------------------------------------------------------------------------------------------
def test_the_headless_log_prints_costs_retries_and_discarded_commands():
    log = answered(retry_run())
    log.add(ev.OperatorCommand, command="stop", source="inbox", status="discarded")
    log.add(ev.SessionEnded, reason="job_complete", turns=7)
    log.add(ev.RunEnded, reason="job_complete", sessions=1)
    lines = lines_of(log.events)
    assert lines[0] == "session 1 started (anthropic/claude-sonnet-4-5)"
    assert lines[1] == "  t6    list_files(.)  [3.0k in, 80 out | ctx 2% | $0.01]"
    assert lines[2] == "        » Listing the files first."  # the model's text (never its reasoning)
    assert lines[3:5] == [
        "  ⧗ model call failed: rate limited; retrying in 8 s, attempt 2: 429 Too Many Requests; the partial reply "
        "(28 chars) was discarded",
        "  ⧗ model call failed: rate limited; retrying in 32 s, attempt 3 (waited 40 s of max 600 s): 429 Too Many "
        "Requests",
    ]
    assert lines[5] == "  t7    read_file(notes/kickoff.md)  [3.3k in, 120 out | ctx 2% | $0.01]"
    assert lines[6] == "        » Reading the kickoff notes."
    assert lines[7:] == [
        "  ⌘ discarded stop from an earlier run",
        "session 1 ended: job_complete after 7 turns; job cost so far $0.42",
        "run ended: job_complete after 1 session; job cost $0.42",
    ]


def test_the_headless_log_says_once_that_no_price_is_known():
    log = retry_run(priced=False)
    log.add(ev.SessionStarted, reason="restart", provider="anthropic", model="claude-sonnet-4-5", priced=False)
    log.add(ev.SessionEnded, reason="max_turns", turns=7)
    log.add(ev.RunEnded, reason="max_turns", sessions=2)
    lines = lines_of(log.events)
    told = [ln for ln in lines if "no price known" in ln]
    assert told == ["  " + present.unpriced_text("claude-sonnet-4-5")]
    assert not any("$" in ln or "cost" in ln.replace("costs are not shown", "") for ln in lines)
    assert not any(ln.startswith("run ended") for ln in lines)  # the cli's own last line says how it ended


# -- the conversation ---------------------------------------------------------------------------------------------
def test_a_retry_discards_the_half_reply_and_thinking_is_apart(make_job):
    app = fed_app(make_job)

    async def body(pilot):
        log = retry_run()
        app.bridge.push_many(log.events[:9])  # thinking and half a reply are on screen
        await settle(pilot, app)
        text = flat(app.run_screen.conversation.plain_lines())
        assert "HALF A REPLY" in text and "thinking The notes name three" in text
        app.bridge.push_many(log.events[9:])
        await settle(pilot, app)
        text = flat(app.run_screen.conversation.plain_lines())
        assert "HALF A REPLY" not in text and "The notes name three" not in text
        assert ("⧗ model call failed: rate limited; retrying in 8 s, attempt 2: 429 Too Many Requests; the partial "
                "reply (28 chars) was discarded") in text
        assert "retrying in 32 s, attempt 3 (waited 40 s of max 600 s)" in text
        assert app.main.query_one(StatusLine).last_plain.startswith(
            f"{app.run_screen.paths.run_id} │ job │  waiting: rate limited, retry in 22 s ")
        log = answered(log)
        app.bridge.push_many(log.events[11:])
        await settle(pilot, app)
        lines = app.run_screen.conversation.plain_lines()
        text = flat(lines)
        assert text.count("Reading the kickoff notes.") == 1 and text.count("The notes name three owners.") == 1
        thinking = text.index("thinking The notes name three owners.")
        assert text.index("⧗") < thinking < text.index("Reading the kickoff")
        assert " running " in app.main.query_one(StatusLine).last_plain

    drive(app, body)


def test_a_turn_asked_again_drops_what_its_first_attempt_streamed(make_job):
    app = fed_app(make_job)

    async def body(pilot):
        log = Log()
        log.add(ev.SessionStarted, reason="new", provider="openai", model="gpt-4.1")
        log.add(ev.TurnStarted, turn=1)
        log.add(ev.TextDelta, turn=1, text="first attempt, cut by a pause")
        log.add(ev.OperatorCommand, command="pause", source="console", status="applied",
                detail="paused: the reply in progress is dropped and asked again on resume")
        log.add(ev.OperatorCommand, command="resume", source="console", status="applied")
        log.add(ev.TurnStarted, turn=1)
        log.add(ev.TextDelta, turn=1, text="second attempt")
        log.add(ev.AssistantMessage, turn=1, text="second attempt")
        app.bridge.push_many(log.events)
        await settle(pilot, app)
        text = flat(app.run_screen.conversation.plain_lines())
        assert "first attempt" not in text and text.count("second attempt") == 1

    drive(app, body)


def test_an_attached_console_shows_reasoning_and_retries_from_the_log(make_job):
    paths = make_job()
    log = answered(retry_run())
    log.add(ev.OperatorCommand, command="stop", source="inbox", status="discarded")
    log.write(paths.events)  # text_delta is never logged: the log has the assistant_message's reasoning
    log.events = [e for e in log.events if not isinstance(e, ev.TextDelta)]
    log.write(paths.events)
    app = attach_app(paths)

    async def body(pilot):
        await wait_for(pilot, lambda: app.state.last_seq == log.events[-1].seq and app.bridge.pending == 0,
                       what="the replay")
        await settle(pilot, app)
        text = flat(app.run_screen.conversation.plain_lines())
        assert text.count("thinking The notes name three owners.") == 1
        assert text.count("⧗ model call failed") == 2 and "HALF A REPLY" not in text
        assert "⌘ discarded stop from an earlier run" in text
        assert app.state.job_cost == 0.4217
        assert "$0.42" in app.main.query_one(StatusLine).last_plain

    drive(app, body, size=(120, 40))


# -- snapshots ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_snapshot_waiting_for_a_retry(snap_compare, fixed_make_job, size):
    """Turn 6's reasoning dimmed above its answer; turn 7's half reply dropped for two retry marks; the status line
    counting the wait down; the window's source in the token pressure pane (120x40). The job is at a fixed path:
    the run id on the status line comes from it."""
    app = fed_app(fixed_make_job)

    async def before(pilot):
        app.bridge.push_many(retry_run().events)
        await settle(pilot, app)

    assert snap_compare(app, terminal_size=size, run_before=before)


def test_the_headless_turn_line_has_the_turns_tokens_not_a_samplings() -> None:
    log = Log()
    log.add(ev.SessionStarted, reason="new", provider="anthropic", model="claude-sonnet-4-5",
            context_window=200_000, priced=True)
    log.add(ev.AssistantMessage, turn=1, text="Asking the server.",
            tool_calls=[ev.ToolCallRecord(id="c1", name="mcp__muse__idea", arguments="{}")])
    # The server sampled the run's model during the call: its usage comes before the turn's.
    log.add(ev.TokenUsage, turn=0, input_tokens=40, output_tokens=5, cost_usd=0.01, job_cost_usd=0.01,
            source="mcp_sampling", mcp_server="muse", call_id="c1")
    log.add(ev.McpSampled, server="muse", tool="idea", call_id="c1", max_tokens=64, input_tokens=40, output_tokens=5,
            cost_usd=0.01)
    log.add(ev.TokenUsage, turn=1, input_tokens=3000, output_tokens=30, cost_usd=0.02, job_cost_usd=0.03,
            context_tokens=3030, context_window=200_000, prompt_budget=180_000)
    lines = lines_of(log.events)
    (turn,) = [x for x in lines if x.lstrip().startswith("t1")]
    assert "3.0k in, 30 out" in turn
    assert any("MCP server muse sampled the run's model during idea: 40 in, 5 out (at most 64)" in x for x in lines)
