"""The compatibility scenarios: each is written once and run against every provider (see ``__init__.py``).

To add one, append a ``Scenario`` to ``SCENARIOS``. Keep the turns provider-neutral (tool calls with JSON
arguments, plain text): the runner turns them into ScriptedTurns and into OpenAI / Anthropic SSE streams.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.compat.runner import Call, Ev, Outcome, Scenario, turn

NOTES = "# Notes\n\n- the build uses make\n- tests live in tests/\n"


PLAN = ("# Plan\n\n## Phase 1: Write ← CURRENT\n" + "".join(f"- step {i}\n" for i in range(5))
        + "\n## Phase 2: Check\n" + "".join(f"- check {i}\n" for i in range(5)))


def _data(i: int, lines: int = 120) -> str:
    """A file whose read_file result (~2,300 tokens) is worth masking."""
    return "".join(f"line {j} of file {i}: lorem ipsum dolor sit amet, consectetur adipiscing elit\n"
                   for j in range(lines))


def _report(i: int) -> str:
    """~1,000 tokens of a write_file's arguments: kept in the conversation, nothing to mask."""
    return f"# Part {i}\n\n" + "words of the report " * 200


# -- checks beyond the declarative fields ---------------------------------------------------------


def _masked_history_went_over_the_wire(out: Outcome) -> None:
    masked = out.of("context_masked")
    assert masked and all(e["tokens_freed"] > 0 and e["used_after"] < e["used_before"] for e in masked)
    if out.requests:
        # After the first masking, every request carries placeholders where the old results were.
        first = next(i for i, r in enumerate(out.requests) if "[masked: read_file(" in str(r.body))
        later = out.requests[first:]
        assert len(later) >= 3, "turns must follow the masking"
        assert all("[masked: read_file(" in str(r.body) for r in later)


def _summarized_by_the_model(out: Outcome) -> None:
    compacted = out.of("context_compacted")
    assert compacted and "bootstrap" in compacted[-1]["reason"]
    assert not [e for e in out.of("error") if "LLM summary failed" in e["message"]]
    if out.requests:
        # The summary request: no tools offered, the bootstrap history (tool calls and results) to summarize.
        summary = [r for r in out.requests if "SUMMARIZE" in str(r.body.get("system", r.body["messages"][0]))]
        assert len(summary) == 1 and "tools" not in summary[0].body


def _restarted_with_carryover(out: Outcome) -> None:
    assert out.result.sessions == 2 and out.result.restarts == 1
    assert [e["by"] for e in out.of("restart_approved")] == ["auto"]
    starts = out.of("session_started")
    assert [s["reason"] for s in starts] == ["new", "restart"] and starts[1]["carryover_messages"] > 0
    if out.requests:
        session2 = [r for r in out.requests if "Session restarted" in str(r.body)]
        assert len(session2) >= 3  # the first prompt of session 2 and the turns after it
        first = str(session2[0].body)
        # The carried turn is whole: the last call of session 1, and its result.
        last = [e for e in out.of("tool_called", "tool_result") if e["session"] == 1][-2:]
        assert [e["type"] for e in last] == ["tool_called", "tool_result"]
        assert last[0]["call_id"] in first and json.loads(last[0]["arguments"])["path"] in first
        assert "Session #2" in first


