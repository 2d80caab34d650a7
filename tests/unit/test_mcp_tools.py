"""[[mcp]] in job.toml and the operator's [mcp] caps; the tools made of a server's list (names, schemas, collisions);
a call's journal: one a kill -9 interrupted is never sent again (its outcome is unknown)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from console.engine import events as ev
from console.engine.job import JobError, JobPaths
from console.engine.job_config import load_job_config
from console.engine.messages import ToolCall
from console.engine.runtime import Runtime
from console.engine.tools.mcp_config import McpCaps, McpServerConfig, caps_problem
from console.engine.tools.mcp_tools import McpCallResult, McpToolInfo, McpUnavailable, build_mcp_tools
from console.engine.tools.registry import ToolRegistry

OBJECT = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


class Fake:
    """A server's port, in memory: its tools, and the calls it got."""

    def __init__(self, name: str, listed: Sequence[McpToolInfo], answer: McpCallResult | None = None,
                 **config: Any) -> None:
        self.config = McpServerConfig(name=name, command=["srv"], **config)
        self.tools = list(listed)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.timeouts: list[float] = []
        self.answer = answer or McpCallResult(True, "fine")

    def call(self, tool: str, arguments: dict[str, Any], timeout: float, should_stop: Any = None) -> McpCallResult:
        self.calls.append((tool, arguments))
        self.timeouts.append(timeout)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    def close(self) -> None:
        pass


def job_toml(tmp_path: Path, text: str) -> JobPaths:
    (tmp_path / "instructions.md").write_text("# Task\n")
    (tmp_path / "job.toml").write_text(text)
    return JobPaths(tmp_path)


# -- job.toml ------------------------------------------------------------------------------------------------
def test_a_stdio_server_is_declared_with_names_of_variables_only(tmp_path: Path) -> None:
    paths = job_toml(tmp_path, '[[mcp]]\nname = "time"\ncommand = ["mcp-server-time"]\nenv = ["TZ_TOKEN"]\n'
                               'tools = ["get_current_time"]\nrequired = true\n')
    (server,) = load_job_config(paths).mcp
    assert (server.name, server.command, server.env, server.tools, server.required) == (
        "time", ["mcp-server-time"], ["TZ_TOKEN"], ["get_current_time"], True)


@pytest.mark.parametrize(("toml", "says"), [
    ('[[mcp]]\nname = "web"\nurl = "https://me:secret@example.com/mcp"\n', "holds no user or password"),
    ('[[mcp]]\nname = "t"\ncommand = ["x"]\nenv = {TOKEN = "secret"}\n', "mcp.0.env"),
    ('[[mcp]]\nname = "t"\ncommand = ["x"]\nenv = ["token"]\n', "not a variable name"),
    ('[[mcp]]\nname = "a_b"\ncommand = ["x"]\n', "1 to 20 letters, digits or '-'"),
    ('[[mcp]]\nname = "t"\ntimeout = 5\n', "timeout without a command or a url"),
    ('[[mcp]]\nname = "t"\ncommand = ["x"]\n[[mcp]]\nname = "T"\ncommand = ["y"]\n', "two servers are named"),
    ('[[mcp]]\nname = "t"\ncommand = ["x"]\nshell = true\n', "mcp.0.shell"),
])
def test_what_a_job_may_not_declare_is_one_line_naming_the_key(tmp_path: Path, toml: str, says: str) -> None:
    with pytest.raises(JobError) as caught:
        load_job_config(job_toml(tmp_path, toml))
    assert says in str(caps := caught.value) and "\n" not in str(caps)
    assert "secret" not in str(caught.value)  # a value written in job.toml is never echoed


def test_the_operators_caps_bound_what_a_job_declares() -> None:
    servers = [McpServerConfig(name="time", command=["mcp-server-time"]),
               McpServerConfig(name="git", command=["mcp-server-git"])]
    assert caps_problem(servers, McpCaps()) is None
    assert caps_problem([], McpCaps(allow=False)) is None
    refused = caps_problem(servers, McpCaps(allow=False))
    assert refused is not None and "allow = false under [mcp]" in refused
    only_time = caps_problem(servers, McpCaps(commands=["mcp-server-time"]))
    assert only_time is not None and "mcp.1.command" in only_time and "mcp-server-git" in only_time


