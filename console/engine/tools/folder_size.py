"""The job folder's size, measured by a walk of its file descriptors (never following a link), and watched
in a thread while a command runs. Stdlib only."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

# What one entry of the job folder costs at least, whatever it holds: an empty file, a folder or a link still
# takes an inode and a directory entry (200,000 empty files are a way to fill a disk too).
ENTRY_BYTES = 512
# Levels of the walk held open at once (two descriptors each: the folder's and its listing's). A deeper folder is
# walked all the same: the shallowest open level is closed (its name, identity and place in its listing kept) and
# opened again through ".." when the walk comes back up to it, so no depth is out of reach and the descriptors stay
# bounded (a command can nest folders without end: one mkdir and one chdir a level).
WINDOW = 100


@dataclass
class FolderMeasure:
    """The job folder's size as a command left it, and what was done about what it should not hold."""

    bytes: int = 0
    # Files whose setuid/setgid bit was removed (outside the sandbox, another user could run them as the owner).
    unset: list[str] = field(default_factory=list)
    # Why the folder could not be walked whole (it then counts as over any limit), or "".
    unmeasurable: str = ""


@dataclass
class _Level:
    """One folder of the walk: open (``fd`` and its listing) or closed (-1: reopened through ".." on the way up)."""

    name: str
    ident: tuple[int, int]  # (st_dev, st_ino), to prove a reopened folder is the one left
    fd: int = -1
    entries: Iterator[os.DirEntry[str]] | None = None
    taken: int = 0  # entries taken from its listing so far (skipped again when it is reopened)


def measure_folder(root: str, state_dir: str = ".console", stop_above: int | None = None, *,
                   strip_setid: bool = False) -> FolderMeasure:
    """What the folder below ``root`` takes on disk (its harness folder aside): for each entry the larger of its
    size and its allocated blocks (a file grown with ``fallocate --keep-size`` is all blocks, a sparse one all
    size), and at least :data:`ENTRY_BYTES`. Walked by file descriptor, links never followed, at any depth with at
    most :data:`WINDOW` levels open (a wide folder cannot exhaust them either). Stops counting above
    ``stop_above``. ``strip_setid``: remove the setuid and setgid bits of the files met, in every folder the walk
    can open (one it cannot is said in ``unmeasurable``, and the walk goes on past it)."""
    out = FolderMeasure()
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        top = os.open(root, flags)
    except OSError as exc:
        out.unmeasurable = f"the job folder cannot be opened ({exc.strerror})"
        return out
    try:
        harness = os.stat(state_dir, dir_fd=top, follow_symlinks=False)
        skip = (harness.st_dev, harness.st_ino)  # the harness folder itself, not a look-alike name (.CONSOLE)
    except OSError:
        skip = None
    # The levels from the top down. Entries are read as they are counted, never listed whole: a folder of millions
    # of empty files (a command makes 40,000 a second) would otherwise be held in the harness's memory at once,
    # about 750 bytes each, at every measure.
    st_top = os.fstat(top)
    stack: list[_Level] = [_Level("", (st_top.st_dev, st_top.st_ino), top)]
    lowest_open = 0  # the open levels are the top one and stack[lowest_open:]
    try:
        try:
            stack[0].entries = _entries(top)
        except OSError as exc:
            out.unmeasurable = _unreadable(".", exc)
            return out
        while stack:
            level = stack[-1]
            assert level.entries is not None
            entry = next(level.entries, None)
            if entry is None:
                stack.pop()
                _close(level.entries)
                if stack and stack[-1].fd < 0:
                    # Back up to a closed level: open it again through "..", proven the same folder, and go on in
                    # its listing where the walk left it.
                    why = _reopen(stack, level.fd, flags)
                    lowest_open = len(stack) - 1
                    if why:
                        out.unmeasurable = out.unmeasurable or why
                        if level.fd != top:
                            os.close(level.fd)
                        break
                if level.fd != top:
                    os.close(level.fd)
                continue
            level.taken += 1
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                if exc.errno in _GONE:
                    continue
                # A folder listed but not searchable (chmod 400): what it holds cannot be counted.
                out.unmeasurable = out.unmeasurable or _unreadable(_path(stack) or ".", exc)
                if strip_setid:
                    continue
                break
            if skip is not None and (st.st_dev, st.st_ino) == skip:
                continue
            out.bytes += max(st.st_size, st.st_blocks * 512, ENTRY_BYTES)
            if stat.S_ISDIR(st.st_mode):
                try:
                    sub = os.open(entry.name, flags, dir_fd=level.fd)
                except OSError as exc:
                    if exc.errno in _GONE:
                        continue
                    # Fail closed: a folder the harness cannot open (chmod 000 by a command, when the operator
                    # is not root) would otherwise hide whatever it holds from every measure.
                    out.unmeasurable = out.unmeasurable or _unreadable(_path(stack, entry.name), exc)
                    if strip_setid:
                        continue  # the rest of the folder still loses its setuid bits
                    break
                try:
                    listing = _entries(sub)
                except OSError as exc:
                    os.close(sub)
                    out.unmeasurable = out.unmeasurable or _unreadable(_path(stack, entry.name), exc)
                    if strip_setid:
                        continue
                    break
                stack.append(_Level(entry.name, (st.st_dev, st.st_ino), sub, listing))
                if len(stack) - max(lowest_open, 1) > WINDOW:
                    # Too many levels open: the shallowest (never the top one) is closed, to be reopened on the way up.
                    lowest_open = max(lowest_open, 1)
                    shallow = stack[lowest_open]
                    assert shallow.entries is not None
                    _close(shallow.entries)
                    os.close(shallow.fd)
                    shallow.fd, shallow.entries = -1, None
                    lowest_open += 1
            elif strip_setid and stat.S_ISREG(st.st_mode) and st.st_mode & 0o6000:
                with contextlib.suppress(OSError, NotImplementedError):
                    os.chmod(entry.name, stat.S_IMODE(st.st_mode) & ~0o6000, dir_fd=level.fd, follow_symlinks=False)
                    out.unset.append(_shown(_path(stack, entry.name), 80))
            if stop_above is not None and out.bytes > stop_above:
                break
    finally:
        for level in stack:
            if level.entries is not None:
                _close(level.entries)
            if level.fd >= 0 and level.fd != top:
                with contextlib.suppress(OSError):
                    os.close(level.fd)
        with contextlib.suppress(OSError):
            os.close(top)
    return out


