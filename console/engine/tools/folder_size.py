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
    # A stack of (folder fd, the iterator over its entries, its path in the job). Entries are read as they are
    # counted, never listed whole: a folder of millions of empty files (a command makes 40,000 a second) would
    # otherwise be held in the harness's memory at once, about 750 bytes each, at every measure.
    stack: list[tuple[int, Iterator[os.DirEntry[str]], str]] = []
    try:
        try:
            stack.append((top, _entries(top), ""))
        except OSError as exc:
            out.unmeasurable = _unreadable(".", exc)
            return out
        while stack:
            fd, entries, prefix = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                _close(entries)
                if fd != top:
                    os.close(fd)
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                if exc.errno in _GONE:
                    continue
                # A folder listed but not searchable (chmod 400): what it holds cannot be counted.
                out.unmeasurable = _unreadable(prefix or ".", exc)
                break
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
                    if exc.errno in _GONE:
                        continue
                    # Fail closed: a folder the harness cannot open (chmod 000 by a command, when the operator
                    # is not root) would otherwise hide whatever it holds from every measure.
                    out.unmeasurable = _unreadable(prefix + entry.name, exc)
                    break
                try:
                    listing = _entries(sub)
                except OSError as exc:
                    os.close(sub)
                    out.unmeasurable = _unreadable(prefix + entry.name, exc)
                    break
                stack.append((sub, listing, f"{prefix}{entry.name}/"))
            elif strip_setid and stat.S_ISREG(st.st_mode) and st.st_mode & 0o6000:
                with contextlib.suppress(OSError, NotImplementedError):
                    os.chmod(entry.name, stat.S_IMODE(st.st_mode) & ~0o6000, dir_fd=fd, follow_symlinks=False)
                    out.unset.append(prefix + entry.name)
            if stop_above is not None and out.bytes > stop_above:
                break
    finally:
        for fd, entries, _prefix in stack:
            _close(entries)
            if fd != top:
                with contextlib.suppress(OSError):
                    os.close(fd)
        with contextlib.suppress(OSError):
            os.close(top)
    return out


# An entry that went away or changed kind between its listing and its look (a command still running): the
# next measure sees what it became.
_GONE = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)


def _unreadable(shown: str, exc: OSError) -> str:
    return f"the folder '{shown[:200]}' cannot be read ({exc.strerror or exc}); make it readable (chmod u+rwx)"


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