# -- the tools -----------------------------------------------------------------------------------------------
def test_tools_are_named_for_both_providers_and_filtered_by_the_allow_list() -> None:
    server = Fake("docs", [McpToolInfo("search", "Search.", OBJECT), McpToolInfo("fetch", "Fetch.", OBJECT),
                           McpToolInfo("x" * 60, "Long.", OBJECT)], tools=["search", "x" * 60, "absent"])
    built = build_mcp_tools([server])
    assert [t.name for t in built.tools] == ["mcp__docs__search"]
    assert any("cannot make a tool name" in s for s in built.skipped)
    assert any("does not list absent" in s for s in built.skipped)
    spec = built.tools[0].spec()
    assert spec.parameters == OBJECT


def test_two_tools_of_one_name_refuse_the_start() -> None:
    twice = Fake("dup", [McpToolInfo("a", "", OBJECT), McpToolInfo("a", "", OBJECT)])
    with pytest.raises(ValueError, match="two tools would be named mcp__dup__a"):
        build_mcp_tools([twice])
    with pytest.raises(ValueError, match="two tools would be named mcp__s__t"):
        build_mcp_tools([Fake("s", [McpToolInfo("t", "", OBJECT)])], reserved={"mcp__s__t"})


@pytest.mark.parametrize(("schema", "why"), [
    ({"type": "array"}, "not of type object"),
    ("object", "not a JSON object"),
    ({"type": "object", "properties": {"a": {"type": 7}}}, "not a valid JSON schema"),
])
def test_a_schema_that_is_not_a_bounded_object_schema_is_not_offered(schema: Any, why: str) -> None:
    built = build_mcp_tools([Fake("s", [McpToolInfo("t", "", schema)])])
    assert built.tools == [] and why in built.skipped[0]


@pytest.fixture
def rt(tmp_path: Path, clock) -> Runtime:  # type: ignore[no-untyped-def]
    (tmp_path / "instructions.md").write_text("# Task\n")
    paths = JobPaths(tmp_path)
    return Runtime(paths, clock, ev.EventStream(paths.events, clock))


def call(rt: Runtime, server: Fake, arguments: str) -> Any:
    registry = ToolRegistry(build_mcp_tools([server]).tools)
    parsed = registry.parse(ToolCall(id="c1", name=f"mcp__{server.config.name}__t", arguments=arguments))
    assert isinstance(parsed, tuple), parsed
    return registry.run(rt, *parsed)


def test_a_call_reaches_the_server_with_its_arguments_and_its_result_is_bounded(rt: Runtime) -> None:
    server = Fake("s", [McpToolInfo("t", "", OBJECT)], McpCallResult(True, "A" * 5000 + "Z" * 5000),
                  max_output_kb=1)
    out = call(rt, server, '{"q": "hello"}')
    assert server.calls == [("t", {"q": "hello"})]
    assert out.ok and out.content.startswith("A" * 512) and "result truncated: showed 1,024 of 10,000" in out.content


def test_arguments_the_schema_refuses_never_reach_the_server(rt: Runtime) -> None:
    server = Fake("s", [McpToolInfo("t", "", OBJECT)])
    out = call(rt, server, '{"q": 5}')
    assert not out.ok and "Invalid arguments for mcp__s__t: 'q'" in out.content and server.calls == []


def test_a_server_that_does_not_answer_is_a_result_not_a_crash(rt: Runtime) -> None:
    server = Fake("s", [McpToolInfo("t", "", OBJECT)], McpUnavailable("no answer within 60 s"))  # type: ignore[arg-type]
    out = call(rt, server, '{"q": "x"}')
    assert not out.ok and "mcp__s__t is unavailable: no answer within 60 s" in out.content


def test_a_call_a_crash_interrupted_is_not_sent_again(rt: Runtime) -> None:
    # The journal held the call's intent and no result: a kill -9 came while the server had it.
    server = Fake("s", [McpToolInfo("t", "", OBJECT)])
    rt.current_call = "c1"
    rt.redo["c1"] = {"mcp": "s", "tool": "t", "started": True}
    out = call(rt, server, '{"q": "x"}')
    assert not out.ok and server.calls == []
    assert "interrupted by a crash of the harness" in out.content and "unknown" in out.content
    assert "c1" not in rt.redo


