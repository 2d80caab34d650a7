"""The search-and-load step's record and answers (console.engine.tools.tool_search): loaded for the phase (a phase
transition unloads, a checkpoint keeps), deterministic and bounded answers, a tool definition both providers take."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from console.engine.todos import TodoManager
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_tools import McpCallResult, McpToolInfo, build_mcp_tools
from console.engine.tools.tool_search import MAX_RESULTS, SEARCH_TOOL, SearchArgs, ToolSearch

OBJECT = {"type": "object", "properties": {"q": {"type": "string"}}}
NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Fake:
    def __init__(self, count: int) -> None:
        self.config = McpServerConfig(name="s", command=["srv"])
        self.tools = [McpToolInfo(f"t{i}", f"Tool {i}: reads {'issues' if i % 2 else 'commits'}.", OBJECT)
                      for i in range(count)]

    def call(self, *a: Any, **k: Any) -> McpCallResult:
        return McpCallResult(True, "")

    def close(self) -> None:
        pass


def searching(count: int = 20) -> tuple[ToolSearch, TodoManager, Any]:
    search = ToolSearch(build_mcp_tools([Fake(count)]).tools)
    todos = TodoManager()
    todos.install(["Do it"], kind="phase", phase_name="P", phase_number=1, total_phases=2)
    search.bind(lambda: todos.state.evidence)
    return search, todos, SimpleNamespace(todos=todos)


def load(search: ToolSearch, rt: Any, *names: str) -> Any:
    return search.tool.handler(rt, SearchArgs(load=list(names)))


def test_loaded_tools_stay_for_the_phase_and_go_with_it() -> None:
    search, todos, rt = searching()
    assert search.loaded() == [] and not search.offered("mcp__s__t1") and search.offered("list_files")
    assert load(search, rt, "mcp__s__t3", "mcp__s__t1").ok
    assert search.loaded() == ["mcp__s__t3", "mcp__s__t1"]  # in the order loaded: a stable prefix of the tools
    todos.begin_transition("checkpoint", NOW)  # re-orients inside the phase: still loaded
    assert search.loaded() == ["mcp__s__t3", "mcp__s__t1"]
    todos.install(["Go on"], kind="phase", phase_name="P", phase_number=1, total_phases=2)
    todos.begin_transition("phase", NOW)  # the next phase starts with none loaded
    assert search.loaded() == []


def test_a_search_is_deterministic_bounded_and_escaped() -> None:
    search, _todos, rt = searching(60)
    first = search.tool.handler(rt, SearchArgs(query="\x1b[31missues\x1b[0m <b>reads</b>"))
    again = search.tool.handler(rt, SearchArgs(query="\x1b[31missues\x1b[0m <b>reads</b>"))
    assert first.ok and first.content == again.content and "\x1b" not in first.content
    listed = [line for line in first.content.splitlines() if line.startswith("- ")]
    assert len(listed) == MAX_RESULTS and all("issues" in line for line in listed)
    # An exact name is first, whatever else matches.
    exact = search.tool.handler(rt, SearchArgs(query="mcp__s__t42")).content.splitlines()
    assert exact[1].startswith("- mcp__s__t42:")


def test_the_search_tool_follows_both_providers_rules() -> None:
    search, _todos, _rt = searching()
    spec = search.tool.spec()
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", spec.name) and spec.name == SEARCH_TOOL
    assert spec.parameters["type"] == "object" and spec.parameters["additionalProperties"] is False
    assert set(spec.parameters["properties"]) == {"query", "load"}
