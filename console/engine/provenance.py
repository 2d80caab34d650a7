"""Whose a job folder's ``.console/`` is: this operator's run, one of their runs from before seals, nothing yet, or
another's (a folder from elsewhere). Judged before a run goes on in place, and before anything of it is used.

- **new**: no ``.console/``, or one that holds only what a start leaves before its record (its lock, its runner's
  log, an empty event log, temp files): a run starts there;
- **ours**: its launch record carries this operator's seal for this folder (console.engine.seal);
- **earlier**: a record without a seal (or none, with state) in a folder the data dir's jobs table knew when the
  key was made: one of this operator's runs from before seals. It is sealed (:func:`adopt`) and goes on;
- **foreign**: anything else. Nothing in it is used: not its settings, its store id, its marker, its state.
  ``run --in-place`` refuses it (or, with ``--fresh``, sets it aside: :func:`set_aside`).

What the seal does not cover (the journal, todos, the event log) is believed once the record is: those files are
the operator's only (0700), the agent cannot write them, and their content can only shape what the agent is told,
as the job's own instructions do.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from console.engine.job_files import JobPaths, one_line
from console.engine.launch import ForeignRecord, Launch, UnreadableRecord, open_launch, write_launch
from console.engine.seal import Seal

Whose = Literal["new", "ours", "earlier", "foreign"]

# What a start leaves in .console/ before its sealed record (its first write: console.engine.supervisor): a run
# killed there is a new run still. Files: regular, any content (never read as the run's: a lock, logs).
BEFORE_RECORD_FILES = ("run.lock", "runner.log", "crash.log")
BEFORE_RECORD_EMPTY = ("events.jsonl", "inbox")  # an empty log, an inbox with no command waiting
BEFORE_RECORD_ANY = ("tmp",)  # temp files: swept at every start, never read


@dataclass(frozen=True)
class Verdict:
    whose: Whose
    record: Launch | None = None
    why: str = ""  # foreign: what makes it so, for the operator's line

    @property
    def usable(self) -> bool:
        return self.whose != "foreign"


def judge(paths: JobPaths, seal: Seal) -> Verdict:
    """Whose ``paths``' .console/ is (see the module). LaunchError when a record of this operator's does not read."""
    state = paths.state
    try:
        st = os.lstat(state)
    except FileNotFoundError:
        return Verdict("new")
    except OSError as exc:
        return Verdict("foreign", why=f"its .console cannot be looked at ({exc.strerror or exc})")
    if not stat.S_ISDIR(st.st_mode):
        return Verdict("foreign", why="its .console is not a folder")
    if st.st_uid != os.getuid():
        return Verdict("foreign", why="its .console belongs to another user")
    try:
        opened = open_launch(paths, seal)
    except ForeignRecord as exc:
        return Verdict("foreign", why=exc.why)
    except UnreadableRecord:
        if seal.earlier(paths.root):
            raise  # one of the operator's own runs from before seals, whose record is damaged: said as it is
        return Verdict("foreign", why="its launch record does not read as one")
    # A record sealed by this operator that this version cannot take (LaunchError) is theirs: it is raised.
    if opened is not None:
        record, how = opened
        return Verdict("ours" if how == "sealed" else "earlier", record)
    if before_record(state):
        return Verdict("new")
    if seal.earlier(paths.root):
        return Verdict("earlier")
    return Verdict("foreign", why="it holds a run's state but no launch record of this operator")


def before_record(state: Path) -> bool:
    """Whether ``state`` holds nothing but what a start leaves before its record (see :data:`BEFORE_RECORD_FILES`)."""
    try:
        names = os.listdir(state)
    except OSError:
        return False
    for name in names:
        try:
            st = os.lstat(state / name)
            if name in BEFORE_RECORD_FILES and stat.S_ISREG(st.st_mode):
                continue
            if name in BEFORE_RECORD_ANY and stat.S_ISDIR(st.st_mode):
                continue
            if name in BEFORE_RECORD_EMPTY and (st.st_size == 0 if stat.S_ISREG(st.st_mode) else
                                                stat.S_ISDIR(st.st_mode) and not os.listdir(state / name)):
                continue
        except OSError:
            return False
        return False
    return True


def adopt(paths: JobPaths, verdict: Verdict, seal: Seal) -> None:
    """Seal the records of one of this operator's runs from before seals (an "earlier" verdict): its store id and
    marker first, its launch record last (the record decides whose the folder is: a kill -9 before it leaves the
    run "earlier", to be sealed again); then the folder leaves the list of earlier runs. An "ours" folder still on
    that list (a kill before it left) leaves it too."""
    from console.engine.store.marker import reseal_marker
    from console.engine.store.postgres import reseal_store_id

    if verdict.whose == "earlier":
        reseal_store_id(paths, seal)
        reseal_marker(paths, seal)
        if verdict.record is None:
            return  # the run's start writes its first sealed record; it leaves the list at its next judging
        write_launch(paths, verdict.record, seal)
    if verdict.whose in ("earlier", "ours"):
        seal.adopted(paths.root)


def aside_name(paths: JobPaths, now: datetime) -> Path:
    """Where ``--fresh`` moves a folder's .console/: beside the job folder, named after it and the time (never
    inside it, where the new run's agent would read it)."""
    base = paths.root.parent / f"{paths.root.name}.console-set-aside-{now:%Y%m%d-%H%M%S}"
    path, n = base, 1
    while os.path.lexists(path):
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def set_aside(paths: JobPaths, now: datetime) -> Path:
    """Move the folder's .console/ aside (:func:`aside_name`): one rename, so nothing of it is left behind.
    OSError (one line naming both folders) when it cannot be moved there."""
    from console.engine.run_lock import RunLock

    if (holder := RunLock(paths).holder()) is not None:  # a run going on there keeps its folder
        raise OSError(errno.EBUSY, f"{one_line(str(paths.root), 0)} is being run by process {holder}: stop it "
                      f"first (agent-console stop {one_line(str(paths.root), 0)}), then start it fresh")
    target = aside_name(paths, now)
    try:
        os.rename(paths.state, target)
    except OSError as exc:
        raise OSError(exc.errno, f"{one_line(str(paths.state), 0)} cannot be moved to {one_line(str(target), 0)} "
                      f"({exc.strerror or exc}): move or delete it yourself, then run again") from None
    return target