def test_the_intent_is_recorded_before_the_server_is_asked(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    server = Fake("s", [McpToolInfo("t", "", OBJECT)])
    seen: list[tuple[dict[str, Any], int]] = []
    real = rt.intent

    def spy(compute):  # type: ignore[no-untyped-def]
        facts, redo = real(compute)
        seen.append((facts, len(server.calls)))
        return facts, redo

    monkeypatch.setattr(rt, "intent", spy)
    rt.current_call = "c1"
    assert call(rt, server, '{"q": "x"}').ok
    ((facts, asked),) = seen
    assert asked == 0 and len(server.calls) == 1
    # "files": the stem of the names its non-text content would be saved under (random, known after a kill).
    assert facts.pop("files").isalnum() and facts == {"mcp": "s", "tool": "t", "started": True}


def test_the_jobs_deadline_bounds_a_call(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    server = Fake("s", [McpToolInfo("t", "", OBJECT)], timeout=60.0)
    monkeypatch.setattr(rt.guards, "seconds_to_cut", lambda: 5.0)
    assert call(rt, server, '{"q": "x"}').ok and server.timeouts == [5.0]  # at most the time left
    monkeypatch.setattr(rt.guards, "seconds_to_cut", lambda: 0.0)
    out = call(rt, server, '{"q": "x"}')
    assert not out.ok and "the job's time is up" in out.content and len(server.calls) == 1  # never sent


def test_an_mcp_tools_doc_lists_the_servers_arguments() -> None:
    from console.engine.tools.docs import DocContext, doc_problems, documented_arguments, render_doc

    (tool,) = build_mcp_tools([Fake("s", [McpToolInfo("t", "Find things.", OBJECT)])]).tools
    doc = render_doc(tool, DocContext())
    assert documented_arguments(doc) == ["q"] and "call it with `{}`" not in doc and "## Examples" not in doc
    assert "It is given any argument" not in doc and tool.params == {"q"}
    assert doc_problems(tool) == ["no example"]  # none of ours: the server's schema is the reference


# -- guardrails that name an MCP tool -------------------------------------------------------------------------
def test_a_read_before_write_read_tool_of_a_server_needs_its_path_argument_at_the_start() -> None:
    from console.engine.guardrails.config import GuardrailsConfig
    from console.engine.tools.mcp_tools import guardrail_problem

    fs = Fake("fs", [McpToolInfo("read_text", "", {"type": "object", "properties": {"path": {"type": "string"}}}),
                     McpToolInfo("stat", "", OBJECT)])
    tools = build_mcp_tools([fs]).tools

    def rbw(read: str) -> GuardrailsConfig:
        return GuardrailsConfig.model_validate({"policies": [{"type": "read_before_write", "read_tools": [read]}]})

    assert guardrail_problem(rbw("mcp__fs__read_text"), tools, [fs]) is None
    assert guardrail_problem(rbw("mcp__fs__stat"), tools, [fs]) == (
        "key 'guardrails.policies.0.read_tools': 'mcp__fs__stat' has no 'path' argument: read_before_write could not "
        "tell which file it reads")
    # A server that did not start: what it offers is not known, its names pass (its tools answer "unavailable").
    fs.state = "unavailable"
    assert guardrail_problem(rbw("mcp__fs__gone"), [], [fs]) is None


def test_job_toml_accepts_a_policy_on_a_declared_servers_tool_only(tmp_path: Path) -> None:
    server = '[[mcp]]\nname = "fs"\ncommand = ["srv"]\ntools = ["read_text"]\n\n'
    ok = job_toml(tmp_path, server + '[[guardrails.policies]]\ntype = "read_before_write"\n'
                                     'read_tools = ["read_file", "mcp__fs__read_text"]\n')
    assert load_job_config(ok).guardrails.policies[0].read_tools == ["read_file", "mcp__fs__read_text"]
    bad = job_toml(tmp_path, server + '[[guardrails.policies]]\ntype = "sequential"\n'
                                      'dependencies = { mcp__fs__write = ["read_file"] }\n')
    with pytest.raises(JobError, match="'mcp__fs__write' is not a tool of this job"):
        load_job_config(bad)
