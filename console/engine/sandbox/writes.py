"""Writing a job file: a whole file replaced at once, or bytes appended at an offset, each checked by the
guards on the fd of its folder and counted by the quota."""

from __future__ import annotations

import os

from console.engine.sandbox.answers import SandboxError, WriteResult, os_error, unstable, write_error
from console.engine.sandbox.guards import Guards
from console.engine.sandbox.kernel import _APPEND, _CREATE, _RETRIES, _pwrite_all
from console.engine.sandbox.quota import Quota
from console.engine.sandbox.resolve import Resolver
from console.engine.sandbox.root import Root
from console.engine.sandbox.temp import TempFiles


class Writes:
    """The door's writes (see :class:`Sandbox`'s methods of the same names)."""

    def __init__(self, root: Root, resolver: Resolver, guards: Guards, quota: Quota, temp: TempFiles) -> None:
        self._root = root
        self._resolver = resolver
        self._guards = guards
        self._quota = quota
        self._temp = temp

    def write_bytes(self, rel: str, data: bytes, *, mkdirs: bool = True, durable: bool = False) -> WriteResult:
        r, parts, shown = self._guards.file_path(rel)
        self._quota.check_write_size(len(data), shown)
        try:
            parent, name = self._resolver.open_parent(parts, shown, create=mkdirs)
        except OSError as exc:
            raise os_error(shown, exc, "written") from None
        try:
            self._guards.name(parent, name, shown)
            try:
                old: os.stat_result | None = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            if old is not None:
                self._guards.require_replaceable(old, shown)
            old_size = old.st_size if old is not None else 0
            delta = len(data) - old_size
            self._quota.reserve(delta, shown)
            try:
                self._temp.replace(parent, name, data, old, durable)
            except BaseException:
                self._quota.release(delta)
                raise
            return WriteResult(r, old is not None, old_size, len(data))
        except OSError as exc:
            raise write_error(shown, exc, parent, name) from None
        finally:
            self._root.release(parent)

    def check_writable(self, rel: str) -> None:
        _, parts, shown = self._guards.file_path(rel)
        try:
            parent, name = self._resolver.open_parent(parts, shown, create=False)
        except FileNotFoundError:
            return  # the folders are created by the write itself
        except OSError as exc:
            raise os_error(shown, exc, "written") from None
        try:
            self._guards.name(parent, name, shown)
            try:
                old = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                return
            self._guards.require_replaceable(old, shown)
        except OSError as exc:
            raise write_error(shown, exc, parent, name) from None
        finally:
            self._root.release(parent)

    def append_bytes(self, rel: str, data: bytes, *, at: int | None = None, mkdirs: bool = True) -> WriteResult:
        r, parts, shown = self._guards.file_path(rel)
        n = len(data)
        self._quota.check_write_size(n, shown)
        if at is not None and at < 0:
            raise SandboxError(f"'{shown}' is refused: the append offset {at} is negative.")
        try:
            parent, name = self._resolver.open_parent(parts, shown, create=mkdirs)
        except OSError as exc:
            raise os_error(shown, exc, "written") from None
        fd = -1
        try:
            self._guards.name(parent, name, shown)
            for _ in range(_RETRIES):
                try:
                    fd = os.open(name, _APPEND, dir_fd=parent)
                except FileNotFoundError:
                    existed, old_size = False, 0
                else:
                    existed = True
                    st = os.fstat(fd)
                    self._guards.require_regular(st, shown, "written")
                    old_size = st.st_size
                offset = old_size if at is None else at
                if offset > old_size:
                    raise SandboxError(f"'{shown}' is refused: the append offset {offset} is past the end of "
                                       f"the file ({old_size} bytes).")
                new_size = offset + n
                delta = new_size - old_size
                self._quota.reserve(delta, shown)
                try:
                    if not existed:
                        try:
                            fd = os.open(name, _CREATE, 0o666, dir_fd=parent)
                        except FileExistsError:
                            self._quota.release(delta)
                            continue  # it appeared meanwhile: look at it again
                    # pwrite at a recorded offset + truncate: redoing the same append after a crash is harmless.
                    _pwrite_all(fd, data, offset)
                    os.ftruncate(fd, new_size)
                except BaseException:
                    self._quota.release(delta)
                    raise
                return WriteResult(r, existed, old_size, new_size)
            raise SandboxError(unstable(shown))
        except OSError as exc:
            raise write_error(shown, exc, parent, name) from None
        finally:
            if fd >= 0:
                os.close(fd)
            self._root.release(parent)
