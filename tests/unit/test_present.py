"""console.view.present: one description of each event (icon, kind, severity, text), the one formatter of tool
arguments, and the shared wording every view prints."""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from datetime import UTC, datetime

import pytest
from rich.cells import cell_len

from console.engine import events as ev
from console.view import present
from console.view.present import Presented, describe, tool_args

T = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)


def make(cls: type[ev.EventBase], **fields: object) -> ev.EventBase:
    return cls(ts=T, seq=7, session=2, **fields)


# One of each event type a view describes, with what it says.
CASES: list[tuple[ev.EventBase, str, str, str, str]] = [
    # event, icon, kind, severity, line
    (make(ev.SessionStarted, reason="new", provider="openai", model="gpt-4.1"),
     "●", "session", "info", "session 2 started (openai/gpt-4.1)"),
    (make(ev.SessionStarted, reason="resume", provider="scripted", model="scripted-agent", detail="after turn 12"),
     "●", "session", "info", f"session 2 resumed (scripted/scripted-agent): after turn 12; {present.DEMO}"),
    (make(ev.SessionStarted, reason="restart", provider="openai", model="gpt-4.1", carryover_messages=1),
     "↻", "restart", "info", "session 2 started after a context restart: 1 message carried over"),
    # Seed 003's settings, said when they are not the defaults (once per process: not at a context restart).
    (make(ev.SessionStarted, reason="new", provider="openai", model="gpt-4.1", working_memory=False,
          file_index=True),
     "●", "session", "info", "session 2 started (openai/gpt-4.1); working memory off (requires_context = false): "
                             "the prompts carry no task history or blockers; file index on: the agent has find_files"),
    (make(ev.SessionStarted, reason="restart", provider="openai", model="gpt-4.1", working_memory=False),
     "↻", "restart", "info", "session 2 started after a context restart: 0 messages carried over"),
    (make(ev.SessionEnded, reason="max_turns", turns=1, detail="100 turns"),
     "■", "session-end", "error", "session 2 ended: turn limit reached after 1 turn (100 turns)"),
    (make(ev.SessionEnded, reason="job_complete", turns=45, detail="done"),
     "■", "session-end", "success", "session 2 ended: job_complete after 45 turns"),
    # A log from before outcomes: what ended it, in words.
    (make(ev.RunEnded, reason="user_shutdown", sessions=2),
     "■", "run-end", "warning", "run ended: stopped after 2 sessions"),
    # The outcome first, then what ended it when that says more.
    (make(ev.RunEnded, reason="user_shutdown", sessions=2, outcome="incomplete"),
     "■", "run-end", "warning", "run ended: incomplete (stopped) after 2 sessions"),
    (make(ev.RunEnded, reason="job_complete", sessions=1, outcome="completed"),
     "■", "run-end", "success", "run ended: completed after 1 session"),
    (make(ev.RunEnded, reason="gave_up", sessions=1, outcome="gave_up"),
     "■", "run-end", "warning", "run ended: the agent gave up after 1 session"),
    (make(ev.RunEnded, reason="budget_exhausted", sessions=1, outcome="completed"),
     "■", "run-end", "success", "run ended: completed (out of budget) after 1 session"),
    (make(ev.RunEnded, reason="error", sessions=3, outcome="failed"),
     "■", "run-end", "error", "run ended: failed (an error) after 3 sessions"),
    (make(ev.JobGaveUp, summary="cannot reach the API", confidence=0.1, notes="the key is revoked",
          unmet=["2 todos are not done"]),
     "⚐", "gave-up", "warning", "the agent gave up (confidence 0.10): cannot reach the API; notes: the key is "
                                "revoked"),
    # The agent's summary ends its sentence: the line going on after it does not read "API.; notes:".
    (make(ev.JobGaveUp, summary="Run it with --provider openai.", confidence=0.1, notes="no key here..."),
     "⚐", "gave-up", "warning", "the agent gave up (confidence 0.10): Run it with --provider openai; notes: no key "
                                "here..."),
    (make(ev.ModelRetry, turn=3, attempt=2, delay_s=8.0, cause="rate limited", message="429", discarded_chars=1200),
     "⧗", "retry", "caution", "model call failed: rate limited; retrying in 8 s, attempt 2: 429; the partial reply "
                              "(1,200 chars) was discarded"),
    (make(ev.ToolCalled, turn=3, call_id="c", tool="read_file", arguments='{"path": "notes/a.md"}'),
     "▸", "tool", "info", "read_file(notes/a.md)"),
    (make(ev.ToolResult, turn=3, call_id="c", tool="read_file", ok=False, content="\n  no such file\nmore",
          duration_ms=1500), "✗", "tool-failed", "caution", "read_file failed: no such file (1.5 s)"),
    # A command's failure says why, in the last line of its output (not just "exit code 2"); notes are not why.
    (make(ev.ToolResult, turn=3, call_id="c", tool="setup", ok=False,
          content="exit code 2\nchecking...\nmake: *** No rule to make target 'all'.\n[made harmless: x]"),
     "✗", "tool-failed", "caution", "setup failed: exit code 2: make: *** No rule to make target 'all'."),
    (make(ev.ToolResult, turn=3, call_id="c", tool="setup", ok=False, content="exit code 1\n(no output)"),
     "✗", "tool-failed", "caution", "setup failed: exit code 1"),
    (make(ev.ToolResult, turn=3, call_id="c", tool="build", ok=False,
          content="exit code 0\nBuild succeeded\n[the job folder now holds 2 GB, past its limit of 1 GB (max_job_mb): "
                  "the call failed, and writes are refused until it shrinks]"),
     "✗", "tool-failed", "caution", "build failed: exit code 0: the job folder now holds 2 GB, past its limit of 1 GB "
                                    "(max_job_mb): the call failed, and writes are refused until it shrinks"),
    (make(ev.ToolResult, turn=3, call_id="c", tool="lint", ok=False, content="exit code 1\n[ERROR] bad import"),
     "✗", "tool-failed", "caution", "lint failed: exit code 1: [ERROR] bad import"),
    # A result that says its tool failed, in the words the agent reads, is said once: not "x failed: x failed:".
    (make(ev.ToolResult, turn=3, call_id="c", tool="write_file", ok=False,
          content="write_file failed: 'a.md' is refused"), "✗", "tool-failed", "caution",
     "write_file failed: 'a.md' is refused"),
    (make(ev.ToolDenied, turn=3, call_id="c", tool="write_file", policy="rbw", reason="read it first",
          error="boom"), "⊗", "denied", "warning",
     "denied write_file by rbw: read it first (the policy failed: boom)"),
    (make(ev.TodosChanged, phase_name="Review", phase_number=1, total_phases=2, kind="phase", reason="todo_write",
          items=[ev.TodoItemRecord(text="a", done=False)]), "□", "todos", "info", "Review (1 of 2): 1 task"),
    (make(ev.TodosChanged, phase_name="Review", phase_number=1, total_phases=2, kind="phase",
          reason="todo_complete", items=[ev.TodoItemRecord(text="Read a", done=True),
                                         ev.TodoItemRecord(text="Read b", done=False)]),
     "✓", "todo-done", "success", "1/2 Read a"),
    (make(ev.TodosChanged, phase_name="", phase_number=0, total_phases=0, kind="transition",
          reason="transition:bootstrap", items=[]), "≡", "todos", "info",
     "todo list archived for the bootstrap transition"),
    (make(ev.PlanChanged, error="no phases"), "✎", "plan", "caution", "main_plan.md: no phases"),
    (make(ev.PhaseTransition, kind="phase", stage="completed", from_phase=1, to_phase=2, to_name="Write"),
     "━", "phase", "info", "phase transition done: now phase 2 'Write'"),
    (make(ev.PhaseTransition, kind="rewind", stage="started", from_phase=2, issue="wrong order"),
     "↺", "phase", "info", "rewind of phase 2 started: wrong order"),
    (make(ev.Feedback, source="Deadline", severity="warning", message="3 minutes left"),
     "◆", "feedback", "warning", "feedback from Deadline (warning): 3 minutes left"),
    (make(ev.ContextMasked, masked=3, tokens_freed=2100, used_before=7200, used_after=5500, prompt_budget=10_000),
     "⊘", "masked", "info", "masked the 3 oldest tool results, ~2.1k tokens freed (72% → 55%); the agent now sees "
                            "placeholders"),
    (make(ev.ContextCompacted, messages_before=31, messages_after=3, summary_chars=1301, reason="restart"),
     "≡", "compacted", "info", "compacted 31 messages into a summary (1,301 chars) + 2 carried; why: restart"),
    # A restart's: the summary, its marker and 6 carried messages; the marker is not one of them (the session's
    # own line says 6 messages carried over).
    (make(ev.ContextCompacted, messages_before=40, messages_after=8, summary_chars=900, reason="restart", carried=6),
     "≡", "compacted", "info", "compacted 40 messages into a summary (900 chars) + 6 carried; why: restart"),
    (make(ev.WindDown, usage_pct=0.86),
     "⚠", "wind-down", "caution", "context 86% full: wind-down sent; the agent was asked to save its state; the "
                                  "session restarts after its next turn"),
    (make(ev.RestartPending, usage_pct=0.9, carryover_messages=7, carryover_tokens=3200, next_session=3),
     "⏸", "restart-pending", "warning", "restart pending: context 90% full; session 3 would start with 7 carried "
                                        "messages (~3.2k tokens); awaiting approval"),
    (make(ev.RestartApproved, by="auto"), "✓", "restart-approved", "info", "restart approved (auto)"),
    (make(ev.RestartDenied, by="operator"), "✗", "restart-denied", "warning",
     "restart denied (operator); the run ends; it can be resumed later (agent-console resume)"),
    (make(ev.CompletionBlocked, reason="r", feedback="2 tasks left", checker="plan", stop_reason="end_turn",
          blocks=1, max_blocks=5), "↩", "blocked", "caution",
     "stop refused by plan (1 of 5): 2 tasks left; the agent was told to continue"),
    # Past the bound: never "(6/5)".
    (make(ev.CompletionBlocked, reason="r", feedback="2 tasks left", checker="protocol", stop_reason="end_turn",
          blocks=6, max_blocks=5), "↩", "blocked", "caution",
     "stop refused by protocol (over the 5 allowed: the operator is asked): 2 tasks left; the agent was told to "
     "continue"),
    (make(ev.CompletionBypassed, budget="cost", stop_reason="end_turn"), "↷", "bypassed", "warning",
     "a turn without a tool call accepted without the completion check: the money budget is spent"),
    (make(ev.BudgetExhausted, budget="deadline", limit=480.0, used=481.0), "◷", "budget", "warning",
     "deadline passed (481s of 480s); the agent was told to wrap up"),
    (make(ev.StuckDetected, reason="no progress", pattern="read_file x4"), "⚠", "stuck", "warning",
     "stuck: no progress (read_file x4)"),
    (make(ev.OperatorCommand, command="force_checkpoint", source="cli", status="applied", detail="phase 2"),
     "⌘", "operator", "info", "force checkpoint applied (cli): phase 2"),
    (make(ev.OperatorCommand, command="stop", source="inbox", status="received"), "⌘", "received", "info",
     "stop received (inbox)"),
    (make(ev.OperatorCommand, command="stop", source="inbox", status="discarded"), "⌘", "operator", "info",
     "discarded stop from an earlier run"),
    (make(ev.JobCompleted, summary="wrote\ndigest.md", confidence=0.85), "✔", "done", "success",
     "job complete (confidence 0.85): wrote digest.md"),
    (make(ev.StateRecovered, file="todos.json", problem="torn", action="rebuilt", moved_to="todos.json.bad"),
     "‼", "recovered", "warning", "recovered todos.json: torn (kept as todos.json.bad); rebuilt"),
    (make(ev.ErrorEvent, message="connection refused", where="provider"), "✗", "error", "error",
     "error (provider): connection refused"),
    (make(ev.AssistantMessage, turn=3, text="  I read the notes.\n\n   Next:   the digest.\t"), "»", "reply", "info",
     "I read the notes. Next: the digest."),
    (make(ev.NeedsOperator, reason="stuck", message="no todo completed in 12 turns", evidence=["read_file x6"]),
     "⚑", "needs-you", "warning", "NEEDS YOU (stuck): no todo completed in 12 turns; the run is paused until you "
                                  "answer"),
    (make(ev.NeedsOperator, reason="restart_approval", message="the context is full", paused=False), "⚑",
     "needs-you", "warning", "NEEDS YOU (restart approval): the context is full"),
    (make(ev.NeedsOperatorCleared, reason="stuck", by="operator's resume"), "✓", "needs-cleared", "info",
     "no longer needs you (stuck): operator's resume"),
]


