"""Many MCP tools stay cheap (console.engine.tools.tool_search): past a share of the window, the MCP tools are not
all offered; the agent finds them with mcp_tool_search and loads the ones it needs, offered from its next turn on,
for the phase, across a resume. Jobs without MCP, or whose MCP tools fit, get the very same prompts as before."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.job import JobPaths
from console.engine.store import JobStore
from console.engine.supervisor import Supervisor
from console.engine.tools import default_registry
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_tools import McpCallResult, McpToolInfo, build_mcp_tools
from console.engine.tools.registry import ToolRegistry
from console.engine.tools.tool_search import (
    MAX_LOADED,
    MAX_RESULTS,
    SEARCH_TOOL,
    offer_mcp_tools,
    schema_tokens,
)
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedTurn as T
from tests.conftest import Recording, run_settings

NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # OpenAI's and Anthropic's rule for a tool's name


def schema(i: int) -> dict[str, Any]:
    """Shaped like a real server's (a few typed, described properties)."""
    return {"type": "object", "properties": {
        "repo_path": {"type": "string", "description": f"Path to the repository for operation {i}."},
        "max_count": {"type": "integer", "description": "How many entries to return at most.", "default": 10},
        "branch": {"type": "string", "description": "The branch to act on; the current one if omitted."}},
        "required": ["repo_path"]}


class Server:
    def __init__(self, name: str, count: int, words: str = "operation") -> None:
        self.config = McpServerConfig(name=name, command=["srv"])
        self.tools = [McpToolInfo(f"tool_{i}", f"Does {words} number {i} on a repository and reports it.",
                                  schema(i)) for i in range(count)]
        self.calls: list[str] = []

    def call(self, tool: str, arguments: dict[str, Any], timeout: float, should_stop: Any = None) -> McpCallResult:
        self.calls.append(tool)
        return McpCallResult(True, f"{tool} done")

    def close(self) -> None:
        pass


def run(job: JobPaths, servers: list[Any], script: list[T], clock: FakeClock, tmp_path: Path,
        **settings: Any) -> Recording:
    provider = Recording(clock=clock, script=script)
    Supervisor(job, run_settings(**settings), provider, clock=clock, store=JobStore(tmp_path / "jobs.db"),
               mcp=servers).run()
    return provider


def names(request: Any) -> list[str]:
    return [t.name for t in request.tools]


def results(job: JobPaths) -> list[ev.ToolResult]:
    return [e for e in ev.read_events(job.events) if isinstance(e, ev.ToolResult)]


def test_many_tools_are_searched_and_loaded_not_all_offered(make_job, clock, tmp_path) -> None:
    job = make_job()
    server = Server("git", 120)
    t7 = "mcp__git__tool_7"
    script = [T(calls=[C(name=t7, arguments={"repo_path": "."})]),
              T(calls=[C(name=SEARCH_TOOL, arguments={"query": "number 7"})]),
              T(calls=[C(name=SEARCH_TOOL, arguments={"load": [t7]})]),
              T(calls=[C(name=t7, arguments={"repo_path": "."})]),
              T(error="end of script")]
    provider = run(job, [server], script, clock, tmp_path)
    first = names(provider.requests[0])
    # Offered: the harness's tools and the search tool, no MCP tool; every name and schema valid for both providers.
    assert SEARCH_TOOL in first and not [n for n in first if n.startswith("mcp__")]
    assert all(NAME.match(t.name) and t.parameters.get("type") == "object" for t in provider.requests[0].tools)
    # The guide names the search tool, never each deferred tool.
    assert SEARCH_TOOL in provider.requests[0].system and t7 not in provider.requests[0].system
    got = results(job)
    # A call of a tool not loaded is refused with a line naming the search tool; the server is never asked.
    assert not got[0].ok and SEARCH_TOOL in got[0].content and "not loaded" in got[0].content
    assert got[1].ok and f"- {t7}:" in got[1].content.splitlines()[1]  # the exact match first
    assert got[2].ok and "Loaded: mcp__git__tool_7" in got[2].content
    # Offered from the next turn on, with the server's own schema; then called through the gate.
    assert t7 not in names(provider.requests[2]) and t7 in names(provider.requests[3])
    offered = {t.name: t for t in provider.requests[3].tools}
    assert offered[t7].parameters["required"] == ["repo_path"]
    assert got[3].ok and server.calls == ["tool_7"]


