"""The system calls under the door: openat2 (loaded once, probed once per process), the open flags, and
whole reads and writes of a file descriptor."""

from __future__ import annotations

import ctypes
import os
import re
import secrets
from collections.abc import Callable

from console.engine.atomic import write_all

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


def _utf8_name(name: str) -> bool:
    # Names that are not UTF-8 come back from the OS with lone surrogates; the agent could never name them.
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_write_all = write_all  # the sandbox's writes (temp.py)


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


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False
