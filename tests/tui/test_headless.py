"""The headless log: its first line names the run (and the demo model), one line per turn with the model's text under
it, and one line per denial, feedback block, refused or bypassed stop, spent budget and stuck detection, under the
turn they happened in, in console.view.present's words; needs-you moments at once; agent text never breaks a line."""

from __future__ import annotations

import io
import json
import re

from console.engine import events as ev
from console.headless import HeadlessLog
from console.view import present
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
    assert lines[turn + 1:turn + 6] == [
        "        » Writing the report.",  # the model's text, under its turn's calls
        "  ⊗ denied write_file by read_before_write: report.md exists and was not read first",
        "  ↩ stop refused by plan (1 of 5): 3 tasks left: Write digest.md, Check digest.md, Record a note; the agent "
        "was told to continue",
        "  ◆ feedback from Deadline (warning): The work so far took 5 minutes. You have 3 minutes remaining.",
        "  ◆ feedback from AGENTS.md (info): AGENTS.md detected. Follow the conventions defined within.",
    ]
    rest = lines[turn + 6:]
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
        "  ↩ stop refused by plan (2 of 5): left: - a - b; the agent was told to continue",
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
    assert lines[-1].startswith("session 1 ended: stopped")


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
    """What the headless log says of an event is console.view.present's line for it (its layout aside)."""
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
    assert said == 13


def test_a_pending_restart_says_how_to_answer_it_for_this_run():
    log = Log()
    log.add(ev.RestartPending, usage_pct=0.9, carryover_messages=7, carryover_tokens=3200, next_session=2)
    assert lines_of(log.events, run_id="k3f9q")[-1] == (
        "restart pending: context 90% full; session 2 would start with 7 carried messages (~3.2k tokens); awaiting "
        "approval; answer with `agent-console approve k3f9q` or `agent-console deny k3f9q`")


# -- the model's text, the story's order, needs-you moments ---------------------------------------------------------
def _turn(log: Log, turn: int, text: str, calls: list[tuple[str, str, dict]] | None = None, *,
          usage: bool = True, results: list[str] | None = None) -> None:
    records = [ev.ToolCallRecord(id=cid, name=name, arguments=json.dumps(args)) for cid, name, args in calls or []]
    log.add(ev.TurnStarted, turn=turn)
    log.add(ev.AssistantMessage, turn=turn, text=text, tool_calls=records)
    for n, r in enumerate(records):
        log.add(ev.ToolCalled, turn=turn, call_id=r.id, tool=r.name, arguments=r.arguments)
        log.add(ev.ToolResult, turn=turn, call_id=r.id, tool=r.name, ok=True, content=(results or ["ok"] * 9)[n])
    if usage:
        log.add(ev.TokenUsage, turn=turn, input_tokens=1000, output_tokens=50)


def test_a_real_models_text_is_shown_under_its_turn():
    """A turn with text and no tool call was '(no tool call)' and nothing else: what the model said is the story."""
    log = Log()
    _turn(log, 1, "I looked at the notes.\n\nThere are **three** meetings;\n   I will   write the digest next.")
    _turn(log, 2, "", [("c1", "read_file", {"path": "notes/a.md"})])
    assert lines_of(log.events) == [
        "  t1    (no tool call)  [1.0k in, 50 out]",
        "        » I looked at the notes. There are **three** meetings; I will write the digest next.",
        "  t2    read_file(notes/a.md)  [1.0k in, 50 out]",  # no text: no line for it
    ]
    long = Log()
    _turn(long, 1, "word " * 400)
    said = lines_of(long.events)[1]
    assert said.startswith("        » word word") and said.endswith("...") and len(said) < 220


def test_hostile_model_text_is_shown_never_run():
    log = Log()
    _turn(log, 1, "done\x1b]0;owned\x07\r\x1b[2Khidden\u202eevil \x9b31m", [("c\x1b[31m", "x\x1b[2J", {"p": 1})])
    out = io.StringIO()
    view = HeadlessLog(out, color=True, results=True)
    for e in log.events:
        view(e)
    text = out.getvalue()
    # The only escape sequences are the log's own colours (ESC [ digits m): without them every line is printable.
    assert all(re.sub(r"\x1b\[[0-9;]*m", "", ln).isprintable() for ln in text.splitlines())
    assert "\x07" not in text and "\r" not in text and "\u202e" not in text and "\x9b" not in text
    assert "» done\\x1b]0;owned\\x07 \\x1b[2Khidden\\u202eevil \\x9b31m" in text.replace("\x1b[0m", "")


def _todos(log: Log, **fields: object) -> None:
    """A todos_changed event (Log.add takes ``kind`` for the event's class)."""
    log.events.append(ev.TodosChanged(ts=log.start, seq=len(log.events) + 1, session=1, **fields))  # type: ignore


