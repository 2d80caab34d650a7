"""Issue 17, point 8: guardrail declarations are checked when the run starts, and read_before_write governs
every tool that changes a file.

A typo in job.toml's ``[guardrails]`` (a ``sequential`` dependency on a tool that does not exist, a policy key
or field spelled wrong) exits 2 with one line naming the key, before anything runs. The policies are played
through the whole CLI (``run --headless --in-place --script``) with exact model turns.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from console.cli import main
from console.engine import events as ev
from console.engine.guardrails import FILE_CHANGING_TOOLS, PolicyGate
from console.engine.job import JobPaths
from console.engine.job_config import JobConfig
from console.engine.tools import default_registry
from console.engine.tools.registry import Tool, ToolArgs
from tests.unit.test_guardrails_world import FakeWorld

COMMANDS = """
[[tools]]
name = "test"
description = "Run the tests"
command = ["true"]

[[tools]]
name = "publish"
description = "Publish"
command = ["true"]
"""


# The scripts end with a free stop of a job whose plan was never done: incomplete, honestly (exit 1).
INCOMPLETE = 1


def play(paths: JobPaths, tmp_path: Path, script: list[dict[str, Any]]) -> int:
    file = tmp_path / f"script-{uuid.uuid4().hex[:6]}.json"
    file.write_text(json.dumps(script))
    return main(["run", str(paths.root), "--headless", "--in-place", "--script", str(file)])


def turn(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"text": "", "calls": [{"name": n, "arguments": a} for n, a in calls]}


@pytest.mark.parametrize(("table", "expected"), [
    # A dependency on a tool that does not exist gated nothing (the typo'd tool is never called).
    ('[[guardrails.policies]]\ntype = "sequential"\ndependencies = { pubish = ["test"] }\n',
     "job.toml: key 'guardrails.policies.0.dependencies': 'pubish' is not a tool of this job (did you mean "
     "'publish'?) (tools: test, publish, "),
    # A prerequisite that does not exist can never succeed: publish would be blocked for ever.
    ('[[guardrails.policies]]\ntype = "sequential"\ndependencies = { publish = ["tset"] }\n',
     "key 'guardrails.policies.0.dependencies': 'tset' is not a tool of this job (did you mean 'test'?)"),
    ('[[guardrails.policies]]\ntype = "read_before_write"\n[[guardrails.policies]]\ntype = "sequential"\n'
     'dependencies = { publish = ["test", "lint"] }\n',
     "key 'guardrails.policies.1.dependencies': 'lint' is not a tool of this job"),
    ('[[guardrails.policies]]\ntype = "read_before_write"\nwrite_tools = ["apend_file"]\n',
     "key 'guardrails.policies.0.write_tools': 'apend_file' is not a tool of this job (did you mean "
     "'append_file'?)"),
    ('[[guardrails.policies]]\ntype = "read_before_write"\nread_tools = ["reed_file"]\n',
     "key 'guardrails.policies.0.read_tools': 'reed_file' is not a tool of this job (did you mean 'read_file'?)"),
    # A "write tool" that changes no file, or a read tool without the path argument, would gate nothing.
    ('[[guardrails.policies]]\ntype = "read_before_write"\nwrite_tools = ["publish"]\n',
     "key 'guardrails.policies.0.write_tools': 'publish' changes no file; the tools that do: write_file, "
     "append_file, edit_file"),
    ('[[guardrails.policies]]\ntype = "read_before_write"\nread_tools = ["todo_write"]\n',
     "key 'guardrails.policies.0.read_tools': 'todo_write' has no 'path' argument"),
    ('[[guardrails.policies]]\ntype = "read_before_write"\npath_param = "file"\n',
     "key 'guardrails.policies.0.read_tools': 'read_file' has no 'file' argument"),
    # Misspelled keys and fields (these were refused before issue 17 too: kept here as the cases).
    ('[[guardrails.policies]]\ntype = "sequential"\ndependencys = { publish = ["test"] }\n',
     "key 'guardrails.policies.0.dependencys': unknown key"),
    ('[[guardrails.policies]]\ntype = "sequentail"\ndependencies = { publish = ["test"] }\n',
     "key 'guardrails.policies.0': missing or unknown type"),
    ('[guardrails]\ndeadlin = "1h"\n', "key 'guardrails.deadlin': unknown key"),
    ('[[guardrails.feedback]]\ntype = "static"\nfeedback = "x"\non_file_create = "a.md"\n',
     "key 'guardrails.feedback.0.on_file_create': unknown key"),
    ('[guardrails.completion]\ntype = "files"\npaths = ["../outside.md"]\n',
     "key 'guardrails.completion.paths.0': '../outside.md' goes outside the job folder"),
    ('[guardrails.completion]\ntype = "files"\npaths = ["/etc/passwd"]\n',
     "key 'guardrails.completion.paths.0': '/etc/passwd' is absolute"),
    ('[guardrails.completion]\ntype = "files"\npaths = ["./.console/outcome.json"]\n',
     "is not a file of the job (it is the job folder itself or the harness's .console/)"),
])
def test_a_guardrail_typo_exits_2_with_a_line_naming_the_key(make_job, tmp_path, capsys, table: str,
                                                               expected: str) -> None:
    paths = make_job(files={"notes.md": "old\n"})
    (paths.root / "job.toml").write_text(table + COMMANDS)
    code = play(paths, tmp_path, [turn(("publish", {})), {"text": "done"}])
    err = capsys.readouterr().err
    assert code == 2, err
    assert expected in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1
    assert not paths.events.exists()  # refused before the run started: nothing ran


def test_the_tools_a_guardrail_names_may_be_builtins_or_the_jobs_commands(make_job, tmp_path) -> None:
    paths = make_job()
    (paths.root / "job.toml").write_text(
        '[guardrails.completion]\ntype = "none"\n[[guardrails.policies]]\ntype = "sequential"\n'
        'dependencies = { publish = ["test", "read_file"], job_complete = ["publish"] }\n' + COMMANDS)
    assert play(paths, tmp_path, [turn(("publish", {})), turn(("test", {}), ("read_file", {"path": "instructions.md"})),
                                  turn(("publish", {})), {"text": "done"}]) == INCOMPLETE
    log = list(ev.read_events(paths.events))
    [denied] = [e for e in log if isinstance(e, ev.ToolDenied)]
    assert denied.tool == "publish" and "requires test and read_file" in denied.reason
    assert [(e.tool, e.ok) for e in log if isinstance(e, ev.ToolResult)] == [
        ("publish", False), ("test", True), ("read_file", True), ("publish", True)]


def test_append_to_an_existing_unread_file_is_denied_until_it_is_read(make_job, tmp_path) -> None:
    paths = make_job(files={"notes.md": "the operator's notes\n"})
    (paths.root / "job.toml").write_text(
        '[guardrails.completion]\ntype = "none"\n[[guardrails.policies]]\ntype = "read_before_write"\n')
    append = ("append_file", {"path": "notes.md", "content": "the agent's line"})
    script = [turn(append), turn(("read_file", {"path": "notes.md"})), turn(append),
              turn(("append_file", {"path": "new.md", "content": "a new file is free"})), {"text": "done"}]
    assert play(paths, tmp_path, script) == INCOMPLETE
    log = list(ev.read_events(paths.events))
    [denied] = [e for e in log if isinstance(e, ev.ToolDenied)]
    assert (denied.tool, denied.policy) == ("append_file", "read_before_write")
    assert "notes.md already exists and has not been read: call read_file('notes.md') first" in denied.reason
    assert [(e.tool, e.ok) for e in log if isinstance(e, ev.ToolResult)] == [
        ("append_file", False), ("read_file", True), ("append_file", True), ("append_file", True)]
    assert (paths.root / "notes.md").read_text() == "the operator's notes\nthe agent's line\n"


def test_every_builtin_tool_that_changes_a_file_is_governed_by_default() -> None:
    # The registry says which tools change a file (Tool.modifies); the policy's standalone default agrees.
    writers = tuple(t.name for t in default_registry().tools() if t.modifies is not None)
    assert writers == FILE_CHANGING_TOOLS == ("write_file", "append_file", "edit_file")
    config = JobConfig.model_validate({"guardrails": {"policies": [{"type": "read_before_write"}]}})
    [entry] = config.guardrails.policies
    assert entry.write_tools == list(writers)


class _TargetArgs(ToolArgs):
    target: str
    text: str = ""


def test_a_new_tool_that_changes_a_file_is_governed_without_naming_it(monkeypatch) -> None:
    """A tool added to the registry with ``modifies`` is under read_before_write with no change to the policy,
    keyed by the argument its entry names (here ``target``, not ``path``)."""
    stamp = Tool("stamp_file", "Stamp a file", _TargetArgs, lambda rt, a: "stamped", modifies="target")
    # job.toml's check knows the registry's tools as plain data (tools.tool_names, kept equal to the registry by
    # tests/unit/test_tool_names.py): the new tool is added there as it would be to the registry.
    from console.engine.tools.tool_names import BUILTIN_TOOLS

    monkeypatch.setattr("console.engine.job_config.BUILTIN_TOOLS",
                        (*BUILTIN_TOOLS, (stamp.name, stamp.params, stamp.modifies)))
    config = JobConfig.model_validate({"guardrails": {"policies": [{"type": "read_before_write"}]}})
    gate = PolicyGate([e.build() for e in config.guardrails.policies])
    world = FakeWorld("notes.md")
    verdict = gate.check("stamp_file", {"target": "notes.md"}, world)
    assert not verdict.allowed and "notes.md already exists and has not been read" in verdict.reason
    assert gate.check("stamp_file", {"target": "new.md"}, world).allowed
    gate.on_result("read_file", {"path": "notes.md"}, True, world)
    assert gate.check("stamp_file", {"target": "notes.md"}, world).allowed


def test_a_tool_declared_to_modify_a_missing_argument_is_refused() -> None:
    with pytest.raises(ValueError, match="modifies='file' is not one of its arguments"):
        Tool("bad", "Bad", _TargetArgs, lambda rt, a: "", modifies="file")