@pytest.mark.parametrize(("event", "icon", "kind", "severity", "line"), CASES, ids=lambda v: getattr(v, "type", None))
def test_each_event_in_words(event, icon, kind, severity, line):
    p = describe(event)
    assert p is not None
    assert (p.icon, p.kind, p.severity, p.line) == (icon, kind, severity, line)
    assert (p.seq, p.ts) == (event.seq, event.ts)
    assert p.severity in present.SEVERITIES and p.source
    assert cell_len(p.icon) == 1  # narrow glyphs only: an emoji takes two cells in some terminals, one in others


def test_every_event_type_is_described_or_deliberately_silent():
    union = typing.get_args(typing.get_args(ev.Event)[0])
    assert union and set(union) == set(present.DESCRIBERS) | set(present.SILENT)
    assert not set(present.DESCRIBERS) & set(present.SILENT)
    for cls in present.SILENT:
        fields = {"turn": 1, "text": "x", "input_tokens": 1, "output_tokens": 1, "what": "x"}
        event = cls.model_construct(ts=T, seq=1, session=1, **{k: v for k, v in fields.items()
                                                                if k in cls.model_fields})
        assert describe(event) is None
    ok = make(ev.ToolResult, turn=1, call_id="c", tool="read_file", ok=True, content="fine")
    assert describe(ok) is None  # a call that worked is the call's line, not an event of its own
    assert describe(make(ev.PlanChanged, phases=2)) is None
    assert describe(make(ev.PhaseTransition, kind="phase", stage="started", from_phase=1)) is None


