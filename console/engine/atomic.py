"""Crash-safe file writes for the harness's own files (``JOB/.console/``).

A reader, or a run resumed after kill -9, sees either the old file or the new
one, never a torn one. Temp files are created in a folder of their own
(``.console/tmp/`` when the caller gives it) so a kill between the write and the
rename leaves nothing where anyone lists files, and :func:`clean_temp` sweeps
what a kill left behind at the next start. Files written by the agent's tools
go through :mod:`console.engine.sandbox`, which follows the same rules.

The harness's state is the operator's alone: its folders are made 0700 and its
files 0600 (conversations, tool results and commands are in them), and
:func:`make_private` tightens what an older version left readable by others.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from console.engine import failpoints

TMP_SUFFIX = ".tmp"
# The modes of the harness's own folders and files: the operator's only (another user on the machine must not
# read a run's conversation, nor open its run.lock to hold it).
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
# Problems make_private names one by one; beyond this many it counts them.
MAX_NAMED = 5


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Every byte of ``data`` to ``fd`` (os.write may take fewer than it is given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True, tmp_dir: Path | None = None) -> None:
    where = tmp_dir if tmp_dir is not None else path.parent
    name = path.name
    # A str, not where / name: pathlib's join is ~200 bytecodes, and os.path.join's checks ~60, at every write (a run
    # writes a state file a turn). ``where`` is a folder's path, never ending with a separator but the root's.
    folder = os.fspath(where)
    tmp = f"{folder}{'' if folder.endswith(os.sep) else os.sep}.{name}.{secrets.token_hex(4)}{TMP_SUFFIX}"
    if failpoints.installed():  # the kill-point tests' (its name not made at every write of a run)
        failpoints.hit(f"write {name}")
    # 0600: the rename keeps the temp file's mode, and a harness file is nobody else's to read.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, PRIVATE_FILE)
    except FileNotFoundError:
        # The folders are made when missing only: mkdir(exist_ok=True) on a folder that is there raises and
        # catches an error inside pathlib, twice a write (a run writes a state file every turn).
        _make_folders(path, where, anchored=tmp_dir is not None)
        fd = os.open(tmp, flags, PRIVATE_FILE)
    try:
        try:  # the descriptor itself, not a buffered file object made and torn down around one write
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if failpoints.installed():
            failpoints.hit(f"rename {name}")
        try:
            os.replace(tmp, path)
        except FileNotFoundError:
            if path.parent.is_dir():
                raise
            _make_folders(path, where, anchored=tmp_dir is not None)  # the temp folder was there, the file's not
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


def _make_folders(path: Path, where: Path, anchored: bool) -> None:
    """The file's folder, then the temp files' (0700 each, as the harness's folders are).

    ``anchored`` (a temp folder given: a run's ``.console/tmp``): the folders are made one level at a time from
    the folder that holds the one holding both (the run's folder, holding its ``.console``), which must be there.
    A run's folder deleted or moved away while it writes is then never made again at its path by a write that had
    looked a moment before (FileNotFoundError instead: console.engine.state.folder_gone): ``mkdir`` of one level
    fails when its parent is gone, whatever happens between two looks."""
    if not anchored:
        path.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        where.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        return
    anchor = Path(os.path.commonpath([path.parent, where])).parent
    for folder in (path.parent, where):
        made = anchor
        for part in folder.relative_to(anchor).parts:
            made = made / part
            with contextlib.suppress(FileExistsError):
                made.mkdir(mode=PRIVATE_DIR)


def atomic_write_text(path: Path, text: str, *, durable: bool = True, tmp_dir: Path | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8", "replace"), durable=durable, tmp_dir=tmp_dir)


def atomic_write_json(path: Path, data: Any, *, durable: bool = True, tmp_dir: Path | None = None) -> None:
    atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=1), durable=durable, tmp_dir=tmp_dir)


def fsync_dir(directory: Path) -> None:
    # The rename itself is only durable once the directory entry is flushed.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def clean_temp(*folders: Path) -> int:
    """Delete temp files a killed process left behind in these folders; returns how many."""
    n = 0
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            if e.name.startswith(".") and e.name.endswith(TMP_SUFFIX) and e.is_file(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.unlink(e.path)
                    n += 1
    return n


def private_dir(path: Path, *, follow: bool = True) -> str | None:
    """Make the folder ``path`` (and its missing parents) and make it the operator's only (0700).

    Only the folder itself is tightened, never what it holds (the data folder holds every run). ``follow``:
    a symbolic link to a folder is that folder (an operator may link the data folder elsewhere); without it a
    link is a problem and is left alone. Returns None, or one line saying why the folder could not be made
    private (it is not ours, not a folder); never raises."""
    try:
        path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    except OSError as exc:
        return f"{path}: cannot be created ({exc.strerror or exc})"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
    except OSError as exc:
        return f"{path}: cannot be opened to make it private ({exc.strerror or exc})"
    try:
        return _tighten(fd, PRIVATE_DIR, str(path))
    finally:
        os.close(fd)


def private_file(path: Path) -> str | None:
    """Make an existing file of ours 0600 (a missing one is no problem). None, or one line saying why not."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path}: cannot be opened to make it private ({exc.strerror or exc})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None  # not a file this helper knows how to make private; its reader says what is wrong
        return _tighten(fd, PRIVATE_FILE, str(path))
    finally:
        os.close(fd)


def _tighten(fd: int, mode: int, shown: str) -> str | None:
    """Take group and other bits off the open file or folder ``fd``; a line saying why not, or None."""
    st = os.fstat(fd)
    if not stat.S_IMODE(st.st_mode) & 0o077:
        return None
    if st.st_uid != os.geteuid():
        return f"{shown}: readable by others and owned by uid {st.st_uid}, not by this user: it cannot be made private"
    try:
        os.fchmod(fd, (stat.S_IMODE(st.st_mode) & 0o700) | (mode & 0o700))
    except OSError as exc:
        return f"{shown}: cannot be made private ({exc.strerror or exc})"
    return None


def make_private(top: Path) -> list[str]:
    """Make ``top`` (a run's ``.console/``) and everything in it the operator's only: folders 0700, files 0600.

    A run made by an older version left them 0755 / 0644. Walked by file descriptor without following a
    link; only regular files and folders are changed, and only ours (a file of another user is named in the
    problems, not touched). Returns what could not be made private, at most :data:`MAX_NAMED` lines and a
    count of the rest; never raises."""
    problems: list[str] = []
    first = private_dir(top, follow=False)
    if first is not None:
        return [first]
    try:
        walk = os.fwalk(top, follow_symlinks=False)
        for dirpath, _dirs, files, dirfd in walk:
            if (p := _tighten(dirfd, PRIVATE_DIR, dirpath)) is not None:
                problems.append(p)
            for name in files:
                if (p := _tighten_entry(dirfd, name, os.path.join(dirpath, name))) is not None:
                    problems.append(p)
    except OSError as exc:
        problems.append(f"{top}: cannot be walked to make it private ({exc.strerror or exc})")
    if len(problems) > MAX_NAMED:
        problems = [*problems[:MAX_NAMED], f"and {len(problems) - MAX_NAMED} more in {top}"]
    return problems


def _tighten_entry(dirfd: int, name: str, shown: str) -> str | None:
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except OSError:
        return None  # gone meanwhile
    if not stat.S_ISREG(st.st_mode) or not stat.S_IMODE(st.st_mode) & 0o077:
        return None  # a link, a pipe or a device is never opened here; a private file needs nothing
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC, dir_fd=dirfd)
    except OSError as exc:
        return f"{shown}: cannot be opened to make it private ({exc.strerror or exc})"
    try:
        return _tighten(fd, PRIVATE_FILE, shown)
    finally:
        os.close(fd)
