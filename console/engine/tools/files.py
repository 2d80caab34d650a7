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

import hashlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import re2
from pydantic import Field

from console.engine import failpoints
from console.engine.job import one_line
from console.engine.sandbox import Sandbox, SandboxError
from console.engine.tools.registry import Example, Failure, Tool, ToolArgs, ToolFailure

if TYPE_CHECKING:
    from console.engine.runtime import Runtime

MAX_READ_LINES = 400
DEFAULT_READ_LINES = 200
MAX_READ_CHARS = 60_000
MAX_LIST = 500
# search_files: the whole search stops with an error after SEARCH_SECONDS (checked between RE2 calls), and
# looks at MAX_SEARCH_FILES files and MAX_SEARCH_BYTES at most (it then says where it stopped).
SEARCH_SECONDS = 2.0
MAX_SEARCH_FILES = 10_000
MAX_SEARCH_BYTES = 256 * 2**20
MAX_PATTERN_CHARS = 1000
# RE2's memory for one pattern: its program and its DFA cache (a DFA that outgrows it gives way to the NFA,
# slower but bounded by the spans below).
SEARCH_MAX_MEM = 16 * 2**20
# RE2 is linear in the text, but the constant is the program's size when its DFA gives up (about 1 ns per
# byte and instruction here, measured on `[a-q]\w{999}\d`): programs are capped, and one RE2 call looks at
# SEARCH_WORK / program size bytes (clamped to the spans below), so no call runs much past 0.3 s.
MAX_PATTERN_PROGRAM = 10_000
SEARCH_WORK = 100_000_000
MIN_SPAN_BYTES = 32 * 2**10
MAX_SPAN_BYTES = 1 * 2**20
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


# A job has at most 64 commands besides the built-in tools: room for their docs beyond a listing's MAX_LIST.
MAX_DOCS = 128


def docs_prefix(rt: Runtime, base: str) -> str | None:
    """The prefix of the harness's folder of tool docs ("tools/") when a listing or search of ``base`` would go
    through it (only a listing or search of that folder itself shows its files), else None."""
    kept = sandbox(rt).kept_folder
    return f"{kept}/" if kept and base == "." else None


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


class SearchFilesArgs(ToolArgs):
    pattern: str = Field(max_length=MAX_PATTERN_CHARS,
                         description="Regular expression, case-insensitive, in RE2 syntax (no backreferences or "
                                     "lookaround)")
    path: str = Field(default=".", description="File or folder to search")
    max_results: int = Field(default=50, ge=1, le=500, description="Stop after this many matching lines")


# What RE2 refuses, as it says it (the start of its message), and what to tell the agent instead.
_UNSUPPORTED = (
    ("invalid perl operator: (?=", "lookahead (?=...) is not supported"),
    ("invalid perl operator: (?!", "negative lookahead (?!...) is not supported"),
    ("invalid perl operator: (?<=", "lookbehind (?<=...) is not supported"),
    ("invalid perl operator: (?<!", "negative lookbehind (?<!...) is not supported"),
    ("invalid perl operator: (?>", "atomic groups (?>...) are not supported"),
    # RE2 echoes "(?P" alone for (?P=name) and (?P>name); (?P<name>...) groups are fine.
    ("invalid perl operator: (?P", "named backreferences (?P=name) and recursion are not supported"),
    ("invalid perl operator: (?#", "comments (?#...) are not supported"),
    ("bad repetition operator: ++", "possessive quantifiers (++, *+, ?+) are not supported"),
    ("bad repetition operator: *+", "possessive quantifiers (++, *+, ?+) are not supported"),
    ("bad repetition operator: ?+", "possessive quantifiers (++, *+, ?+) are not supported"),
    ("invalid escape sequence: \\Z", "\\Z is written \\z here (end of text)"),
    ("invalid repetition size", "a repetition count is at most 1000 (nested counts multiplied together)"),
    ("pattern too large", "the pattern is too large; use smaller repetition counts"),
)