def test_agent_text_can_neither_break_nor_colour_a_line():
    e = make(ev.Feedback, source="x\x1b[31m", severity="info", message="one\r\ntwo\n\n\x1b[2Jthree\x07")
    p = describe(e)
    assert p is not None and "\n" not in p.line and "\r" not in p.line and "\x1b" not in p.line
    assert p.text == "feedback from x\\x1b[31m (info): one two \\x1b[2Jthree\\x07"
    long = describe(make(ev.StuckDetected, reason="x" * 1000))
    assert long is not None and len(long.text) < 260 and long.text.endswith("...")


def test_the_demo_model_is_named_where_it_speaks():
    assert present.is_demo("scripted") and not present.is_demo("openai")
    p = describe(make(ev.SessionStarted, reason="new", provider="scripted", model="scripted-agent"))
    assert p is not None and p.detail == present.DEMO == "scripted demo model: deterministic, no AI"
    real = describe(make(ev.SessionStarted, reason="new", provider="anthropic", model="claude"))
    assert real is not None and present.DEMO not in real.line


def test_a_value_not_a_str_is_shown_as_json_writes_it():
    """tool_args writes a value not a str without json.dumps (an int as its digits, others by one encoder made
    once): the same text as json.dumps(value, ensure_ascii=False), for every kind of JSON value."""
    values = [0, -7, 12, 10**30, True, False, None, 0.5, 1e300, -0.0, [1, "é", None], {"a": [True]}, "x", []]
    for value in values:
        raw = json.dumps({"n": value})
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        assert tool_args("x", raw, 0) == f"n={shown}", value
        assert present.argument_items(raw) == [("n", shown)], value


