"""The door itself: :class:`Sandbox`, every read, write, append and listing of a job file."""

from __future__ import annotations

import contextlib
import errno
import heapq
import itertools
import os
import stat
import threading
from pathlib import Path

from console.engine.sandbox.answers import FileInfo, SandboxError, WriteResult, _Absent, _NotFolder, _show
from console.engine.sandbox.kernel import (
    _APPEND,
    _CREATE,
    _DIR,
    _LOOK,
    _RETRIES,
    _TMP_SUFFIX,
    WALK_DEPTH,
    _is_dir,
    _probe_openat2,
    _pwrite_all,
    _read_fd,
    _utf8_name,
)
from console.engine.sandbox.temp import _TempFiles

# Job files only the harness writes (the agent reads them), and what the agent does instead of writing one.
# A folder with more entries than this is listed in a bounded heap of the first ones a walk can use.
BIG_FOLDER = 50_000


def _walk_order(entry: os.DirEntry[str]) -> tuple[bool, str]:
    return _is_dir(entry), entry.name


HARNESS_KEPT = {"experiences.md": "record an entry with record_experience(section, text)"}


class Sandbox(_TempFiles):
    """Confines every file operation to ``root``; see the package docstring (console.engine.sandbox) for the rules."""

    def __init__(self, root: Path, *, state_dir: str = ".console",
                 protected: tuple[str, ...] = ("job.toml", "instructions.md"),
                 max_write_bytes: int = 4 * 2**20, max_job_bytes: int = 2**30,
                 openat2: bool | None = None) -> None:
        self.root = Path(root).resolve()
        self.max_write_bytes = max_write_bytes
        self.max_job_bytes = max_job_bytes
        self._state_dir = state_dir
        self._state_cf = state_dir.casefold()
        self._checked = {}
        self._lock = threading.Lock()
        self._tmp_fd = -1
        self._total: int | None = None
        self._root_fd = os.open(self.root, _DIR)
        try:
            st = os.fstat(self._root_fd)
            self._root_key = (st.st_dev, st.st_ino)
            try:
                real = os.readlink(f"/proc/self/fd/{self._root_fd}")
            except OSError:
                real = str(self.root)
            self._root_prefix = real.rstrip("/") + "/"
            if openat2 is False:
                self.uses_openat2 = False
            else:
                works = _probe_openat2(self._root_fd)
                if openat2 and not works:
                    raise OSError(errno.ENOSYS, "openat2 with RESOLVE_BENEATH (and /proc) is not available here")
                self.uses_openat2 = works
            self._protected: set[tuple[int, int, str]] = {(*self._root_key, p.casefold()) for p in protected}
            # Files the harness writes for the agent to read (experiences.md), with what to do instead.
            self._kept = {(*self._root_key, name.casefold()): hint for name, hint in HARNESS_KEPT.items()}
            # The folder of the tool docs, which the harness writes (keep_folder): its name, and the folder itself.
            self._kept_dir: tuple[str, str, tuple[int, int] | None] | None = None
            # A protected file that is a symlink protects the file it leads to; re-located on every write,
            # because the target (or its folder) may not exist yet and could otherwise be created.
            self._protected_links = tuple(p for p in protected if self._is_link_at_root(p))
            self._refresh_protected()
            # Where the job's repository has git read or run files outside its .git (a hooks folder that is a link,
            # core.hooksPath): the file tools never write there either. Looked at once: a command that changes them
            # has the change undone after its call (console.engine.tools.repos).
            self._vcs_elsewhere = self._repo_elsewhere()
        except BaseException:
            os.close(self._root_fd)
            self._root_fd = -1
            raise

    # -- public API -----------------------------------------------------------------------------------
    def check(self, user_path: str) -> str:
        """The normalised posix path relative to the root ("." for the root), or SandboxError."""
        return self._check(user_path)[0]

    def info(self, rel: str) -> FileInfo | None:
        """What the final component is, without following a final symlink; None if it does not exist."""
        r, parts, shown = self._check(rel if rel.strip() else ".")
        try:
            if not parts:
                return self._info(".", os.fstat(self._root_fd))
            try:
                parent, name = self._open_parent(parts, shown, create=False)
            except (_Absent, _NotFolder):
                return None
            try:
                self._guard_harness(parent, name, shown)
                try:
                    st = os.stat(name, dir_fd=parent, follow_symlinks=False)
                except (FileNotFoundError, NotADirectoryError):
                    return None
            finally:
                self._close(parent)
            return self._info(r, st)
        except OSError as exc:
            raise self._os_error(shown, exc, "examined") from None

    def read_bytes(self, rel: str, *, max_bytes: int) -> bytes:
        fd, st, shown = self._open_regular(rel)
        try:
            if st.st_size > max_bytes:
                raise SandboxError(self._too_big(shown, st.st_size, max_bytes))
            data = _read_fd(fd, st.st_size, max_bytes)
            if len(data) > max_bytes:
                raise SandboxError(self._too_big(shown, len(data), max_bytes, grew=True))
            return data
        except OSError as exc:
            raise self._os_error(shown, exc, "read") from None
        finally:
            os.close(fd)

    def read_text(self, rel: str, *, max_bytes: int) -> str:
        # Python's utf-8 codec rejects encoded surrogates, so "replace" can never yield a lone one.
        return self.read_bytes(rel, max_bytes=max_bytes).decode("utf-8", errors="replace")

    def read_head(self, rel: str, n: int) -> bytes:
        fd, st, shown = self._open_regular(rel)
        try:
            return _read_fd(fd, st.st_size, max(n, 0))[: max(n, 0)]
        except OSError as exc:
            raise self._os_error(shown, exc, "read") from None
        finally:
            os.close(fd)

    def check_write(self, rel: str, size: int) -> None:
        """SandboxError if writing ``size`` bytes to ``rel`` now would be refused for its size (one write's limit,
        the job folder's) or its name: for a file the harness writes after the step's commit, so that the tool
        that asked for it can say the truth first. Nothing is reserved: the write itself checks again."""
        _, parts, shown = self._check(rel)
        self._guard_kept_folder(parts, shown)
        self._guard_vcs_path(parts, shown)
        if not parts:
            raise SandboxError(f"'{shown}' is a folder, not a file.")
        self._check_write_size(size, shown)
        info = self.info(rel)  # never through a link
        if info is not None and info.kind != "file":
            what = {"dir": "folder", "symlink": "symbolic link"}.get(info.kind, "special file")
            raise SandboxError(f"'{shown}' is refused: a {what} has that name, not a file.")
        self._check_growth(size - (info.size if info is not None else 0), shown)

    def write_bytes(self, rel: str, data: bytes, *, mkdirs: bool = True, durable: bool = False) -> WriteResult:
        r, parts, shown = self._check(rel)
        self._guard_kept_folder(parts, shown)
        self._guard_vcs_path(parts, shown)
        if not parts:
            raise SandboxError(f"'{shown}' is a folder, not a file.")
        self._check_write_size(len(data), shown)
        try:
            parent, name = self._open_parent(parts, shown, create=mkdirs)
        except OSError as exc:
            raise self._os_error(shown, exc, "written") from None
        try:
            self._guard_name(parent, name, shown)
            try:
                old: os.stat_result | None = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            if old is not None:
                self._require_replaceable(old, shown)
            old_size = old.st_size if old is not None else 0
            delta = len(data) - old_size
            self._reserve(delta, shown)
            try:
                self._replace(parent, name, data, old, durable)
            except BaseException:
                self._release(delta)
                raise
            return WriteResult(r, old is not None, old_size, len(data))
        except OSError as exc:
            raise self._write_error(shown, exc, parent, name) from None
        finally:
            self._close(parent)

    def keep_folder(self, name: str | None) -> None:
        """Make the folder ``name`` at the root the harness's (the tool docs): reading it is fine, but writing
        anything into it (by any path, through a symlink too) or creating it is refused. None: no such folder."""
        if name is None:
            self._kept_dir = None
            return
        try:
            st = os.stat(name, dir_fd=self._root_fd, follow_symlinks=False)
        except OSError:
            key = None
        else:
            key = (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None
        self._kept_dir = (name, name.casefold(), key)

    @property
    def kept_folder(self) -> str | None:
        """The harness's folder of tool docs (keep_folder), or None."""
        return self._kept_dir[0] if self._kept_dir is not None else None

    def check_writable(self, rel: str) -> None:
        """Refuse now what a write to ``rel`` would refuse whatever its content (a protected or harness
        file, a symlink, a folder, a pipe, a hard link), so a tool can say so before doing its work."""
        _, parts, shown = self._check(rel)
        self._guard_kept_folder(parts, shown)
        self._guard_vcs_path(parts, shown)
        if not parts:
            raise SandboxError(f"'{shown}' is a folder, not a file.")
        try:
            parent, name = self._open_parent(parts, shown, create=False)
        except FileNotFoundError:
            return  # the folders are created by the write itself
        except OSError as exc:
            raise self._os_error(shown, exc, "written") from None
        try:
            self._guard_name(parent, name, shown)
            try:
                old = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                return
            self._require_replaceable(old, shown)
        except OSError as exc:
            raise self._write_error(shown, exc, parent, name) from None
        finally:
            self._close(parent)

    def append_bytes(self, rel: str, data: bytes, *, at: int | None = None, mkdirs: bool = True) -> WriteResult:
        r, parts, shown = self._check(rel)
        self._guard_kept_folder(parts, shown)
        self._guard_vcs_path(parts, shown)
        if not parts:
            raise SandboxError(f"'{shown}' is a folder, not a file.")
        n = len(data)
        self._check_write_size(n, shown)
        if at is not None and at < 0:
            raise SandboxError(f"'{shown}' is refused: the append offset {at} is negative.")
        try:
            parent, name = self._open_parent(parts, shown, create=mkdirs)
        except OSError as exc:
            raise self._os_error(shown, exc, "written") from None
        fd = -1
        try:
            self._guard_name(parent, name, shown)
            for _ in range(_RETRIES):
                try:
                    fd = os.open(name, _APPEND, dir_fd=parent)
                except FileNotFoundError:
                    existed, old_size = False, 0
                else:
                    existed = True
                    st = os.fstat(fd)
                    self._require_regular(st, shown, "written")
                    old_size = st.st_size
                offset = old_size if at is None else at
                if offset > old_size:
                    raise SandboxError(f"'{shown}' is refused: the append offset {offset} is past the end of "
                                       f"the file ({old_size} bytes).")
                new_size = offset + n
                delta = new_size - old_size
                self._reserve(delta, shown)
                try:
                    if not existed:
                        try:
                            fd = os.open(name, _CREATE, 0o666, dir_fd=parent)
                        except FileExistsError:
                            self._release(delta)
                            continue  # it appeared meanwhile: look at it again
                    # pwrite at a recorded offset + truncate: redoing the same append after a crash is harmless.
                    _pwrite_all(fd, data, offset)
                    os.ftruncate(fd, new_size)
                except BaseException:
                    self._release(delta)
                    raise
                return WriteResult(r, existed, old_size, new_size)
            raise SandboxError(self._unstable(shown))
        except OSError as exc:
            raise self._write_error(shown, exc, parent, name) from None
        finally:
            if fd >= 0:
                os.close(fd)
            self._close(parent)

    def walk(self, rel: str = ".", *, limit: int = 10_000, hidden_files: bool = True,
             skip_dirs: frozenset[str] = frozenset()) -> list[FileInfo]:
        """Regular files under ``rel``, depth-first in name order; never opens a file. Folders named in
        ``skip_dirs`` (at any depth: node_modules, __pycache__...) are not entered."""
        r, parts, shown = self._check(rel if rel.strip() else ".")
        out: list[FileInfo] = []
        if limit <= 0:
            return out
        try:
            if not parts:
                self._walk_dir(self._root_fd, "", 0, out, limit, hidden_files, skip_dirs)
                return out
            fd = self._open_target(parts, shown, _LOOK)
            try:
                st = os.fstat(fd)
                if stat.S_ISDIR(st.st_mode):
                    dfd = os.open(".", _DIR, dir_fd=fd)  # re-opens that very folder, not a name
                    try:
                        self._walk_dir(dfd, r + "/", 0, out, limit, hidden_files, skip_dirs)
                    finally:
                        os.close(dfd)
                elif stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                    out.append(FileInfo(r, "file", st.st_size, st.st_mtime, 1))
            finally:
                os.close(fd)
        except OSError as exc:
            raise self._os_error(shown, exc, "listed") from None
        return out

    def close(self) -> None:
        with self._lock:
            for attr in ("_tmp_fd", "_root_fd"):
                fd = getattr(self, attr)
                if fd >= 0:
                    setattr(self, attr, -1)
                    os.close(fd)

    def __del__(self) -> None:
        # A forgotten close() must not leak the root fd for the life of a long-running engine.
        with contextlib.suppress(Exception):
            self.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _walk_dir(self, dirfd: int, prefix: str, depth: int, out: list[FileInfo], limit: int,
                  hidden_files: bool, skip_dirs: frozenset[str] = frozenset()) -> None:
        at_root = self._dir_key(dirfd) == self._root_key
        try:
            with os.scandir(dirfd) as it:
                # A folder's own files before its sub-folders (as os.walk lists them): the top of a
                # listing is what the agent reads first.
                head = list(itertools.islice(it, BIG_FOLDER))
                if len(head) < BIG_FOLDER:
                    entries = sorted(head, key=_walk_order)
                else:
                    # A folder of millions of entries (a command makes 40,000 a second) is not held whole in
                    # the harness's memory: only the first entries, in the listing's order, of those the loop
                    # below can use (what it skips by name or kind is left out first), with room for those it
                    # can tell only by looking (a link out, a hard-linked file, an empty folder).
                    def usable(entry: os.DirEntry[str]) -> bool:
                        name = entry.name
                        if not _utf8_name(name) or name.endswith(_TMP_SUFFIX):
                            return False
                        if _is_dir(entry):
                            return not (name.startswith(".") or (at_root and name.casefold() == self._state_cf)
                                        or name in skip_dirs or depth + 1 > WALK_DEPTH)
                        if name.startswith(".") and not hidden_files:
                            return False
                        with contextlib.suppress(OSError):
                            return entry.is_symlink() or entry.is_file(follow_symlinks=False)
                        return False

                    room = (limit - len(out)) * 2 + 64
                    entries = heapq.nsmallest(room, filter(usable, itertools.chain(head, it)), key=_walk_order)
        except OSError:
            return
        for entry in entries:
            if len(out) >= limit:
                return
            name = entry.name
            if not _utf8_name(name) or name.endswith(_TMP_SUFFIX):
                continue
            rel = prefix + name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if (name.startswith(".") or (at_root and name.casefold() == self._state_cf)
                            or name in skip_dirs):
                        continue
                    if depth + 1 > WALK_DEPTH:
                        continue
                    sub = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=dirfd)
                    try:
                        self._walk_dir(sub, rel + "/", depth + 1, out, limit, hidden_files, skip_dirs)
                    finally:
                        os.close(sub)
                    continue
                if name.startswith(".") and not hidden_files:
                    continue
                if entry.is_symlink():
                    # Listed only if a read would accept it; resolved from the root by the same rules.
                    try:
                        fd = self._open_target(rel.split("/"), _show(rel), _LOOK)
                    except SandboxError:
                        continue
                    try:
                        st = os.fstat(fd)
                    finally:
                        os.close(fd)
                elif entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                else:
                    continue  # FIFOs, sockets, devices: nothing the agent can use
                if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
                    out.append(FileInfo(rel, "file", st.st_size, st.st_mtime, 1))
            except OSError:
                continue