SCENARIOS: list[Scenario] = [
    Scenario(
        "read_then_write",
        files={"notes.md": NOTES},
        turns=[
            turn("Reading the notes.", Call("read_file", {"path": "notes.md"})),
            turn("Writing the summary.", Call("write_file", {"path": "summary.md",
                                                             "content": "The build uses make.\n"})),
        ],
        expect=[Ev("session_started"), Ev("tool_called", "read_file"), Ev("tool_result", "read_file", ok=True),
                Ev("tool_called", "write_file"), Ev("tool_result", "write_file", ok=True)],
        absent=["context_masked", "tool_denied"],
        expect_files={"summary.md": "The build uses make.", "notes.md": "tests live in tests/"},
    ),
    Scenario(
        "bad_arguments_then_corrected",
        files={"notes.md": NOTES},
        turns=[
            turn("Reading.", Call("read_file", '{"path": "notes.md"')),  # truncated JSON
            turn("Again.", Call("read_file", {"path": "notes.md", "lines": 5})),  # no such argument
            turn("Once more.", Call("read_file", {"path": "notes.md"})),
            turn("Writing.", Call("write_file", {"path": "out.md"})),  # content missing
            turn("Writing, with content.", Call("write_file", {"path": "out.md", "content": "done\n"})),
        ],
        expect=[Ev("tool_result", "read_file", ok=False), Ev("tool_result", "read_file", ok=False),
                Ev("tool_result", "read_file", ok=True), Ev("tool_result", "write_file", ok=False),
                Ev("tool_result", "write_file", ok=True)],
        expect_files={"out.md": "done"},
    ),
    Scenario(
        "masking_keeps_requests_valid",
        files={f"data{i}.txt": _data(i) for i in range(6)},
        settings={"context_window": 12_000},
        turns=[
            *(turn(f"Reading part {i}.", Call("read_file", {"path": f"data{i}.txt"})) for i in range(6)),
            turn("Noting.", Call("write_file", {"path": "notes.md", "content": "six files read\n"})),
            turn("Back to the first.", Call("read_file", {"path": "data0.txt", "max_lines": 5})),
            turn("And a listing.", Call("list_files", {})),
        ],
        counts={"context_masked": 1, "tool_result": 9},
        absent=["wind_down", "restart_approved"],
        expect=[Ev("context_masked"), Ev("tool_result", "write_file", ok=True), Ev("tool_result", "read_file", ok=True),
                Ev("tool_result", "list_files", ok=True)],
        expect_files={"notes.md": "six files read"},
        check=_masked_history_went_over_the_wire,
    ),
    Scenario(
        "restart_with_carryover",
        settings={"context_window": 8_000, "auto_restart": True, "max_restarts": 2},
        turns=[
            *(turn(f"Part {i}.", Call("write_file", {"path": f"part{i}.md", "content": _report(i)})) for i in range(6)),
            turn("Checking part 0.", Call("read_file", {"path": "part0.md", "max_lines": 3})),
            turn("Writing the index.", Call("write_file", {"path": "index.md", "content": "parts 0-5\n"})),
        ],
        expect=[Ev("session_started"), Ev("wind_down"), Ev("tool_result", "write_file", ok=True),
                Ev("session_ended"), Ev("restart_approved"), Ev("session_started"),
                Ev("tool_result", "read_file", ok=True), Ev("tool_result", "write_file", ok=True)],
        counts={"session_started": 2, "tool_result": 8},
        expect_files={"index.md": "parts 0-5", "part5.md": "# Part 5"},
        check=_restarted_with_carryover,
    ),
    Scenario(
        # Bootstrap done, the phase transition compacts the conversation with [context] summary = "llm": one
        # extra request (the turn "The bootstrap: ..." is the model's summary) whose history holds tool blocks.
        "phase_transition_with_llm_summary",
        job_toml='[context]\nsummary = "llm"\n',
        turns=[
            turn("Summary first.", Call("generate_workspace_summary")),
            turn("Done.", Call("todo_complete")),
            turn("Reading it.", Call("read_file", {"path": "workspace_summary.md"})),
            turn("Done.", Call("todo_complete")),
            turn("Reading the task.", Call("read_file", {"path": "instructions.md"})),
            turn("Done.", Call("todo_complete")),
            turn("Planning.", Call("write_file", {"path": "main_plan.md", "content": PLAN})),
            turn("Done.", Call("todo_complete")),
            turn("Phases are 5 steps each.", Call("todo_complete")),
            turn("Phase 1.", Call("todo_write", {"todos": [{"task": f"step {i}"} for i in range(5)]})),
            turn("The bootstrap: the workspace was summarized and a two-phase plan written to main_plan.md."),
            turn("Step 0.", Call("write_file", {"path": "step0.md", "content": "step 0 done\n"})),
        ],
        expect=[Ev("tool_result", "todo_complete", ok=True), Ev("phase_transition"),
                Ev("tool_result", "todo_write", ok=True), Ev("context_compacted"),
                Ev("tool_result", "write_file", ok=True)],
        absent=["completion_blocked"],
        expect_files={"main_plan.md": "Phase 1", "step0.md": "step 0 done", "workspace_summary.md": "Workspace"},
        check=_summarized_by_the_model,
    ),
]


