"""search_files: the agent's pattern run with RE2 over the job's text files (no backtracking, so time linear in
the text and memory bounded for any pattern); what RE2 cannot run is refused with a message naming the
construct, and one search is bounded in time, files and bytes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import re2
from pydantic import Field

from console.engine.job_files import one_line
from console.engine.sandbox import SandboxError
from console.engine.text import looks_binary
from console.engine.tools.file_access import MAX_DOCS, MAX_FILE_BYTES, checked, docs_prefix, sandbox
from console.engine.tools.registry import ToolArgs, ToolFailure

if TYPE_CHECKING:
    from console.engine.runtime import Runtime


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
        if looks_binary(data):
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