def test_arguments_read_as_json_loads_reads_them():
    """_parse_args reads one object with nothing around it by json's scanner at once, everything else by json.loads:
    the same data, and the same refusals, either way."""
    from console.view.present.args import _parse_args

    raws = ['{"n": 12}', '{}', ' {"a": 1}', '{"a": 1} ', '{"a": 1}\n', '{"a": 1}{"b": 2}', '{"a": 1} x', '{"a": 1}}',
            '{"a": [1, 2.5, true, null, "\\u00e9"], "b": {"c": NaN}}', '{"a": 1,}', '{"a": }', '{', '}', '{}}',
            '{"a": "\x01"}', '{"a": 1e999}', '\ufeff{"a": 1}', '{"a": 1, "a": 2}', "[1]", '"s"', "", "{" * 10_000 + "}"]
    for raw in raws:
        try:
            expected = json.loads(raw or "{}")
        except (ValueError, RecursionError):
            expected = ValueError
        got = _parse_args(raw)
        assert got == expected and type(got) is type(expected), raw  # (json's NaN is one object: equal to itself)


def test_tool_args_is_the_one_formatter_of_a_calls_arguments():
    assert tool_args("read_file", '{"path": "notes/a.md", "start": 1}') == "notes/a.md"  # a path is self-evident
    assert tool_args("job_complete", '{"summary": "done", "confidence": 0.9}') == "summary=done"
    assert tool_args("grep", '{"pattern": "TODO", "path": "src"}') == "src"
    assert tool_args("todo_write", json.dumps({"todos": [{"text": "a"}, {"text": "b"}]})) == "2 tasks"
    assert tool_args("todo_write", json.dumps({"todos": [{"text": "a"}]})) == "1 task"
    assert tool_args("x", '{"count": [1, 2]}') == "count=[1, 2]"
    assert tool_args("x", "{bad") == "<invalid JSON>" and tool_args("x", "") == "" and tool_args("x", "[1]") == ""
    assert tool_args("x", "[" * 100_000) == "<invalid JSON>"  # deep nesting is no crash
    # Arguments the log cut (a write_file of 20 KB) read as far as they go: the call's path, not "<invalid JSON>";
    # the expanded view says the rest is not in the log. A model's own malformed JSON is still said as such.
    logged, was_cut = ev.cap_text(json.dumps({"path": "report.md", "content": "a line of the report\n" * 1000}))
    assert was_cut is not None and tool_args("write_file", logged) == "report.md"
    assert describe(make(ev.ToolCalled, turn=1, call_id="c", tool="write_file", arguments=logged,
                         arguments_cut=was_cut)).text == "write_file(report.md)"
    items = present.argument_items(logged)
    assert items[0] == ("path", "report.md") and items[1][0] == "content"
    assert items[-1][0] == "" and items[-1][1].startswith("[... ") and "more chars not logged" in items[-1][1]
    assert tool_args("x", '{"path": "a.md", "content": "abc') == "<invalid JSON>"
    assert tool_args("x", "[" * 100_000 + "\n[... 5 more chars not logged; sha256 0123456789abcdef]") == \
        "<invalid JSON>"
    assert tool_args("add_note", json.dumps({"text": "line one\nline two"})) == "text=line one line two"
    cut = tool_args("add_note", json.dumps({"text": "word " * 40}), 20)
    assert len(cut) == 20 and cut.endswith("…") and len(tool_args("add_note", json.dumps({"text": "w" * 99}), 0)) > 99
    # The headless turn line and the console's call line both say it this way.
    assert describe(make(ev.ToolCalled, turn=1, call_id="c", tool="todo_write",
                         arguments=json.dumps({"todos": [1, 2, 3]}))).text == "todo_write(3 tasks)"  # type: ignore


