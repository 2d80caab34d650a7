"""The job folder's size, measured by a walk of its file descriptors (never following a link), and watched
in a thread while a command runs. Stdlib only."""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from dataclasses import dataclass, field

from console.engine.tools.folder_walk import DIR_FLAGS, Entry, Unreadable, shown, walk

# What one entry of the job folder costs at least, whatever it holds: an empty file, a folder or a link still
# takes an inode and a directory entry (200,000 empty files are a way to fill a disk too).
ENTRY_BYTES = 512


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
    size), and at least :data:`ENTRY_BYTES`. Walked by file descriptor at any depth (:mod:`.folder_walk`). Stops
    counting above ``stop_above``. ``strip_setid``: remove the setuid and setgid bits of the files met, in every
    folder the walk can open (one it cannot is said in ``unmeasurable``, and the walk goes on past it)."""
    out = FolderMeasure()
    try:
        top = os.open(root, DIR_FLAGS)
    except OSError as exc:
        out.unmeasurable = f"the job folder cannot be opened ({exc.strerror})"
        return out
    try:
        try:
            harness = os.stat(state_dir, dir_fd=top, follow_symlinks=False)
            skip = (harness.st_dev, harness.st_ino)  # the harness folder itself, not a look-alike name (.CONSOLE)
        except OSError:
            skip = None
        steps = walk(top, skip=skip)
        try:
            for step in steps:
                if isinstance(step, Unreadable):
                    # Fail closed: a folder the harness cannot open (chmod 000 by a command, when the operator is
                    # not root) would otherwise hide whatever it holds from every measure.
                    out.unmeasurable = out.unmeasurable or _unreadable(step)
                    if strip_setid and not step.final:
                        continue  # the rest of the folder still loses its setuid bits
                    break
                if not isinstance(step, Entry):
                    continue
                st = step.st
                out.bytes += max(st.st_size, st.st_blocks * 512, ENTRY_BYTES)
                if strip_setid and stat.S_ISREG(st.st_mode) and st.st_mode & 0o6000:
                    with contextlib.suppress(OSError, NotImplementedError):
                        os.chmod(step.name, stat.S_IMODE(st.st_mode) & ~0o6000, dir_fd=step.dir_fd,
                                 follow_symlinks=False)
                        out.unset.append(shown(step.path, 80))
                if stop_above is not None and out.bytes > stop_above:
                    break
        finally:
            steps.close()
    finally:
        with contextlib.suppress(OSError):
            os.close(top)
    return out


def _unreadable(step: Unreadable) -> str:
    if step.moved:
        return f"the folder '{shown(step.path)}' was moved while it was measured"
    return f"the folder '{shown(step.path)}' cannot be read ({step.strerror}); make it readable (chmod u+rwx)"


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