def _reopen(stack: list[_Level], child: int, flags: int) -> str:
    """Open ``stack[-1]`` (closed) again as the ".." of ``child`` (the folder just walked, still open), with its
    listing moved past the entries already taken; "" or why it could not be (then it is not walked further)."""
    level = stack[-1]
    try:
        fd = os.open("..", flags, dir_fd=child)
    except OSError as exc:
        return _unreadable(_path(stack) or ".", exc)
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != level.ident:
        os.close(fd)
        # Moved while it was walked (a command still running): the walk cannot tell where it is any more.
        return f"the folder '{_shown(_path(stack))}' was moved while it was measured"
    try:
        entries = _entries(fd)
    except OSError as exc:
        os.close(fd)
        return _unreadable(_path(stack) or ".", exc)
    for _ in range(level.taken):
        if next(entries, None) is None:
            break
    level.fd, level.entries = fd, entries
    return ""


def _path(stack: list[_Level], name: str = "") -> str:
    """The path in the job of ``name`` in the deepest level of ``stack`` (of that level, without a name)."""
    return "/".join([*(lv.name for lv in stack[1:]), *((name,) if name else ())])


def _shown(path: str, most: int = 200) -> str:
    """A path of the job as said to the agent and the operator: its end, where it is long (a folder nested deep)."""
    return path if len(path) <= most else "..." + path[3 - most:]


# An entry that went away or changed kind between its listing and its look (a command still running): the
# next measure sees what it became.
_GONE = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)


def _unreadable(shown: str, exc: OSError) -> str:
    return f"the folder '{_shown(shown)}' cannot be read ({exc.strerror or exc}); make it readable (chmod u+rwx)"


def _entries(fd: int) -> Iterator[os.DirEntry[str]]:
    """The entries of the folder open as ``fd``, read as they are asked for (a scandir of its own descriptor:
    one more per level). OSError if it cannot be read at all."""
    return os.scandir(fd)


def _close(entries: Iterator[os.DirEntry[str]]) -> None:
    with contextlib.suppress(OSError, AttributeError):
        entries.close()  # type: ignore[attr-defined]


def folder_bytes(root: str, state_dir: str = ".console", stop_above: int | None = None) -> int:
    """:func:`measure_folder`'s bytes; a folder that cannot be walked whole counts as over any limit."""
    m = measure_folder(root, state_dir, stop_above)
    return max(m.bytes, (stop_above or 0) + 1) if m.unmeasurable else m.bytes


class FolderWatch:
    """Measures the job folder in a thread while a command runs, spending at most a fifth of a core."""

    def __init__(self, root: str, limit: int, state_dir: str) -> None:
        self.root, self.limit, self.state_dir = root, limit, state_dir
        self.over: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="folder-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            size = folder_bytes(self.root, self.state_dir, stop_above=self.limit)
            if size > self.limit:
                self.over = size
                return
            self._stop.wait(max(0.25, 4 * (time.monotonic() - began)))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
