"""The job folder as every part of the door holds it: its fd and key, the harness's folder in it, the lock, and
the little state more than one part reads (the tool docs' folder, where the repository has git read or run
files outside its .git)."""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from console.engine.sandbox.kernel import _DIR, MAX_DEPTH, _probe_openat2
from console.engine.sandbox.vcs_guard import repo_elsewhere


class Root:
    """The job folder, opened once: every part resolves, checks and writes from ``fd``, never from a path string.

    ``openat2``: None uses it where the kernel has it, False never, True requires it (OSError if it is missing).
    """

    def __init__(self, path: Path, *, state_dir: str = ".console", openat2: bool | None = None) -> None:
        self.path = Path(path).resolve()
        self.state_dir = state_dir
        self.state_cf = state_dir.casefold()
        # Guards what parts change after they are made: the folder's size account, the temp folder's fd, closing.
        self.lock = threading.Lock()
        # The folder of the tool docs, which the harness writes (keep_folder): its name, casefolded, and its key.
        self.kept_dir: tuple[str, str, tuple[int, int] | None] | None = None
        self.fd = os.open(self.path, _DIR)
        try:
            st = os.fstat(self.fd)
            self.key: tuple[int, int] = (st.st_dev, st.st_ino)
            try:
                real = os.readlink(f"/proc/self/fd/{self.fd}")
            except OSError:
                real = str(self.path)
            self.prefix = real.rstrip("/") + "/"
            if openat2 is False:
                self.uses_openat2 = False
            else:
                works = _probe_openat2(self.fd)
                if openat2 and not works:
                    raise OSError(errno.ENOSYS, "openat2 with RESOLVE_BENEATH (and /proc) is not available here")
                self.uses_openat2 = works
            # Where the job's repository has git read or run files outside its .git (a hooks folder that is a link,
            # core.hooksPath): the file tools never write there either. Looked at once: a command that changes them
            # has the change undone after its call (console.engine.tools.repos).
            self.vcs_elsewhere = repo_elsewhere(self.fd, self.path)
        except BaseException:
            os.close(self.fd)
            self.fd = -1
            raise

    def release(self, fd: int) -> None:
        """Close an fd a part opened, unless it is the root's own (which resolution hands out for the root)."""
        if fd != self.fd and fd >= 0:
            os.close(fd)

    def close(self) -> None:
        with self.lock:
            if self.fd >= 0:
                fd, self.fd = self.fd, -1
                os.close(fd)

    def dir_key(self, dirfd: int) -> tuple[int, int]:
        if dirfd == self.fd:
            return self.key
        st = os.fstat(dirfd)
        return st.st_dev, st.st_ino

    # -- the harness's folders ------------------------------------------------------------------------
    def harness_refusal(self, shown: str) -> str:
        return (f"'{shown}' is refused: {self.state_dir}/ holds the harness's own state. "
                "Use the todo and workspace tools instead.")

    def keep_folder(self, name: str | None) -> None:
        """Make the folder ``name`` at the root the tool docs' (see :meth:`Sandbox.keep_folder`); None: none."""
        if name is None:
            self.kept_dir = None
            return
        try:
            st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except OSError:
            key = None
        else:
            key = (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None
        self.kept_dir = (name, name.casefold(), key)

    def in_kept_folder(self, dirfd: int, name: str) -> bool:
        """Whether ``name`` in the folder ``dirfd`` is the tool docs' folder or in it."""
        kept = self.kept_dir
        if kept is None:
            return False
        key = self.dir_key(dirfd)
        return (kept[2] is not None and key == kept[2]) or (key == self.key and name.casefold() == kept[1])

    def kept_folder_refusal(self, shown: str) -> str:
        folder = self.kept_dir[0] if self.kept_dir is not None else "tools"
        return (f"'{shown}' is refused: {folder}/ holds the tool docs, which the harness writes at each session "
                "start; read them, they cannot be changed.")

    # -- every entry ----------------------------------------------------------------------------------
    def scan(self, visit: Callable[[int, os.DirEntry[str]], None]) -> None:
        """Every entry of every folder (hidden ones too) except the harness folder, without following links."""
        self._scan(self.fd, 0, visit)

    def _scan(self, dirfd: int, depth: int, visit: Callable[[int, os.DirEntry[str]], None]) -> None:
        at_root = self.dir_key(dirfd) == self.key
        try:
            it = os.scandir(dirfd)
        except OSError:
            return
        # Read as visited, never listed whole: a folder of millions of empty files a command made would otherwise
        # sit in the harness's memory at once (about 550 bytes an entry).
        with it:
            for entry in it:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if (at_root and entry.name.casefold() == self.state_cf) or depth >= MAX_DEPTH:
                            continue
                        sub = os.open(entry.name, _DIR | os.O_NOFOLLOW, dir_fd=dirfd)
                        try:
                            self._scan(sub, depth + 1, visit)
                        finally:
                            os.close(sub)
                    else:
                        visit(dirfd, entry)
                except OSError:
                    continue
