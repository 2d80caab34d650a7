"""The headless log: its first line names the run (and the demo model), one line per turn, and one line per
denial, feedback block, refused or bypassed stop, spent budget and stuck detection, under the turn they happened
in, in console.present's words; agent text never breaks a line."""

from __future__ import annotations

import io

from console import present
from console.engine import events as ev
from console.headless import HeadlessLog
from tests.tui.guardrail_events import Log, guarded_run, spent_run


def lines_of(events: list[ev.EventBase], **kw: str) -> list[str]:
    out = io.StringIO()
    log = HeadlessLog(out, **kw)
    for e in events:
        log(e)
    return out.getvalue().splitlines()


def test_guardrail_events_are_one_line_each_under_their_turn():
    lines = lines_of(spent_run().events)
    turn = next(n for n, ln in enumerate(lines) if ln.startswith("  t7 "))
    assert lines[turn] == ("  t7    write_file(report.md), job_complete(summary=done)  [4.1k in, 120 out | ctx 3% | "
                           "$0.01]")
    assert lines[turn + 1:turn + 5] == [
        "  ⊗ denied write_file by read_before_write: report.md exists and was not read first",
        "  ↩ stop refused by plan (1/5): 3 tasks left: Write digest.md, Check digest.md, Record a note; the agent "
        "was told to continue",
        "  ◆ feedback from Deadline (warning): The work so far took 5 minutes. You have 3 minutes remaining.",
        "  ◆ feedback from AGENTS.md (info): AGENTS.md detected. Follow the conventions defined within.",
    ]
    rest = lines[turn + 5:]
    assert rest == [
        "  ◆ feedback from stuck (caution): No todo completed in 6 turns.",  # the stuck event itself adds nothing
        "  ◷ deadline passed: 8 minutes since the job started, deadline 8 minutes; the agent was told to wrap up",
        "  ↷ job_complete accepted without the completion check: the deadline passed",
    ]
    # The denied call's error result and the refused job_complete's are not repeated as failures.
    assert not any("✗ write_file" in ln or "✗ job_complete" in ln for ln in lines)


def test_agent_text_cannot_break_or_colour_a_line():
    log = Log()
    log.add(ev.ToolDenied, turn=1, call_id="x", tool="write_file", policy="read_before_write",
            reason="a.md exists\nand\x1b[31m was not read")
    log.add(ev.Feedback, source="Deadline", severity="caution", message="line one\nline two\r\n")
    log.add(ev.CompletionBlocked, reason="todo: x", feedback="left:\n- a\n- b", checker="plan", blocks=2,
            max_blocks=5, stop_reason="end_turn")
    log.add(ev.StuckDetected, reason="no progress\nfor 5 turns", pattern="loop")
    log.add(ev.CompletionBlocked, reason="the agent tried to stop before job_complete")  # the loop's own nudge
    log.add(ev.BudgetExhausted, budget="tokens", limit=1000.0, used=1200.0)
    lines = lines_of(log.events)
    # Line breaks join like a paragraph's lines; any other control character is shown escaped, never sent.
    assert lines == [
        "  ⊗ denied write_file by read_before_write: a.md exists and\\x1b[31m was not read",
        "  ◆ feedback from Deadline (caution): line one line two",
        "  ↩ stop refused by plan (2/5): left: - a - b; the agent was told to continue",
        "  ⚠ stuck: no progress for 5 turns (loop)",
        "  ↩ stop refused: the agent tried to stop before job_complete; the agent was told to continue",
        "  ◷ token budget spent (1.2k of 1.0k); the run pauses and asks its operator",
    ]


def test_a_turn_cut_short_still_prints_what_it_held():
    log = guarded_run()
    events = [e for e in log.events if not isinstance(e, ev.TokenUsage)]
    events.append(ev.SessionEnded(ts=log.start, seq=999, session=1, reason="user_shutdown", turns=7))
    lines = lines_of(events)
    assert any(ln.startswith("  ⊗ denied write_file") for ln in lines)
    assert lines[-1].startswith("session 1 ended: user_shutdown")