# -- guardrails (seed 002): task completion, policies, feedback -----------------------------------------------

FINISHED_PLAN = """# Execution Plan

## Overview
Write out.md.

## Phase 1: Write
- [ ] Write out.md
- [ ] Check out.md
- [ ] Record a note
- [ ] Review the result
- [ ] Tidy up
"""
NUDGE = "Keep the notes short."
NUDGE_BLOCK = f"<feedback provider='Nudge'>\n{NUDGE}\n</feedback>"


def _complete(*deliverables: str) -> Call:
    return Call("job_complete", {"summary": "done", "deliverables": list(deliverables), "confidence": 0.9})


def _finished_plan() -> list:
    """Bootstrap, one phase, the completion todos but job_complete (tests/integration's finished_plan_script)."""
    done = Call("todo_complete")
    current = FINISHED_PLAN.replace("## Phase 1: Write", "## Phase 1: Write ← CURRENT")
    return [
        turn("Summary.", Call("generate_workspace_summary"), done),
        # The reads the bootstrap's tasks name, then their ticks (console.engine.evidence).
        turn("Bootstrap.", Call("read_file", {"path": "workspace_summary.md"}),
             Call("read_file", {"path": "instructions.md"}), done, done, done),
        turn("Planning.", Call("write_file", {"path": "main_plan.md", "content": FINISHED_PLAN}), done, done),
        turn("Phase 1.", Call("write_file", {"path": "main_plan.md", "content": current}),
             Call("todo_write", {"todos": ["Write out.md", "Check out.md", "Record a note", "Review the result",
                                           "Tidy up"]})),
        turn("Working.", Call("write_file", {"path": "out.md", "content": "# Out\n"}), done, done, done, done, done),
        turn("Phase done.", Call("write_file", {"path": "main_plan.md",
                                                "content": current.replace("← CURRENT", "✓ COMPLETE")}),
             Call("todo_write", {"todos": ["Verify all deliverables", "Generate summary report",
                                           "Call job_complete()"]})),
        turn("Verified.", done, done),
    ]


def _wire_messages(out: Outcome, index: int) -> list[dict]:
    return out.requests[index].body["messages"]


def _texts_on_wire(out: Outcome, index: int) -> list[str]:
    """Every user or system text of wire request ``index``: message contents and text blocks."""
    found = []
    for m in _wire_messages(out, index):
        if m["role"] == "assistant":
            continue
        content = m.get("content")
        if isinstance(content, str):
            found.append(content)
        elif isinstance(content, list):
            found += [b["text"] for b in content if b.get("type") == "text"]
    return found


def _tool_result_on_wire(out: Outcome, index: int, call_id: str) -> tuple[str, bool]:
    """(content, flagged as an error) of the result of ``call_id`` in wire request ``index``."""
    for m in _wire_messages(out, index):
        if out.provider == "openai" and m.get("role") == "tool" and m.get("tool_call_id") == call_id:
            return m["content"], False  # Chat Completions has no error flag on a tool message
        if out.provider == "anthropic" and m["role"] == "user" and isinstance(m["content"], list):
            for b in m["content"]:
                if b["type"] == "tool_result" and b["tool_use_id"] == call_id:
                    return b.get("content", ""), bool(b.get("is_error"))
    raise AssertionError(f"no result for {call_id} in request {index + 1}")


def _stops_refused(out: Outcome) -> None:
    blocked = out.of("completion_blocked")
    assert [b["stop_reason"] for b in blocked] == ["job_complete", "end_turn"]
    assert all(b["checker"] == "plan" and "the bootstrap is not finished" in b["feedback"] for b in blocked)
    assert [b["blocks"] for b in blocked] == [1, 2]
    # The refusals reach the agent: job_complete's as the call's error result, the bare stop's as a message.
    refused_call = out.prompts[1].messages[-1]
    assert refused_call.role == "tool" and refused_call.meta.get("ok") is False
    assert refused_call.content.startswith("[job_complete was refused: the job is not complete (plan).")
    told = out.prompts[2].messages[-1]
    assert told.meta.get("kind") == "completion_blocked" and "stop was refused" in told.content
    if out.requests:
        prefix = "call" if out.provider == "openai" else "toolu"
        content, flagged = _tool_result_on_wire(out, 1, f"{prefix}_000_0")
        assert content == refused_call.content and flagged == (out.provider == "anthropic")
        assert any(told.content in text for text in _texts_on_wire(out, 2))


