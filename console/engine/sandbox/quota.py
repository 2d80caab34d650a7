"""The size limits: one write's, and the whole job folder's (scanned once, then kept by account)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from console.engine.sandbox.answers import SandboxError
from console.engine.sandbox.guards import _Guards
from console.engine.sandbox.kernel import _DIR, MAX_DEPTH


class _Quota(_Guards):
    """The per-write and whole-job size limits."""

    def job_bytes(self) -> int:
        return self._ensure_total()

    def set_job_bytes(self, total: int) -> None:
        """The folder's size as measured by someone else (a command changed files behind the file tools)."""
        with self._lock:
            self._total = max(0, total)

    def _check_write_size(self, n: int, shown: str) -> None:
        if n > self.max_write_bytes:
            raise SandboxError(f"'{shown}' is refused: {n} bytes is over the limit of {self.max_write_bytes} "
                               "bytes for one write (max_write_mb in job.toml). Write the first part, then "
                               "append the rest in pieces.")

    # -- the job's size ---------------------------------------------------------------------------------
    def _ensure_total(self) -> int:
        total = self._total
        if total is None:
            counted = 0

            def visit(_dirfd: int, entry: os.DirEntry[str]) -> None:
                nonlocal counted
                if entry.is_file(follow_symlinks=False):
                    with contextlib.suppress(OSError):
                        counted += entry.stat(follow_symlinks=False).st_size

            self._scan(self._root_fd, 0, visit)
            with self._lock:
                if self._total is None:
                    self._total = counted
                total = self._total
        return total

    def _reserve(self, delta: int, shown: str) -> None:
        if delta <= 0 and self._total is None:
            return  # a shrink needs no check; the first scan will see it
        self._ensure_total()
        with self._lock:
            assert self._total is not None
            grown = self._total + delta
            if delta > 0 and grown > self.max_job_bytes:
                raise self._folder_full(grown, shown)
            self._total = grown

    def _check_growth(self, delta: int, shown: str) -> None:
        """SandboxError if the folder cannot grow by ``delta`` bytes now (nothing reserved: see _reserve)."""
        if delta > 0 and (grown := self._ensure_total() + delta) > self.max_job_bytes:
            raise self._folder_full(grown, shown)

    def _folder_full(self, grown: int, shown: str) -> SandboxError:
        return SandboxError(f"'{shown}' is refused: the job folder would grow to {grown} bytes, over its limit of "
                            f"{self.max_job_bytes} (max_job_mb in job.toml). Write less, or ask the operator to "
                            "raise the limit.")

    def _release(self, delta: int) -> None:
        with self._lock:
            if self._total is not None:
                self._total -= delta

    def _scan(self, dirfd: int, depth: int, visit: Callable[[int, os.DirEntry[str]], None]) -> None:
        """Every entry of every folder (hidden ones too) except the harness folder, without following links."""
        at_root = self._dir_key(dirfd) == self._root_key
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
                        if (at_root and entry.name.casefold() == self._state_cf) or depth >= MAX_DEPTH:
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
