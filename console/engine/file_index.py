"""The job folder's file catalogue: seed 003's phase 2, option A (a lightweight filename index).

What it is for: in a folder of thousands of files, ``find_files(query)`` (:mod:`console.engine.tools.find_files`)
ranks the files by the words of a query found in their path or their first lines, so the agent finds "the auth
module" without listing everything or grepping whole files. No embeddings, no model: a deterministic substring
match, the same query on the same files always giving the same answer.

What it holds, per file: its path relative to the job folder, its size and mtime, and its first lines (read from
the first HEAD_BYTES bytes; blank lines dropped, lines joined by `` ⏎ ``, at most HEAD_CHARS characters).

The rules (seed 003's gates for anything shown to the agent, and the engine's own):

* Only through the sandbox: one directory walk (:meth:`Sandbox.walk`: never follows a link out of the folder, never
  lists a named pipe, a socket, a device or a hard-linked file, never enters ``.console/`` or a hidden folder) and
  one bounded read per file (:meth:`Sandbox.read_head`: resolved again beneath the root, a regular file with one
  link, opened non-blocking). A file replaced between the walk and the read by something the sandbox refuses is
  simply left out.
* Bounded: at most MAX_FILES files (a bigger folder is said to be cut), HEAD_BYTES read per file, READ_SECONDS of
  reading per refresh (a file not read then is matched by its path alone and read at the next refresh), paths of
  at most MAX_PATH_CHARS; the usual generated folders (JUNK_DIRS) are not entered, hidden files are left out.
* Not binary: a file whose head has a NUL byte, or is mostly not UTF-8, is never shown; it is remembered as binary
  so that a refresh does not read it again.
* Cheap to refresh: a refresh is one walk; a file is read again only when its size or mtime changed, or when it
  was read within RACY_SECONDS of its last change (a second write in the same timestamp tick, same size, would
  otherwise go unseen: git's "racy" entries).
* Derived state: kept in memory, one index per Sandbox (so per run process), built on the first query; a new
  process builds it again. Nothing on disk to validate, to damage, or to drift from the files.

The text it holds is the agent's (file names and contents): the tool shows it through ``safe_text``.
"""

from __future__ import annotations

import codecs
import heapq
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from console.engine.sandbox import Sandbox, SandboxError

MAX_FILES = 10_000
HEAD_BYTES = 1024
HEAD_CHARS = 200
READ_SECONDS = 2.0
RACY_SECONDS = 2.0
MAX_PATH_CHARS = 1000
MAX_TERMS = 8
MAX_TERM_CHARS = 100
LINE_JOIN = " ⏎ "
# Folders of generated or vendored files, at any depth (hidden ones, .git, .venv, .next..., are never entered).
JUNK_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "bower_components", "venv", "dist", "build"})
# A term found in a file's name (the whole name or its stem: more), its folders, its first lines.
SCORE_NAME_EXACT, SCORE_NAME, SCORE_PATH, SCORE_HEAD = 8, 4, 2, 1


@dataclass(slots=True)
class Entry:
    rel: str
    size: int
    mtime: float
    head: str = ""
    binary: bool = False
    # Its first lines have been read (else it is matched by its path alone).
    read: bool = False
    # Its first lines must be read (again) at the next refresh: not read yet, or read while it was still changing.
    stale: bool = True
    name_cf: str = ""
    stem_cf: str = ""
    path_cf: str = ""
    head_cf: str = ""


@dataclass(frozen=True)
class Refresh:
    """What one refresh found and did (the tool's notes; the benchmark's figures)."""

    files: int  # text files in the index (binary ones excluded)
    binary: int
    read: int  # files whose first lines this refresh read
    removed: int
    pending: int  # files whose first lines are still to be read (the refresh ran out of time)
    truncated: bool  # the folder has more than MAX_FILES files: the rest is not in the index
    long_paths: int  # paths over MAX_PATH_CHARS, left out
    seconds: float


def first_lines(data: bytes) -> str | None:
    """The first lines of a file's head as one line of at most HEAD_CHARS characters; None if it is binary."""
    if b"\x00" in data:
        return None
    # Incremental, not final: a character cut by the end of the head is left out instead of counted as invalid.
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(data)
    if text.count("\ufffd") * 3 > len(text):  # a third not UTF-8: binary (a Latin-1 text has a few stray bytes)
        return None
    return LINE_JOIN.join(s for line in text.splitlines() if (s := line.strip()))[:HEAD_CHARS]


def terms_of(query: str) -> list[str]:
    """The words of a query, case-folded, each once, in order (at most MAX_TERMS of MAX_TERM_CHARS)."""
    out: list[str] = []
    for word in query.casefold().split():
        word = word[:MAX_TERM_CHARS]
        if word not in out:
            out.append(word)
        if len(out) == MAX_TERMS:
            break
    return out


