"""Every agent tool, path confinement and invalid arguments."""

from __future__ import annotations

import json
import os

import pytest

from console.engine import events as ev
from console.engine.messages import ToolCall
from console.engine.phases import BOOTSTRAP_TODOS
from console.engine.runtime import Runtime
from console.engine.tools import ToolOutcome, default_registry
from tests.evidence_support import do_bootstrap_work

REG = default_registry()
PLAN = """# Execution Plan

## Overview
Test.

## Phase 1: Gather
- [ ] Read a.md
- [ ] Read b.md
- [ ] Note facts
- [ ] Read c.md
- [ ] Note more

## Phase 2: Write
- [ ] Write out.md
- [ ] Check out.md
- [ ] Note it
- [ ] Review
- [ ] Polish
"""


@pytest.fixture
def rt(make_job, clock):
    paths = make_job(files={"a.md": "# Alpha\nline 2\nline 3\n", "sub/b.txt": "bee\n"})
    r = Runtime(paths, clock, ev.EventStream(paths.events, clock))
    r.seen: list[ev.EventBase] = []
    r.events.subscribe(r.seen.append)
    r.phases.ensure_bootstrap()
    return r


def call(rt: Runtime, name: str, raw: str | None = None, **args: object) -> ToolOutcome:
    parsed = REG.parse(ToolCall(id="c1", name=name, arguments=raw if raw is not None else json.dumps(args)))
    if isinstance(parsed, ToolOutcome):
        return parsed
    return REG.run(rt, *parsed)


def types(rt: Runtime) -> list[str]:
    return [e.type for e in rt.seen]


# -- schemas and invalid arguments ------------------------------------------------------
def test_schemas_are_generated_from_types_without_refs_or_titles() -> None:
    specs = {s.name: s for s in REG.specs()}
    assert set(specs) >= {"todo_write", "todo_complete", "todo_rewind", "archive_and_reset",
                          "generate_workspace_summary", "add_accomplishment", "add_note", "job_complete",
                          "read_file", "write_file", "append_file", "edit_file", "list_files", "search_files"}
    dumped = json.dumps([s.parameters for s in specs.values()])
    assert "$ref" not in dumped and '"title"' not in dumped
    tw = specs["todo_write"].parameters
    assert tw["properties"]["todos"]["items"]["properties"]["task"]["type"] == "string"
    assert specs["todo_complete"].parameters["properties"] == {}
    assert specs["job_complete"].parameters["required"] == ["summary", "confidence"]


@pytest.mark.parametrize(
    "name, raw, expected",
    [
        ("read_file", "{not json", "not valid JSON"),
        ("read_file", "[1, 2]", "expected a JSON object"),
        ("read_file", "{}", "'path': Field required"),
        ("read_file", '{"path": "a.md", "start_line": "x"}', "'start_line'"),
        ("read_file", '{"path": "a.md", "colour": 1}', "'colour': unknown argument"),
        ("job_complete", '{"summary": "s", "confidence": 7}', "'confidence': Input should be less than or equal"),
        ("todo_write", '{"todos": []}', "'todos'"),
        ("nope", "{}", "Unknown tool 'nope'"),
    ],
)
def test_invalid_arguments_come_back_as_readable_errors(rt, name, raw, expected) -> None:
    out = call(rt, name, raw)
    assert not out.ok
    assert expected in out.content
    if name != "nope":
        assert "Expected" in out.content


# -- file tools and confinement ------------------------------------------------------------
def test_read_file_ranges_and_hints(rt) -> None:
    (rt.paths.root / "long.txt").write_text("\n".join(f"l{i}" for i in range(1, 501)))
    out = call(rt, "read_file", path="long.txt", start_line=10, max_lines=5)
    assert out.ok and out.content.splitlines()[0] == "[long.txt: lines 10-14 of 500]"
    assert out.content.splitlines()[1] == "l10"
    assert "read_file(path='long.txt', start_line=15)" in out.content
    assert "does not exist" in call(rt, "read_file", path="missing.md").content
    assert "past the end" in call(rt, "read_file", path="a.md", start_line=99).content
    (rt.paths.root / "bin.dat").write_bytes(b"\x00\x01\x02")
    assert "binary" in call(rt, "read_file", path="bin.dat").content