def test_argument_items_keep_text_as_text():
    items = present.argument_items(json.dumps({"path": "a.md", "content": "# T\n\nbody", "n": 3}))
    assert items == [("path", "a.md"), ("content", "# T\n\nbody"), ("n", "3")]
    assert present.argument_items("{}") == [] and present.argument_items("") == []
    assert present.argument_items("not json") == [("", "not json")]


def test_brief_is_one_line_for_a_fleet_row():
    p = describe(make(ev.ToolDenied, turn=1, call_id="c", tool="write_file", policy="rbw", reason="r"))
    assert present.brief(p) == "⊗ denied write_file by rbw: r"
    assert present.brief(p, 12) == "⊗ denied wr…" and present.brief(None) == ""
    assert present.brief(Presented("", "x", "info", "plain")) == "plain"


def test_stuck_told_and_labels():
    fb = make(ev.Feedback, source="stuck", message="No todo completed in 6 turns.")
    same = ev.StuckDetected(ts=T, seq=fb.seq + 1, session=1, reason="No todo completed in 6 turns.")
    later = ev.StuckDetected(ts=T, seq=fb.seq + 5, session=1, reason="No todo completed in 6 turns.")
    assert present.stuck_told(fb, same) and not present.stuck_told(fb, later) and not present.stuck_told(None, same)
    assert present.phase_label(None) == "" and present.stop_kind("end_turn") == "a turn without a tool call"
    done = make(ev.TodosChanged, phase_name="Job Completion", phase_number=0, total_phases=2, kind="completion",
                items=[])
    assert present.phase_label(done) == "Job Completion"  # type: ignore[arg-type]
    assert present.run_ended_text(make(ev.RunEnded, reason="job_complete", sessions=1), "k3f9q") == (  # type: ignore
        "run k3f9q ended: job_complete after 1 session")
    assert present.tokens(950) == "950" and present.tokens(1234) == "1.2k" and present.tokens(2_500_000) == "2.50M"


