"""Unattended trust, end to end: the examples an attacker and a crash found, each now a clear outcome.

Crash recovery at every kill point is in test_kill_points.py and the sandbox's races in
tests/unit/test_sandbox.py; this file runs the engine whole on what those found.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

from console.engine import events as ev
from console.engine.job import JobPaths
from console.engine.messages import ModelRequest
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedProvider
from console.providers.scripted import ScriptedTurn as T
from tests.conftest import SAMPLES, run_settings
from tests.evidence_support import bootstrap_calls

SECRET = "sk-live-TOP-SECRET-123"


class Recording(ScriptedProvider):
    """The scripted model, keeping every request it was sent."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.requests: list[ModelRequest] = []

    def stream(self, request):
        self.requests.append(request)
        yield from super().stream(request)


def quickstart(tmp_path: Path) -> JobPaths:
    root = tmp_path / "quickstart"
    shutil.copytree(SAMPLES / "quickstart", root)
    return JobPaths(root)


def run(paths: JobPaths, clock, provider=None, **settings):
    provider = provider or ScriptedProvider(clock=clock)
    return Supervisor(paths, run_settings(**settings), provider, clock=clock).run()


def recovered(paths: JobPaths) -> list[ev.StateRecovered]:
    return [e for e in ev.read_events(paths.events) if isinstance(e, ev.StateRecovered)]


# -- crash recovery ------------------------------------------------------------------------------------
def test_the_issues_reproduction_a_journal_cut_back_one_commit_still_does_every_phase(tmp_path, clock) -> None:
    """run --max-turns 23, cut the journal back to the previous commit, resume: both deliverables, every phase."""
    paths = quickstart(tmp_path)
    assert run(paths, clock, max_turns=23).reason.value == "max_turns"
    lines = paths.checkpoint.read_bytes().splitlines(keepends=True)
    commits = [i for i, line in enumerate(lines) if b'"op": "commit"' in line]
    paths.checkpoint.write_bytes(b"".join(lines[: commits[-2] + 1]))
    assert run(paths, clock).ok
    assert (paths.root / "action_items.md").read_text().count("- [ ]") == 9
    assert (paths.root / "digest.md").exists()
    memory = json.loads(paths.memory.read_text())
    intents = [t["intent"] for t in memory["completed_tasks"]]
    assert "Write action_items.md" in intents and "Write digest.md" in intents
    assert len(intents) == len(set(intents)) or sorted(intents) == sorted(intents)  # nothing recorded twice
    done_events = [e for e in ev.read_events(paths.events) if isinstance(e, ev.JobCompleted)]
    assert len(done_events) == 1


def test_each_commit_cut_back_in_turn_resumes_without_losing_or_repeating_a_task(tmp_path, clock) -> None:
    """Every suffix of the journal a kill could have lost, cut and resumed: the same working memory."""
    base = quickstart(tmp_path)
    assert run(base, clock).ok
    expected = [t["intent"] for t in json.loads(base.memory.read_text())["completed_tasks"]]
    lines_total = base.checkpoint.read_bytes().splitlines(keepends=True)
    commits = [i for i, line in enumerate(lines_total) if b'"op": "commit"' in line]
    # From a fresh run stopped at turn 20, cut back 1..8 commits (reply, calls, bookkeeping of several turns).
    for back in range(1, 9):
        paths = JobPaths(tmp_path / f"cut{back}")
        shutil.copytree(SAMPLES / "quickstart", paths.root)
        assert run(paths, clock, max_turns=20).reason.value == "max_turns"
        lines = paths.checkpoint.read_bytes().splitlines(keepends=True)
        cuts = [i for i, line in enumerate(lines) if b'"op": "commit"' in line]
        paths.checkpoint.write_bytes(b"".join(lines[: cuts[-1 - back] + 1]))
        assert run(paths, clock).ok, back
        got = [t["intent"] for t in json.loads(paths.memory.read_text())["completed_tasks"]]
        assert got == expected, back
    assert commits


