"""The agent's tools (layer 3)."""

from __future__ import annotations

from console.engine.tools.files import FILE_TOOLS
from console.engine.tools.find_files import INDEX_TOOLS
from console.engine.tools.registry import Tool, ToolOutcome, ToolRegistry
from console.engine.tools.todo import TODO_TOOLS
from console.engine.tools.workspace_tools import WORKSPACE_TOOLS

__all__ = ["BUILTIN_TOOL_NAMES", "Tool", "ToolOutcome", "ToolRegistry", "default_registry"]

# A job-declared command may not take one of these names (it would shadow the harness's own tool).
BUILTIN_TOOL_NAMES = frozenset(t.name for t in [*TODO_TOOLS, *WORKSPACE_TOOLS, *FILE_TOOLS, *INDEX_TOOLS])


def default_registry(*, file_index: bool = False) -> ToolRegistry:
    """The harness's tools; ``file_index``: with find_files too (job.toml ``[context] file_index``)."""
    return ToolRegistry([*TODO_TOOLS, *WORKSPACE_TOOLS, *FILE_TOOLS, *(INDEX_TOOLS if file_index else [])])