def test_write_append_edit(rt) -> None:
    assert call(rt, "write_file", path="out/new.md", content="hello\nworld\n").content.startswith("Created out/new.md")
    assert call(rt, "append_file", path="out/new.md", content="more").ok
    assert (rt.paths.root / "out/new.md").read_text() == "hello\nworld\nmore\n"
    assert call(rt, "edit_file", path="out/new.md", old_text="world", new_text="there").ok
    assert "hello\nthere" in (rt.paths.root / "out/new.md").read_text()
    assert "not found" in call(rt, "edit_file", path="out/new.md", old_text="zzz", new_text="").content
    call(rt, "write_file", path="dup.md", content="x x")
    assert "occurs 2 times" in call(rt, "edit_file", path="dup.md", old_text="x", new_text="y").content
    assert call(rt, "edit_file", path="dup.md", old_text="x", new_text="y", replace_all=True).ok


def test_list_and_search_skip_harness_state(rt) -> None:
    listing = call(rt, "list_files").content
    assert "a.md (" in listing and "sub/b.txt (" in listing and ".console" not in listing
    hits = call(rt, "search_files", pattern="^line").content
    assert hits.splitlines() == ["a.md:2: line 2", "a.md:3: line 3"]
    assert "not a valid regular expression" in call(rt, "search_files", pattern="(").content
    assert "No lines match" in call(rt, "search_files", pattern="zebra").content


@pytest.mark.parametrize(
    "path, reason",
    [
        ("../outside.md", "'..' would leave the job folder"),
        ("sub/../../x.md", "'..' would leave the job folder"),
        ("/etc/passwd", "absolute paths are not allowed"),
        ("~/secrets", "absolute paths are not allowed"),
        (".console/todos.json", "harness's own state"),
        ("", "the path is empty"),
    ],
)
@pytest.mark.parametrize("tool", ["read_file", "write_file", "list_files"])
def test_paths_that_leave_the_job_are_refused(rt, tool, path, reason) -> None:
    args = {"path": path, "content": "x"} if tool == "write_file" else {"path": path}
    if tool == "list_files" and path == "":
        return  # an empty path lists the job root, by design
    out = call(rt, tool, **args)
    assert not out.ok and reason in out.content


