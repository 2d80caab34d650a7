"""The door itself: :class:`Sandbox`, every read, write, append and listing of a job file.

One class over named parts, each built on the one :class:`.Root` (the job folder's fd, its lock, the state more
than one part reads): :class:`.Resolver` (a path to an fd beneath the root), :class:`.Guards` (what the agent may
not touch), :class:`.Quota` (the size limits), :class:`.TempFiles` (atomic replacement), :class:`.Writes` and
:class:`.Listing`. Reading a file is here: it is one guard and one read.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from console.engine.sandbox.answers import (
    Absent,
    FileInfo,
    NotFolder,
    SandboxError,
    WriteResult,
    file_info,
    os_error,
    too_big,
)
from console.engine.sandbox.guards import HARNESS_KEPT, Guards
from console.engine.sandbox.kernel import _read_fd
from console.engine.sandbox.listing import Listing
from console.engine.sandbox.quota import Quota
from console.engine.sandbox.resolve import Resolver
from console.engine.sandbox.root import Root
from console.engine.sandbox.temp import TempFiles
from console.engine.sandbox.writes import Writes

__all__ = ["HARNESS_KEPT", "Sandbox"]


class Sandbox:
    """Confines every file operation to ``root``; see the package docstring (console.engine.sandbox) for the rules."""

    def __init__(self, root: Path, *, state_dir: str = ".console",
                 protected: tuple[str, ...] = ("job.toml", "instructions.md"),
                 max_write_bytes: int = 4 * 2**20, max_job_bytes: int = 2**30,
                 openat2: bool | None = None) -> None:
        self.folder = Root(root, state_dir=state_dir, openat2=openat2)
        try:
            self.resolver = Resolver(self.folder)
            self.guards = Guards(self.folder, self.resolver, protected)
        except BaseException:
            self.folder.close()
            raise
        self.quota = Quota(self.folder, max_write_bytes=max_write_bytes, max_job_bytes=max_job_bytes)
        self.temp = TempFiles(self.folder)
        self.writes = Writes(self.folder, self.resolver, self.guards, self.quota, self.temp)
        self.listing = Listing(self.folder, self.resolver)

    @property
    def root(self) -> Path:
        return self.folder.path

    @property
    def uses_openat2(self) -> bool:
        return self.folder.uses_openat2

    @property
    def max_write_bytes(self) -> int:
        return self.quota.max_write_bytes

    @property
    def max_job_bytes(self) -> int:
        return self.quota.max_job_bytes

    @max_job_bytes.setter
    def max_job_bytes(self, limit: int) -> None:
        self.quota.max_job_bytes = limit

    # -- public API -----------------------------------------------------------------------------------
    def check(self, user_path: str) -> str:
        """The normalised posix path relative to the root ("." for the root), or SandboxError."""
        return self.resolver.check(user_path)[0]

    def info(self, rel: str) -> FileInfo | None:
        """What the final component is, without following a final symlink; None if it does not exist."""
        r, parts, shown = self.resolver.check(rel if rel.strip() else ".")
        try:
            if not parts:
                return file_info(".", os.fstat(self.folder.fd))
            try:
                parent, name = self.resolver.open_parent(parts, shown, create=False)
            except (Absent, NotFolder):
                return None
            try:
                self.guards.harness(parent, name, shown)
                try:
                    st = os.stat(name, dir_fd=parent, follow_symlinks=False)
                except (FileNotFoundError, NotADirectoryError):
                    return None
            finally:
                self.folder.release(parent)
            return file_info(r, st)
        except OSError as exc:
            raise os_error(shown, exc, "examined") from None

    def read_bytes(self, rel: str, *, max_bytes: int) -> bytes:
        fd, st, shown = self.guards.open_regular(rel)
        try:
            if st.st_size > max_bytes:
                raise SandboxError(too_big(shown, st.st_size, max_bytes))
            data = _read_fd(fd, st.st_size, max_bytes)
            if len(data) > max_bytes:
                raise SandboxError(too_big(shown, len(data), max_bytes, grew=True))
            return data
        except OSError as exc:
            raise os_error(shown, exc, "read") from None
        finally:
            os.close(fd)

    def read_text(self, rel: str, *, max_bytes: int) -> str:
        # Python's utf-8 codec rejects encoded surrogates, so "replace" can never yield a lone one.
        return self.read_bytes(rel, max_bytes=max_bytes).decode("utf-8", errors="replace")

    def read_head(self, rel: str, n: int) -> bytes:
        fd, st, shown = self.guards.open_regular(rel)
        try:
            return _read_fd(fd, st.st_size, max(n, 0))[: max(n, 0)]
        except OSError as exc:
            raise os_error(shown, exc, "read") from None
        finally:
            os.close(fd)

    def check_write(self, rel: str, size: int) -> None:
        """SandboxError if writing ``size`` bytes to ``rel`` now would be refused for its size (one write's limit,
        the job folder's) or its name: for a file the harness writes after the step's commit, so that the tool
        that asked for it can say the truth first. Nothing is reserved: the write itself checks again."""
        _, _, shown = self.guards.file_path(rel)
        self.quota.check_write_size(size, shown)
        info = self.info(rel)  # never through a link
        if info is not None and info.kind != "file":
            what = {"dir": "folder", "symlink": "symbolic link"}.get(info.kind, "special file")
            raise SandboxError(f"'{shown}' is refused: a {what} has that name, not a file.")
        self.quota.check_growth(size - (info.size if info is not None else 0), shown)

    def write_bytes(self, rel: str, data: bytes, *, mkdirs: bool = True, durable: bool = False) -> WriteResult:
        return self.writes.write_bytes(rel, data, mkdirs=mkdirs, durable=durable)

    def check_writable(self, rel: str) -> None:
        """Refuse now what a write to ``rel`` would refuse whatever its content (a protected or harness
        file, a symlink, a folder, a pipe, a hard link), so a tool can say so before doing its work."""
        self.writes.check_writable(rel)

    def append_bytes(self, rel: str, data: bytes, *, at: int | None = None, mkdirs: bool = True) -> WriteResult:
        return self.writes.append_bytes(rel, data, at=at, mkdirs=mkdirs)

    def walk(self, rel: str = ".", *, limit: int = 10_000, hidden_files: bool = True,
             skip_dirs: frozenset[str] = frozenset()) -> list[FileInfo]:
        """Regular files under ``rel``, depth-first in name order; never opens a file. Folders named in
        ``skip_dirs`` (at any depth: node_modules, __pycache__...) are not entered."""
        return self.listing.walk(rel, limit=limit, hidden_files=hidden_files, skip_dirs=skip_dirs)

    def keep_folder(self, name: str | None) -> None:
        """Make the folder ``name`` at the root the harness's (the tool docs): reading it is fine, but writing
        anything into it (by any path, through a symlink too) or creating it is refused. None: no such folder."""
        self.folder.keep_folder(name)

    @property
    def kept_folder(self) -> str | None:
        """The harness's folder of tool docs (keep_folder), or None."""
        kept = self.folder.kept_dir
        return kept[0] if kept is not None else None

    def job_bytes(self) -> int:
        return self.quota.job_bytes()

    def set_job_bytes(self, total: int) -> None:
        """The folder's size as measured by someone else (a command changed files behind the file tools)."""
        self.quota.set_job_bytes(total)

    def forget_job_bytes(self) -> None:
        """The folder's size changed unmeasured (an MCP server's call): counted again at the next write."""
        self.quota.forget()

    def clean_tmp(self) -> int:
        """Delete temp files a killed write left behind (call at start, before any write); return how many."""
        return self.temp.clean_tmp()

    def close(self) -> None:
        self.temp.close()
        self.folder.close()

    def __del__(self) -> None:
        # A forgotten close() must not leak the root fd for the life of a long-running engine.
        with contextlib.suppress(Exception):
            self.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
