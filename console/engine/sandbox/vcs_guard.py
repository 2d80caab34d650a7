"""The file tools never write a repository's control files (:mod:`console.engine.vcs` says which and why): nothing
inside a folder named ``.git``, ``.hg`` or ``.jj`` (any case), no file or folder of those names, nothing inside a
folder shaped like a git directory, and nothing that would complete that shape. Reading stays allowed.

Checked twice: on the agent's string (:func:`path_refusal`: ``.git/config``), and on where the write lands, by
file descriptor (:func:`landing_refusal`: a symlink ``cfg -> .git`` makes ``cfg/config`` that same file; a folder
a command shaped as a bare repository has no telling name). The walk of the door calls it too before it makes a
folder, so a refused write never leaves behind the ``objects/`` that completes a shape."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from console.engine import vcs
from console.engine.repo_files import exists, outside_paths
from console.engine.sandbox.kernel import _DIR, MAX_DEPTH

_TOOL = {".git": "git", ".hg": "Mercurial", ".jj": "jj"}


def _inside(shown: str, folder: str) -> str:
    # Said of the name, whether or not the folder exists yet: the agent may be about to make it.
    name = folder.rsplit("/", 1)[-1]
    return (f"'{shown}' is refused: a folder named {name} is a repository's control folder, whose config and hooks "
            f"the operator's version control ({_TOOL.get(name.lower(), 'git')}) runs on their machine, outside "
            "the sandbox; the file tools may read in it, never write.")


def path_refusal(parts: Sequence[str], shown: str) -> str | None:
    """Why the agent's path (its components) names a repository's control files, or None."""
    for i, part in enumerate(parts):
        if vcs.is_vcs_folder(part):
            if i == len(parts) - 1:
                return (f"'{shown}' is refused: a file or folder named {part} makes a repository whose config and "
                        f"hooks the operator's version control ({_TOOL.get(part.lower(), 'git')}) would run on their "
                        "machine; the file tools never make one.")
            return _inside(shown, "/".join(parts[: i + 1]))
    return None


def landing_refusal(root_fd: int, where: Sequence[str], name: str, shown: str,
                    elsewhere: Sequence[tuple[str, ...]] = ()) -> str | None:
    """Why writing ``name`` (a file, or a folder the walk is about to make) in the folder ``where`` (its real
    components beneath the root, no link among them) is refused, or None: a name of :data:`vcs.VCS_FOLDERS` on
    the way, a folder on the way that is, or would then be, shaped like a git directory, or one of ``elsewhere``
    (what the job's repository has git read or run from outside its .git: a hooks folder it links to, its
    core.hooksPath)."""
    parts = [*where, name]
    why = path_refusal(parts, shown)
    if why is not None:
        return why
    for other in elsewhere:
        if tuple(parts[: len(other)]) == other:
            return (f"'{shown}' is refused: {'/'.join(other)} is where the repository's .git has git read its "
                    "config or run its hooks (a link, or core.hooksPath), on the operator's machine; the file tools "
                    "may read it, never write in it.")
    fd = root_fd
    try:
        for depth in range(len(where) + 1):
            last = depth == len(where)
            # HEAD first: without it (and not writing it) a folder has no git directory's shape, and one look is enough.
            head = exists(fd, "HEAD") or (last and name == "HEAD")
            have = {n for n in vcs.SHAPE_NAMES if head and exists(fd, n)}
            folder = "/".join(where[:depth]) or "the job folder"
            if vcs.git_dir_shaped(have):
                return (f"'{shown}' is refused: {_named(folder)} is shaped as a git repository (it holds HEAD, "
                        "objects/ and refs/), whose config and hooks the operator's git would run on their machine; "
                        "the file tools never write in it.")
            if last:
                if vcs.git_dir_shaped(have | {name}):
                    return (f"'{shown}' is refused: it would make {_named(folder)} hold HEAD, objects/ and refs/, the "
                            "shape of a git repository, whose config and hooks the operator's git would run on "
                            "their machine; use another name.")
                return None
            if depth >= MAX_DEPTH:
                break
            sub = os.open(where[depth], _DIR | os.O_NOFOLLOW, dir_fd=fd)
            if fd != root_fd:
                os.close(fd)
            fd = sub
    except OSError:
        pass
    finally:
        if fd != root_fd:
            os.close(fd)
    return f"'{shown}' is refused: the folders on its way kept changing while they were looked at; try again."


def repo_elsewhere(root_fd: int, root: Path) -> tuple[tuple[str, ...], ...]:
    """What the job folder's repository has git read or run from outside its .git (see repo_files), as the
    components of each path beneath the root: where :func:`landing_refusal` refuses too."""
    try:
        fd = os.open(".git", _DIR | os.O_NOFOLLOW, dir_fd=root_fd)
    except OSError:
        return ()
    try:
        return tuple(tuple(p.split("/")) for p in outside_paths(str(root), ".git", fd))
    finally:
        os.close(fd)


def _named(folder: str) -> str:
    return folder if folder == "the job folder" else f"'{folder}'"


def climb(dirfd: int, root_key: tuple[int, int]) -> list[str] | None:
    """The real components of the folder ``dirfd`` beneath the root (whose (dev, ino) is ``root_key``), found by
    going up through ``..`` and looking for each folder in its parent; None if the root is not above it. For a
    system without /proc, where the kernel cannot say it at once."""
    names: list[str] = []
    cur = os.open(".", _DIR, dir_fd=dirfd)
    try:
        for _ in range(MAX_DEPTH + 1):
            st = os.fstat(cur)
            if (st.st_dev, st.st_ino) == root_key:
                return names[::-1]
            up = os.open("..", _DIR, dir_fd=cur)
            found = None
            with contextlib.suppress(OSError), os.scandir(up) as it:
                for entry in it:
                    if entry.inode() == st.st_ino and entry.is_dir(follow_symlinks=False):
                        found = entry.name
                        break
            os.close(cur)
            cur = up
            if found is None or (os.fstat(cur).st_dev, os.fstat(cur).st_ino) == (st.st_dev, st.st_ino):
                return None
            names.append(found)
        return None
    finally:
        os.close(cur)