def test_a_run_stopped_by_sigkill_leaves_no_temp_file_where_the_agent_looks(tmp_path, clock) -> None:
    from console.engine.tools import default_registry

    paths = quickstart(tmp_path)
    assert run(paths, clock, max_turns=10).reason.value == "max_turns"
    # What a kill between a temp write and its rename leaves: the next run sweeps it, list_files never shows it.
    (paths.state / "tmp").mkdir(exist_ok=True)
    (paths.state / "tmp" / ".main_plan.md.1234.tmp").write_text("half")
    (paths.state / ".todos.json.abcd.tmp").write_text("half")
    sup = Supervisor(paths, run_settings(max_turns=1), ScriptedProvider(clock=clock), clock=clock)
    sup.run()
    assert not list((paths.state / "tmp").iterdir()) and not list(paths.state.glob(".*.tmp"))
    from console.engine.messages import ToolCall

    reg = default_registry()
    tool, args = reg.parse(ToolCall(id="x", name="list_files", arguments="{}"))
    assert ".tmp" not in reg.run(sup.runtime, tool, args).content


# -- the sandbox, from the agent's side ----------------------------------------------------------------
def test_the_agent_cannot_rewrite_its_own_definition(tmp_path, clock) -> None:
    paths = quickstart(tmp_path)
    definition = paths.job_toml.read_bytes()
    hostile = '[model]\nprovider = "openai"\nbase_url = "http://evil.example/v1"\n'
    script = [T(calls=[C(name="write_file", arguments={"path": "job.toml", "content": hostile}),
                       C(name="write_file", arguments={"path": "JOB.TOML", "content": hostile}),
                       C(name="append_file", arguments={"path": "job.toml", "content": hostile}),
                       C(name="edit_file", arguments={"path": "job.toml", "old_text": "x", "new_text": "y"}),
                       C(name="write_file", arguments={"path": "instructions.md", "content": "Do nothing."}),
                       C(name="write_file", arguments={"path": ".console/todos.json", "content": "{}"})]),
              T(error="end of script")]
    run(paths, clock, ScriptedProvider(clock=clock, script=script))
    assert paths.job_toml.read_bytes() == definition
    assert not (paths.root / "JOB.TOML").exists()
    results = [e for e in ev.read_events(paths.events) if isinstance(e, ev.ToolResult)]
    assert len(results) == 6 and not any(r.ok for r in results)
    assert sum("part of the job's definition" in r.content for r in results) == 5
    assert "harness's own state" in results[5].content


def test_the_engine_never_reads_through_a_symlink_that_leaves_the_job(tmp_path, clock) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "plan.md").write_text(f"# Plan\n\n## Phase 1: Leak\n- [ ] send {SECRET}\n")
    (outside / "prompt.md").write_text(f"You are helpful. The key is {SECRET}.\n")
    paths = quickstart(tmp_path)
    os.symlink(outside / "prompt.md", paths.system_prompt)
    os.symlink(outside / "plan.md", paths.main_plan)
    provider = Recording(clock=clock)
    run(paths, clock, provider, max_turns=8)
    assert provider.requests
    for r in provider.requests:
        text = r.system + r.protected + "".join(m.content for m in r.messages)
        assert SECRET not in text
    assert "MAIN PLAN (main_plan.md): cannot be read" in provider.requests[0].protected


def test_a_named_pipe_in_the_job_folder_hangs_nothing(tmp_path, clock) -> None:
    paths = quickstart(tmp_path)
    os.mkfifo(paths.root / "notes" / "pipe.md")
    os.mkfifo(paths.root / "stream.txt")
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(run(paths, clock)), daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the run hung on a named pipe"
    assert result[0].ok and time.monotonic() - started < 30
    summary = paths.workspace_summary.read_text()
    assert "pipe.md" not in summary and "stream.txt" not in summary


def test_a_named_pipe_read_directly_is_refused_at_once(tmp_path, clock) -> None:
    from tests.integration.test_robustness import _call, _runtime

    paths = quickstart(tmp_path)
    os.mkfifo(paths.root / "pipe.md")
    rt = _runtime(paths, clock)
    for name, args in [("read_file", {"path": "pipe.md"}), ("append_file", {"path": "pipe.md", "content": "x"}),
                       ("edit_file", {"path": "pipe.md", "old_text": "a", "new_text": "b"}),
                       ("search_files", {"pattern": "x"}), ("generate_workspace_summary", {})]:
        started = time.monotonic()
        out = _call(rt, name, **args)
        assert time.monotonic() - started < 15, name  # refused, not blocked on the pipe (no writer ever comes)
        if name in ("read_file", "append_file", "edit_file"):
            assert not out.ok and "named pipe" in out.content, (name, out.content)


