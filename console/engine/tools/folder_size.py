"""The job folder's size, measured by a walk of its file descriptors (never following a link), and watched
in a thread while a command runs. Stdlib only."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
import time
from dataclasses import dataclass, field

# What one entry of the job folder costs at least, whatever it holds: an empty file, a folder or a link still
# takes an inode and a directory entry (200,000 empty files are a way to fill a disk too).
ENTRY_BYTES = 512
# Folders deeper than this are not walked: the folder counts as over its limit (no honest project nests so deep,
# and each level holds a file descriptor open).
MAX_DEPTH = 256


@dataclass
class FolderMeasure:
    """The job folder's size as a command left it, and what was done about what it should not hold."""

    bytes: int = 0
    # Files whose setuid/setgid bit was removed (outside the sandbox, another user could run them as the owner).
    unset: list[str] = field(default_factory=list)
    # Why the folder could not be walked whole (it then counts as over any limit), or "".
    unmeasurable: str = ""


def measure_folder(root: str, state_dir: str = ".console", stop_above: int | None = None, *,
                   strip_setid: bool = False) -> FolderMeasure:
    """What the folder below ``root`` takes on disk (its harness folder aside): for each entry the larger of its
    size and its allocated blocks (a file grown with ``fallocate --keep-size`` is all blocks, a sparse one all
    size), and at least :data:`ENTRY_BYTES`. Walked by file descriptor, links never followed, one descriptor
    per level held open (a wide folder cannot exhaust them). Stops counting above ``stop_above``.
    ``strip_setid``: remove the setuid and setgid bits of the files met."""
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
    # A stack of (folder fd, its entries, next index, its path in the job): one open descriptor per level.
    stack: list[tuple[int, list[os.DirEntry[str]], int, str]] = []
    try:
        stack.append((top, _entries(top), 0, ""))
        while stack:
            fd, entries, i, prefix = stack[-1]
            if i >= len(entries):
                stack.pop()
                if fd != top:
                    os.close(fd)
                continue
            stack[-1] = (fd, entries, i + 1, prefix)
            entry = entries[i]
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if skip is not None and (st.st_dev, st.st_ino) == skip:
                continue
            out.bytes += max(st.st_size, st.st_blocks * 512, ENTRY_BYTES)
            if stat.S_ISDIR(st.st_mode):
                if len(stack) >= MAX_DEPTH:
                    out.unmeasurable = f"it nests folders more than {MAX_DEPTH} deep"
                    break
                try:
                    sub = os.open(entry.name, flags, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM):
                        out.unmeasurable = f"a folder could not be opened ({exc.strerror})"
                        break
                    continue
                stack.append((sub, _entries(sub), 0, f"{prefix}{entry.name}/"))
            elif strip_setid and stat.S_ISREG(st.st_mode) and st.st_mode & 0o6000:
                with contextlib.suppress(OSError, NotImplementedError):
                    os.chmod(entry.name, stat.S_IMODE(st.st_mode) & ~0o6000, dir_fd=fd, follow_symlinks=False)
                    out.unset.append(prefix + entry.name)
            if stop_above is not None and out.bytes > stop_above:
                break
    finally:
        for level in stack:
            fd = level[0]
            if fd != top:
                with contextlib.suppress(OSError):
                    os.close(fd)
        with contextlib.suppress(OSError):
            os.close(top)
    return out


def _entries(fd: int) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(fd) as it:
            return list(it)
    except OSError:
        return []


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
