"""What the door answers: a file's info, a write's result, and refusals (one actionable sentence each)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from typing import Literal

from console.engine.sandbox.kernel import MAX_LINKS

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


class Absent(SandboxError):
    """The path (or a folder on it) does not exist."""


class NotFolder(SandboxError):
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


def file_info(rel: str, st: os.stat_result) -> FileInfo:
    return FileInfo(rel, _kind(st.st_mode), st.st_size, st.st_mtime, st.st_nlink)


# Said without pointing at the link's target: it may be a protected file or one outside the job.
_LINK_REFUSED = ("'{shown}' is refused: it is a symbolic link, and the file tools write only regular files. "
                 "Use another name.")


# -- the sentences the parts refuse with ------------------------------------------------------------------
def outside(shown: str) -> str:
    return f"'{shown}' is refused: it is a symlink that leads outside the job folder."


def loop(shown: str) -> str:
    return (f"'{shown}' is refused: it is a symlink loop (more than {MAX_LINKS} links to follow). "
            "Fix or remove the link.")


def unstable(shown: str) -> str:
    return f"'{shown}' is refused: it kept changing while it was being opened; try again."


def too_big(shown: str, size: int, limit: int, *, grew: bool = False) -> str:
    what = "grew past" if grew else f"is {size} bytes, over"
    return (f"'{shown}' {what} the limit of {limit} bytes for one read. "
            "Use search_files to find the part you need.")


def not_folder(shown: str, dirfd: int, name: str, where: list[str]) -> SandboxError:
    try:
        what = _describe(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode)
    except OSError:
        what = "a file"
    prefix = _show("/".join([*where, name]))
    return NotFolder(f"'{shown}' is refused: '{prefix}' is {what}, not a folder. Check the path.")


def os_error(shown: str, exc: OSError, verb: str) -> SandboxError:
    reason = _REASONS.get(exc.errno or 0) or (exc.strerror or type(exc).__name__).lower()
    return SandboxError(f"'{shown}' could not be {verb}: {reason}.")


def write_error(shown: str, exc: OSError, parent: int, name: str) -> SandboxError:
    if exc.errno == errno.ELOOP:
        return SandboxError(_LINK_REFUSED.format(shown=shown))
    if exc.errno == errno.EISDIR:
        return SandboxError(f"'{shown}' is a folder, not a file.")
    if exc.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
        # Opening a FIFO without a reader, or a socket, for writing: say what it is.
        with contextlib.suppress(OSError):
            mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
            return SandboxError(f"'{shown}' is {_describe(mode)}; only regular files can be written.")
    return os_error(shown, exc, "written")
