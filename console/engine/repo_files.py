"""A repository's control files on disk (:mod:`console.engine.vcs` says which run programs): found and read by
file descriptor, never through a link, and made harmless where they would run a program on the operator's machine.
Shared by the look after each command (:mod:`console.engine.tools.repos`) and the copy ``run JOB`` makes
(:mod:`console.engine.run_copy`). Stdlib only (and the rules' module)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from console.engine import vcs
from console.engine.atomic import write_all

Kind = Literal["git", "hg", "jj"]
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
PLAIN = "only plain keys are kept (the format's, user, remote, branch, submodule URLs)"


@dataclass(frozen=True)
class Seen:
    """One control file as it was: its mode and the digest of its content (of its target, for a link)."""

    mode: int
    digest: str
    data: bytes | None = None  # a config's bytes, kept to put it back (never recorded)

    def same(self, other: Seen | None) -> bool:
        return other is not None and other.mode == self.mode and other.digest == self.digest


def join(prefix: str, name: str) -> str:
    return name if prefix in ("", ".") else f"{prefix}/{name}"


def seen(dirfd: int, name: str, *, keep: bool = False) -> Seen | None:
    """What ``name`` in ``dirfd`` is now (None: nothing), its content read through a descriptor, never a link."""
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(name, dir_fd=dirfd)
        except OSError:
            target = ""
        return Seen(st.st_mode, hashlib.sha256(os.fsencode(target)).hexdigest())
    if not stat.S_ISREG(st.st_mode):
        return Seen(st.st_mode, "")
    try:
        fd = os.open(name, _FILE, dir_fd=dirfd)
    except OSError:
        return Seen(st.st_mode, "")
    try:
        data = os.read(fd, vcs.MAX_CONTROL_BYTES + 1)
        if len(data) > vcs.MAX_CONTROL_BYTES:
            return Seen(st.st_mode, "")
        return Seen(st.st_mode, hashlib.sha256(data).hexdigest(), data if keep else None)
    except OSError:
        return Seen(st.st_mode, "")
    finally:
        os.close(fd)


@contextlib.contextmanager
def sub(dirfd: int, path: str) -> Iterator[int | None]:
    """The folder ``path`` (components, no link among them) below ``dirfd``, or None."""
    fd = dirfd
    try:
        for part in path.split("/"):
            if part in ("", "."):
                continue
            nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            if fd != dirfd:
                os.close(fd)
            fd = nxt
    except OSError:
        if fd != dirfd:
            os.close(fd)
        yield None
        return
    try:
        yield fd
    finally:
        if fd != dirfd:
            os.close(fd)


def exists(dirfd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except OSError:
        return False
    return True


# The entries of a git directory git reads or runs: when one is a link, what it leads to is theirs too.
LINKED = (*vcs.CONFIG_NAMES, vcs.HOOKS, "info")


def outside_paths(root: str, rel: str, fd: int) -> list[str]:
    """What the git directory at ``rel`` in the job folder ``root`` (open as ``fd``) has git read or run from
    elsewhere in the job: where its config, hooks and info lead when they are links, and its ``core.hooksPath``
    (husky's ``.husky/_``). Real paths relative to ``root``; never the job folder itself (a hooks path of "." makes
    every file of it a hook: the README says so)."""
    base = os.path.realpath(root)
    here = os.path.join(base, rel) if rel not in ("", ".") else base
    found: list[str] = []
    for name in LINKED:
        try:
            if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                found.append(os.path.realpath(os.path.join(here, name)))
        except OSError:
            continue
    config = seen(fd, "config", keep=True)
    data = config.data if config is not None else None
    if config is not None and stat.S_ISLNK(config.mode):  # git reads what it leads to (never a pipe: non-blocking)
        with contextlib.suppress(OSError):
            cfd = os.open(os.path.join(here, "config"), os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
            try:
                if stat.S_ISREG(os.fstat(cfd).st_mode):
                    data = os.read(cfd, vcs.MAX_CONTROL_BYTES + 1)
            finally:
                os.close(cfd)
    entries = vcs.parse_git_config(data) if data is not None else None
    paths = [e.value for e in entries or () if e.section == "core" and e.key == "hookspath" and e.value]
    if paths and not paths[-1].startswith("~"):  # the last one is git's; ~ is the operator's home
        worktree = os.path.dirname(here) if os.path.basename(here).casefold() == ".git" else here
        found.append(os.path.realpath(os.path.join(worktree, paths[-1])))
    out = []
    for real in found:
        if real.startswith(base + "/"):
            out.append(real[len(base) + 1:])
    return list(dict.fromkeys(out))


def repo_kind(fd: int, name: str) -> Kind | None:
    """What repository folder the folder ``fd`` (named ``name``) is: a ``.git`` (any case) or a folder shaped as a git
    directory, ``.hg``, ``.jj``; None for any other."""
    folded = name.casefold()
    # HEAD first: most folders have none, and then one look is enough.
    if folded == ".git" or (exists(fd, "HEAD") and vcs.git_dir_shaped(n for n in vcs.SHAPE_NAMES if exists(fd, n))):
        return "git"
    if folded == ".hg":
        return "hg"
    return "jj" if folded == ".jj" else None


Role = Literal["config", "commondir", "todo", "options", "hook", "hgrc", "jj"]


def _files_of(kind: Kind) -> tuple[tuple[str, Role], ...]:
    """The control files of a repository folder of ``kind`` (its hooks aside), as (path in it, role)."""
    if kind == "git":
        return (*((n, "config") for n in vcs.CONFIG_NAMES), ("commondir", "commondir"),
                *((t, "todo") for t in vcs.SEQUENCER_TODOS), *((o, "options") for o in vcs.SEQUENCER_OPTIONS))
    if kind == "hg":
        return ((vcs.HGRC[0], "hgrc"),)
    return (("/".join(vcs.JJ_CONFIG), "jj"),)


def control_files(fd: int, rel: str, kind: Kind) -> Iterator[tuple[int, str, str, Role]]:
    """(folder fd, name, path in the job, role) of each control file of the repository folder ``fd`` at ``rel``
    that exists; hooks one by one (the ``hooks`` entry itself when it is not a folder). Each fd is open while the
    caller uses it."""
    for path, role in _files_of(kind):
        folder, _, name = path.rpartition("/")
        with sub(fd, folder) as where:
            if where is not None and exists(where, name):
                yield where, name, join(rel, path), role
    if kind != "git":
        return
    hooks = join(rel, vcs.HOOKS)
    try:
        hfd = os.open(vcs.HOOKS, DIR_FLAGS, dir_fd=fd)
    except OSError:
        if exists(fd, vcs.HOOKS):
            yield fd, vcs.HOOKS, hooks, "hook"  # a link (or a file) where the hooks folder should be
        return
    try:
        with os.scandir(hfd) as it:
            names = [e.name for e in it if not e.name.endswith(".sample")]
    except OSError:
        names = []
    try:
        for name in sorted(names):
            yield hfd, name, f"{hooks}/{name}", "hook"
    finally:
        os.close(hfd)


def make_harmless(dirfd: int, name: str, path: str, role: Role, now: Seen, was: Seen | None, root: str, *,
                  outside_ok: bool = True) -> str:
    """Make the control file ``name`` at ``path`` in the job folder ``root`` harmless: ``now`` is what it is, ``was``
    what it was before a command (None: new, or a copy's). Returns what was done ("" for nothing).
    ``outside_ok``: a ``commondir`` naming a folder outside the job is kept (commands cannot write there)."""
    previous = was.data if was is not None and stat.S_ISREG(was.mode) else None
    if stat.S_ISLNK(now.mode):
        # git follows it, to a file the agent could write later with its file tools.
        os.unlink(name, dir_fd=dirfd)
        if role in ("config", "hgrc", "jj") and previous is not None:
            rewrite(dirfd, name, previous, was.mode if was is not None else 0o644)
            return f"put '{path}' back as it was before the call, a file (a command made it a link)"
        return f"removed the link '{path}' (a repository's control files are never links a command leaves)"
    if not stat.S_ISREG(now.mode):
        return ""
    data = now.data if now.data is not None else b""
    if role == "hook":
        if not vcs.hook_runs(name, now.mode):
            return ""
        os.chmod(name, stat.S_IMODE(now.mode) & ~0o7111, dir_fd=dirfd, follow_symlinks=False)
        return f"made '{path}' not executable (git would run it on the operator's machine)"
    if role == "config":
        added = vcs.added_programs(previous, data)
        if not added:
            return ""
        keys = ", ".join(added[:5]) + (f" and {len(added) - 5} more" if len(added) > 5 else "")
        if previous is not None:
            rewrite(dirfd, name, previous, now.mode)
            return (f"put '{path}' back as it was before the call: the call added {keys}, which can run a program "
                    f"on the operator's machine ({PLAIN})")
        rewrite(dirfd, name, vcs.plain_config(data).data, now.mode)
        return f"removed {keys} from '{path}': {PLAIN}"
    if role == "commondir":
        if _names_git_dir(root, path.rpartition("/")[0], data, outside_ok):
            return ""
        os.unlink(name, dir_fd=dirfd)
        return (f"removed '{path}': it names a folder that is no git directory of the job, which could later be "
                "given a config")
    if role == "todo":
        kept = vcs.drop_exec_lines(data)
        if kept is None:
            return ""
        rewrite(dirfd, name, kept, now.mode)
        return f"dropped the exec lines of '{path}' (git rebase --continue would run them)"
    if role == "options":
        os.unlink(name, dir_fd=dirfd)
        return f"removed '{path}' (it names a merge strategy, which is a program)"
    if role == "hgrc" and vcs.hgrc_plain(data):
        return ""
    if previous is not None:
        rewrite(dirfd, name, previous, now.mode)
        return f"put '{path}' back as it was before the call (it can name programs to run on the operator's machine)"
    os.unlink(name, dir_fd=dirfd)
    return f"removed '{path}' (it can name programs to run on the operator's machine)"


def would_run(name: str, path: str, role: Role, now: Seen) -> str:
    """What the control file ``name`` at ``path`` holds that the operator's own tools may run, in a few words ("" for
    nothing): the same tests as :func:`make_harmless`, which acts on them; this one only reads (a run in place
    leaves what came with its folder as it was, and says so: :func:`console.engine.tools.repos.would_run_in`)."""
    if stat.S_ISLNK(now.mode):
        return f"'{path}' is a link (git follows it)"
    if not stat.S_ISREG(now.mode):
        return ""
    data = now.data if now.data is not None else b""
    if role == "hook":
        return f"'{path}' is an executable hook" if vcs.hook_runs(name, now.mode) else ""
    if role == "config":
        keys = vcs.added_programs(None, data)
        if not keys:
            return ""
        listed = ", ".join(keys[:4]) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")
        return f"'{path}' sets {listed}"
    if role == "todo":
        return f"'{path}' has exec lines (git rebase --continue runs them)" if vcs.drop_exec_lines(data) else ""
    if role == "options":
        return f"'{path}' names a merge strategy (a program)"
    if role == "hgrc":
        return "" if vcs.hgrc_plain(data) else f"'{path}' has more than [paths] (hooks, extensions)"
    if role == "jj":
        return f"'{path}' is jj's repository config"
    return ""


def _names_git_dir(root: str, folder: str, data: bytes, outside_ok: bool) -> bool:
    """Whether a ``commondir`` in ``folder`` (holding ``data``) names a git directory: in the job, a folder named
    .git or shaped as one (the file tools write in neither); outside it, whatever it is if ``outside_ok`` (commands
    cannot write there)."""
    target = data.decode("utf-8", "replace").strip()
    if not target or "\x00" in target:
        return False
    base = os.path.realpath(root)
    real = os.path.realpath(os.path.join(base, folder, target))
    if not (real == base or real.startswith(base + "/")):
        return outside_ok
    if not os.path.isdir(real):
        return False
    return os.path.basename(real).casefold() == ".git" or vcs.git_dir_shaped(
        n for n in vcs.SHAPE_NAMES if os.path.lexists(os.path.join(real, n)))


def rewrite(dirfd: int, name: str, data: bytes, mode: int) -> None:
    """``name`` in ``dirfd`` replaced by a new file holding ``data`` (never written through a link or another
    name of the file: removed, then made again; a kill between leaves no file, which git takes for an empty one)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dirfd)
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 stat.S_IMODE(mode) & 0o666, dir_fd=dirfd)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)