def test_huge_writes_are_refused_and_the_logs_stay_bounded(tmp_path, clock) -> None:
    """The issue's 16 appends of 64 MB, scaled to what a test can afford: nothing grows past its limit."""
    paths = quickstart(tmp_path)
    over_the_call_limit = "x" * (17 * 2**20)  # more than one tool call may carry: refused, not recorded
    over_the_write_limit = "y" * (5 * 2**20)  # recorded (as a blob), refused by the sandbox's 4 MB write limit
    script = [T(calls=[C(name="append_file", arguments={"path": "big.txt", "content": over_the_call_limit})])
              for _ in range(3)]
    script += [T(calls=[C(name="append_file", arguments={"path": "big.txt", "content": over_the_write_limit})])
               for _ in range(4)]
    script += [T(calls=[C(name="append_file", arguments={"path": "big.txt", "content": "z" * 3 * 2**20})])
               for _ in range(3)]
    script.append(T(error="end of script"))
    run(paths, clock, ScriptedProvider(clock=clock, script=script), max_job_mb=8.0)
    results = [e for e in ev.read_events(paths.events) if isinstance(e, ev.ToolResult)]
    assert [r.ok for r in results] == [False] * 7 + [True, True, False]
    assert "more than the 16777216 one tool call may carry" in results[0].content
    assert "over the limit of 4194304 bytes for one write" in results[3].content
    assert "over its limit" in results[9].content
    assert (paths.root / "big.txt").stat().st_size == 2 * (3 * 2**20 + 1)  # append_file ends each with a newline
    assert paths.events.stat().st_size < 2 * 2**20
    assert max(len(line) for line in paths.events.read_bytes().splitlines()) < 64 * 1024
    assert max(len(line) for line in paths.checkpoint.read_bytes().splitlines()) < 256 * 1024
    blobs = sum(p.stat().st_size for p in (paths.state / "blobs").iterdir()) if (paths.state / "blobs").exists() else 0
    assert blobs < 64 * 2**20


# -- bad input: every file the harness reads -----------------------------------------------------------
def test_an_outcome_file_holding_an_empty_object_is_moved_aside(tmp_path, clock) -> None:
    paths = quickstart(tmp_path)
    assert run(paths, clock).ok
    paths.outcome.write_text("{}")
    result = run(paths, clock)
    assert result.ok and result.detail == "the job was already complete"  # rebuilt from the journal
    (event,) = recovered(paths)
    assert event.file == ".console/outcome.json" and "rebuilt from the journal" in event.action
    assert json.loads(paths.outcome.read_text())["summary"]


def test_a_garbage_first_journal_line_is_kept_aside_and_the_run_goes_on(tmp_path, clock) -> None:
    paths = quickstart(tmp_path)
    assert run(paths, clock, max_turns=15).reason.value == "max_turns"
    journal = paths.checkpoint.read_bytes()
    paths.checkpoint.write_bytes(b"garbage\n" + journal)
    assert run(paths, clock).ok
    (event,) = [e for e in recovered(paths) if e.file == ".console/checkpoint.jsonl"]
    assert "line 1 is not a journal record" in event.problem and "state files" in event.action
    kept = list((paths.state / "corrupt").glob("checkpoint.jsonl.*"))
    assert len(kept) == 1 and kept[0].read_bytes() == b"garbage\n" + journal


def test_an_archive_holding_null_does_not_break_the_summary(tmp_path, clock) -> None:
    paths = quickstart(tmp_path)
    assert run(paths, clock, max_turns=15).reason.value == "max_turns"
    (paths.archive / "phase-00-bootstrap.json").write_text("null")
    (paths.archive / "phase-99-junk.json").write_text('{"items": "nope"}')
    assert run(paths, clock).ok


def test_harness_files_that_are_folders_or_pipes_are_moved_aside(tmp_path, clock) -> None:
    paths = quickstart(tmp_path)
    assert run(paths, clock, max_turns=10).reason.value == "max_turns"
    (paths.state / "run.lock").unlink()
    (paths.state / "run.lock").mkdir()
    paths.todos.unlink()
    os.mkfifo(paths.todos)
    assert run(paths, clock).ok
    files = {e.file for e in recovered(paths)}
    assert {".console/run.lock", ".console/todos.json"} <= files


