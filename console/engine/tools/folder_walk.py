"""One walk of the job folder by file descriptor, for everything that looks at what a command left there: the
folder's measure and its setuid sweep (:mod:`.folder_size`), the repositories' survey and sweep (:mod:`.repos`).

A command can nest folders without end (one mkdir and one chdir a level), so the walk has no depth at which it
stops: it holds at most :data:`WINDOW` levels open (two descriptors each: the folder's and its listing's); deeper,
the shallowest open level is closed (its name, identity and place in its listing kept) and opened again through
``..`` when the walk comes back up to it, proven to be the same folder. Links are never followed; a listing is
read as it is walked, never held whole (a folder of millions of empty files would otherwise be held in memory).
Stdlib only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Generator, Iterator
from dataclasses import dataclass

WINDOW = 100
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# An entry that went away or changed kind between its listing and its look (a command still running): the
# next walk sees what it became.
GONE = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)


@dataclass(frozen=True)
class Entry:
    """An entry of a folder (never the skipped harness folder). ``dir_fd`` is open while the entry is handled."""

    dir_fd: int
    name: str
    path: str  # in the job: "a/b/name"
    st: os.stat_result


@dataclass(frozen=True)
class Opened:
    """A folder the walk has just opened and is about to walk (``fd`` is open while it is handled)."""

    fd: int
    path: str


@dataclass(frozen=True)
class Unreadable:
    """A folder the walk could not open or read (what it holds is not walked); ``final``: the walk ends here."""

    path: str
    strerror: str = ""
    final: bool = False
    moved: bool = False  # moved away while it was walked (a command still running): the walk lost its place


Step = Entry | Opened | Unreadable


@dataclass
class _Level:
    name: str
    ident: tuple[int, int]  # (st_dev, st_ino), to prove a reopened folder is the one left
    fd: int = -1
    entries: Iterator[os.DirEntry[str]] | None = None
    taken: int = 0  # entries taken from its listing so far (skipped again when it is reopened)


def walk(top: int, *, skip: tuple[int, int] | None = None, files: bool = True) -> Generator[Step, None, None]:
    """Every entry below the open folder ``top`` (which the caller closes), depth first: an :class:`Entry` for
    each (only folders when ``files`` is false: no stat of the others), an :class:`Opened` for each folder entered,
    an :class:`Unreadable` for each that cannot be. ``skip``: the identity of a folder never entered nor shown
    (the harness folder). A caller that stops iterating closes every descriptor the walk opened."""
    st_top = os.fstat(top)
    stack = [_Level("", (st_top.st_dev, st_top.st_ino), top)]
    lowest_open = 0  # the open levels are the top one and stack[lowest_open:]
    try:
        try:
            stack[0].entries = os.scandir(top)
        except OSError as exc:
            yield Unreadable(".", _why(exc), final=True)
            return
        while stack:
            level = stack[-1]
            assert level.entries is not None
            entry = next(level.entries, None)
            if entry is None:
                stack.pop()
                _close(level.entries)
                if stack and stack[-1].fd < 0:
                    why = _reopen(stack, level.fd)
                    lowest_open = len(stack) - 1
                    if why is not None:
                        os.close(level.fd)
                        yield why
                        return
                if level.fd != top:
                    os.close(level.fd)
                continue
            level.taken += 1
            here = _path(stack)
            path = f"{here}/{entry.name}" if here else entry.name
            try:
                if files:
                    st = entry.stat(follow_symlinks=False)
                    is_dir = stat.S_ISDIR(st.st_mode)
                else:
                    is_dir = entry.is_dir(follow_symlinks=False)
            except OSError as exc:
                if exc.errno not in GONE:
                    # A folder listed but not searchable (chmod 400): what it holds cannot be looked at.
                    yield Unreadable(here or ".", _why(exc))
                continue
            if files:
                if skip is not None and (st.st_dev, st.st_ino) == skip:
                    continue
                yield Entry(level.fd, entry.name, path, st)
            if not is_dir:
                continue
            try:
                sub = os.open(entry.name, DIR_FLAGS, dir_fd=level.fd)
            except OSError as exc:
                if exc.errno not in GONE:
                    yield Unreadable(path, _why(exc))
                continue
            st_sub = os.fstat(sub)
            ident = (st_sub.st_dev, st_sub.st_ino)
            if skip is not None and ident == skip:
                os.close(sub)
                continue
            try:
                listing = os.scandir(sub)
            except OSError as exc:
                os.close(sub)
                yield Unreadable(path, _why(exc))
                continue
            stack.append(_Level(entry.name, ident, sub, listing))
            if len(stack) - max(lowest_open, 1) > WINDOW:
                # Too many levels open: the shallowest (never the top one) is closed, to be reopened on the way up.
                lowest_open = max(lowest_open, 1)
                shallow = stack[lowest_open]
                assert shallow.entries is not None
                _close(shallow.entries)
                os.close(shallow.fd)
                shallow.fd, shallow.entries = -1, None
                lowest_open += 1
            yield Opened(sub, path)
    finally:
        for level in stack:
            if level.entries is not None:
                _close(level.entries)
            if level.fd >= 0 and level.fd != top:
                with contextlib.suppress(OSError):
                    os.close(level.fd)


def _reopen(stack: list[_Level], child: int) -> Unreadable | None:
    """Open ``stack[-1]`` (closed) again as the ".." of ``child`` (the folder just walked, still open), with its
    listing moved past the entries already taken; None, or why it could not be (the walk then ends)."""
    level = stack[-1]
    here = _path(stack) or "."
    try:
        fd = os.open("..", DIR_FLAGS, dir_fd=child)
    except OSError as exc:
        return Unreadable(here, _why(exc), final=True)
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != level.ident:
        os.close(fd)
        return Unreadable(here, final=True, moved=True)
    try:
        entries = os.scandir(fd)
    except OSError as exc:
        os.close(fd)
        return Unreadable(here, _why(exc), final=True)
    for _ in range(level.taken):
        if next(entries, None) is None:
            break
    level.fd, level.entries = fd, entries
    return None


def _path(stack: list[_Level]) -> str:
    return "/".join(lv.name for lv in stack[1:])


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _close(entries: Iterator[os.DirEntry[str]]) -> None:
    with contextlib.suppress(OSError, AttributeError):
        entries.close()  # type: ignore[attr-defined]


def shown(path: str, most: int = 200) -> str:
    """A path of the job as said to the agent and the operator: its end, where it is long (a folder nested deep)."""
    return path if len(path) <= most else "..." + path[3 - most:]
