"""The agent's tools (layer 3)."""

from __future__ import annotations

from console.engine.tools.files import FILE_TOOLS
from console.engine.tools.registry import Tool, ToolOutcome, ToolRegistry
from console.engine.tools.todo import TODO_TOOLS
from console.engine.tools.workspace_tools import WORKSPACE_TOOLS

__all__ = ["BUILTIN_TOOL_NAMES", "Tool", "ToolOutcome", "ToolRegistry", "default_registry"]

# A job-declared command may not take one of these names (it would shadow the harness's own tool).
BUILTIN_TOOL_NAMES = frozenset(t.name for t in [*TODO_TOOLS, *WORKSPACE_TOOLS, *FILE_TOOLS])


def default_registry() -> ToolRegistry:
    return ToolRegistry([*TODO_TOOLS, *WORKSPACE_TOOLS, *FILE_TOOLS])
