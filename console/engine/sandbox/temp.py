"""Atomic replacement: a temp file filled in the harness's tmp folder (never in the agent's), then renamed
into the parent folder's fd."""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from console.engine.sandbox.kernel import _BESIDE_TMP, _CREATE, _DIR, _RETRIES, _temp_name, _write_all
from console.engine.sandbox.root import Root


class TempFiles:
    """Temp files and the atomic replace of a file by one."""

    def __init__(self, root: Root) -> None:
        self._root = root
        self._tmp_fd = -1  # the harness's temp folder, opened at the first write

    def close(self) -> None:
        with self._root.lock:
            if self._tmp_fd >= 0:
                fd, self._tmp_fd = self._tmp_fd, -1
                os.close(fd)

    def clean_tmp(self) -> int:
        """Delete temp files a killed write left behind (call at start, before any write); return how many."""
        removed = 0
        tmp = self._open_tmp(create=False)
        if tmp >= 0:
            with os.scandir(tmp) as it:
                names = [e.name for e in it if not e.is_dir(follow_symlinks=False)]
            for name in names:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=tmp)
                    removed += 1

        # Temps beside the target exist only when the tmp folder is on another file system.
        def visit(dirfd: int, entry: os.DirEntry[str]) -> None:
            nonlocal removed
            if _BESIDE_TMP.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.unlink(entry.name, dir_fd=dirfd)
                    removed += 1

        self._root.scan(visit)
        return removed

    # -- writing ----------------------------------------------------------------------------------------
    def _open_tmp(self, *, create: bool) -> int:
        """The harness's temp folder (state_dir/tmp), opened once and kept; -1 if it is not there / usable."""
        if self._tmp_fd >= 0:
            return self._tmp_fd
        with self._root.lock:
            if self._tmp_fd < 0:
                try:
                    self._tmp_fd = self._open_tmp_dir(create)
                except OSError:
                    return -1
            return self._tmp_fd

    def _open_tmp_dir(self, create: bool) -> int:
        fd = self._root.fd
        for name, mode in ((self._root.state_dir, 0o700), ("tmp", 0o700)):
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, mode, dir_fd=fd)
            try:
                sub = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
            finally:
                self._root.release(fd)
            fd = sub
        return fd

    def _drop_tmp(self) -> None:
        with self._root.lock:
            if self._tmp_fd >= 0:
                os.close(self._tmp_fd)
                self._tmp_fd = -1

    def _fill_temp(self, dirfd: int, data: bytes, mode: int | None, durable: bool, beside: str | None) -> str:
        for _ in range(_RETRIES):
            tname = _temp_name(beside)
            try:
                # 0o666 and the umask: the usual 0644, not mkstemp's 0600.
                fd = os.open(tname, _CREATE, 0o666, dir_fd=dirfd)
            except FileExistsError:
                continue
            break
        else:
            raise OSError(errno.EEXIST, "no free temp file name")
        try:
            try:
                _write_all(fd, data)
                if mode is not None:
                    os.fchmod(fd, mode)  # an overwrite keeps the file's permissions (a script stays executable)
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tname, dir_fd=dirfd)
            raise
        return tname

    def replace(self, parent: int, name: str, data: bytes, old: os.stat_result | None, durable: bool) -> None:
        """Replace ``name`` in the folder ``parent`` by a file of ``data`` (with ``old``'s permissions), at once."""
        mode = stat.S_IMODE(old.st_mode) & 0o777 if old is not None else None
        for attempt in range(2):
            tmp = self._open_tmp(create=True)
            if tmp < 0:
                break
            try:
                tname = self._fill_temp(tmp, data, mode, durable, None)
            except FileNotFoundError:
                self._drop_tmp()  # someone removed the temp folder: make it again, once
                if attempt:
                    break
                continue
            try:
                os.rename(tname, name, src_dir_fd=tmp, dst_dir_fd=parent)
            except BaseException as exc:
                with contextlib.suppress(OSError):
                    os.unlink(tname, dir_fd=tmp)
                if not (isinstance(exc, OSError) and exc.errno == errno.EXDEV):
                    raise
                break  # the target folder is on another file system: a temp beside it instead
            else:
                if durable:
                    self._fsync_dir(parent)
                return
        tname = self._fill_temp(parent, data, mode, durable, name)
        try:
            os.rename(tname, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tname, dir_fd=parent)
            raise
        if durable:
            self._fsync_dir(parent)

    @staticmethod
    def _fsync_dir(dirfd: int) -> None:
        # The rename is only durable once the folder's entry is flushed; some file systems refuse, fine.
        with contextlib.suppress(OSError):
            os.fsync(dirfd)
