"""The agent's tools (layer 3).

The tools themselves are imported when first asked for (PEP 562): the settings and the command line's start
need only ``tools.limits`` (the sandbox's bounds), never the file tools, the sandbox or the event log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console.engine.tools.registry import Tool, ToolOutcome, ToolRegistry

    BUILTIN_TOOL_NAMES: frozenset[str]

__all__ = ["BUILTIN_TOOL_NAMES", "Tool", "ToolOutcome", "ToolRegistry", "default_registry"]


def _builtin(*, file_index: bool = True) -> list[Tool[Any]]:
    from console.engine.tools.files import FILE_TOOLS
    from console.engine.tools.find_files import INDEX_TOOLS
    from console.engine.tools.todo import TODO_TOOLS
    from console.engine.tools.workspace_tools import WORKSPACE_TOOLS

    return [*TODO_TOOLS, *WORKSPACE_TOOLS, *FILE_TOOLS, *(INDEX_TOOLS if file_index else [])]


def default_registry(*, file_index: bool = False) -> ToolRegistry:
    """The harness's tools; ``file_index``: with find_files too (job.toml ``[context] file_index``)."""
    from console.engine.tools.registry import ToolRegistry

    return ToolRegistry(_builtin(file_index=file_index))


def __getattr__(name: str) -> Any:
    if name == "BUILTIN_TOOL_NAMES":
        from console.engine.tools.tool_names import BUILTIN_TOOL_NAMES as value  # plain data, checked by a test
    elif name in ("Tool", "ToolOutcome", "ToolRegistry"):
        from console.engine.tools import registry

        value = getattr(registry, name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
