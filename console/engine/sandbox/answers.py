"""What the door answers: a file's info, a write's result, and refusals (one actionable sentence each)."""

from __future__ import annotations

import errno
import stat
from dataclasses import dataclass
from typing import Literal

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


# Said without pointing at the link's target: it may be a protected file or one outside the job.
_LINK_REFUSED = ("'{shown}' is refused: it is a symbolic link, and the file tools write only regular files. "
                 "Use another name.")