def test_present_imports_no_textual():
    code = "import sys, console.view.present; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- the story: the model's text, results, needs-you moments, and which events are told ----------------------------
def test_the_models_text_is_trimmed_to_one_safe_line():
    assert present.reply_text("one\n\n  two\r\n three  ") == "one two three"
    assert present.reply_text(" \n\t ") == "" and describe(make(ev.AssistantMessage, turn=1, text=" \n ")) is None
    long = present.reply_text("word " * 200)
    assert len(long) == present.REPLY and long.endswith("...")
    assert len(present.reply_text("word " * 200, 0)) > 900  # 0: the whole text
    hostile = present.reply_text("a\x1b]0;pwned\x07b \x1b[2J c\u202ed \x9b31m \x1c e")
    assert "\x1b" not in hostile and "\x07" not in hostile and "\u202e" not in hostile and "\x9b" not in hostile
    assert hostile == "a\\x1b]0;pwned\\x07b \\x1b[2J c\\u202ed \\x9b31m e"
    # A cut never leaves half an escape that would read as something else.
    assert not present.reply_text("x" * 198 + "\x1b[31m", 200).endswith("\\x...")


def test_a_calls_result_in_a_few_words():
    def result(content: str, **kw: object) -> ev.ToolResult:
        return make(ev.ToolResult, turn=1, call_id="c", tool="read_file", ok=True, content=content, **kw)  # type: ignore

    assert present.result_text(result("\n[a.md: lines 1-3 of 3]\n# A\n\nbody\n")) == (
        "read_file: [a.md: lines 1-3 of 3] (+2 lines)")
    assert present.result_text(result("Created a.md (1 line).")) == "read_file: Created a.md (1 line)."
    assert present.result_text(result("")) == "read_file: (empty)"
    assert present.result_text(result("ok", duration_ms=2500)) == "read_file: ok (2.5 s)"
    said = present.result_text(result("\x1b[2J" + "y" * 500))
    assert "\x1b" not in said and len(said) < 130


def test_needs_you_carries_its_evidence_and_how_to_answer():
    e = make(ev.NeedsOperator, reason="stuck", message="looping\x1b[31m", evidence=["read_file a.md x6\nagain", " "])
    p = describe(e)
    assert p is not None and p.lines == ("read_file a.md x6 again",)  # blank evidence left out, one line each
    assert "\x1b" not in p.text and p.text.startswith("NEEDS YOU (stuck): looping\\x1b[31m")
    assert present.needs_answer(e, "k3f9q") == ("go on with `agent-console resume k3f9q`, or end it with "  # type: ignore
                                                "`agent-console stop k3f9q`")
    restart = make(ev.NeedsOperator, reason="restart_approval", message="full", paused=False)
    assert present.needs_answer(restart, "k3f9q") == (  # type: ignore[arg-type]
        "answer with `agent-console approve k3f9q` or `agent-console deny k3f9q`")
    assert present.needs_answer(make(ev.NeedsOperator, reason="crashed", message="x", paused=False)) == ""  # type: ignore
    for reason in typing.get_args(ev.NeedReason):
        assert "_" not in present.need_label(reason)
    assert present.need_label("some_new_reason") == "some new reason"


