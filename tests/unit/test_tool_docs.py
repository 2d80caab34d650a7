"""The tools' full docs (layer 3): generated from the tool definitions, complete, and never drifting from the
schemas the providers are sent; the prompt's guide is one short line per tool pointing to its doc."""

from __future__ import annotations

import json

import pytest
from pydantic import Field

from console.engine.context.layers import DEFAULT_SYSTEM_PROMPT, build_system
from console.engine.messages import ToolCall
from console.engine.tools import default_registry
from console.engine.tools.commands import CommandToolConfig, build_command_tools
from console.engine.tools.docs import (
    HEADER,
    INDEX,
    DocContext,
    doc_problems,
    documented_arguments,
    render_all,
    render_doc,
    render_index,
)
from console.engine.tools.limits import CommandWorld
from console.engine.tools.registry import Example, Failure, NoArgs, Tool, ToolArgs, ToolOutcome, ToolRegistry

BUILTINS = default_registry(file_index=True).tools()  # find_files too, though it is opt-in
COMMANDS = build_command_tools(
    [CommandToolConfig(name="run_tests", description="Run the test suite.", command=["pytest", "-q", "tests/"],
                       timeout=300, max_output_kb=128, env={"API_TOKEN": "s3cr3t-value", "PYTHONHASHSEED": "0"})],
    CommandWorld())


class PathArgs(ToolArgs):
    path: str = Field(description="A path")
    count: int = Field(default=3, ge=1, le=9, description="How many")


def _noop(_rt: object, _a: object) -> str:
    return ""


@pytest.mark.parametrize("tool", [*BUILTINS, *COMMANDS], ids=lambda t: t.name)
def test_every_tool_has_a_complete_doc(tool: Tool) -> None:
    assert doc_problems(tool) == []


@pytest.mark.parametrize("tool", [*BUILTINS, *COMMANDS], ids=lambda t: t.name)
def test_every_example_is_a_call_the_registry_accepts(tool: Tool) -> None:
    """Through the very path a model's call takes: JSON text, parse, validate."""
    registry = ToolRegistry([tool])
    for ex in tool.examples:
        parsed = registry.parse(ToolCall(id="c", name=tool.name, arguments=json.dumps(ex.args)))
        assert not isinstance(parsed, ToolOutcome), (ex, parsed)


@pytest.mark.parametrize("tool", BUILTINS, ids=lambda t: t.name)
def test_a_doc_lists_exactly_the_schemas_arguments_with_their_facts(tool: Tool) -> None:
    doc = render_doc(tool, DocContext())
    schema = tool.spec().parameters
    assert documented_arguments(doc) == list(schema["properties"])
    for name, prop in schema["properties"].items():
        line = next(x for x in doc.splitlines() if x.startswith(f"- `{name}` ("))
        assert ("required" if name in schema.get("required", []) else "optional") in line
        if "maxLength" in prop:
            assert f"{prop['maxLength']} characters" in line
        if "maximum" in prop:
            assert f"to {prop['maximum']}" in line
        if "default" in prop:
            assert f"default {json.dumps(prop['default'])}" in line
    assert doc.startswith(HEADER + "\n") and "## Examples" in doc and "## Errors" in doc
    for ex in tool.examples:
        assert json.dumps(ex.args, ensure_ascii=False) in doc
    for f in tool.errors:
        assert f.when.split("{")[0][1:40] in doc


def test_nested_arguments_are_listed_under_their_parent() -> None:
    doc = render_doc(next(t for t in BUILTINS if t.name == "todo_write"), DocContext())
    assert "- `todos` (array of object, required, 1-50 items)" in doc
    assert "  - `task` (string, required, 1-500 characters)" in doc and "  - `done` (boolean, optional" in doc
    assert documented_arguments(doc) == ["todos"]


def test_the_drift_check_catches_a_doc_that_is_not_the_schema(monkeypatch) -> None:
    tool = Tool("t", "Do it.", PathArgs, _noop, examples=(Example({"path": "a"}, "x"),), errors=(Failure("a", "b"),))
    assert doc_problems(tool) == []
    from console.engine.tools import docs

    original = docs.arguments
    monkeypatch.setattr(docs, "arguments", lambda t: original(t)[:1])  # a renderer that forgets an argument
    assert any("the schema has ['path', 'count']" in p for p in doc_problems(tool))


def test_a_tool_without_example_or_errors_is_reported() -> None:
    problems = doc_problems(Tool("t", "Do it.", PathArgs, _noop))
    assert "no example" in problems and any("no error" in p for p in problems)


def test_an_example_that_does_not_validate_cannot_even_be_defined() -> None:
    with pytest.raises(ValueError, match=r"tool t: example 1 does not validate"):
        Tool("t", "Do it.", PathArgs, _noop, examples=(Example({"path": "a", "count": 99}, "too many"),))
    with pytest.raises(ValueError, match=r"example 2 does not validate"):
        Tool("t", "Do it.", NoArgs, _noop, examples=(Example({}, "ok"), Example({"x": 1}, "unknown argument")))