def test_what_happens_in_a_turn_is_told_under_it_in_order():
    """A task done, a transition and the job's completion used to print above the turn that did them."""
    log = Log()
    log.add(ev.TurnStarted, turn=5)
    log.add(ev.AssistantMessage, turn=5, text="Done with this task.",
            tool_calls=[ev.ToolCallRecord(id="c1", name="todo_complete", arguments="{}")])
    log.add(ev.ToolCalled, turn=5, call_id="c1", tool="todo_complete", arguments="{}")
    _todos(log, phase_name="Review", phase_number=1, total_phases=2, kind="phase", reason="todo_complete",
           items=[ev.TodoItemRecord(text="Read a", done=True)])
    _todos(log, phase_name="", phase_number=0, total_phases=0, kind="transition", reason="transition:phase",
           items=[])
    log.add(ev.JobCompleted, summary="wrote a.md", confidence=0.9)
    log.add(ev.ToolResult, turn=5, call_id="c1", tool="todo_complete", ok=True, content="Task 1 marked complete.")
    log.add(ev.TokenUsage, turn=5, input_tokens=2000, output_tokens=10)
    log.add(ev.ContextCompacted, messages_before=30, messages_after=1, summary_chars=300, reason="phase transition")
    assert lines_of(log.events) == [
        "  t5    todo_complete()  [2.0k in, 10 out]",
        "        » Done with this task.",
        "[Review (1 of 2): 1 task]",
        "    ✓ 1/1 Read a",
        "-- todo list archived for the phase transition --",
        "✔ job complete (confidence 0.90): wrote a.md",
        "  ≡ compacted 30 messages into a summary (300 chars); why: phase transition",
    ]
    out = io.StringIO()
    story = HeadlessLog(out, results=True)
    for e in log.events:
        story(e)
    # With results (`logs`): a task's own result is its ✓ line, not said twice.
    assert "← todo_complete" not in out.getvalue() and "✓ 1/1 Read a" in out.getvalue()


class CountingOut(io.StringIO):
    """A live log's stream that counts its writes and flushes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = self.flushes = 0

    def write(self, s: str) -> int:
        self.writes += 1
        return super().write(s)

    def flush(self) -> None:
        self.flushes += 1


def test_a_turns_lines_are_written_together():
    """A turn's line, its text and what happened in it are one write and one flush, not one a line (issue 37: the
    log's cost a turn), and the same lines."""
    log = Log()
    log.add(ev.TurnStarted, turn=5)
    log.add(ev.AssistantMessage, turn=5, text="Done with this task.",
            tool_calls=[ev.ToolCallRecord(id="c1", name="todo_complete", arguments="{}")])
    _todos(log, phase_name="Review", phase_number=1, total_phases=2, kind="phase", reason="todo_complete",
           items=[ev.TodoItemRecord(text="Read a", done=True)])
    log.add(ev.ToolResult, turn=5, call_id="c1", tool="todo_complete", ok=True, content="Task 1 marked complete.")
    out = CountingOut()
    story = HeadlessLog(out)
    for e in log.events:
        story(e)
    assert out.writes == out.flushes == 0  # held until the turn's tokens come
    story(ev.TokenUsage(ts=log.start, seq=99, session=1, turn=5, input_tokens=2000, output_tokens=10))
    assert out.writes == out.flushes == 1
    assert out.getvalue().splitlines() == ["  t5    todo_complete()  [2.0k in, 10 out]",
                                           "        » Done with this task.", "[Review (1 of 2): 1 task]",
                                           "    ✓ 1/1 Read a"]


def test_events_outside_the_story_are_passed_over_without_changing_what_told_folds():
    """The log passes an event outside the story over before Told's fold (issue 37: each of the fold's checks is a
    failed isinstance on the event, and two of a turn's five events are outside it): it may, since the fold reads
    only events in the story. Every other event type leaves the fold as it was."""
    import typing

    from console.engine.events.registry import Event
    from console.view.story import Told

    union = typing.get_args(Event)[0]
    outside = [cls for cls in typing.get_args(union) if not present.in_story(cls.model_fields["type"].default)]
    assert ev.TurnStarted in outside and ev.ToolCalled in outside and ev.GuardrailsStatus in outside
    told = Told()
    told.last_feedback = ev.Feedback(ts=Log().start, seq=1, session=1, source="stuck", message="m")
    before = (list(told.denied), told.refusing, told.refused_tick, told.last_feedback)
    for cls in outside:
        assert told.sees(cls.model_construct()) is False
    assert (list(told.denied), told.refusing, told.refused_tick, told.last_feedback) == before
    # The log asks the fold about events in the story only.
    story = HeadlessLog(io.StringIO())
    asked: list[str] = []
    real = story._told.sees
    story._told.sees = lambda e: asked.append(e.type) or real(e)  # type: ignore[method-assign]
    log = Log()
    log.add(ev.TurnStarted, turn=1)
    log.add(ev.AssistantMessage, turn=1, text="Reading.",
            tool_calls=[ev.ToolCallRecord(id="c1", name="read_file", arguments='{"path": "a.md"}')])
    log.add(ev.ToolCalled, turn=1, call_id="c1", tool="read_file", arguments='{"path": "a.md"}')
    log.add(ev.ToolResult, turn=1, call_id="c1", tool="read_file", ok=True, content="# A")
    log.add(ev.TokenUsage, turn=1, input_tokens=2000, output_tokens=10)
    for e in log.events:
        story(e)
    assert asked == ["assistant_message", "tool_result", "token_usage"]