def _completed(*deliverables: str) -> Callable[[Outcome], None]:
    def check(out: Outcome) -> None:
        (done,) = out.of("job_completed")
        assert done["deliverables"] == list(deliverables) and done["confidence"] == 0.9
        assert out.result.ok
    return check


def _deadline_bypassed(out: Outcome) -> None:
    (spent,) = out.of("budget_exhausted")
    assert (spent["budget"], spent["limit"]) == ("deadline", 600) and spent["used"] >= 600
    (bypass,) = out.of("completion_bypassed")
    assert (bypass["budget"], bypass["stop_reason"]) == ("deadline", "job_complete")
    assert "deadline passed" in out.result.detail
    # One wrap-up turn after the deadline, then no further request.
    assert len(out.prompts) == 3
    wrap = out.prompts[2].messages[-1]
    assert wrap.meta.get("kind") == "wrap_up" and "deadline" in wrap.content
    if out.requests:
        assert len(out.requests) == 3 and any(wrap.content in text for text in _texts_on_wire(out, 2))


def _budget_asked(out: Outcome) -> None:
    (spent,) = out.of("budget_exhausted")
    assert spent["budget"] == "tokens" and spent["used"] >= spent["limit"] == 1000
    (asked,) = out.of("needs_operator")
    assert asked["reason"] == "budget" and asked["paused"] is True
    assert asked["evidence"][0].startswith("token budget spent: ") and "1,000 tokens used" in asked["evidence"][0]
    (cleared,) = out.of("needs_operator_cleared")
    assert (cleared["reason"], cleared["by"]) == ("budget", "operator's stop")
    # The spend limit paused the run before another turn: the stop was never asked of the model, nothing passed
    # the completion check unchecked, and the operator's stop ended it as out of budget.
    assert "token budget spent" in out.result.detail and len(out.prompts) == 1


def _composite_blocked_by_files(out: Outcome) -> None:
    (blocked,) = out.of("completion_blocked")
    # Only the failing checker speaks: the plan is done, the file is missing.
    assert blocked["checker"] == "composite/files" and blocked["stop_reason"] == "job_complete"
    assert blocked["feedback"] == "Required file is missing: report.md. Create it before finishing."
    _completed("out.md", "report.md")(out)


def _denied_then_allowed(out: Outcome) -> None:
    (denied,) = out.of("tool_denied")
    assert (denied["tool"], denied["policy"], denied["error"]) == ("write_file", "read_before_write", None)
    assert "notes.md" in denied["reason"]
    result = out.prompts[1].messages[-1]
    assert result.role == "tool" and result.meta.get("ok") is False
    assert result.content.startswith("Denied by the read_before_write policy:")
    if out.requests:
        # The request after the denial is valid for the API (the strict loopback passed it) and carries the
        # denial as the call's own result.
        prefix = "call" if out.provider == "openai" else "toolu"
        content, flagged = _tool_result_on_wire(out, 1, f"{prefix}_000_0")
        assert content == result.content and flagged == (out.provider == "anthropic")