def test_what_is_loaded_survives_a_resume(make_job, clock, tmp_path) -> None:
    job = make_job()
    t3 = "mcp__git__tool_3"
    run(job, [Server("git", 120)], [T(calls=[C(name=SEARCH_TOOL, arguments={"load": [t3]})]),
                                    T(error="end of script")], clock, tmp_path)
    # A new process: what was loaded is read from the journaled phase record, not from memory.
    server = Server("git", 120)
    provider = run(job, [server], [T(calls=[C(name=t3, arguments={"repo_path": "."})]), T(error="end of script")],
                   clock, tmp_path)
    assert t3 in names(provider.requests[0])
    assert results(job)[-1].ok and server.calls == ["tool_3"]


def test_a_hostile_query_and_a_server_of_500_tools_give_bounded_answers(make_job, clock, tmp_path) -> None:
    job = make_job()
    server = Server("big", 500, words="\x1b[31mred\x1b[0m <b>markup</b> [link](x)")
    query = "\x1b]0;owned\x07 <script>red</script> \x1b[2J markup " + "x" * 1000
    load = [f"mcp__big__tool_{i}" for i in range(40)]
    script = [T(calls=[C(name=SEARCH_TOOL, arguments={"query": query[:790]})]),
              *[T(calls=[C(name=SEARCH_TOOL, arguments={"load": load[i:i + 8]})]) for i in range(0, 40, 8)],
              T(error="end of script")]
    provider = run(job, [server], script, clock, tmp_path)
    got = results(job)
    listed = [line for line in got[0].content.splitlines() if line.startswith("- ")]
    assert got[0].ok and len(listed) == MAX_RESULTS  # bounded, whatever matched
    assert "\x1b" not in got[0].content and "\x07" not in got[0].content
    # At most 128 tools of a server are considered, and at most MAX_LOADED loaded in a phase: the rest refused.
    assert [r.ok for r in got[1:]] == [True] * (MAX_LOADED // 8) + [False]
    assert "nothing was loaded" in got[-1].content
    last = names(provider.requests[-1])
    assert len([n for n in last if n.startswith("mcp__")]) == MAX_LOADED
    assert len(json.dumps([t.model_dump() for t in provider.requests[-1].tools])) < 200_000


def test_an_unknown_name_to_load_loads_nothing(make_job, clock, tmp_path) -> None:
    job = make_job()
    script = [T(calls=[C(name=SEARCH_TOOL, arguments={"load": ["mcp__git__tool_1", "mcp__git__\x1b[31mx"]})]),
              T(error="end of script")]
    provider = run(job, [Server("git", 120)], script, clock, tmp_path)
    (got,) = results(job)
    assert not got.ok and "Nothing was loaded" in got.content and "\x1b" not in got.content
    assert "mcp__git__tool_1" not in names(provider.requests[-1])


def test_without_mcp_or_under_the_share_the_tools_and_guide_are_unchanged() -> None:
    base = default_registry().tools()
    # No MCP: the very registry the run had before.
    plain = ToolRegistry(list(base))
    assert offer_mcp_tools(base, [], 128_000, None).specs() == plain.specs()
    # A few MCP tools, under the share: all offered, in the same order, the same guide, no search tool.
    few = build_mcp_tools([Server("time", 5)]).tools
    assert schema_tokens(few) < 0.10 * 128_000
    before, after = ToolRegistry([*base, *few]), offer_mcp_tools(base, few, 128_000, None)
    assert after.search is None and SEARCH_TOOL not in after
    assert [s.model_dump_json() for s in after.specs()] == [s.model_dump_json() for s in before.specs()]
    assert after.guide() == before.guide()
    # The same tools past the share of a smaller window: deferred.
    assert offer_mcp_tools(base, few, 4_000, None).search is not None


def test_a_run_whose_mcp_tools_fit_sends_the_tools_and_system_as_before(make_job, clock, tmp_path) -> None:
    job = make_job()
    server = Server("time", 3)
    provider = run(job, [server], [T(calls=[C(name="list_files")]), T(error="end of script")], clock, tmp_path)
    # What the run offered before this step existed: the harness's registry, then the server's tools, all at once.
    before = ToolRegistry([*default_registry().tools(), *build_mcp_tools([server]).tools])
    for request in provider.requests:
        assert [t.model_dump_json() for t in request.tools] == [s.model_dump_json() for s in before.specs()]
        assert SEARCH_TOOL not in request.system and "mcp__time__tool_2" in request.system
