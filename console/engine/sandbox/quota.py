"""The size limits: one write's, and the whole job folder's (scanned once, then kept by account)."""

from __future__ import annotations

import contextlib
import os

from console.engine.sandbox.answers import SandboxError
from console.engine.sandbox.root import Root


class Quota:
    """The per-write and whole-job size limits, and the job folder's size account (under the root's lock)."""

    def __init__(self, root: Root, *, max_write_bytes: int, max_job_bytes: int) -> None:
        self._root = root
        self.max_write_bytes = max_write_bytes
        self.max_job_bytes = max_job_bytes
        self._total: int | None = None  # None until the first scan (or set_job_bytes)

    def job_bytes(self) -> int:
        total = self._total
        if total is None:
            counted = 0

            def visit(_dirfd: int, entry: os.DirEntry[str]) -> None:
                nonlocal counted
                if entry.is_file(follow_symlinks=False):
                    with contextlib.suppress(OSError):
                        counted += entry.stat(follow_symlinks=False).st_size

            self._root.scan(visit)
            with self._root.lock:
                if self._total is None:
                    self._total = counted
                total = self._total
        return total

    def set_job_bytes(self, total: int) -> None:
        """The folder's size as measured by someone else (a command changed files behind the file tools)."""
        with self._root.lock:
            self._total = max(0, total)

    def forget(self) -> None:
        """The account is stale (an MCP server may have changed files behind the file tools): scanned again when next
        needed, not on every call."""
        with self._root.lock:
            self._total = None

    def check_write_size(self, n: int, shown: str) -> None:
        if n > self.max_write_bytes:
            raise SandboxError(f"'{shown}' is refused: {n} bytes is over the limit of {self.max_write_bytes} "
                               "bytes for one write (max_write_mb in job.toml). Write the first part, then "
                               "append the rest in pieces.")

    # -- the job's size ---------------------------------------------------------------------------------
    def reserve(self, delta: int, shown: str) -> None:
        """Count ``delta`` more bytes in the folder, or SandboxError if it would grow past its limit."""
        if delta <= 0 and self._total is None:
            return  # a shrink needs no check; the first scan will see it
        self.job_bytes()
        with self._root.lock:
            assert self._total is not None
            grown = self._total + delta
            if delta > 0 and grown > self.max_job_bytes:
                raise self._folder_full(grown, shown)
            self._total = grown

    def check_growth(self, delta: int, shown: str) -> None:
        """SandboxError if the folder cannot grow by ``delta`` bytes now (nothing reserved: see reserve)."""
        if delta > 0 and (grown := self.job_bytes() + delta) > self.max_job_bytes:
            raise self._folder_full(grown, shown)

    def _folder_full(self, grown: int, shown: str) -> SandboxError:
        return SandboxError(f"'{shown}' is refused: the job folder would grow to {grown} bytes, over its limit of "
                            f"{self.max_job_bytes} (max_job_mb in job.toml). Write less, or ask the operator to "
                            "raise the limit.")

    def release(self, delta: int) -> None:
        """Take back a reservation whose write did not happen."""
        with self._root.lock:
            if self._total is not None:
                self._total -= delta
