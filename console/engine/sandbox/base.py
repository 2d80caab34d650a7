"""What every part of the door holds (the job root's fd and key, the protected names, the size account) and
the sentences it refuses with."""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from pathlib import Path

from console.engine.sandbox.answers import (
    _LINK_REFUSED,
    _REASONS,
    FileInfo,
    SandboxError,
    _describe,
    _kind,
    _NotFolder,
    _show,
)
from console.engine.sandbox.kernel import MAX_LINKS


class _SandboxBase:
    """The door's state, set by :class:`Sandbox.__init__`, and what every part of it shares."""

    root: Path
    max_write_bytes: int
    max_job_bytes: int
    uses_openat2: bool
    _state_dir: str
    _state_cf: str
    _lock: threading.Lock
    _tmp_fd: int
    _total: int | None
    _root_fd: int
    _root_key: tuple[int, int]
    _root_prefix: str
    _protected: set[tuple[int, int, str]]
    _kept: dict[tuple[int, int, str], str]
    _kept_dir: tuple[str, str, tuple[int, int] | None] | None
    _protected_links: tuple[str, ...]
    _vcs_elsewhere: tuple[tuple[str, ...], ...]
    _checked: dict[str, tuple[str, tuple[str, ...], str]]

    def _close(self, fd: int) -> None:
        if fd != self._root_fd and fd >= 0:
            os.close(fd)

    # -- shared by the guards and the listing ---------------------------------------------------------
    def _dir_key(self, dirfd: int) -> tuple[int, int]:
        if dirfd == self._root_fd:
            return self._root_key
        st = os.fstat(dirfd)
        return st.st_dev, st.st_ino

    def _kept_folder_refusal(self, shown: str) -> str:
        folder = self._kept_dir[0] if self._kept_dir is not None else "tools"
        return (f"'{shown}' is refused: {folder}/ holds the tool docs, which the harness writes at each session "
                "start; read them, they cannot be changed.")

    def _in_kept_folder(self, dirfd: int, name: str) -> bool:
        """Whether ``name`` in the folder ``dirfd`` is the tool docs' folder or in it."""
        kept = self._kept_dir
        if kept is None:
            return False
        key = self._dir_key(dirfd)
        return (kept[2] is not None and key == kept[2]) or (key == self._root_key and name.casefold() == kept[1])

    @staticmethod
    def _info(rel: str, st: os.stat_result) -> FileInfo:
        return FileInfo(rel, _kind(st.st_mode), st.st_size, st.st_mtime, st.st_nlink)

    # -- messages ---------------------------------------------------------------------------------------
    def _harness(self, shown: str) -> str:
        return (f"'{shown}' is refused: {self._state_dir}/ holds the harness's own state. "
                "Use the todo and workspace tools instead.")

    @staticmethod
    def _outside(shown: str) -> str:
        return f"'{shown}' is refused: it is a symlink that leads outside the job folder."

    @staticmethod
    def _loop(shown: str) -> str:
        return (f"'{shown}' is refused: it is a symlink loop (more than {MAX_LINKS} links to follow). "
                "Fix or remove the link.")

    @staticmethod
    def _unstable(shown: str) -> str:
        return f"'{shown}' is refused: it kept changing while it was being opened; try again."

    @staticmethod
    def _too_big(shown: str, size: int, limit: int, *, grew: bool = False) -> str:
        what = "grew past" if grew else f"is {size} bytes, over"
        return (f"'{shown}' {what} the limit of {limit} bytes for one read. "
                "Use search_files to find the part you need.")

    @staticmethod
    def _not_folder(shown: str, dirfd: int, name: str, where: list[str]) -> SandboxError:
        try:
            what = _describe(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode)
        except OSError:
            what = "a file"
        prefix = _show("/".join([*where, name]))
        return _NotFolder(f"'{shown}' is refused: '{prefix}' is {what}, not a folder. Check the path.")

    @staticmethod
    def _os_error(shown: str, exc: OSError, verb: str) -> SandboxError:
        reason = _REASONS.get(exc.errno or 0) or (exc.strerror or type(exc).__name__).lower()
        return SandboxError(f"'{shown}' could not be {verb}: {reason}.")

    def _write_error(self, shown: str, exc: OSError, parent: int, name: str) -> SandboxError:
        if exc.errno == errno.ELOOP:
            return SandboxError(_LINK_REFUSED.format(shown=shown))
        if exc.errno == errno.EISDIR:
            return SandboxError(f"'{shown}' is a folder, not a file.")
        if exc.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
            # Opening a FIFO without a reader, or a socket, for writing: say what it is.
            with contextlib.suppress(OSError):
                mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
                return SandboxError(f"'{shown}' is {_describe(mode)}; only regular files can be written.")
        return self._os_error(shown, exc, "written")
