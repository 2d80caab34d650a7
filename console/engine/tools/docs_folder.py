"""The folder of tool docs in the job folder: which folder, and writing it (:mod:`.docs` renders the files).

Which folder: ``tools/`` (seed 000), unless the job has a ``tools/`` of its own (a software repository often
does). The harness never writes into, removes from or mixes with a folder it did not make: a folder is the
harness's when it holds the marker file :data:`MARKER` and nothing but files the harness writes (each starts
with :data:`.docs.HEADER`). The docs go into the first of :data:`CANDIDATES` that is the harness's, else into
the first that does not exist; when each one is the job's own, none are written (the caller says so) and the
prompt points to none. An operator who puts a file of their own into the harness's folder makes it theirs: it
is left alone from then on, and the docs go to the next candidate.

How: the first time, the whole folder is made in ``.console/tmp`` and renamed into the job folder in one step,
so it exists complete or not at all; after that, each file whose content changed is replaced atomically (a
temp file in ``.console/tmp`` renamed over it) and the doc of a tool that is gone is removed. Every step goes
through directory file descriptors with O_NOFOLLOW, so a symlink put in place of the folder or of a file is
never followed. It runs at every session start: cheap (a few dozen small files compared with what is there),
idempotent, and a kill at any point leaves each file old or new, each one whole.

Each rename is a failpoint (console.engine.failpoints), so the kill-point tests kill a run there too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from console.engine import failpoints
from console.engine.atomic import write_all
from console.engine.tools.docs import HEADER

CANDIDATES = ("tools", "tool_docs", "harness_tool_docs")
MARKER = ".agent-console-tool-docs"
MARKER_FIRST_LINE = "agent-console tool docs"
MARKER_TEXT = (f"{MARKER_FIRST_LINE}\n\nThis folder is written by agent-console from its tools' definitions at each "
               "session start, for the agent to read. Do not edit it (edits are overwritten) and do not add files to "
               "it: a folder holding files of its own is taken for the job's and left alone, and the docs then go "
               "to another folder.\n")
# More entries than this, or a file bigger than MAX_FILE_BYTES, is not the harness's folder.
MAX_ENTRIES = 512
MAX_FILE_BYTES = 1 * 2**20
STAGE_PREFIX = "tool-docs."
# The names the harness gives its docs (a tool name is letters, digits, '_' and '-': commands.py, the built-ins).
_DOC_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}(?:\.tool)?\.md")
# Its temp files, when they have to be made beside the target (.console/tmp on another file system).
_TEMP = re.compile(r"\..+\.[0-9a-f]{8}\.tmp")

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

Ownership = Literal["absent", "ours", "theirs"]


@dataclass
class DocsResult:
    """Where the docs are (None: nowhere this session), what changed, and what went wrong (None: nothing)."""

    folder: str | None
    written: int = 0
    removed: int = 0
    # Candidates passed over because they are the job's own (the docs went to the next one).
    theirs: tuple[str, ...] = ()
    problem: str | None = None


def _read(dirfd: int, name: str, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of ``name`` in ``dirfd``, or None when it is not a regular file with one link."""
    try:
        fd = os.open(name, _READ, dir_fd=dirfd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return None
        chunks, got = [], 0
        while got < limit:
            chunk = os.read(fd, min(limit - got, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _is_ours_file(dirfd: int, name: str) -> bool:
    if name == MARKER:
        head = _read(dirfd, name, len(MARKER_FIRST_LINE) + 1)
        return head is not None and head.decode("utf-8", "replace").split("\n", 1)[0] == MARKER_FIRST_LINE
    if _TEMP.fullmatch(name):
        return _read(dirfd, name, 0) is not None  # a temp file a kill left: a regular file of ours to sweep
    if not _DOC_NAME.fullmatch(name):
        return False
    head = _read(dirfd, name, len(HEADER) + 1)
    return head is not None and head.startswith(HEADER.encode() + b"\n")


def ownership(root_fd: int, name: str) -> Ownership:
    """Whether the folder ``name`` of the job folder is absent, the harness's, or the job's own."""
    try:
        st = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
    except FileNotFoundError:
        return "absent"
    if not stat.S_ISDIR(st.st_mode):
        return "theirs"  # a file, a symlink (even to a folder of ours), a pipe
    try:
        fd = os.open(name, _DIR, dir_fd=root_fd)
    except OSError:
        return "theirs"
    try:
        names = os.listdir(fd)
        if len(names) > MAX_ENTRIES or MARKER not in names:
            return "theirs"
        return "ours" if all(_is_ours_file(fd, n) for n in names) else "theirs"
    except OSError:
        return "theirs"
    finally:
        os.close(fd)


def choose(root_fd: int) -> tuple[str | None, tuple[str, ...]]:
    """(the folder for the docs or None, the candidates passed over as the job's own)."""
    states = {name: ownership(root_fd, name) for name in CANDIDATES}
    folder = next((n for n in CANDIDATES if states[n] == "ours"), None) or \
        next((n for n in CANDIDATES if states[n] == "absent"), None)
    stop = CANDIDATES.index(folder) if folder is not None else len(CANDIDATES)
    return folder, tuple(n for n in CANDIDATES[:stop] if states[n] == "theirs")


def _write_new(dirfd: int, name: str, data: bytes) -> None:
    fd = os.open(name, _NEW, 0o644, dir_fd=dirfd)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)


def _put(tmp_fd: int, dirfd: int, name: str, data: bytes) -> None:
    """Replace ``name`` in ``dirfd`` with ``data`` in one step: a temp file in .console/tmp renamed over it (or,
    .console/tmp being on another file system, a temp file beside it)."""
    temp = f".{name}.{secrets.token_hex(4)}.tmp"
    where = tmp_fd
    try:
        _write_new(where, temp, data)
        failpoints.hit(f"rename tool doc {name}")
        try:
            os.replace(temp, name, src_dir_fd=where, dst_dir_fd=dirfd)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            os.unlink(temp, dir_fd=where)
            where = dirfd
            _write_new(where, temp, data)
            os.replace(temp, name, src_dir_fd=where, dst_dir_fd=dirfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=where)
        raise


def _remove_tree(parent: int, name: str) -> None:
    """Remove a stage folder of ours (files only, no sub-folders) from ``parent``."""
    with contextlib.suppress(OSError):
        fd = os.open(name, _DIR, dir_fd=parent)
        try:
            for entry in os.listdir(fd):
                with contextlib.suppress(OSError):
                    os.unlink(entry, dir_fd=fd)
        finally:
            os.close(fd)
        os.rmdir(name, dir_fd=parent)


def _open_tmp(root_fd: int, state_dir: str) -> int:
    """.console/tmp (made if missing), opened without following a symlink on the way."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(state_dir, 0o700, dir_fd=root_fd)
    state = os.open(state_dir, _DIR, dir_fd=root_fd)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir("tmp", 0o700, dir_fd=state)
        return os.open("tmp", _DIR, dir_fd=state)
    finally:
        os.close(state)


def _create(root_fd: int, tmp_fd: int, folder: str, files: dict[str, bytes]) -> int:
    """Make the folder whole in .console/tmp, then rename it into place: it exists complete or not at all."""
    stage = f"{STAGE_PREFIX}{secrets.token_hex(4)}"
    os.mkdir(stage, 0o755, dir_fd=tmp_fd)
    try:
        fd = os.open(stage, _DIR, dir_fd=tmp_fd)
        try:
            for name, data in files.items():
                _write_new(fd, name, data)
        finally:
            os.close(fd)
        try:
            # A folder of that name made in the last instant: rename fails on a non-empty one (and replaces an
            # empty one, which loses nothing).
            failpoints.hit("rename tool docs folder")
            os.rename(stage, folder, src_dir_fd=tmp_fd, dst_dir_fd=root_fd)
            return len(files)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
    finally:
        _remove_tree(tmp_fd, stage)
    # .console/tmp is on another file system: made in place, the marker first, so it is never a folder of ours
    # without it for longer than one write (and one without it is the job's: never written into again).
    os.mkdir(folder, 0o755, dir_fd=root_fd)
    fd = os.open(folder, _DIR, dir_fd=root_fd)
    try:
        for name in (MARKER, *[n for n in files if n != MARKER]):
            _write_new(fd, name, files[name])
    finally:
        os.close(fd)
    return len(files)


def _update(root_fd: int, tmp_fd: int, folder: str, files: dict[str, bytes]) -> tuple[int, int]:
    """Rewrite what changed in the harness's folder and remove the docs of tools that are gone."""
    written = removed = 0
    fd = os.open(folder, _DIR, dir_fd=root_fd)
    try:
        for name, data in files.items():
            if _read(fd, name, len(data) + 1) == data:
                continue
            _put(tmp_fd, fd, name, data)
            written += 1
        for name in os.listdir(fd):
            if name in files:
                continue
            # Only files of ours: a stale doc (it starts with the header), a temp file a kill left beside one.
            if _is_ours_file(fd, name):
                os.unlink(name, dir_fd=fd)
                removed += 0 if _TEMP.fullmatch(name) else 1
    finally:
        os.close(fd)
    return written, removed


def write_docs(root: Path, render: Callable[[str], dict[str, str]], *, state_dir: str = ".console") -> DocsResult:
    """Write the docs ``render(folder)`` gives (file name -> text) into the folder chosen by the rule above."""
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        return DocsResult(None, problem=f"the job folder cannot be opened ({exc.strerror or exc})")
    folder: str | None = None
    try:
        folder, theirs = choose(root_fd)
        if folder is None:
            return DocsResult(None, theirs=theirs, problem=f"{', '.join(f'{n}/' for n in CANDIDATES)} are all the "
                                                           "job's own folders; no tool docs were written")
        files = {MARKER: MARKER_TEXT.encode()}
        for name, text in render(folder).items():
            if not _DOC_NAME.fullmatch(name) or name == MARKER:
                raise ValueError(f"not a name for a tool doc: {name!r}")
            files[name] = text.encode("utf-8", "replace")
        tmp_fd = _open_tmp(root_fd, state_dir)
        try:
            for name in os.listdir(tmp_fd):  # stages a kill left
                if name.startswith(STAGE_PREFIX):
                    _remove_tree(tmp_fd, name)
            if ownership(root_fd, folder) == "absent":
                return DocsResult(folder, written=_create(root_fd, tmp_fd, folder, files), theirs=theirs)
            written, removed = _update(root_fd, tmp_fd, folder, files)
            return DocsResult(folder, written, removed, theirs)
        finally:
            os.close(tmp_fd)
    except OSError as exc:
        # The docs already there (if any) are whole: point to them; none there, point to none.
        kept = folder if folder is not None and ownership(root_fd, folder) == "ours" else None
        return DocsResult(kept, problem=f"the tool docs could not be written ({exc.strerror or exc})")
    finally:
        os.close(root_fd)
