"""File tools, confined to the job folder.

Every path the model gives is checked before any I/O: absolute paths, ``..``
components, the harness's own ``.console/`` folder and symlinks that resolve
outside the job are refused with a message that says what to do instead.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import regex
from pydantic import Field

from console.engine.atomic import atomic_write_text
from console.engine.job import STATE_DIR, within
from console.engine.tools.registry import Tool, ToolArgs, ToolFailure

if TYPE_CHECKING:
    from console.engine.runtime import Runtime

MAX_READ_LINES = 400
DEFAULT_READ_LINES = 200
MAX_READ_CHARS = 60_000
MAX_LIST = 500
SEARCH_SECONDS = 2.0


def confine(root: Path, user_path: str) -> Path:
    """Resolve ``user_path`` inside ``root`` or raise ToolFailure explaining why not."""
    raw = (user_path or "").strip()
    if not raw:
        raise ToolFailure("the path is empty; give a path relative to the job folder, e.g. 'notes.md'")
    if "\x00" in raw:
        raise ToolFailure("the path contains a NUL character; give a plain relative path")
    if raw.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:[\\/]", raw) or os.path.isabs(raw):
        raise ToolFailure(
            f"'{raw}' is refused: absolute paths are not allowed. Use a path relative to the job folder."
        )
    parts = PurePosixPath(raw.replace("\\", "/")).parts
    if ".." in parts:
        raise ToolFailure(f"'{raw}' is refused: '..' would leave the job folder. Stay inside it.")
    if any(len(p.encode("utf-8", "replace")) > 255 for p in parts):
        raise ToolFailure(f"'{raw[:80]}...' is refused: a file name may be at most 255 bytes long.")
    harness = (f"'{raw}' is refused: {STATE_DIR}/ holds the harness's own state. "
               "Use the todo and workspace tools instead.")
    if parts and parts[0].lower() == STATE_DIR:
        raise ToolFailure(harness)
    root_real = root.resolve()
    target = (root_real / Path(*parts)) if parts else root_real
    resolved = target.resolve()
    if resolved != root_real and root_real not in resolved.parents:
        raise ToolFailure(f"'{raw}' is refused: it is a symlink that leads outside the job folder.")
    if not within(root_real, target):
        raise ToolFailure(harness)
    return target


def _walk(rt: Runtime, base: Path) -> list[Path]:
    """Files under ``base``, skipping harness state, hidden folders and symlinks that leave the job."""
    root_real = rt.paths.root.resolve()
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d.lower() != STATE_DIR and not d.startswith("."))
        for f in sorted(filenames):
            p = Path(dirpath) / f
            if p.is_symlink() and not within(root_real, p):
                continue
            out.append(p)
    return out


def rel(runtime: Runtime, path: Path) -> str:
    return path.relative_to(runtime.paths.root.resolve()).as_posix() or "."


def _read_text(path: Path, shown: str) -> str:
    if not path.exists():
        raise ToolFailure(f"'{shown}' does not exist. Use list_files to see what is there.")
    if path.is_dir():
        raise ToolFailure(f"'{shown}' is a folder; use list_files to see its content.")
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise ToolFailure(f"'{shown}' is a binary file; only text files can be read.")
    return data.decode("utf-8", errors="replace")


class ReadFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the job folder")
    start_line: int = Field(default=1, ge=1, description="First line to read (1-based)")
    max_lines: int = Field(
        default=DEFAULT_READ_LINES, ge=1, le=MAX_READ_LINES, description="How many lines to read at most"
    )


def read_file(rt: Runtime, a: ReadFileArgs) -> str:
    path = confine(rt.paths.root, a.path)
    shown = rel(rt, path)
    lines = _read_text(path, shown).splitlines()
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
    path = confine(rt.paths.root, a.path)
    if path.is_dir():
        raise ToolFailure(f"'{a.path}' is a folder, not a file.")
    existed = path.exists()
    # Atomic: a crash mid-write must not leave main_plan.md (or any deliverable) half written.
    atomic_write_text(path, a.content, durable=False)
    shown = rel(rt, path)
    verb = "Overwrote" if existed else "Created"
    msg = f"{verb} {shown} ({len(a.content.splitlines())} lines, {len(a.content)} chars)."
    return msg + rt.after_file_write(path)


class AppendFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the job folder; created if missing")
    content: str = Field(description="Text to append at the end of the file")


def append_file(rt: Runtime, a: AppendFileArgs) -> str:
    path = confine(rt.paths.root, a.path)
    if path.is_dir():
        raise ToolFailure(f"'{a.path}' is a folder, not a file.")
    path.parent.mkdir(parents=True, exist_ok=True)
    text = a.content if a.content.endswith("\n") else a.content + "\n"
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text)
    shown = rel(rt, path)
    return f"Appended {len(text.splitlines())} lines to {shown}." + rt.after_file_write(path)


class EditFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the job folder")
    old_text: str = Field(description="Exact text to replace; must occur in the file")
    new_text: str = Field(description="Replacement text")
    replace_all: bool = Field(default=False, description="Replace every occurrence instead of exactly one")


def edit_file(rt: Runtime, a: EditFileArgs) -> str:
    path = confine(rt.paths.root, a.path)
    shown = rel(rt, path)
    text = _read_text(path, shown)
    if not a.old_text:
        raise ToolFailure("old_text is empty; give the exact text to replace.")
    count = text.count(a.old_text)
    if count == 0:
        raise ToolFailure(f"old_text was not found in {shown}. Read the file and copy the text exactly.")
    if count > 1 and not a.replace_all:
        raise ToolFailure(
            f"old_text occurs {count} times in {shown}; include more context to make it unique, "
            "or set replace_all=true."
        )
    new = text.replace(a.old_text, a.new_text) if a.replace_all else text.replace(a.old_text, a.new_text, 1)
    atomic_write_text(path, new, durable=False)
    return f"Edited {shown}: {count if a.replace_all else 1} replacement(s)." + rt.after_file_write(path)


class ListFilesArgs(ToolArgs):
    path: str = Field(default=".", description="Folder relative to the job folder")


def list_files(rt: Runtime, a: ListFilesArgs) -> str:
    base = confine(rt.paths.root, a.path) if a.path not in ("", ".", "./") else rt.paths.root.resolve()
    if not base.exists():
        raise ToolFailure(f"'{a.path}' does not exist.")
    if base.is_file():
        return f"{rel(rt, base)} ({base.stat().st_size} bytes)"
    rows = []
    for p in _walk(rt, base):
        try:
            size = p.stat().st_size
        except OSError:
            continue
        rows.append(f"{rel(rt, p)} ({size} bytes)")
        if len(rows) >= MAX_LIST:
            rows.append(f"[listing stopped at {MAX_LIST} files]")
            return "\n".join(rows)
    return "\n".join(rows) if rows else "(no files)"


class SearchFilesArgs(ToolArgs):
    pattern: str = Field(description="Regular expression (case-insensitive) to search for")
    path: str = Field(default=".", description="File or folder to search, relative to the job folder")
    max_results: int = Field(default=50, ge=1, le=500, description="Stop after this many matching lines")


def search_files(rt: Runtime, a: SearchFilesArgs) -> str:
    try:
        rx = regex.compile(a.pattern, regex.IGNORECASE)
    except regex.error as exc:
        raise ToolFailure(f"'{a.pattern}' is not a valid regular expression: {exc}") from None
    base = confine(rt.paths.root, a.path) if a.path not in ("", ".", "./") else rt.paths.root.resolve()
    if not base.exists():
        raise ToolFailure(f"'{a.path}' does not exist.")
    files = [base] if base.is_file() else _walk(rt, base)
    hits: list[str] = []
    # A pathological pattern must not freeze the engine (stop is only polled between calls).
    deadline = time.monotonic() + SEARCH_SECONDS
    for f in files:
        try:
            data = f.read_bytes()
        except OSError:
            continue
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
                hits.append(f"{rel(rt, f)}:{n}: {line.strip()[:200]}")
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