def test_colour_wraps_whole_lines_only():
    out = io.StringIO()
    log = HeadlessLog(out, color=True)
    for e in guarded_run().events:
        log(e)
    text = out.getvalue()
    assert "\x1b[1;33m  ◆ feedback from Deadline (warning): " in text
    assert all(ln.count("\x1b[0m") <= 2 for ln in text.splitlines())


def test_the_first_line_names_the_run_and_the_demo_model_and_so_does_the_last():
    log = guarded_run()  # the scripted provider
    log.add(ev.SessionEnded, reason="job_complete", turns=7)
    log.add(ev.RunEnded, reason="job_complete", sessions=1)
    lines = lines_of(log.events, run_id="k3f9q")
    assert lines[0] == f"run k3f9q · session 1 started (scripted/scripted-agent); {present.DEMO}"
    assert lines[-1] == f"run k3f9q ended: job_complete after 1 session; job cost $0.42; {present.DEMO}"
    assert sum(present.DEMO in ln for ln in lines) == 2
    # A real model: its name, no demo label.
    real = Log()
    real.add(ev.SessionStarted, reason="resume", provider="openai", model="gpt-4.1", detail="after turn 12")
    assert lines_of(real.events, run_id="k3f9q") == ["run k3f9q · session 1 resumed (openai/gpt-4.1): after turn 12"]
    assert lines_of(real.events) == ["session 1 resumed (openai/gpt-4.1): after turn 12"]


def test_a_line_before_the_session_starts_comes_after_the_runs_own():
    log = Log()
    log.add(ev.StateRecovered, file=".console/todos.json", problem="not valid JSON", moved_to="todos.json.bad",
            action="todo list is rebuilt from the journal; nothing is lost")
    log.add(ev.SessionStarted, reason="resume", provider="scripted", model="scripted-agent")
    lines = lines_of(log.events, run_id="k3f9q", provider="scripted")
    assert lines == [
        f"run k3f9q; {present.DEMO}",
        "  ‼ recovered .console/todos.json: not valid JSON (kept as todos.json.bad); todo list is rebuilt from the "
        "journal; nothing is lost",
        f"session 1 resumed (scripted/scripted-agent); {present.DEMO}",
    ]


def test_every_line_about_an_event_is_in_the_shared_words():
    """What the headless log says of an event is console.present's line for it (its layout aside)."""
    log = spent_run()
    log.add(ev.ContextMasked, masked=3, tokens_freed=2100, used_before=7200, used_after=5500, prompt_budget=10_000,
            call_ids=["a", "b", "c"])
    log.add(ev.ModelRetry, turn=8, attempt=2, delay_s=8.0, cause="rate limited", message="429 Too Many Requests")
    log.add(ev.OperatorCommand, command="pause", source="cli", status="applied")
    log.add(ev.ErrorEvent, message="tool x crashed", where="tool")
    text = "\n".join(lines_of(log.events))
    said = 0
    for e in log.events:
        p = present.describe(e)
        # The calls are on the turn's line; the denied and the refused call's error results are their denial and
        # refusal; the stuck detection is its feedback block's.
        if p is None or isinstance(e, ev.ToolCalled | ev.ToolResult | ev.StuckDetected):
            continue
        assert p.line in text, p.line
        said += 1
    assert said == 12


def test_a_pending_restart_says_how_to_answer_it_for_this_run():
    log = Log()
    log.add(ev.RestartPending, usage_pct=0.9, carryover_messages=7, carryover_tokens=3200, next_session=2)
    assert lines_of(log.events, run_id="k3f9q")[-1] == (
        "restart pending: context 90% full; session 2 would start with 7 carried messages (~3.2k tokens); awaiting "
        "approval; answer with `agent-console approve k3f9q` or `agent-console deny k3f9q`")