class FileIndex:
    def __init__(self, *, max_files: int = MAX_FILES, read_seconds: float = READ_SECONDS,
                 monotonic: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.max_files = max_files
        self.read_seconds = read_seconds
        # The bound on reading is elapsed time; "racy" compares file mtimes, which are wall-clock time.
        self._monotonic = monotonic
        self._wall = wall
        self._entries: dict[str, Entry] = {}
        self._rows: list[tuple[str, str, str, str, int, str]] | None = None
        self.last: Refresh | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, rel: str) -> Entry | None:
        return self._entries.get(rel)

    def refresh(self, sandbox: Sandbox) -> Refresh:
        """Bring the index up to the folder: one walk, and a read of each file that is new or changed."""
        started = self._monotonic()
        deadline = started + self.read_seconds
        racy_since = self._wall() - RACY_SECONDS
        listed = sandbox.walk(".", limit=self.max_files + 1, hidden_files=False, skip_dirs=JUNK_DIRS)
        truncated = len(listed) > self.max_files
        old, new = self._entries, {}
        read = long_paths = 0
        reading = True
        for f in listed[: self.max_files]:
            if len(f.rel) > MAX_PATH_CHARS:
                long_paths += 1
                continue
            e = old.get(f.rel)
            same = e is not None and e.size == f.size and e.mtime == f.mtime
            if same and e is not None and not e.stale:
                new[f.rel] = e
                continue
            reading = reading and self._monotonic() < deadline
            if not reading:  # out of time: what it was (if unchanged), else its path alone until the next refresh
                new[f.rel] = e if same and e is not None else _entry(f.rel, f.size, f.mtime)
                continue
            try:
                head = first_lines(sandbox.read_head(f.rel, HEAD_BYTES))
            except SandboxError:
                continue  # gone, or replaced by what the sandbox refuses, since the walk: not a file to show
            read += 1
            e = _entry(f.rel, f.size, f.mtime)
            e.binary, e.head, e.read = head is None, head or "", True
            e.head_cf = e.head.casefold()
            e.stale = f.mtime >= racy_since
            new[f.rel] = e
        removed = sum(1 for rel in old if rel not in new)
        self._entries = new
        self._rows = None
        binary = sum(1 for e in new.values() if e.binary)
        self.last = Refresh(files=len(new) - binary, binary=binary, read=read, removed=removed,
                            pending=sum(1 for e in new.values() if not e.read),
                            truncated=truncated, long_paths=long_paths, seconds=self._monotonic() - started)
        return self.last

    def query(self, terms: list[str], limit: int) -> tuple[list[Entry], int]:
        """The best ``limit`` text files for ``terms`` (from :func:`terms_of`) and how many matched at all.

        A file matches if any term is in its path or first lines; files matching more terms rank first, then a
        higher score (a term in the name counts more than one in a folder's name, which counts more than one in
        the first lines), then shallower paths, then the path itself: a total order, so the answer is the same
        every time."""
        ranked: list[tuple[int, int, int, str]] = []
        for text, name, stem, path, depth, rel in self._searchable():
            matched = score = 0
            for t in terms:
                if t not in text:  # most files miss most terms: one look for those
                    continue
                if t in name:
                    score += SCORE_NAME_EXACT if t in (name, stem) else SCORE_NAME
                elif t in path:
                    score += SCORE_PATH
                else:
                    score += SCORE_HEAD
                matched += 1
            if matched:
                ranked.append((-matched, -score, depth, rel))
        best = heapq.nsmallest(limit, ranked)
        return [self._entries[key[3]] for key in best], len(ranked)

    def _searchable(self) -> list[tuple[str, str, str, str, int, str]]:
        """The text files' fields a query looks at, as plain tuples (a query is a tight loop over them), made once
        per refresh. The first is the path and the first lines joined by a newline: a term never holds
        whitespace (terms_of splits on it), so it cannot match across the two."""
        if self._rows is None:
            self._rows = [(f"{e.path_cf}\n{e.head_cf}", e.name_cf, e.stem_cf, e.path_cf, e.rel.count("/"), e.rel)
                          for e in self._entries.values() if not e.binary]
        return self._rows


def _entry(rel: str, size: int, mtime: float) -> Entry:
    name = rel.rsplit("/", 1)[-1].casefold()
    stem = name.rsplit(".", 1)[0] if "." in name[1:] else name
    return Entry(rel, size, mtime, name_cf=name, stem_cf=stem, path_cf=rel.casefold())


_INDEXES: weakref.WeakKeyDictionary[Sandbox, FileIndex] = weakref.WeakKeyDictionary()


def index_for(sandbox: Sandbox) -> FileIndex:
    """The index of the folder ``sandbox`` guards, made on first use (it lives as long as the sandbox)."""
    index = _INDEXES.get(sandbox)
    if index is None:
        index = _INDEXES[sandbox] = FileIndex()
    return index
