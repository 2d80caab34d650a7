"""The headless log's guardrail lines: one line per denial, feedback block, refused or bypassed stop, spent budget
and stuck detection, under the turn they happened in; agent text never breaks a line."""

from __future__ import annotations

import io

from console.engine import events as ev
from console.headless import HeadlessLog
from tests.tui.guardrail_events import Log, guarded_run, spent_run


def lines_of(events: list[ev.EventBase]) -> list[str]:
    out = io.StringIO()
    log = HeadlessLog(out)
    for e in events:
        log(e)
    return out.getvalue().splitlines()


def test_guardrail_events_are_one_line_each_under_their_turn():
    lines = lines_of(spent_run().events)
    turn = next(n for n, ln in enumerate(lines) if ln.startswith("  t7 "))
    assert lines[turn + 1:turn + 5] == [
        "  ✗ denied write_file by read_before_write: report.md exists and was not read first",
        "  ⛔ stop refused (plan, 1/5): 3 tasks left: Write digest.md, Check digest.md, Record a note",
        "  ◆ feedback Deadline (warning): The work so far took 5 minutes. You have 3 minutes remaining.",
        "  ◆ feedback AGENTS.md (info): AGENTS.md detected. Follow the conventions defined within.",
    ]
    rest = lines[turn + 5:]
    assert rest == [
        "  ◆ feedback stuck (caution): No todo completed in 6 turns.",  # the stuck event itself adds nothing
        "  ⌛ budget exhausted (deadline): deadline passed: 8 minutes since the job started, deadline 8 minutes; "
        "the agent was told to wrap up",
        "  ⏭ completion check bypassed (deadline spent): job_complete accepted unchecked",
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
    assert lines == [
        "  ✗ denied write_file by read_before_write: a.md exists\\nand\\x1b[31m was not read",
        "  ◆ feedback Deadline (caution): line one\\nline two\\r\\n",
        "  ⛔ stop refused (plan, 2/5): left:\\n- a\\n- b",
        "  ⟳ stuck: no progress\\nfor 5 turns (loop)",
        "  ⛔ stop refused: the agent tried to stop before job_complete",
        "  ⌛ budget exhausted (tokens): 1200 of 1000; the agent was told to wrap up",
    ]


def test_a_turn_cut_short_still_prints_what_it_held():
    log = guarded_run()
    events = [e for e in log.events if not isinstance(e, ev.TokenUsage)]
    events.append(ev.SessionEnded(ts=log.start, seq=999, session=1, reason="user_shutdown", turns=7))
    lines = lines_of(events)
    assert any(ln.startswith("  ✗ denied write_file") for ln in lines)
    assert lines[-1].startswith("session 1 ended: user_shutdown")


def test_colour_wraps_whole_lines_only():
    out = io.StringIO()
    log = HeadlessLog(out, color=True)
    for e in guarded_run().events:
        log(e)
    text = out.getvalue()
    assert "\x1b[1;33m  ◆ feedback Deadline (warning): " in text
    assert all(ln.count("\x1b[0m") <= 2 for ln in text.splitlines())
