"""The single door through which every read and write of a job file passes.

Why it exists: the agent's paths and file contents are hostile input, and path strings cannot be
trusted between two system calls. Checking a path and then re-opening it lets a symlink swapped in
between lead out of the folder; a hard link makes an outside file look like an inside one; opening a
named pipe blocks forever; and the agent must never rewrite job.toml (its own definition, including
the endpoint that receives the API key) nor reach the harness's own state in ``.console/``.

So, for the agent's file tools and for the engine's own reads of main_plan.md, SYSTEM_PROMPT.md etc.:

* ``check()`` validates the string once (no absolute paths, no ``..``, no NUL, sane lengths, not the
  harness folder).
* Resolution is by file descriptor from a directory fd kept open on the job root, never by re-opening a
  path string: ``openat2(RESOLVE_BENEATH)`` where the kernel has it, otherwise a component-by-component
  walk with O_NOFOLLOW that follows relative symlinks itself and refuses absolute ones and any that climb
  above the root. Both modes refuse to land in the harness folder and behave the same.
* Every check (kind, hard links, size) is an fstat of the fd that is then read or written: nothing can
  change between the check and the use. The one name-based step is the final rename of a finished temp
  file into the parent folder's fd, and rename never follows a symlink.
* Opens use O_NONBLOCK, so a FIFO cannot hang the engine; only regular files with one link are used.
* Writes are atomic through a temp file in ``.console/tmp`` (never in the agent's folder), under a
  per-write and a whole-job size limit, and the operator's files (job.toml, instructions.md) are
  refused, including the real file a protected symlink points to, and so is anything in the folder of the
  tool docs the harness writes (``keep_folder``).

Stdlib only and free of console.* imports on purpose: it sits below everything that touches job files.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import secrets
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["FileInfo", "Sandbox", "SandboxError", "WriteResult"]

MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4096
MAX_LINKS = 40  # the kernel's own limit, so both resolution modes agree
MAX_DEPTH = 256  # folders held open at once by the manual walk; no honest path comes near it
WALK_DEPTH = 64
_RETRIES = 64  # a path that keeps changing under us is an attack or a storm; either way, give up

_SYS_OPENAT2 = 437  # the same number on every architecture (unified syscall table)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08

_O_PATH = getattr(os, "O_PATH", 0)
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NONBLOCK
_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
# O_PATH looks at an inode without opening it: no device open, no FIFO, no read permission needed.
_LOOK = (_O_PATH or (os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)) | os.O_CLOEXEC
_APPEND = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

_TMP_SUFFIX = ".agent-console.tmp"
_BESIDE_TMP = re.compile(r"\..*\.[0-9a-f]{16}" + re.escape(_TMP_SUFFIX), re.DOTALL)
_DRIVE = re.compile(r"[A-Za-z]:[\\/]")

_REASONS = {
    errno.EACCES: "permission denied",
    errno.EPERM: "the operation is not permitted",
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EROFS: "the file system is read-only",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EMFILE: "too many files are open",
    errno.ENFILE: "too many files are open",
    errno.EBUSY: "it is busy",
    errno.ETXTBSY: "it is a running program",
    errno.EIO: "an input/output error",
}


class SandboxError(Exception):
    """A refusal: str(exc) is one actionable sentence for the agent (what is wrong, what to do instead)."""


class _Absent(SandboxError):
    """The path (or a folder on it) does not exist."""


class _NotFolder(SandboxError):
    """A folder on the path is a file."""


@dataclass(frozen=True)
class FileInfo:
    rel: str
    kind: Literal["file", "dir", "symlink", "other"]
    size: int
    mtime: float
    nlink: int


@dataclass(frozen=True)
class WriteResult:
    rel: str
    existed: bool
    old_size: int
    new_size: int


# -- openat2 ------------------------------------------------------------------------------------------
class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _load_syscall() -> Callable[..., int] | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    # A CDLL of our own: setting argtypes here cannot disturb anyone else's libc.syscall.
    fn.restype = ctypes.c_long
    fn.argtypes = (ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t)
    return fn


_syscall = _load_syscall()
_HOW_SIZE = ctypes.sizeof(_OpenHow)
_hows: dict[tuple[int, int], _OpenHow] = {}  # kept alive: their addresses are handed to the kernel
_openat2_works: bool | None = None  # probed once per process


def _openat2(dirfd: int, path: bytes, flags: int, resolve: int) -> int:
    """The new fd, or -errno."""
    how = _hows.get((flags, resolve))
    if how is None:
        how = _hows.setdefault((flags, resolve), _OpenHow(flags, 0, resolve))
    assert _syscall is not None
    fd = _syscall(_SYS_OPENAT2, dirfd, path, ctypes.addressof(how), _HOW_SIZE)
    return fd if fd >= 0 else -ctypes.get_errno()


def _probe_openat2(dirfd: int) -> bool:
    global _openat2_works
    if _openat2_works is None:
        works = False
        if _syscall is not None and _O_PATH:
            fd = _openat2(dirfd, b".", _LOOK | os.O_DIRECTORY, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
            if fd >= 0:
                # The harness-folder check after a symlink needs /proc; without it openat2 is no use.
                try:
                    works = bool(os.readlink(f"/proc/self/fd/{fd}"))
                except OSError:
                    works = False
                finally:
                    os.close(fd)
        _openat2_works = works
    return _openat2_works


# -- helpers ------------------------------------------------------------------------------------------
def _show(raw: str) -> str:
    """The agent's path as it may appear in a message: short, no NUL, no lone surrogate (JSON-safe)."""
    s = raw if len(raw) <= 200 else raw[:200] + "..."
    return s.replace("\x00", "\\x00").encode("utf-8", "replace").decode("utf-8")