def test_the_runs_limits_and_folder_are_filled_in() -> None:
    write = next(t for t in BUILTINS if t.name == "write_file")
    doc = render_doc(write, DocContext("tool_docs", max_write_mb=2, max_job_mb=50))
    assert "at most 2 MB" in doc and "at most 50 MB" in doc and "tool_docs/" in doc
    assert "{" + "max_write_mb}" not in doc and "tools/" not in doc.replace("tool_docs/", "")


def test_braces_in_a_job_tomls_text_are_text() -> None:
    [tool] = build_command_tools([CommandToolConfig(name="fmt", description="Format {folder} and {x} {", command=[
        "sh", "-c", "echo {max_job_mb}"])], CommandWorld())
    doc = render_doc(tool, DocContext("tools"))
    assert "Format {folder} and {x} {." in doc  # the description is the operator's, sent to the model as it is
    assert "It runs exactly `sh -c 'echo {max_job_mb}'`" in doc  # the argv as declared, not filled in
    assert "## Arguments\n\nNone: call it with `{}`." in doc


def test_a_commands_doc_comes_from_its_job_toml_entry() -> None:
    [tool] = COMMANDS
    doc = render_doc(tool, DocContext())
    assert tool.summary == "run `pytest -q tests/` (job-declared command)"
    assert "It runs exactly `pytest -q tests/` (an argv, no shell)" in doc
    assert "killed after 300 s" in doc and "At most 128 KB of its output" in doc
    assert "job.toml's API_TOKEN, PYTHONHASHSEED" in doc
    assert "s3cr3t-value" not in doc  # the names of its variables, never their values
    assert "The tool docs in tools/, job.toml and instructions.md are read-only to it" in doc
    assert "no network (not even loopback)" in doc and "exit code" in doc
    [loose] = build_command_tools([CommandToolConfig(name="x", description="X.", command=["true"])],
                                  CommandWorld(unconfined=True))
    text = render_doc(loose, DocContext())
    assert "unconfined" in text and "read-only to it" not in text


def test_a_command_named_readme_does_not_take_the_index() -> None:
    [tool] = build_command_tools([CommandToolConfig(name="README", description="X.", command=["true"])],
                                 CommandWorld())
    files = render_all([*BUILTINS, tool], DocContext())
    assert tool.doc_name == "README.tool.md" and files["README.tool.md"].startswith(HEADER)
    assert files[INDEX].startswith(HEADER + "\n# Tool docs")
    assert len(files) == len(BUILTINS) + 2


def test_the_index_lists_every_tool_and_what_holds_for_all() -> None:
    index = render_index([*BUILTINS, *COMMANDS], DocContext("tool_docs"))
    for t in [*BUILTINS, *COMMANDS]:
        assert f"- [{t.name}]({t.doc_name}): " in index
    assert "`tool_docs/<tool>.md`" in index and "read-only" in index and "Denied by" in index
    assert "commands see it read-only" in index
    assert "commands see it" not in render_index(BUILTINS, DocContext(commands_confined=False))


def test_the_guide_is_one_short_line_per_tool_ending_with_its_doc() -> None:
    registry = ToolRegistry([*BUILTINS, *COMMANDS])
    assert all("(doc:" not in line for line in registry.guide().splitlines())  # no docs written: no pointers
    registry.docs_folder = "tool_docs"
    lines = registry.guide().splitlines()
    assert len(lines) == len(BUILTINS) + len(COMMANDS)
    for tool, line in zip(registry.tools(), lines, strict=True):
        assert line.startswith(f"- {tool.name}: ") and line.endswith(f" (doc: tool_docs/{tool.doc_name})")
        assert "\n" not in line and len(line) < 140, line
    system = build_system(DEFAULT_SYSTEM_PROMPT, registry)
    tools = system.split("## Tools\n", 1)[1]
    assert tools.startswith("Full docs (arguments, examples, errors) are read-only files in tool_docs/; read one "
                            "when a call fails.\n- todo_complete: ")


def test_the_prompt_stays_about_as_small_as_before() -> None:
    """The guide's pointers cost bytes every turn: paid for by shorter schemas and descriptions (measured before
    this change: 2,106 tokens of system prompt and tool schemas with the default tools)."""
    from console.engine.context.tokens import estimate_text

    registry = default_registry()
    registry.docs_folder = "tools"
    system = build_system(DEFAULT_SYSTEM_PROMPT, registry)
    specs = json.dumps([s.model_dump() for s in registry.specs()], separators=(",", ":"))
    assert estimate_text(system) + estimate_text(specs) <= 2106 * 1.03
