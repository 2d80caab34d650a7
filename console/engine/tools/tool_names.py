"""The built-in tools as plain data: each one's name, the names of its arguments, and the argument naming the file
it changes (None: it changes no file), in the default registry's order.

What job.toml's check needs of the tools (a ``[[tools]]`` command may not take a built-in's name; a guardrail may
name only the job's tools and their arguments), without importing the tools themselves (their files, workspace
and todo implementations): a start that hands its run over (``run --detach``) checks the job with this alone.
tests/unit/test_tool_names.py checks it against the registry, so the two cannot drift apart."""

from __future__ import annotations

# (name, argument names, the argument naming the file it changes or None)
ToolShape = tuple[str, frozenset[str], str | None]

# default_registry().tools(): the todo tools, the workspace's, the file tools.
BUILTIN_TOOLS: tuple[ToolShape, ...] = (
    ("todo_complete", frozenset(), None),
    ("todo_write", frozenset({"todos"}), None),
    ("todo_rewind", frozenset({"issue"}), None),
    ("archive_and_reset", frozenset(), None),
    ("generate_workspace_summary", frozenset(), None),
    ("add_accomplishment", frozenset({"text"}), None),
    ("add_note", frozenset({"text"}), None),
    ("record_experience", frozenset({"section", "text"}), None),
    ("job_complete", frozenset({"confidence", "deliverables", "notes", "summary"}), None),
    ("read_file", frozenset({"max_lines", "path", "start_line"}), None),
    ("write_file", frozenset({"content", "path"}), "path"),
    ("append_file", frozenset({"content", "path"}), "path"),
    ("edit_file", frozenset({"new_text", "old_text", "path", "replace_all"}), "path"),
    ("list_files", frozenset({"path"}), None),
    ("search_files", frozenset({"max_results", "path", "pattern"}), None),
)

# find_files.INDEX_TOOLS: a tool of the job with [context] file_index only.
INDEX_TOOLS: tuple[ToolShape, ...] = (
    ("find_files", frozenset({"limit", "query"}), None),
)

# A job-declared command may not take one of these names (it would shadow the harness's own tool).
BUILTIN_TOOL_NAMES = frozenset(name for name, _, _ in (*BUILTIN_TOOLS, *INDEX_TOOLS))
