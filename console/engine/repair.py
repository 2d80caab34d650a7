"""Clearing the way before a run: what a kill, a damaged disk or a stray hand left where a harness file should be is
moved aside to ``.console/corrupt/`` (and reported as a :class:`~console.engine.state.FileProblem`), never trusted
or deleted."""

from __future__ import annotations

import os
import stat

from console.engine import events as ev
from console.engine.clock import Clock
from console.engine.job_files import JobPaths
from console.engine.journal import JOURNAL_NAME
from console.engine.state import PROJECTION_FILES, FileProblem, quarantine

# Harness files that must be regular files, and folders that must be folders; anything else there
# (a folder, a pipe, a link) is moved aside: every later write would fail on it.
HARNESS_FILES = ("events.jsonl", JOURNAL_NAME, "run.lock", *PROJECTION_FILES.values())
HARNESS_DIRS = ("tmp", "archive", "blobs", "inbox", "corrupt")


def clear_the_way(paths: JobPaths, clock: Clock) -> list[FileProblem]:
    """Move aside anything where a harness file should be that is not a regular file (a folder, a pipe)."""
    problems = []
    for name in (*HARNESS_DIRS, *HARNESS_FILES):
        path = paths.state / name
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode) if name in HARNESS_DIRS else stat.S_ISREG(mode):
            continue
        kind = ("a folder" if stat.S_ISDIR(mode) else "a symbolic link" if stat.S_ISLNK(mode)
                else "a file" if stat.S_ISREG(mode) else "a named pipe, socket or device")
        moved = quarantine(paths, path, clock.now())
        problems.append(FileProblem(f".console/{name}", f"it was {kind}",
                                    str(moved.relative_to(paths.root)) if moved else None))
    problems += check_log(paths, clock)
    return problems


def check_log(paths: JobPaths, clock: Clock) -> list[FileProblem]:
    """Lines of events.jsonl that are not events: the original is kept aside, the log keeps the rest."""
    path = paths.events
    if not path.is_file() or not (bad := ev.damaged_lines(path)):
        return []
    moved = quarantine(paths, path, clock.now())
    if moved is None:
        return []
    ev.copy_events(moved, path)
    return [FileProblem(".console/events.jsonl", f"{bad} line{'s' if bad != 1 else ''} did not read as events",
                        str(moved.relative_to(paths.root)), "log")]