def test_results_are_told_under_their_turn_in_logs():
    log = Log()
    _turn(log, 3, "Reading.", [("c1", "read_file", {"path": "a.md"}), ("c2", "list_files", {"path": "."})],
          results=["[a.md: lines 1-2 of 2]\n# A\nbody", "a.md (3 bytes)"])
    out = io.StringIO()
    story = HeadlessLog(out, results=True)
    for e in log.events:
        story(e)
    assert out.getvalue().splitlines() == [
        "  t3    read_file(a.md), list_files(.)  [1.0k in, 50 out]",
        "        » Reading.",
        "        ← read_file: [a.md: lines 1-2 of 2] (+2 lines)",
        "        ← list_files: a.md (3 bytes)",
    ]
    assert lines_of(log.events)[2:] == []  # the live log stays compact: no results


def test_needs_you_is_told_at_once_with_its_evidence_and_answer():
    log = Log()
    _turn(log, 9, "Reading a.md again.", [("c1", "read_file", {"path": "a.md"})], usage=False)
    log.add(ev.Feedback, source="stuck", severity="warning", message="same call 6 times")
    log.add(ev.NeedsOperator, reason="stuck", message="no progress in 12 turns after 3 nudges",
            evidence=["read_file(a.md) x6", "no todo completed since turn 3"])
    log.add(ev.TokenUsage, turn=9, input_tokens=5000, output_tokens=20)  # the turn's end comes after
    log.add(ev.OperatorCommand, command="resume", source="cli", status="applied", detail="resumed")
    log.add(ev.NeedsOperatorCleared, reason="stuck", by="operator's resume")
    assert lines_of(log.events, run_id="k3f9q") == [
        "run k3f9q",
        "  t9    read_file(a.md)",  # written early (no tokens yet): the needs-you moment must not wait for the turn
        "        » Reading a.md again.",
        "  ◆ feedback from stuck (warning): same call 6 times",
        "⚑ NEEDS YOU (stuck): no progress in 12 turns after 3 nudges",
        "    read_file(a.md) x6",
        "    no todo completed since turn 3",
        "    the run is paused until you answer; go on with `agent-console resume k3f9q`, or end it with "
        "`agent-console stop k3f9q`",
        "  ⌘ resume applied (cli): resumed",
        "  ✓ no longer needs you (stuck): operator's resume",
    ]
    out = io.StringIO()
    coloured = HeadlessLog(out, color=True)
    for e in log.events:
        coloured(e)
    assert "\x1b[1;31m⚑ NEEDS YOU (stuck)" in out.getvalue()  # it stands out


def test_a_restart_waiting_for_approval_says_how_to_answer_once():
    log = Log()
    log.add(ev.RestartPending, usage_pct=0.9, carryover_messages=7, carryover_tokens=3200, next_session=2)
    log.add(ev.NeedsOperator, reason="restart_approval", message="the context is full: approve the restart",
            evidence=["carryover: 7 messages, ~3,200 tokens"], paused=False)
    log.add(ev.NeedsOperatorCleared, reason="restart_approval", by="restart approved")
    log.add(ev.RestartApproved, by="operator")
    lines = lines_of(log.events, run_id="k3f9q")
    assert sum("agent-console approve k3f9q" in ln for ln in lines) == 1
    assert lines[1:] == [
        "restart pending: context 90% full; session 2 would start with 7 carried messages (~3.2k tokens); awaiting "
        "approval; answer with `agent-console approve k3f9q` or `agent-console deny k3f9q`",
        "⚑ NEEDS YOU (restart approval): the context is full: approve the restart",
        "    carryover: 7 messages, ~3,200 tokens",
        "  ✓ no longer needs you (restart approval): restart approved",
        "  ✓ restart approved (operator)",
    ]


def test_a_turn_cut_by_a_kill_keeps_its_line_and_the_end_is_said_in_logs():
    log = Log()
    log.add(ev.SessionStarted, reason="new", provider="openai", model="gpt-4.1")
    _turn(log, 4, "Writing.", [("c1", "write_file", {"path": "a.md"})], usage=False)  # killed before its end
    log.add(ev.SessionStarted, reason="resume", provider="openai", model="gpt-4.1", detail="turn 4, call 1 of 1")
    log.add(ev.TokenUsage, turn=4, input_tokens=900, output_tokens=9)  # the resumed turn's end: no second line
    log.add(ev.RunEnded, reason="user_shutdown", detail="interrupted by SIGTERM", sessions=2)
    assert lines_of(log.events) == [
        "session 1 started (openai/gpt-4.1)",
        "  t4    write_file(a.md)",
        "        » Writing.",
        "session 1 resumed (openai/gpt-4.1): turn 4, call 1 of 1",
    ]  # live, the cli's last line says how the run ended
    out = io.StringIO()
    story = HeadlessLog(out, run_id="k3f9q", say_end=True)
    for e in log.events:
        story(e)
    assert out.getvalue().splitlines()[-1] == (
        "run k3f9q ended: stopped after 2 sessions (interrupted by SIGTERM)")