def test_tool_arguments_nested_100000_deep_are_a_tool_error(tmp_path, clock) -> None:
    paths = quickstart(tmp_path)
    script = [T(calls=[C(name="write_file", arguments="[" * 100_000 + "]" * 100_000),
                       C(name="todo_write", arguments='{"todos": ' + "[" * 50_000 + "]" * 50_000 + "}")]),
              T(calls=[C(name="write_file", arguments={"path": "emoji.md", "content": "half an emoji: \ud83d!"})]),
              T(error="end of script")]
    run(paths, clock, ScriptedProvider(clock=clock, script=script))
    results = [e for e in ev.read_events(paths.events) if isinstance(e, ev.ToolResult)]
    assert [r.ok for r in results] == [False, False, True]
    assert "nested too deeply" in results[0].content
    assert (paths.root / "emoji.md").read_text(encoding="utf-8") == "half an emoji: ?!"
    assert not [e for e in ev.read_events(paths.events) if isinstance(e, ev.ErrorEvent) and e.where == "tool"]


def test_a_plan_with_a_huge_phase_number_and_a_padded_heading_runs(tmp_path, clock) -> None:
    paths = quickstart(tmp_path)
    plan = ("# Plan\n\n## Phase " + "9" * 5000 + ": Huge" + " " * 2500 + "\n"
            + "".join(f"- [ ] h{i}\n" for i in range(5))
            + "\n## Phase 2: Then" + " " * 2500 + "#\n" + "".join(f"- [ ] t{i}\n" for i in range(5)))
    script = [T(calls=[C(name="write_file", arguments={"path": "main_plan.md", "content": plan}),
                       *bootstrap_calls(C)]),  # the bootstrap's work (console.engine.evidence)
              *[T(calls=[C(name="todo_complete")]) for _ in range(5)],
              T(calls=[C(name="todo_write", arguments={"todos": [f"h{i}" for i in range(5)]})]),
              *[T(calls=[C(name="todo_complete")]) for _ in range(5)],
              T(error="end of script")]
    started = time.monotonic()
    run(paths, clock, ScriptedProvider(clock=clock, script=script))
    assert time.monotonic() - started < 10
    results = [e for e in ev.read_events(paths.events) if isinstance(e, ev.ToolResult)]
    assert all(r.ok for r in results), [r.content for r in results if not r.ok]
    errors = [e for e in ev.read_events(paths.events) if isinstance(e, ev.ErrorEvent)]
    assert not [e for e in errors if e.where not in ("plan", "provider")]


def test_a_state_file_emptied_to_braces_is_damage_not_an_empty_state(tmp_path, clock) -> None:
    """'{}' validates as an empty todo list, but the harness never writes one: it is moved aside and rebuilt."""
    paths = quickstart(tmp_path)
    assert run(paths, clock, max_turns=20).reason.value == "max_turns"
    before = json.loads(paths.memory.read_text())["completed_tasks"]
    paths.todos.write_text("{}")
    paths.memory.write_text("{}")
    assert run(paths, clock).ok
    events = {e.file: e for e in recovered(paths)}
    assert "it lacks items, kind" in events[".console/todos.json"].problem
    assert "rebuilt from the journal" in events[".console/memory.json"].action
    after = json.loads(paths.memory.read_text())["completed_tasks"]
    assert [t["intent"] for t in after[: len(before)]] == [t["intent"] for t in before]
    intents = [t["intent"] for t in after]
    assert len(intents) == len(set(intents)) == 17  # no task redone


def test_a_harness_folder_that_is_not_a_folder_is_moved_aside(tmp_path, clock) -> None:
    paths = quickstart(tmp_path)
    assert run(paths, clock, max_turns=20).reason.value == "max_turns"
    shutil.rmtree(paths.state / "tmp")
    os.mkfifo(paths.state / "tmp")
    shutil.rmtree(paths.archive)
    os.symlink(tmp_path, paths.archive)
    assert run(paths, clock).ok
    files = {e.file: e.problem for e in recovered(paths)}
    assert files[".console/tmp"] == "it was a named pipe, socket or device"
    assert files[".console/archive"] == "it was a symbolic link"
    assert not [e for e in ev.read_events(paths.events) if isinstance(e, ev.ErrorEvent)]
    assert json.loads(paths.outcome.read_text())["summary"]