def _pattern_error(pattern: str, reason: str) -> ToolFailure:
    what, sep, where = reason.partition(": ")
    if sep and where.startswith(_LINES) and (_LINES + pattern).startswith(where):
        reason = f"{what}: {where[len(_LINES):]}"  # the prefix compile_pattern added is not the agent's
    if reason.startswith("invalid escape sequence: \\") and reason[-1:].isdigit():
        reason = f"backreferences ({reason.rsplit(' ', 1)[-1]}) are not supported"
    else:
        reason = next((why for prefix, why in _UNSUPPORTED if reason.startswith(prefix)), reason)
    return ToolFailure(f"'{one_line(pattern, 100)}' is not a valid regular expression for search_files: "
                       f"{one_line(reason)}. It takes RE2 syntax, which runs in linear time: no backreferences, "
                       "lookaround, atomic groups or possessive quantifiers; repetition counts up to 1000.")


# Multi-line: ^ and $ match at every line of the file, as they would on the line alone.
_LINES = "(?m)"


def compile_pattern(pattern: str) -> re2._Regexp:
    """The agent's pattern compiled by RE2, or a ToolFailure naming what it cannot be.

    RE2 never backtracks: matching takes time linear in the text, and its memory is bounded by max_mem
    (Python's re or the regex module compiled ``a{12000000}`` into gigabytes and ran ``(a*)*b`` for
    ever). Lines are the unit: (?m) makes ^ and $ match at each line, never_nl keeps a match on one line."""
    options = re2.Options()
    options.case_sensitive = False
    options.never_nl = True
    options.max_mem = SEARCH_MAX_MEM
    options.log_errors = False  # RE2 would print its error to stderr, under the console's screen
    try:
        rx = re2.compile(_LINES + pattern, options)
    except re2.error as exc:
        raw = exc.args[0] if exc.args else ""
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        raise _pattern_error(pattern, text) from None
    except UnicodeEncodeError:
        raise _pattern_error(pattern, "it holds characters that are not valid Unicode") from None
    finally:
        # re2 keeps the last 128 patterns, each up to max_mem: keep none, so memory is one pattern's.
        re2.purge()
    if rx.programsize > MAX_PATTERN_PROGRAM:
        raise _pattern_error(pattern, f"it compiles to {rx.programsize} instructions, more than the "
                                      f"{MAX_PATTERN_PROGRAM} a search allows; use smaller repetition counts")
    return rx


# Line separators str.splitlines knows besides "\n", in UTF-8 (\x85 is c2 85, U+2028 e2 80 a8...). In valid
# or invalid UTF-8 these byte sequences are those characters only (c2 and e2 are never continuation bytes).
_OTHER_BREAKS = (b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\xc2\x85", b"\xe2\x80\xa8",
                 b"\xe2\x80\xa9")


def line_text(data: bytes) -> bytes:
    """``data`` with every line break read_file counts (str.splitlines) made a "\\n": the line numbers of a
    search are then the ones read_file takes. Most files have none of the others and are returned as they are."""
    if not any(sep in data for sep in _OTHER_BREAKS):
        return data
    data = data.replace(b"\r\n", b"\n")
    for sep in _OTHER_BREAKS:
        data = data.replace(sep, b"\n")
    return data


