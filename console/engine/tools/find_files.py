"""find_files: the agent's query of the job's file catalogue (:mod:`console.engine.file_index`, seed 003 phase 2).

On only when the job asks for it (job.toml ``[context] file_index = true``): its spec is in every request, and
list_files and search_files already answer in a small folder. Each call refreshes the index first (one walk of
the folder; only new or changed files are read), so it sees what the agent wrote a moment ago.

What it returns is bounded (``limit`` files, MAX_OUTPUT_CHARS in all) and safe: paths and first lines are the
agent's own text, so control characters, escape sequences and newlines in names are shown escaped, one file per
line, and a name cannot forge a line of the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from console.engine.file_index import HEAD_CHARS, MAX_FILES, MAX_PATH_CHARS, index_for, terms_of
from console.engine.text import safe_text
from console.engine.tools.file_access import sandbox
from console.engine.tools.registry import Example, Failure, Tool, ToolArgs, ToolFailure

if TYPE_CHECKING:
    from console.engine.runtime import Runtime

MAX_LIMIT = 50
MAX_QUERY_CHARS = 200
MAX_OUTPUT_CHARS = 8000


class FindFilesArgs(ToolArgs):
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS,
                       description="Words to find in file paths and first lines (case-insensitive)")
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT, description="Most files to show")


def find_files(rt: Runtime, a: FindFilesArgs) -> str:
    terms = terms_of(a.query)
    if not terms:
        raise ToolFailure("give one or more words to look for, e.g. find_files(query=\"auth login\").")
    sb = sandbox(rt)
    index = index_for(sb)
    r = index.refresh(sb)
    hits, matched = index.query(terms, a.limit)
    asked = safe_text(a.query, one_line=True, limit=100)
    if not hits:
        lines = [f"No indexed file matches '{asked}' ({r.files} files indexed by path and first lines). "
                 "Try other words, or search_files(pattern) to search inside whole files."]
    else:
        best = f"; the best {len(hits)}" if matched > len(hits) else ""
        lines = [f"{matched} of {r.files} indexed files match '{asked}'{best} (path, size, first lines):"]
        size = len(lines[0])
        for n, e in enumerate(hits):
            line = f"{safe_text(e.rel, one_line=True, limit=MAX_PATH_CHARS)} ({e.size} bytes)"
            if e.head:
                line += ": " + safe_text(e.head, one_line=True, limit=HEAD_CHARS)
            if size + len(line) > MAX_OUTPUT_CHARS:
                lines.append(f"[{len(hits) - n} more not shown: the answer is limited to {MAX_OUTPUT_CHARS} "
                             "characters; use more words or a smaller limit]")
                break
            lines.append(line)
            size += len(line) + 1
    if r.pending:
        lines.append(f"[{r.pending} files not read yet (the index reads for a bounded time per call): matched by "
                     "their path only]")
    if r.truncated:
        lines.append(f"[the folder has more than {MAX_FILES} files: only the first {MAX_FILES} are indexed; "
                     "use list_files or search_files with a path for the rest]")
    if r.long_paths:
        lines.append(f"[{r.long_paths} files with paths over {MAX_PATH_CHARS} characters are not indexed]")
    return "\n".join(lines)


INDEX_TOOLS: list[Tool[Any]] = [
    Tool("find_files", "Find job files by words in their path or first lines, from a catalogue of the job "
                       "folder (path, size, first lines; binary files and generated folders left out).",
         FindFilesArgs, find_files, "find files by words in their path or first lines",
         examples=(Example({"query": "invoice parser"}, "Find the files about invoice parsing"),
                   Example({"query": "config yaml", "limit": 5}, "The five best matches for config files")),
         errors=(Failure("the query has no word to look for", "give one or more words"),
                 Failure("nothing matches", "try other words, or search_files(pattern) to search inside files")),
         rules=("It matches words, not patterns: a file matches by more of the words first, a word in its name "
                "before one in a folder name or its first lines.",
                f"Only the first {MAX_FILES} files are indexed; binary files, hidden files and generated folders "
                "(node_modules, venv, build...) are left out.")),
]
