"""A job's repositories around each command: what a command may change in them, and what it may not leave behind.

The operator's own git runs what a repository's control files say (:mod:`console.engine.vcs`): a command that
could write ``.git/config`` or a hook would plant a program the operator runs at their next ``git status``, or on
``cd`` alone with a prompt that shows the branch. So, around every call:

* before it, :func:`survey` finds every repository of the job folder (a ``.git`` folder, a folder shaped as a git
  directory, the folder a ``commondir`` names, ``.hg`` and ``.jj``; at any depth) and notes its control files;
* from that, :func:`repo_binds`: by default each repository's git directory is bound read-only, as Codex's
  workspace-write sandbox does with a writable root's ``.git``: a command reads the history (``git status``,
  ``diff``, ``log``) and changes none of it. job.toml's ``[sandbox] git = "commit"`` lets commands commit (the git
  directory is writable but for its config, ``hooks/`` and ``info/``), ``git = "config"`` lets them change the
  config too; in every mode what the repository has git run from elsewhere in the job (a hooks folder its
  ``.git/hooks`` links to, its ``core.hooksPath``) is read-only;
* after it, :func:`sweep` looks again and makes harmless what the call made or changed that runs a program: a
  command can make a new repository anywhere in its folder (``git init sub``, a bare one, a ``.git`` file), and in
  ``config`` mode change the config. A config keeps its plain keys only (a changed one is put back as it was), a
  hook is made not executable, a link among the control files is removed, a rebase's ``exec`` lines are dropped.
  What was there before the call (the operator's own hooks, an ``lfs`` filter) is left as it was: files are
  compared by content, not by name.

The control files' snapshot also goes into the call's record, so the redo of a call a crash interrupted sweeps
what it may have left. Walked by file descriptor, never following a link; stdlib only (and the rules' module).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from console.engine import vcs
from console.engine.repo_files import (
    DIR_FLAGS,
    Kind,
    Seen,
    control_files,
    join,
    make_harmless,
    outside_paths,
    repo_kind,
    seen,
    sub,
    would_run,
)
from console.engine.tools.folder_walk import Opened, Unreadable, shown, walk
from console.engine.tools.limits import GitMode

# Repositories bound one by one (each is a mount); beyond them, the look after the call still holds.
MAX_BINDS = 256


@dataclass
class Repos:
    """The repositories of a job folder at one moment, and their control files by path."""

    folders: list[tuple[str, Kind]] = field(default_factory=list)  # (path in the job, "." for the job folder; kind)
    files: dict[str, Seen] = field(default_factory=dict)
    # What their git reads or runs from elsewhere in the job: a hooks folder they link to, core.hooksPath.
    elsewhere: list[str] = field(default_factory=list)
    problem: str = ""  # why the folder could not be walked whole

    def record(self) -> dict[str, list[Any]]:
        """For the call's record (JSON): each control file's mode and digest."""
        return {rel: [s.mode, s.digest] for rel, s in self.files.items()}

    @classmethod
    def from_record(cls, data: Any) -> Repos:
        out = cls()
        if isinstance(data, dict):
            for rel, value in data.items():
                if (isinstance(rel, str) and isinstance(value, list) and len(value) == 2
                        and isinstance(value[0], int) and isinstance(value[1], str)):
                    out.files[rel] = Seen(value[0], value[1])
        return out


def _walk(root: str, state_dir: str, visit: Callable[[int, str, Kind], None]) -> tuple[list[tuple[str, Kind]], str]:
    """Call ``visit(fd, rel, kind)`` for each repository folder below ``root`` (the harness folder aside), at any
    depth (:mod:`.folder_walk`), then for each folder a git directory's ``commondir`` names inside the job.
    Returns (the folders, why the walk could not see everything or "")."""
    found: list[tuple[str, Kind]] = []
    problem = ""
    try:
        top = os.open(root, DIR_FLAGS)
    except OSError as exc:
        return found, f"the job folder cannot be opened ({exc.strerror})"
    try:
        try:
            harness = os.stat(state_dir, dir_fd=top, follow_symlinks=False)
            skip: tuple[int, int] | None = (harness.st_dev, harness.st_ino)  # the harness folder itself
        except OSError:
            skip = None
        commons: list[str] = []
        _look(top, ".", visit, found, commons, root)
        steps = walk(top, skip=skip, files=False)
        try:
            for step in steps:
                if isinstance(step, Opened):
                    _look(step.fd, step.path, visit, found, commons, root)
                elif isinstance(step, Unreadable):
                    problem = problem or (f"the folder '{shown(step.path)}' was moved while it was looked at"
                                          if step.moved else
                                          f"the folder '{shown(step.path)}' cannot be read ({step.strerror})")
        finally:
            steps.close()
        for rel in dict.fromkeys(commons):
            if any(f == rel for f, _ in found):
                continue
            with sub(top, rel) as cfd:
                if cfd is not None:
                    found.append((rel, "git"))
                    visit(cfd, rel, "git")
    finally:
        os.close(top)
    return found, problem


def _look(fd: int, rel: str, visit: Callable[[int, str, Kind], None], found: list[tuple[str, Kind]],
          commons: list[str], root: str) -> None:
    kind = repo_kind(fd, rel.rsplit("/", 1)[-1])
    if kind is None:
        return
    if kind == "git" and (common := _common_dir(fd, rel, root)) is not None:
        commons.append(common)
    found.append((rel, kind))
    visit(fd, rel, kind)


def _common_dir(fd: int, rel: str, root: str) -> str | None:
    """The folder (in the job) that a git directory's ``commondir`` names, or None (none, or outside the job)."""
    found = seen(fd, "commondir", keep=True)
    if found is None or found.data is None or not stat.S_ISREG(found.mode):
        return None
    target = found.data.decode("utf-8", "replace").strip()
    if not target or "\x00" in target:
        return None
    here = os.path.join(root, rel)
    real = os.path.realpath(os.path.join(here, target))
    base = os.path.realpath(root)
    if real == base:
        return "."
    return real[len(base) + 1:] if real.startswith(base + "/") else None


