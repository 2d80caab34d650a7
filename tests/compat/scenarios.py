"""The compatibility scenarios: each is written once and run against every provider (see ``__init__.py``).

To add one, append a ``Scenario`` to ``SCENARIOS``. Keep the turns provider-neutral (tool calls with JSON
arguments, plain text): the runner turns them into ScriptedTurns and into OpenAI / Anthropic SSE streams.
"""

from __future__ import annotations

import json

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
        first = next(i for i, r in enumerate(out.requests) if "[masked: the result of read_file" in str(r.body))
        later = out.requests[first:]
        assert len(later) >= 3, "turns must follow the masking"
        assert all("[masked: the result of read_file" in str(r.body) for r in later)


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