def _describe(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a file" if stat.S_ISREG(mode) else "not a regular file"


def _kind(mode: int) -> Literal["file", "dir", "symlink", "other"]:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "symlink" if stat.S_ISLNK(mode) else "other"


def _utf8_name(name: str) -> bool:
    # Names that are not UTF-8 come back from the OS with lone surrogates; the agent could never name them.
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _pwrite_all(fd: int, data: bytes | bytearray | memoryview, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view = view[n:]
        offset += n


def _read_fd(fd: int, size: int, limit: int) -> bytes:
    """Up to limit + 1 bytes (one more than allowed tells the caller the file grew past the limit)."""
    want = min(size, limit) + 1
    chunks: list[bytes] = []
    got = 0
    while want > 0:
        b = os.read(fd, want)
        if not b:
            break
        chunks.append(b)
        got += len(b)
        if got > limit or (len(b) < want and got >= size):
            break  # a short read of a regular file at its known size is the end: save a syscall
        want = min(max(1 << 16, size - got + 1), limit + 1 - got)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _temp_name(beside: str | None) -> str:
    token = secrets.token_hex(8)
    if beside is None:
        return token + _TMP_SUFFIX
    # Keep within the 255-byte name limit whatever the target's name.
    short = beside.encode("utf-8", "surrogateescape")[:200].decode("utf-8", "ignore")
    return f".{short}.{token}{_TMP_SUFFIX}"


# Job files only the harness writes (the agent reads them), and what the agent does instead of writing one.
HARNESS_KEPT = {"experiences.md": "record an entry with record_experience(section, text)"}


class Sandbox:
    """Confines every file operation to ``root``; see the module docstring for the rules."""

    def __init__(self, root: Path, *, state_dir: str = ".console",
                 protected: tuple[str, ...] = ("job.toml", "instructions.md"),
                 max_write_bytes: int = 4 * 2**20, max_job_bytes: int = 2**30,
                 openat2: bool | None = None) -> None:
        self.root = Path(root).resolve()
        self.max_write_bytes = max_write_bytes
        self.max_job_bytes = max_job_bytes
        self._state_dir = state_dir
        self._state_cf = state_dir.casefold()
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

    def write_bytes(self, rel: str, data: bytes, *, mkdirs: bool = True, durable: bool = False) -> WriteResult:
        r, parts, shown = self._check(rel)
        self._guard_kept_folder(parts, shown)
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

    def job_bytes(self) -> int:
        return self._ensure_total()

    def set_job_bytes(self, total: int) -> None:
        """The folder's size as measured by someone else (a command changed files behind the file tools)."""
        with self._lock:
            self._total = max(0, total)

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

        self._scan(self._root_fd, 0, visit)
        return removed

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

    # -- the string --------------------------------------------------------------------------------
    def _check(self, user_path: str) -> tuple[str, list[str], str]:
        if self._root_fd < 0:
            raise SandboxError("the job folder is closed; nothing can be read or written")
        raw = user_path.strip()
        if not raw:
            raise SandboxError("the path is empty; give a path relative to the job folder, e.g. 'notes.md'")
        shown = _show(raw)
        if "\x00" in raw:
            raise SandboxError(f"'{shown}' is refused: it contains a NUL character; give a plain relative path.")
        if raw.startswith(("/", "\\", "~")) or _DRIVE.match(raw):
            raise SandboxError(f"'{shown}' is refused: absolute paths are not allowed. "
                               "Use a path relative to the job folder.")
        try:
            size = len(raw.encode("utf-8"))
        except UnicodeEncodeError:
            raise SandboxError(f"'{shown}' is refused: it contains a character that cannot be part of a file "
                               "name (a lone surrogate); use plain text.") from None
        if size > MAX_PATH_BYTES:
            raise SandboxError(f"'{raw[:80]}...' is refused: a path may be at most {MAX_PATH_BYTES} bytes long.")
        parts = [p for p in raw.replace("\\", "/").split("/") if p and p != "."]
        if ".." in parts:
            raise SandboxError(f"'{shown}' is refused: '..' would leave the job folder. Stay inside it.")
        for p in parts:
            if len(p) > MAX_NAME_BYTES // 4 and len(p.encode("utf-8")) > MAX_NAME_BYTES:
                raise SandboxError(f"'{raw[:80]}...' is refused: a file name may be at most 255 bytes long.")
        if len(parts) > MAX_DEPTH:
            raise SandboxError(f"'{shown[:80]}...' is refused: it is nested more than {MAX_DEPTH} folders deep.")
        if parts and parts[0].casefold() == self._state_cf:
            raise SandboxError(self._harness(shown))
        return "/".join(parts) or ".", parts, shown

    # -- resolution -------------------------------------------------------------------------------------
    def _open_target(self, parts: list[str], shown: str, flags: int) -> int:
        """An fd on what ``parts`` names, symlinks beneath the root followed, opened with ``flags``."""
        if not parts:
            return os.open(".", flags, dir_fd=self._root_fd)
        # One name at the root is one openat(O_NOFOLLOW) either way, and cheaper without ctypes.
        if self.uses_openat2 and len(parts) > 1:
            fd = self._o2_open("/".join(parts), flags, shown)
            if fd >= 0:
                return fd
        return self._manual(parts, shown, "open", flags)[0]

    def _open_parent(self, parts: list[str], shown: str, *, create: bool) -> tuple[int, str]:
        """(fd of the folder holding the final name, final name); the final name is not looked at.

        The fd may be the root fd: release it with ``_close``.
        """
        if len(parts) == 1:
            return self._root_fd, parts[0]
        if self.uses_openat2:
            fd = self._o2_open("/".join(parts[:-1]), _DIR, shown)
            if fd >= 0:
                return fd, parts[-1]
        return self._manual(parts, shown, "parent", create=create)

    def _o2_open(self, rel: str, flags: int, shown: str) -> int:
        """An fd via openat2, or -1 to let the manual walk decide (it words every other refusal)."""
        path = os.fsencode(rel)
        # First without symlinks: then the fd is where the checked string says, and /proc need not be asked.
        resolve = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS
        for _ in range(_RETRIES):
            fd = _openat2(self._root_fd, path, flags, resolve)
            if fd >= 0:
                if resolve & _RESOLVE_NO_SYMLINKS:
                    return fd
                where = self._proc_rel(fd)
                if where is None:  # the root moved or the file went away: the manual walk copes with both
                    os.close(fd)
                    return -1
                if where.split("/", 1)[0].casefold() == self._state_cf:
                    os.close(fd)
                    raise SandboxError(self._harness(shown))
                return fd
            err = -fd
            if err in (errno.EAGAIN, errno.EINTR):
                continue  # RESOLVE_BENEATH asks for a retry when a rename raced the lookup
            if err == errno.ELOOP and resolve & _RESOLVE_NO_SYMLINKS:
                resolve = _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS
                continue
            if err == errno.EXDEV:
                raise SandboxError(self._outside(shown))
            if err == errno.ELOOP:
                raise SandboxError(self._loop(shown))
            return -1
        return -1

    def _proc_rel(self, fd: int) -> str | None:
        try:
            real = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
        if real == self._root_prefix[:-1] or real == self._root_prefix:
            return "."
        return real[len(self._root_prefix):] if real.startswith(self._root_prefix) else None

    def _manual(self, parts: list[str], shown: str, mode: Literal["open", "parent", "locate"],
                flags: int = 0, create: bool = False) -> tuple[int, str]:
        """Resolve ``parts`` one component at a time from the root fd, following relative symlinks here.

        mode "open": (fd of the target opened with ``flags``, "").
        mode "parent": (fd of the folder holding the final name, the final name), final name not looked at.
        mode "locate": as "parent", but a final symlink is followed first: where a write through it lands.
        Each folder is opened with O_NOFOLLOW from the fd of the one before, and ``..`` pops back to the fd
        we came from, so a path can never be re-read as a string, and never climb above the root.
        """
        root = self._root_fd
        stack = [root]
        where: list[str] = []
        todo = parts[::-1]
        links = retries = 0
        try:
            while todo:
                name = todo.pop()
                if not name or name == ".":
                    continue
                if name == "..":
                    if len(stack) == 1:
                        raise SandboxError(self._outside(shown))
                    os.close(stack.pop())
                    where.pop()
                    continue
                if len(stack) == 1 and name.casefold() == self._state_cf:
                    raise SandboxError(self._harness(shown))
                dirfd = stack[-1]
                last = not todo
                not_dir = False
                if last and mode == "parent":
                    return stack.pop(), name
                if last and mode == "locate":
                    try:
                        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                    except FileNotFoundError:
                        return stack.pop(), name  # absent: a write would create it right here
                    if not stat.S_ISLNK(st.st_mode):
                        return stack.pop(), name
                elif last:
                    try:
                        fd = os.open(name, flags | os.O_NOFOLLOW, dir_fd=dirfd)
                    except FileNotFoundError:
                        raise _Absent(f"'{shown}' does not exist. Use list_files to see what is there.") from None
                    except OSError as exc:
                        # ELOOP: a symlink. ENOTDIR (O_DIRECTORY asked): a symlink or not a folder.
                        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                            raise
                        not_dir = exc.errno == errno.ENOTDIR
                    else:
                        # O_PATH|O_NOFOLLOW opens a symlink itself instead of failing with ELOOP.
                        if not (flags & _O_PATH) or not stat.S_ISLNK(os.fstat(fd).st_mode):
                            return fd, ""
                        os.close(fd)
                else:
                    try:
                        fd = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=dirfd)
                    except FileNotFoundError:
                        if not create:
                            missing = "/".join([*where, name])
                            raise _Absent(f"'{shown}' does not exist: there is no folder '{_show(missing)}'. "
                                          "Use list_files to see what is there.") from None
                        if self._in_kept_folder(dirfd, name):  # a folder made in it (or it, made again)
                            raise SandboxError(self._kept_folder_refusal(shown)) from None
                        try:
                            os.mkdir(name, 0o777, dir_fd=dirfd)
                        except FileExistsError:
                            retries = self._bump(retries, shown)
                        todo.append(name)
                        continue
                    except NotADirectoryError:
                        not_dir = True  # O_DIRECTORY|O_NOFOLLOW says ENOTDIR for a symlink too
                    else:
                        if len(stack) > MAX_DEPTH:
                            os.close(fd)
                            raise SandboxError(f"'{shown}' is refused: it is nested more than {MAX_DEPTH} "
                                               "folders deep.")
                        stack.append(fd)
                        where.append(name)
                        continue
                # The name is a symlink (or was a moment ago), or something that is not a folder.
                try:
                    target = os.readlink(name, dir_fd=dirfd)
                except OSError as exc:
                    if exc.errno == errno.EINVAL and (not last or not_dir):
                        raise self._not_folder(shown, dirfd, name, where) from None
                    if exc.errno not in (errno.EINVAL, errno.ENOENT):
                        raise
                    retries = self._bump(retries, shown)  # swapped under us: look again
                    todo.append(name)
                    continue
                links += 1
                if links > MAX_LINKS:
                    raise SandboxError(self._loop(shown))
                if target.startswith("/"):
                    raise SandboxError(self._outside(shown))
                todo.extend(reversed(target.split("/")))
            if mode != "open":
                raise _Absent(f"'{shown}' does not exist. Use list_files to see what is there.")
            # A symlink that ends in '.' or '..': the target is the folder we hold.
            return os.open(".", flags & ~os.O_NOFOLLOW, dir_fd=stack[-1]), ""
        finally:
            for fd in stack:
                if fd != root:
                    os.close(fd)

    def _bump(self, retries: int, shown: str) -> int:
        if retries >= _RETRIES:
            raise SandboxError(self._unstable(shown))
        return retries + 1

    def _close(self, fd: int) -> None:
        if fd != self._root_fd and fd >= 0:
            os.close(fd)

    def _is_link_at_root(self, name: str) -> bool:
        try:
            return stat.S_ISLNK(os.stat(name, dir_fd=self._root_fd, follow_symlinks=False).st_mode)
        except (OSError, ValueError):
            return False

    def _refresh_protected(self) -> None:
        for name in self._protected_links:
            try:
                dirfd, real = self._manual([name], name, "locate")
            except (SandboxError, OSError):
                continue
            try:
                st = os.fstat(dirfd)
                self._protected.add((st.st_dev, st.st_ino, real.casefold()))
            finally:
                self._close(dirfd)

    # -- guards -----------------------------------------------------------------------------------------
    def _dir_key(self, dirfd: int) -> tuple[int, int]:
        if dirfd == self._root_fd:
            return self._root_key
        st = os.fstat(dirfd)
        return st.st_dev, st.st_ino

    def _guard_harness(self, parent: int, name: str, shown: str) -> None:
        # A symlink to the root ("me -> .") puts the parent at the root although the string did not.
        if name.casefold() == self._state_cf and self._dir_key(parent) == self._root_key:
            raise SandboxError(self._harness(shown))

    def _guard_kept_folder(self, parts: list[str], shown: str) -> None:
        """A write whose path starts with the tool docs' folder (the string; _guard_name and the walk's mkdir
        catch the ways round it, a symlink to it or into it)."""
        if self._kept_dir is not None and parts and parts[0].casefold() == self._kept_dir[1]:
            raise SandboxError(self._kept_folder_refusal(shown))

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

    def _guard_name(self, parent: int, name: str, shown: str) -> None:
        key = self._dir_key(parent)
        folded = name.casefold()
        if folded == self._state_cf and key == self._root_key:
            raise SandboxError(self._harness(shown))
        if self._in_kept_folder(parent, name):
            raise SandboxError(self._kept_folder_refusal(shown))
        if self._protected_links:
            self._refresh_protected()
        if (hint := self._kept.get((*key, folded))) is not None:
            raise SandboxError(f"'{shown}' is refused: the harness keeps it; read it, and {hint}.")
        if (*key, folded) in self._protected:
            raise SandboxError(f"'{shown}' is refused: it is part of the job's definition, which only the "
                               "operator may change.")

    def _require_regular(self, st: os.stat_result, shown: str, verb: str) -> None:
        """Checks made on an open fd: only a regular file with a single link may be used."""
        mode = st.st_mode
        if stat.S_ISREG(mode):
            if st.st_nlink > 1:
                raise SandboxError(f"'{shown}' has several hard links (it may be a file outside the job folder); "
                                   "it cannot be used.")
            return
        if stat.S_ISDIR(mode):
            if verb == "read":
                raise SandboxError(f"'{shown}' is a folder; use list_files to see its content.")
            raise SandboxError(f"'{shown}' is a folder, not a file.")
        raise SandboxError(f"'{shown}' is {_describe(mode)}; only regular files can be {verb}.")

    def _require_replaceable(self, st: os.stat_result, shown: str) -> None:
        if stat.S_ISLNK(st.st_mode):
            raise SandboxError(_LINK_REFUSED.format(shown=shown))
        self._require_regular(st, shown, "written")

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
                raise SandboxError(f"'{shown}' is refused: the job folder would grow to {grown} bytes, over its "
                                   f"limit of {self.max_job_bytes} (max_job_mb in job.toml). Write less, or ask "
                                   "the operator to raise the limit.")
            self._total = grown

    def _release(self, delta: int) -> None:
        with self._lock:
            if self._total is not None:
                self._total -= delta

    def _scan(self, dirfd: int, depth: int, visit: Callable[[int, os.DirEntry[str]], None]) -> None:
        """Every entry of every folder (hidden ones too) except the harness folder, without following links."""
        at_root = self._dir_key(dirfd) == self._root_key
        try:
            with os.scandir(dirfd) as it:
                entries = list(it)
        except OSError:
            return
        for entry in entries:
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

    # -- writing ----------------------------------------------------------------------------------------
    def _open_tmp(self, *, create: bool) -> int:
        """The harness's temp folder (state_dir/tmp), opened once and kept; -1 if it is not there / usable."""
        if self._tmp_fd >= 0:
            return self._tmp_fd
        with self._lock:
            if self._tmp_fd < 0:
                try:
                    self._tmp_fd = self._open_tmp_dir(create)
                except OSError:
                    return -1
            return self._tmp_fd

    def _open_tmp_dir(self, create: bool) -> int:
        fd = self._root_fd
        for name, mode in ((self._state_dir, 0o700), ("tmp", 0o700)):
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, mode, dir_fd=fd)
            try:
                sub = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
            finally:
                self._close(fd)
            fd = sub
        return fd

    def _drop_tmp(self) -> None:
        with self._lock:
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

    def _replace(self, parent: int, name: str, data: bytes, old: os.stat_result | None, durable: bool) -> None:
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

    # -- reading and listing ------------------------------------------------------------------------
    def _open_regular(self, rel: str) -> tuple[int, os.stat_result, str]:
        _, parts, shown = self._check(rel)
        try:
            fd = self._open_target(parts, shown, _READ)
        except OSError as exc:
            if exc.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
                # A socket, or a device without a driver, cannot even be opened: say what it is.
                mode = 0
                with contextlib.suppress(OSError, SandboxError):
                    look = self._open_target(parts, shown, _LOOK)
                    try:
                        mode = os.fstat(look).st_mode
                    finally:
                        os.close(look)
                if mode:
                    raise SandboxError(f"'{shown}' is {_describe(mode)}; only regular files can be read.") from None
            raise self._os_error(shown, exc, "read") from None
        try:
            st = os.fstat(fd)
            self._require_regular(st, shown, "read")
        except BaseException:
            os.close(fd)
            raise
        return fd, st, shown

    def _walk_dir(self, dirfd: int, prefix: str, depth: int, out: list[FileInfo], limit: int,
                  hidden_files: bool, skip_dirs: frozenset[str] = frozenset()) -> None:
        at_root = self._dir_key(dirfd) == self._root_key
        try:
            with os.scandir(dirfd) as it:
                # A folder's own files before its sub-folders (as os.walk lists them): the top of a
                # listing is what the agent reads first.
                entries = sorted(it, key=lambda e: (_is_dir(e), e.name))
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


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


# Said without pointing at the link's target: it may be a protected file or one outside the job.
_LINK_REFUSED = ("'{shown}' is refused: it is a symbolic link, and the file tools write only regular files. "
                 "Use another name.")