def survey(root: str, state_dir: str = ".console") -> Repos:
    """The repositories of the job folder ``root`` now, with their control files (configs' bytes kept)."""
    out = Repos()

    def visit(fd: int, rel: str, kind: Kind) -> None:
        for dirfd, name, path, _role in control_files(fd, rel, kind):
            now = seen(dirfd, name, keep=True)
            if now is not None:
                out.files[path] = now
        if kind == "git":
            out.elsewhere += [p for p in outside_paths(root, rel, fd) if p not in out.elsewhere]

    out.folders, out.problem = _walk(root, state_dir, visit)
    return out


def would_run_in(root: str, state_dir: str = ".console") -> list[str]:
    """What the repositories of the job folder ``root`` hold now that the operator's own git (or hg, or jj) may run
    outside every sandbox, one phrase a file (:func:`console.engine.repo_files.would_run`): nothing is changed. A run
    in place leaves what came with the folder as it was (it is the operator's repository), so its start says it."""
    out: list[str] = []

    def visit(fd: int, rel: str, kind: Kind) -> None:
        for dirfd, name, path, role in control_files(fd, rel, kind):
            now = seen(dirfd, name, keep=True)
            if now is not None and (what := would_run(name, path, role, now)):
                out.append(what)

    _walk(root, state_dir, visit)
    return out


def repo_binds(root: str, repos: Repos, mode: GitMode) -> list[str]:
    """bwrap options making ``repos``' control files read-only: each git directory whole by default; in ``commit``
    mode its config, ``hooks/`` and ``info/``; in ``config`` mode its ``hooks/`` and ``info/`` (and the same for
    ``.hg`` and ``.jj``). Only real folders and files (a mount on a link would cover its target). A job folder that
    is itself a git directory (a bare repository) is never bound whole: a new mount of it would show its harness
    folder again; its control files are bound one by one instead."""
    opts: list[str] = []
    whole: list[str] = []
    base = root.rstrip("/")
    for rel, kind in sorted(repos.folders):
        if len(opts) >= 3 * MAX_BINDS:
            break
        if any(rel.startswith(b + "/") for b in whole):
            continue  # inside a folder bound whole already
        if mode == "read-only" and rel != ".":
            paths = [rel]
            whole.append(rel)
        elif kind == "git":
            paths = [join(rel, "hooks"), join(rel, "info")]
            if mode != "config":
                paths += [join(rel, n) for n in vcs.CONFIG_NAMES]
        else:
            paths = [join(rel, "/".join(vcs.JJ_CONFIG) if kind == "jj" else vcs.HGRC[0])] if mode != "config" else []
        for path in paths:
            full = f"{base}/{path}"
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) or (stat.S_ISREG(st.st_mode) and path != rel):
                opts += ["--ro-bind", full, full]
    for path in repos.elsewhere[:MAX_BINDS]:  # in every mode: the hooks and config git runs from elsewhere
        full = f"{base}/{path}"
        with contextlib.suppress(OSError):
            st = os.lstat(full)
            if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                opts += ["--ro-bind", full, full]
    return opts


@dataclass
class Swept:
    """What :func:`sweep` did (one line each, for the call's result) and what it could not do."""

    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    problem: str = ""




def sweep(root: str, before: Repos, state_dir: str = ".console") -> Swept:
    """Make harmless what runs a program in the repositories of ``root`` and was not there ``before`` the call."""
    out = Swept()

    def visit(fd: int, rel: str, kind: Kind) -> None:
        for dirfd, name, path, role in control_files(fd, rel, kind):
            now = seen(dirfd, name, keep=True)
            if now is None or now.same(before.files.get(path)):
                continue
            try:
                what = make_harmless(dirfd, name, path, role, now, before.files.get(path), root)
            except OSError as exc:
                out.failed.append(f"'{path}' ({exc.strerror or exc})")
                continue
            if what:
                out.done.append(what)

    _folders, out.problem = _walk(root, state_dir, visit)
    return out


