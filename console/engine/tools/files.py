"""File tools, confined to the job folder by :mod:`console.engine.sandbox`.

Every path the model gives goes through the sandbox, which resolves it by file
descriptor beneath the job root: absolute paths, ``..``, the harness's own
``.console/``, symlinks that lead out (even one swapped in mid-call), hard
links, named pipes and devices are refused with a message that says what to
do instead, and writes are limited in size.

The three tools that change files record what they saw first (:meth:`Runtime.intent`):
whether the file existed, the offset an append starts at, the digests before and
after an edit. If a kill interrupts one of them, the resumed run redoes the call
with those facts, so an append is never applied twice and the result the agent
reads is the one the first attempt would have given. Each declares the argument
naming the file it changes (``modifies``): read_before_write governs it.

search_files runs the agent's pattern with RE2: no backtracking, so time linear in
the text and memory bounded for any pattern; what RE2 cannot run is refused with a
message naming the construct, and one search is bounded in time, files and bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from console.engine import failpoints
from console.engine.tools.file_access import (
    MAX_DOCS,
    MAX_FILE_BYTES,
    checked,
    digest,
    docs_prefix,
    read_text,
    sandbox,
    stray_temp,
)
from console.engine.tools.registry import Example, Failure, Tool, ToolArgs, ToolFailure
from console.engine.tools.search_files import (
    MAX_PATTERN_CHARS,
    MAX_PATTERN_PROGRAM,
    MAX_SEARCH_BYTES,
    MAX_SEARCH_FILES,
    MAX_SPAN_BYTES,
    MIN_SPAN_BYTES,
    SEARCH_MAX_MEM,
    SEARCH_SECONDS,
    SEARCH_WORK,
    SearchFilesArgs,
    compile_pattern,
    line_text,
    search_files,
)

if TYPE_CHECKING:
    from console.engine.runtime import Runtime


# Every name this module had before search_files and the shared steps moved out: importable from here as before.
__all__ = [
    "DEFAULT_READ_LINES",
    "FILE_TOOLS",
    "MAX_DOCS",
    "MAX_FILE_BYTES",
    "MAX_LIST",
    "MAX_PATTERN_CHARS",
    "MAX_PATTERN_PROGRAM",
    "MAX_READ_CHARS",
    "MAX_READ_LINES",
    "MAX_SEARCH_BYTES",
    "MAX_SEARCH_FILES",
    "MAX_SPAN_BYTES",
    "MIN_SPAN_BYTES",
    "MISSING",
    "PATHS_RULE",
    "PATH_ERRORS",
    "READ_ONLY_RULE",
    "SEARCH_MAX_MEM",
    "SEARCH_SECONDS",
    "SEARCH_WORK",
    "TEXT_ONLY",
    "WRITE_ERRORS",
    "WRITE_RULES",
    "AppendFileArgs",
    "EditFileArgs",
    "ListFilesArgs",
    "ReadFileArgs",
    "SearchFilesArgs",
    "WriteFileArgs",
    "append_file",
    "checked",
    "compile_pattern",
    "digest",
    "docs_prefix",
    "edit_file",
    "line_text",
    "list_files",
    "read_file",
    "read_text",
    "sandbox",
    "search_files",
    "stray_temp",
    "write_file",
]

MAX_READ_LINES = 400
DEFAULT_READ_LINES = 200
MAX_READ_CHARS = 60_000
MAX_LIST = 500


class ReadFileArgs(ToolArgs):
    path: str = Field(description="Path in the job folder")
    start_line: int = Field(default=1, ge=1, le=10**9, description="First line to read (1-based)")
    max_lines: int = Field(
        default=DEFAULT_READ_LINES, ge=1, le=MAX_READ_LINES, description="How many lines to read at most"
    )


def read_file(rt: Runtime, a: ReadFileArgs) -> str:
    shown = checked(rt, a.path)
    lines = read_text(rt, shown).splitlines()
    total = len(lines)
    if total == 0:
        return f"[{shown}: empty file]"
    if a.start_line > total:
        raise ToolFailure(f"'{shown}' has {total} lines; start_line {a.start_line} is past the end.")
    start = a.start_line - 1
    chunk: list[str] = []
    size = 0
    for line in lines[start : start + a.max_lines]:
        if size + len(line) > min(MAX_READ_CHARS, rt.observation_chars) and chunk:
            break
        chunk.append(line)
        size += len(line) + 1
    end = start + len(chunk)
    header = f"[{shown}: lines {start + 1}-{end} of {total}]"
    body = "\n".join(chunk)
    if end < total:
        body += f"\n[... {total - end} more lines: read_file(path='{shown}', start_line={end + 1})]"
    return f"{header}\n{body}"


class WriteFileArgs(ToolArgs):
    path: str = Field(description="Path in the job folder; folders are created")
    content: str = Field(description="The whole new content of the file")


def write_file(rt: Runtime, a: WriteFileArgs) -> str:
    rel = checked(rt, a.path)
    sb = sandbox(rt)

    def facts() -> dict[str, bool]:
        info = sb.info(rel)
        return {"existed": info is not None and info.kind == "file"}

    seen, _ = rt.intent(facts)
    # Atomic (a temp in .console/tmp renamed into place): a kill never leaves half a file, and a redo
    # writes the same bytes again.
    data = a.content.encode("utf-8")
    failpoints.hit(f"agent write {rel}", tear=lambda: stray_temp(rt, data))
    sb.write_bytes(rel, data)
    verb = "Overwrote" if seen["existed"] else "Created"
    msg = f"{verb} {rel} ({len(a.content.splitlines())} lines, {len(a.content)} chars)."
    return msg + rt.after_file_write(rel)


class AppendFileArgs(ToolArgs):
    path: str = Field(description="Path in the job folder; created if missing")
    content: str = Field(description="Text to append at the end of the file")


def append_file(rt: Runtime, a: AppendFileArgs) -> str:
    rel = checked(rt, a.path)
    sb = sandbox(rt)
    text = a.content if a.content.endswith("\n") else a.content + "\n"

    def facts() -> dict[str, int]:
        info = sb.info(rel)
        if info is not None and info.kind == "dir":
            raise ToolFailure(f"'{rel}' is a folder, not a file.")
        return {"at": info.size if info is not None else 0}

    seen, _ = rt.intent(facts)
    # Written at the offset recorded before acting, then cut there: redone after a kill, the same bytes
    # land in the same place instead of a second copy at the end.
    data, at = text.encode("utf-8"), int(seen["at"])
    failpoints.hit(f"agent append {rel}", tear=lambda: sb.append_bytes(rel, data[: len(data) // 2], at=at))
    sb.append_bytes(rel, data, at=at)
    return f"Appended {len(text.splitlines())} lines to {rel}." + rt.after_file_write(rel)


class EditFileArgs(ToolArgs):
    path: str = Field(description="Path in the job folder")
    old_text: str = Field(description="Exact text to replace; must occur in the file")
    new_text: str = Field(description="Replacement text")
    replace_all: bool = Field(default=False, description="Replace every occurrence instead of exactly one")


def edit_file(rt: Runtime, a: EditFileArgs) -> str:
    rel = checked(rt, a.path)
    sandbox(rt).check_writable(rel)  # a file the agent may not change: say so before matching text in it
    text = read_text(rt, rel)
    prior = rt.redo.get(rt.current_call or "")
    if prior is not None and digest(text) == prior.get("after"):
        # A kill came after this edit was written: the file already holds its result.
        rt.intent(lambda: prior)
        return f"Edited {rel}: {prior.get('count', 1)} replacement(s)." + rt.after_file_write(rel)
    if not a.old_text:
        raise ToolFailure("old_text is empty; give the exact text to replace.")
    count = text.count(a.old_text)
    if count == 0:
        raise ToolFailure(f"old_text was not found in {rel}. Read the file and copy the text exactly.")
    if count > 1 and not a.replace_all:
        raise ToolFailure(
            f"old_text occurs {count} times in {rel}; include more context to make it unique, "
            "or set replace_all=true."
        )
    new = text.replace(a.old_text, a.new_text) if a.replace_all else text.replace(a.old_text, a.new_text, 1)
    n = count if a.replace_all else 1
    rt.redo.pop(rt.current_call or "", None)
    rt.intent(lambda: {"before": digest(text), "after": digest(new), "count": n})
    data = new.encode("utf-8")
    failpoints.hit(f"agent edit {rel}", tear=lambda: stray_temp(rt, data))
    sandbox(rt).write_bytes(rel, data)
    return f"Edited {rel}: {n} replacement(s)." + rt.after_file_write(rel)


class ListFilesArgs(ToolArgs):
    path: str = Field(default=".", description="Folder in the job folder")


def list_files(rt: Runtime, a: ListFilesArgs) -> str:
    sb = sandbox(rt)
    base = checked(rt, a.path) if a.path.strip() not in ("", ".", "./") else "."
    info = sb.info(base)
    if info is None:
        raise ToolFailure(f"'{a.path}' does not exist.")
    if info.kind == "file":
        return f"{base} ({info.size} bytes)"
    rows: list[str] = []
    docs, n_docs = docs_prefix(rt, base), 0
    for f in sb.walk(base, limit=MAX_LIST + 1 + MAX_DOCS):
        if docs and f.rel.startswith(docs):
            n_docs += 1  # the tool docs: one row, not a file each (list that folder to see them)
            if n_docs == 1:
                rows.append(f"{docs} (the tool docs, read-only: list_files(path='{docs[:-1]}') shows them)")
            continue
        rows.append(f"{f.rel} ({f.size} bytes)")
    if len(rows) > MAX_LIST:
        return "\n".join([*rows[:MAX_LIST], f"[listing stopped at {MAX_LIST} files]"])
    return "\n".join(rows) if rows else "(no files)"


# -- the docs (console.engine.tools.docs) --------------------------------------------------------------------
# What the sandbox refuses for any path, and what a write adds (console.engine.sandbox's messages).
PATH_ERRORS = (
    Failure("the path is absolute, contains '..' or names .console (the harness's state)",
            "give a path relative to the job folder, inside it"),
    Failure("a symlink on the path leads out of the job folder, or the file has several hard links, or it is not a "
            "regular file (a named pipe, a device)", "such a file cannot be used; use another"),
)
MISSING = Failure("the file does not exist", "list_files shows what is there; check the spelling")
WRITE_ERRORS = (
    Failure("the file is job.toml or instructions.md (the job's definition)",
            "only the operator may change them; do not retry"),
    Failure("the file is kept by the harness: experiences.md, or anything in the tool docs folder {folder}/",
            "read it; add to experiences.md with record_experience; the docs cannot be changed"),
    Failure("the path is in a repository's .git (or .hg, .jj) folder, or would make one",
            "read it freely; git runs what is there on the operator's machine, so only the operator changes it"),
    Failure("the content is over {max_write_mb} MB, the most one write may carry",
            "write the first part, then append_file the rest in pieces"),
    Failure("the job folder would grow past its limit of {max_job_mb} MB", "write less, or delete what is not needed"),
    *PATH_ERRORS,
)
PATHS_RULE = "Paths are relative to the job folder ('notes.md', 'data/2019.csv'); nothing outside it can be reached."
READ_ONLY_RULE = ("Read-only (refused): job.toml and instructions.md (the operator's), experiences.md and the tool "
                  "docs in {folder}/ (the harness's), a repository's .git, .hg and .jj folders (git runs what they "
                  "hold on the operator's machine).")
WRITE_RULES = (PATHS_RULE, READ_ONLY_RULE, "One write carries at most {max_write_mb} MB; the job folder holds at most "
               "{max_job_mb} MB.", "The file is replaced atomically: a crash never leaves half of it.")
TEXT_ONLY = Failure("the file is binary, or over 32 MB", "only text files up to 32 MB can be read or edited")

FILE_TOOLS: list[Tool[Any]] = [
    Tool("read_file", "Read a text file, a range of lines at a time.", ReadFileArgs,
         read_file, "read lines of a file",
         examples=(Example({"path": "instructions.md"}, "Read instructions.md from its first line"),
                   Example({"path": "data/report.csv", "start_line": 201, "max_lines": 100},
                           "Read lines 201-300 of a long file")),
         errors=(MISSING, Failure("the path is a folder", "list_files shows its content"), TEXT_ONLY,
                 Failure("start_line is past the end of the file", "the error gives the file's line count"),
                 *PATH_ERRORS),
         rules=(PATHS_RULE,
                f"A result holds at most {MAX_READ_LINES} lines and {MAX_READ_CHARS:,} characters (fewer in a small "
                "context window). Its first line says which lines of how many it holds; when there is more, its "
                "last line gives the call that reads on.")),
    Tool("write_file", "Create or overwrite a file with the given content.", WriteFileArgs,
         write_file, "create or overwrite a file", modifies="path",
         examples=(Example({"path": "notes/findings.md", "content": "# Findings\n\n- The 2019 files are XML.\n"},
                           "Create notes/findings.md (the folder notes/ is created if missing)"),),
         errors=(Failure("the path is a folder", "give a file's path"), *WRITE_ERRORS),
         rules=("Folders on the path are created.", *WRITE_RULES)),
    Tool("append_file", "Append text to the end of a file (created if missing).",
         AppendFileArgs, append_file, "append text to a file", modifies="path",
         examples=(Example({"path": "log.md", "content": "- step 3 done"},
                           "Add a line at the end of log.md (a newline is added if the text has none)"),),
         errors=(Failure("the path is a folder", "give a file's path"), *WRITE_ERRORS),
         rules=("The text always ends with a newline (one is added if missing).", *WRITE_RULES)),
    Tool("edit_file", "Replace an exact piece of text in a file.", EditFileArgs, edit_file,
         "replace exact text in a file", modifies="path",
         examples=(Example({"path": "report.md", "old_text": "## Results\nTBD", "new_text": "## Results\n42 rows"},
                           "Replace one exact passage (copied from read_file's output, without the header line)"),
                   Example({"path": "report.md", "old_text": "colour", "new_text": "color", "replace_all": True},
                           "Replace every occurrence")),
         errors=(Failure("old_text was not found", "read the file and copy the text exactly, spaces and line "
                                                   "breaks included"),
                 Failure("old_text occurs several times", "include more of the surrounding text to make it unique, "
                                                          "or set replace_all to true"),
                 Failure("old_text is empty", "give the exact text to replace; write_file replaces a whole file"),
                 MISSING, TEXT_ONLY, *WRITE_ERRORS),
         rules=("The match is exact: case, spaces and line breaks count.", *WRITE_RULES)),
    Tool("list_files", "List the files of the job folder or a sub-folder, with sizes.", ListFilesArgs,
         list_files, "list files with sizes",
         examples=(Example({}, "List the whole job folder"), Example({"path": "data"}, "List the folder data/")),
         errors=(Failure("the path does not exist", "list the job folder ({}) to see what is there"), *PATH_ERRORS),
         rules=(PATHS_RULE, f"At most {MAX_LIST} files are listed; give a sub-folder to see the rest.",
                "The tool docs folder {folder}/ is one line of the job folder's listing; list it to see its files.",
                "The harness's state (.console) is never listed; symlinks, pipes and devices are not shown.")),
    Tool("search_files", "Search the job's text files for lines matching a regular expression.",
         SearchFilesArgs, search_files, "grep the job's files with a regex",
         examples=(Example({"pattern": "TODO|FIXME"}, "Find every line with TODO or FIXME in the job folder"),
                   Example({"pattern": "^## ", "path": "docs", "max_results": 20},
                           "Find the second-level headings of the files under docs/")),
         errors=(Failure("the pattern is not a valid RE2 expression (backreferences, lookaround, atomic groups, "
                         "possessive quantifiers, repetition counts over 1000)",
                         "rewrite it without them: e.g. search for each alternative, or a simpler pattern"),
                 Failure(f"the search took over {SEARCH_SECONDS:g} s and was stopped",
                         "use a simpler pattern or a narrower path"),
                 Failure("the path does not exist", "list_files shows what is there"), *PATH_ERRORS),
         rules=(PATHS_RULE,
                "Case-insensitive, line by line: ^ and $ match at each line's start and end, a match never spans "
                "two lines.",
                f"Looks at {MAX_SEARCH_FILES:,} files and {MAX_SEARCH_BYTES // 2**20} MB at most, skips binary files "
                f"and files over {MAX_FILE_BYTES // 2**20} MB, and says where it stopped.",
                "Each result line is path:line: text, the line number as read_file counts it.",
                "Searching the job folder skips the tool docs in {folder}/; give that path to search them.")),
]