def _feedback_after_all_results(out: Outcome) -> None:
    fb = out.of("feedback")
    # After each call (seed 002): twice in turn 1 (two calls), once in turn 2.
    assert [(e["source"], e["turn"], e["block"]) for e in fb] == [("Nudge", 1, NUDGE_BLOCK), ("Nudge", 1, NUDGE_BLOCK),
                                                                 ("Nudge", 2, NUDGE_BLOCK)]
    both = NUDGE_BLOCK + "\n\n" + NUDGE_BLOCK
    # What the engine asked for: the turn's two results, then its blocks (one message, joined by a blank line).
    msgs = out.prompts[1].messages
    at = max(i for i, m in enumerate(msgs) if m.role == "assistant")
    assert [m.role for m in msgs[at + 1:at + 4]] == ["tool", "tool", "user"]
    assert msgs[at + 3].content == both and msgs[at + 3].meta.get("kind") == "feedback"
    if out.provider == "openai":
        wire = _wire_messages(out, 1)
        at = next(i for i, m in enumerate(wire) if m.get("tool_calls"))
        assert [(m["role"], m.get("tool_call_id")) for m in wire[at + 1:at + 3]] == [
            ("tool", "call_000_0"), ("tool", "call_000_1")]
        # The block is the user message right after the results (a Mistral-family template, which refuses a user
        # message there, gets "(no reply)" between them); the protected layer (todo list) joins its end.
        if wire[at + 3] == {"role": "assistant", "content": "(no reply)"}:
            at += 1
        assert wire[at + 3]["role"] == "user" and wire[at + 3]["content"].startswith(both + "\n\n")
        assert wire[-1] is wire[at + 3] and "ACTIVE TODO LIST" in wire[at + 3]["content"]
    elif out.provider == "anthropic":
        wire = _wire_messages(out, 1)
        at = next(i for i, m in enumerate(wire) if m["role"] == "assistant"
                  and any(b["type"] == "tool_use" for b in m["content"]))
        after = wire[at + 1]
        assert after["role"] == "user"
        # In the same user message: the tool_result blocks first, then the feedback as a text block.
        blocks = after["content"]
        assert [(b["type"], b.get("tool_use_id")) for b in blocks[:3]] == [
            ("tool_result", "toolu_000_0"), ("tool_result", "toolu_000_1"), ("text", None)]
        assert blocks[2]["text"] == both
        assert all(b["type"] != "tool_result" for b in blocks[3:])


