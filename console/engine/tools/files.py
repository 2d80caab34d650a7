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
reads is the one the first attempt would have given.
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING

import regex
from pydantic import Field

from console.engine import failpoints
from console.engine.sandbox import Sandbox, SandboxError
from console.engine.tools.registry import Tool, ToolArgs, ToolFailure

if TYPE_CHECKING:
    from console.engine.runtime import Runtime

MAX_READ_LINES = 400
DEFAULT_READ_LINES = 200
MAX_READ_CHARS = 60_000
MAX_LIST = 500
SEARCH_SECONDS = 2.0
# The largest file read_file and edit_file take whole, and search_files looks into.
MAX_FILE_BYTES = 32 * 2**20


def sandbox(rt: Runtime) -> Sandbox:
    assert rt.sandbox is not None
    return rt.sandbox


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def stray_temp(rt: Runtime, data: bytes) -> None:
    """What a kill between writing a temp file and renaming it leaves (for the kill-point tests)."""
    tmp = rt.paths.state / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / ".killed-mid-write.tmp").write_bytes(data[: len(data) // 2])


def checked(rt: Runtime, user_path: str) -> str:
    try:
        return sandbox(rt).check(user_path)
    except SandboxError as exc:
        raise ToolFailure(str(exc)) from None


def read_text(rt: Runtime, rel: str) -> str:
    sb = sandbox(rt)
    info = sb.info(rel)
    if info is None:
        raise ToolFailure(f"'{rel}' does not exist. Use list_files to see what is there.")
    if info.kind == "dir":
        raise ToolFailure(f"'{rel}' is a folder; use list_files to see its content.")
    data = sb.read_bytes(rel, max_bytes=MAX_FILE_BYTES)
    if b"\x00" in data[:8192]:
        raise ToolFailure(f"'{rel}' is a binary file; only text files can be read.")
    return data.decode("utf-8", errors="replace")


class ReadFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the job folder")
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
    path: str = Field(description="File path relative to the job folder; folders are created")
    content: str = Field(description="The whole new content of the file")


def write_file(rt: Runtime, a: WriteFileArgs) -> str:
    rel = checked(rt, a.path)
    sb = sandbox(rt)

    def facts() -> dict:
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
    path: str = Field(description="File path relative to the job folder; created if missing")
    content: str = Field(description="Text to append at the end of the file")


def append_file(rt: Runtime, a: AppendFileArgs) -> str:
    rel = checked(rt, a.path)
    sb = sandbox(rt)
    text = a.content if a.content.endswith("\n") else a.content + "\n"

    def facts() -> dict:
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
    path: str = Field(description="File path relative to the job folder")
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
    path: str = Field(default=".", description="Folder relative to the job folder")


def list_files(rt: Runtime, a: ListFilesArgs) -> str:
    sb = sandbox(rt)
    base = checked(rt, a.path) if a.path.strip() not in ("", ".", "./") else "."
    info = sb.info(base)
    if info is None:
        raise ToolFailure(f"'{a.path}' does not exist.")
    if info.kind == "file":
        return f"{base} ({info.size} bytes)"
    rows = [f"{f.rel} ({f.size} bytes)" for f in sb.walk(base, limit=MAX_LIST + 1)]
    if len(rows) > MAX_LIST:
        return "\n".join([*rows[:MAX_LIST], f"[listing stopped at {MAX_LIST} files]"])
    return "\n".join(rows) if rows else "(no files)"


class SearchFilesArgs(ToolArgs):
    pattern: str = Field(max_length=1000, description="Regular expression (case-insensitive) to search for")
    path: str = Field(default=".", description="File or folder to search, relative to the job folder")
    max_results: int = Field(default=50, ge=1, le=500, description="Stop after this many matching lines")


def search_files(rt: Runtime, a: SearchFilesArgs) -> str:
    try:
        rx = regex.compile(a.pattern, regex.IGNORECASE)
    except (regex.error, RecursionError, OverflowError) as exc:
        raise ToolFailure(f"'{a.pattern}' is not a valid regular expression: {exc}") from None
    sb = sandbox(rt)
    base = checked(rt, a.path) if a.path.strip() not in ("", ".", "./") else "."
    info = sb.info(base)
    if info is None:
        raise ToolFailure(f"'{a.path}' does not exist.")
    if info.kind == "other":
        sb.read_head(base, 1)  # refuses it, naming what it is (a named pipe, a socket, a device)
    hits: list[str] = []
    # A pathological pattern must not freeze the engine (stop is only polled between calls).
    deadline = time.monotonic() + SEARCH_SECONDS
    for f in sb.walk(base):
        try:
            data = sb.read_bytes(f.rel, max_bytes=MAX_FILE_BYTES)
        except SandboxError:
            continue  # changed or replaced since the listing: not a file we may read now
        if b"\x00" in data[:8192]:
            continue
        for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            left = deadline - time.monotonic()
            try:
                found = left > 0 and rx.search(line, timeout=left)
            except TimeoutError:
                found = False
            if left <= 0 or (found is False and time.monotonic() >= deadline):
                raise ToolFailure(f"the search took over {SEARCH_SECONDS:g} s and was stopped; use a simpler "
                                  "pattern or a narrower path")
            if found:
                hits.append(f"{f.rel}:{n}: {line.strip()[:200]}")
                if len(hits) >= a.max_results:
                    return "\n".join(hits) + f"\n[stopped at {a.max_results} matches]"
    return "\n".join(hits) if hits else f"No lines match '{a.pattern}'."


FILE_TOOLS: list[Tool] = [
    Tool("read_file", "Read a text file of the job folder, a range of lines at a time.", ReadFileArgs,
         read_file, "read lines of a file (start_line, max_lines for long files)"),
    Tool("write_file", "Create or overwrite a file in the job folder with the given content.", WriteFileArgs,
         write_file, "create or overwrite a file"),
    Tool("append_file", "Append text to the end of a file in the job folder (creates it if missing).",
         AppendFileArgs, append_file, "append text to a file"),
    Tool("edit_file", "Replace an exact piece of text in a file of the job folder.", EditFileArgs, edit_file,
         "replace exact text in a file"),
    Tool("list_files", "List the files of the job folder (or a sub-folder) with their sizes.", ListFilesArgs,
         list_files, "list files with sizes"),
    Tool("search_files", "Search the job's text files for lines matching a regular expression.",
         SearchFilesArgs, search_files, "grep the job's files with a regex"),
]