def test_symlink_leaving_the_job_is_refused(rt, tmp_path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret")
    os.symlink(outside, rt.paths.root / "link")
    os.symlink(outside / "secret.txt", rt.paths.root / "file_link.txt")
    for p in ("link/secret.txt", "file_link.txt"):
        out = call(rt, "read_file", path=p)
        assert not out.ok and "symlink that leads outside" in out.content
    assert not call(rt, "write_file", path="link/new.txt", content="x").ok
    assert not (outside / "new.txt").exists()


# -- todo tools ------------------------------------------------------------------------------
def test_todo_complete_message_and_bootstrap(rt) -> None:
    assert [i.text for i in rt.todos.state.items] == BOOTSTRAP_TODOS
    out = call(rt, "todo_complete")
    assert out.content == ("Task 1 'Generate workspace summary using generate_workspace_summary()' marked complete. "
                           "4 tasks remaining.")


def _finish_bootstrap(rt) -> None:
    (rt.paths.main_plan).write_text(PLAN)
    do_bootstrap_work(rt)
    for _ in BOOTSTRAP_TODOS:
        out = call(rt, "todo_complete")
    assert "transition" in out.content


def test_last_todo_starts_transition_and_todo_write_finishes_it(rt) -> None:
    _finish_bootstrap(rt)
    assert rt.todos.state.pending is not None and rt.todos.state.items == []
    assert (rt.paths.archive / "phase-00-bootstrap.json").exists()
    assert rt.paths.workspace_summary.exists()
    (notice,) = rt.take_notices()
    assert notice.meta["kind"] == "transition_prompt" and "todo_write" in notice.content
    refused = call(rt, "todo_complete")
    assert not refused.ok and "transition is in progress" in refused.content
    out = call(rt, "todo_write", todos=["Read a.md", "Read b.md", {"task": "Note facts"}, "Read c.md", "Note more"])
    assert out.ok and "Phase 1 'Gather' (1 of 2)" in out.content
    st = rt.todos.state
    assert (st.kind, st.phase_name, st.phase_number, st.total_phases) == ("phase", "Gather", 1, 2)
    assert rt.compaction_reason is not None
    assert "← CURRENT" in rt.paths.main_plan.read_text().split("## Phase 1")[1].splitlines()[0]
    transitions = [e for e in rt.seen if e.type == "phase_transition"]
    assert [(t.kind, t.stage) for t in transitions] == [("bootstrap", "started"), ("bootstrap", "completed")]


def test_todo_write_outside_transition_replaces_items_and_advises_size(rt) -> None:
    _finish_bootstrap(rt)
    assert call(rt, "todo_write", todos=["Read a.md", "b", "c", "d", "e"]).ok  # phase 1's list
    out = call(rt, "todo_write", todos=["one", "two"])
    assert out.ok and "small phase" in out.content
    assert [i.text for i in rt.todos.state.items] == ["one", "two"]


def test_the_bootstrap_list_cannot_be_rewritten_around_its_work(rt) -> None:
    # the trial's move: replace the bootstrap's tasks with placeholders and tick those
    out = call(rt, "todo_write", todos=["Step one", "Step two", "Step three", "Step four", "Step five"])
    assert not out.ok and "bootstrap's tasks stay on the list" in out.content
    assert [i.text for i in rt.todos.state.items] == BOOTSTRAP_TODOS
    # adding to it is fine, and a task it completed may go
    do_bootstrap_work(rt)
    assert call(rt, "todo_complete").ok
    assert call(rt, "todo_write", todos=[*BOOTSTRAP_TODOS[1:], "Skim a.md"]).ok
    assert [i.text for i in rt.todos.state.items] == [*BOOTSTRAP_TODOS[1:], "Skim a.md"]


def test_rewind_archives_with_issue_and_guides_replanning(rt) -> None:
    _finish_bootstrap(rt)
    rt.take_notices()
    call(rt, "todo_write", todos=["Read a.md", "Read b.md", "Note facts", "Read c.md", "Note more"])
    call(rt, "read_file", path="a.md")  # the evidence "Read a.md" names
    call(rt, "todo_complete")
    out = call(rt, "todo_rewind", issue="b.md does not exist; use sub/b.txt")
    assert out.ok and "Rewind started" in out.content
    archive = rt.paths.archive / "phase-01-gather-rewind.json"
    data = json.loads(archive.read_text())
    assert data["note"] == "FAILED - rewind: b.md does not exist; use sub/b.txt"
    assert [i["done"] for i in data["items"]] == [True, False, False, False, False]
    (notice,) = rt.take_notices()
    assert notice.content.startswith("REWIND") and "b.md does not exist" in notice.content
    assert "b.md does not exist" in rt.paths.workspace_summary.read_text()
    out = call(rt, "todo_write", todos=["Read a.md", "Read sub/b.txt", "Note facts", "Read c.md", "Note more"])
    assert out.ok and rt.todos.state.phase_name == "Gather" and rt.todos.state.pending is None


def test_archive_and_reset(rt) -> None:
    call(rt, "todo_complete")
    out = call(rt, "archive_and_reset")
    assert out.ok and "archived and reset" in out.content
    assert (rt.paths.archive / "phase-00-bootstrap-reset.json").exists()
    assert rt.todos.state.pending.kind == "reset"


def test_malformed_plan_at_transition_gives_error_event_and_actionable_message(rt) -> None:
    rt.paths.main_plan.write_text("# Plan\n\nno phases here\n")
    do_bootstrap_work(rt)
    for _ in BOOTSTRAP_TODOS:
        call(rt, "todo_complete")
    (notice,) = rt.take_notices()
    assert "main_plan.md needs fixing first" in notice.content and "## Phase 1" in notice.content
    assert "error" in types(rt)
    out = call(rt, "todo_write", todos=["a", "b", "c", "d", "e"])
    assert not out.ok and out.content.startswith("todo_write refused: main_plan.md has no phases")
    rt.paths.main_plan.write_text(PLAN)
    assert call(rt, "todo_write", todos=["a", "b", "c", "d", "e"]).ok


def test_plan_written_by_agent_emits_plan_changed_or_warning(rt) -> None:
    out = call(rt, "write_file", path="main_plan.md", content="# Plan\nnothing\n")
    assert out.ok and "Warning: main_plan.md has no phases" in out.content
    assert call(rt, "write_file", path="main_plan.md", content=PLAN).content.endswith("chars).")
    changed = [e for e in rt.seen if e.type == "plan_changed"]
    assert changed[0].error and changed[1].phases == 2 and changed[1].current == "Gather"


# -- workspace and completion tools ----------------------------------------------------------------
def test_workspace_summary_format(rt) -> None:
    call(rt, "add_accomplishment", text="Extracted 23 requirements")
    call(rt, "add_note", text="Section 4 uses odd formatting")
    assert call(rt, "generate_workspace_summary").ok
    text = rt.paths.workspace_summary.read_text()
    for heading in ("# Workspace Summary", "Generated: 2026-01-15 14:00", "## Files",
                    "| File | Purpose | Last Modified |", "## Accomplishments", "- Extracted 23 requirements",
                    "## Current State", "- Working on Phase: Bootstrap", "## Notes",
                    "- Section 4 uses odd formatting"):
        assert heading in text
    assert "| a.md | Alpha |" in text and "| instructions.md | Task instructions |" in text
    assert ".console" not in text


def test_the_workspace_summary_shows_control_characters_never_sends_them(rt) -> None:
    """A file named with an ESC sequence (the job's, or the agent's own), a note or a heading with one: the summary
    is a file the operator cats in a terminal, so each is shown as text (a raw ESC was written into it)."""
    (rt.paths.root / "evil\x1b[31mname.md").write_text("# Head\x1b]0;TITLE\x07ing\n")
    call(rt, "add_note", text="note \x1b[2J with\na second line")
    call(rt, "add_accomplishment", text="done \x1b[5m")
    assert call(rt, "generate_workspace_summary").ok
    raw = rt.paths.workspace_summary.read_bytes()
    assert b"\x1b" not in raw and b"\x07" not in raw
    text = raw.decode()
    assert "| evil\\x1b[31mname.md | Head\\x1b]0;TITLE\\x07ing |" in text
    assert "- note \\x1b[2J with a second line" in text and "- done \\x1b[5m" in text


def test_a_workspace_summary_the_job_folder_has_no_room_for_fails_the_call(rt) -> None:
    """The file is written after the step's commit: the call says now that it would be refused, not "Wrote"."""
    assert rt.sandbox is not None
    rt.sandbox.max_job_bytes = rt.sandbox.job_bytes() + 10
    out = call(rt, "generate_workspace_summary")
    assert not out.ok and "max_job_mb" in out.content and "workspace_summary.md" in out.content
    assert not rt.paths.workspace_summary.exists()
    rt.paths.workspace_summary.mkdir()  # a folder by that name
    rt.sandbox.max_job_bytes = 2**30
    out = call(rt, "generate_workspace_summary")
    assert not out.ok and "a folder has that name" in out.content
    rt.paths.workspace_summary.rmdir()
    assert call(rt, "generate_workspace_summary").ok and rt.paths.workspace_summary.exists()


def test_job_complete_checks_deliverables_and_records(rt) -> None:
    bad = call(rt, "job_complete", summary="s", deliverables=["nope.md"], confidence=0.5)
    assert not bad.ok and "nope.md does not exist" in bad.content and rt.outcome is None
    (rt.paths.root / "empty.md").write_text("")
    empty = call(rt, "job_complete", summary="s", deliverables=["empty.md"], confidence=0.9)
    assert not empty.ok and "empty.md is empty" in empty.content
    # Seed 000's protocol (nothing declared) refuses a job whose bootstrap is not done: this call's error.
    early = call(rt, "job_complete", summary="Done", deliverables=["a.md"], confidence=0.92)
    assert not early.ok and not early.end_session and rt.outcome is None
    assert "job_complete was refused" in early.content and "the bootstrap is not finished" in early.content
    (blocked,) = [e for e in rt.seen if e.type == "completion_blocked"]
    assert (blocked.checker, blocked.stop_reason, blocked.blocks, blocked.max_blocks) == (
        "protocol", "job_complete", 1, 5)
    rt.guardrails.free_stop = True  # [guardrails.completion] type = "none": a free stop
    out = call(rt, "job_complete", summary="Done", deliverables=["a.md"], confidence=0.92, notes="3 flagged")
    assert out.ok and out.end_session
    (done,) = [e for e in rt.seen if e.type == "job_completed"]
    assert (done.summary, done.deliverables, done.confidence, done.notes) == ("Done", ["a.md"], 0.92, "3 flagged")
    # The agent's word, not the record's: the event says what is left (the run will end incomplete).
    assert done.unmet and "bootstrap" in done.unmet[0]
    assert out.ok and out.end_session
    (done,) = [e for e in rt.seen if e.type == "job_completed"]
    assert (done.summary, done.deliverables, done.confidence, done.notes) == ("Done", ["a.md"], 0.92, "3 flagged")