def test_in_story_is_the_one_answer_of_which_events_are_told():
    union = typing.get_args(typing.get_args(ev.Event)[0])
    told = {cls.model_fields["type"].default for cls in union if present.in_story(cls.model_fields["type"].default)}
    assert told == present.STORY_TYPES
    # Every event an operator reads about, the turn's text and tokens; not the bookkeeping, not tool_called (the
    # turn's line says the calls).
    for name in ("assistant_message", "token_usage", "tool_result", "needs_operator", "needs_operator_cleared",
                 "command_sandbox", "model_retry", "operator_command", "phase_transition", "tool_denied",
                 "completion_blocked", "feedback", "stuck_detected", "budget_exhausted", "completion_bypassed",
                 "session_started", "restart_pending", "restart_approved", "restart_denied", "run_ended",
                 "job_completed", "todos_changed", "error", "state_recovered", "context_masked", "wind_down"):
        assert present.in_story(name), name
    for name in ("tool_called", "turn_started", "text_delta", "guardrails_status", "memory_updated", "nope"):
        assert not present.in_story(name), name
    assert present.in_story(make(ev.NeedsOperator, reason="stuck", message="m"))
    assert not present.in_story(make(ev.TurnStarted, turn=1))


def test_an_mcp_server_reads_as_its_state_tools_and_confinement_escaped() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    ready = ev.McpServerEvent(ts=at, seq=1, session=1, server="time", state="ready",
                              tools=["mcp__time__get_current_time", "mcp__time__convert_time"],
                              confined="bubblewrap 0.11.0")
    p = present.describe(ready)
    assert p is not None and p.severity == "info" and p.kind == "mcp"
    assert p.text == "MCP server time ready: 2 tools: get_current_time, convert_time · confined by bubblewrap 0.11.0"
    loose = ready.model_copy(update={"confined": "UNCONFINED (run --unconfined)"})
    assert present.describe(loose).severity == "warning"  # type: ignore[union-attr]
    down = ev.McpServerEvent(ts=at, seq=2, session=1, server="gh\x1b[2J", state="unavailable", known=False,
                             why="did not start (its last words: \x1b]52;c;aGk=\x07)", calls=3, errors=2)
    p = present.describe(down)
    assert p is not None and p.severity == "warning"
    assert "its tools are not known (job.toml names none in tools): none offered · not running · after 3 calls " \
           "(2 failed)" in p.text
    assert all("\x1b" not in s and "\x07" not in s for s in (p.text, p.detail, *p.lines))
    assert p.lines == ("did not start (its last words: \\x1b]52;c;aGk=\\x07)",)


def test_an_unavailable_mcp_call_says_its_tool_once() -> None:
    r = ev.ToolResult(ts=datetime(2026, 1, 1, tzinfo=UTC), seq=1, session=1, turn=1, call_id="c",
                      tool="mcp__hostile__die", ok=False,
                      content="mcp__hostile__die is unavailable: the server exited during the call (it was restarted). "
                              "Nothing is known of its effects.")
    p = present.describe(r)
    assert p is not None and p.text.startswith(
        "mcp__hostile__die failed: unavailable: the server exited during the call (it was restarted)")


def test_the_narrow_phase_column_names_the_final_review_not_done() -> None:
    """A run that gave up in its final review read "done" in the fleet's phase column, beside "needs you: gave up"
    (a completed run's row still says "done": console/view/fleet.py)."""
    at = datetime(2026, 1, 1, tzinfo=UTC)

    def todos(kind: str, number: int = 0, total: int = 0) -> ev.TodosChanged:
        return ev.TodosChanged(ts=at, seq=1, session=1, phase_name="x", phase_number=number, total_phases=total,
                               kind=kind, items=[])  # type: ignore[arg-type]

    assert [present.phase_short(todos("bootstrap")), present.phase_short(todos("phase", 2, 4)),
            present.phase_short(todos("transition")), present.phase_short(todos("completion"))] == \
        ["boot", "2/4", "→", "final"]