GUARDRAIL_SCENARIOS: list[Scenario] = [
    Scenario(
        # Seed 002: test_task_completion_blocks_early_stop. No plan yet: job_complete and a bare stop are refused.
        "completion_blocks_early_stop",
        job_toml='[guardrails.completion]\ntype = "plan"\n',
        turns=[turn("Done already.", _complete()), turn("All done.")],
        expect=[Ev("tool_called", "job_complete"), Ev("completion_blocked"),
                Ev("tool_result", "job_complete", ok=False), Ev("completion_blocked")],
        absent=["job_completed", "completion_bypassed"],
        check=_stops_refused,
    ),
    Scenario(
        # Seed 002: test_task_completion_allows_stop_when_complete.
        "completion_allows_stop_when_complete",
        job_toml='[guardrails.completion]\ntype = "plan"\n',
        turns=[*_finished_plan(), turn("Finishing.", _complete("out.md"))],
        expect=[Ev("tool_result", "todo_write", ok=True), Ev("tool_called", "job_complete"),
                Ev("job_completed"), Ev("tool_result", "job_complete", ok=True)],
        absent=["completion_blocked", "completion_bypassed"],
        expect_files={"out.md": "# Out", "main_plan.md": "✓ COMPLETE"},
        reason="job_complete",
        check=_completed("out.md"),
    ),
    Scenario(
        # Seed 002: test_task_completion_skipped_on_deadline_exhaustion. 400 s a turn against a 10 minute
        # deadline: spent during turn 2 (its reply is cut at the deadline), turn 3 is the wrap-up, answered within
        # its time, and its job_complete passes unchecked.
        "completion_skipped_on_deadline",
        job_toml='[guardrails]\ndeadline = "10m"\n',
        advance_seconds_per_turn=(400, 400, 10),
        turns=[turn("Looking.", Call("list_files")), turn("Looking again.", Call("list_files")),
               turn("Out of time.", _complete())],
        expect=[Ev("budget_exhausted"), Ev("completion_bypassed"), Ev("job_completed"),
                Ev("tool_result", "job_complete", ok=True)],
        absent=["completion_blocked"],
        reason="budget_exhausted",
        check=_deadline_bypassed,
    ),
    Scenario(
        # Seed 002's test_task_completion_skipped_on_budget_exhaustion, for a spend limit: the first prompt alone
        # spends the token budget; the run pauses and asks its operator before another turn (no stop is let
        # through unchecked: none is asked for), and the operator's stop ends it as out of budget.
        "budget_spent_asks_the_operator",
        job_toml="[guardrails]\nbudget_tokens = 1000\n",
        turns=[turn("Looking.", Call("list_files")), turn("Out of budget, stopping.")],
        expect=[Ev("tool_result", "list_files", ok=True), Ev("budget_exhausted"), Ev("needs_operator")],
        absent=["completion_blocked", "completion_bypassed", "job_completed"],
        reason="budget_exhausted",
        check=_budget_asked,
    ),
    Scenario(
        # Seed 002: test_composite_checker_all_must_pass. The plan passes, the files checker does not.
        "composite_all_must_pass_one_failing",
        job_toml=('[guardrails.completion]\ntype = "composite"\nall_must_pass = true\n'
                  'checkers = [{ type = "plan" }, { type = "files", paths = ["report.md"] }]\n'),
        turns=[*_finished_plan(), turn("Finishing.", _complete("out.md")),
               turn("The report.", Call("write_file", {"path": "report.md", "content": "# Report\n"})),
               turn("Finishing again.", _complete("out.md", "report.md"))],
        expect=[Ev("completion_blocked"), Ev("tool_result", "job_complete", ok=False),
                Ev("tool_result", "write_file", ok=True), Ev("job_completed"),
                Ev("tool_result", "job_complete", ok=True)],
        expect_files={"report.md": "# Report"},
        reason="job_complete",
        check=_composite_blocked_by_files,
    ),
    Scenario(
        # Seed 002: test_no_checker_allows_free_stop.
        "no_checker_free_stop",
        job_toml='[guardrails.completion]\ntype = "none"\n',
        turns=[turn("I am done.")],
        absent=["completion_blocked", "completion_bypassed", "job_completed"],
        reason="agent_stopped",
    ),
    Scenario(
        # An existing file written before it was read: denied (the call's error result), read, then written.
        "policy_denial_read_before_write",
        job_toml='[[guardrails.policies]]\ntype = "read_before_write"\n',
        files={"notes.md": NOTES},
        turns=[turn("Rewriting the notes.", Call("write_file", {"path": "notes.md", "content": "new notes\n"})),
               turn("Reading first.", Call("read_file", {"path": "notes.md"})),
               turn("Rewriting.", Call("write_file", {"path": "notes.md", "content": "new notes\n"})),
               turn("A new file.", Call("write_file", {"path": "fresh.md", "content": "fresh\n"}))],
        expect=[Ev("tool_called", "write_file"), Ev("tool_denied", "write_file"),
                Ev("tool_result", "write_file", ok=False), Ev("tool_result", "read_file", ok=True),
                Ev("tool_result", "write_file", ok=True), Ev("tool_result", "write_file", ok=True)],
        expect_files={"notes.md": "new notes", "fresh.md": "fresh"},
        check=_denied_then_allowed,
    ),
    Scenario(
        # A static provider after every call (seed 002: run after each tool call): its blocks follow all the
        # turn's tool results.
        "feedback_after_tool_results",
        job_toml=('[[guardrails.feedback]]\ntype = "static"\nname = "Nudge"\n'
                  f'feedback = "{NUDGE}"\nevery_n_calls = 1\n'
                  '[[guardrails.feedback]]\ntype = "stuck"\nenabled = false\n'),
        files={"notes.md": NOTES},
        turns=[turn("Looking around.", Call("read_file", {"path": "notes.md"}), Call("list_files")),
               turn("Writing.", Call("write_file", {"path": "summary.md", "content": "short\n"}))],
        expect=[Ev("tool_result", "read_file", ok=True), Ev("feedback"), Ev("tool_result", "list_files", ok=True),
                Ev("feedback"), Ev("tool_result", "write_file", ok=True), Ev("feedback")],
        expect_files={"summary.md": "short"},
        check=_feedback_after_all_results,
    ),
]
SCENARIOS += GUARDRAIL_SCENARIOS