@dataclass
class _Search:
    """One search's bounds and what it found so far."""

    rx: re2._Regexp
    max_results: int
    deadline: float
    # Bytes one RE2 call may look at: its worst case is this times the program size (see SEARCH_WORK).
    span: int
    hits: list[str] = field(default_factory=list)
    cut_lines: int = 0
    scanned: int = 0

    def check_time(self) -> None:
        if time.monotonic() >= self.deadline:
            raise ToolFailure(f"the search took over {SEARCH_SECONDS:g} s and was stopped; use a simpler "
                              "pattern or a narrower path")

    def full(self) -> bool:
        return len(self.hits) >= self.max_results

    def file(self, rel: str, data: bytes) -> None:
        """Add the matching lines of one file: RE2 runs over whole lines, ``span`` bytes at most per call, with
        the deadline checked between calls; a longer line is searched in its first ``span`` bytes."""
        n = len(data)
        last = n - 1 if data.endswith(b"\n") else n  # the final newline ends the last line; it starts none
        pos, counted, line_no = 0, 0, 1
        while pos < n and not self.full():
            # The region: whole lines from pos, or the first span bytes of one longer line.
            if pos + self.span >= last:
                end = nxt = last
            else:
                nl = data.rfind(b"\n", pos, pos + self.span)
                if nl >= 0:
                    end, nxt = nl, nl + 1
                else:
                    self.cut_lines += 1
                    end = pos + self.span
                    after = data.find(b"\n", end)
                    nxt = n if after < 0 else after + 1
            self.scanned += end - pos
            while not self.full():
                self.check_time()
                m = self.rx.search(data, pos, end)
                if m is None:
                    break
                start = m.start()
                line_start = data.rfind(b"\n", pos, start) + 1 or pos
                line_no += data.count(b"\n", counted, line_start)
                counted = line_start
                line_end = data.find(b"\n", start)
                line_end = n if line_end < 0 else line_end
                shown = data[line_start:min(line_end, line_start + 1000)].decode("utf-8", "replace").strip()
                self.hits.append(f"{rel}:{line_no}: {shown[:200]}")
                pos = line_end + 1
                if pos > end:
                    break
            pos = max(pos, nxt)
            if nxt >= last:
                break


def search_files(rt: Runtime, a: SearchFilesArgs) -> str:
    rx = compile_pattern(a.pattern)
    sb = sandbox(rt)
    base = checked(rt, a.path) if a.path.strip() not in ("", ".", "./") else "."
    info = sb.info(base)
    if info is None:
        raise ToolFailure(f"'{a.path}' does not exist.")
    if info.kind == "other":
        sb.read_head(base, 1)  # refuses it, naming what it is (a named pipe, a socket, a device)
    # A call cannot be interrupted (and stop is only polled between tool calls): the deadline is checked
    # between RE2 calls, each of which is bounded by its span times the program's size.
    span = max(MIN_SPAN_BYTES, min(MAX_SPAN_BYTES, SEARCH_WORK // max(1, rx.programsize)))
    search = _Search(rx, a.max_results, time.monotonic() + SEARCH_SECONDS, span)
    notes: list[str] = []
    docs = docs_prefix(rt, base)  # the tool docs would match most searches: searched only when asked for
    files = [f for f in sb.walk(base, limit=MAX_SEARCH_FILES + 1 + MAX_DOCS) if not (docs and f.rel.startswith(docs))]
    too_big = 0
    for i, f in enumerate(files):
        if i >= MAX_SEARCH_FILES or search.scanned >= MAX_SEARCH_BYTES:
            notes.append(f"[search stopped after {i} files and {search.scanned // 2**20} MB: give a narrower path]")
            break
        search.check_time()
        if f.size > MAX_FILE_BYTES:
            too_big += 1
            continue
        try:
            data = sb.read_bytes(f.rel, max_bytes=MAX_FILE_BYTES)
        except SandboxError:
            continue  # changed or replaced since the listing: not a file we may read now
        if b"\x00" in data[:8192]:
            continue
        search.file(f.rel, line_text(data))
        del data
        if search.full():
            notes.append(f"[stopped at {a.max_results} matches]")
            break
    if too_big:
        notes.append(f"[{too_big} file(s) over {MAX_FILE_BYTES // 2**20} MB not searched]")
    if search.cut_lines:
        notes.append(f"[{search.cut_lines} line(s) longer than {span // 1024} KB were searched in their first "
                     f"{span // 1024} KB only]")
    if not search.hits:
        return "\n".join([f"No lines match '{one_line(a.pattern, 200)}'.", *notes])
    return "\n".join([*search.hits, *notes])


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
    Failure("the content is over {max_write_mb} MB, the most one write may carry",
            "write the first part, then append_file the rest in pieces"),
    Failure("the job folder would grow past its limit of {max_job_mb} MB", "write less, or delete what is not needed"),
    *PATH_ERRORS,
)
PATHS_RULE = "Paths are relative to the job folder ('notes.md', 'data/2019.csv'); nothing outside it can be reached."
READ_ONLY_RULE = ("Read-only (refused): job.toml and instructions.md (the operator's), experiences.md and the tool "
                  "docs in {folder}/ (the harness's).")
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
