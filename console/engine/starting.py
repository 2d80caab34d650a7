"""A run handed to a runner that has not taken it yet: ``run --detach`` returns before the runner's engine has
loaded (seconds), and says so in the run's folder (``.console/starting``: its watcher's pid). Until the runner holds
the run's lock, `jobs` counts the run as running and a command for it waits for it, instead of finding no process.
Stale once the watcher is gone, which is looked at; only the standard library (`jobs` reads it)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

STARTING = "starting"  # in .console/: the pid of the watcher of a runner that was handed the run (run --detach)


def mark_starting(paths: Any, watcher: int) -> None:
    """Say in the run's folder that process ``watcher`` (a runner's watcher) was handed the run: until its runner
    holds the run's lock (its engine takes seconds to load), a command for the run waits for it
    (console.runner.await_start) instead of finding no process. Stale once the watcher is gone, which is looked at."""
    from console.engine.atomic import atomic_write_text

    with contextlib.suppress(OSError):  # without it, a command right after the start says no process runs it yet
        atomic_write_text(paths.state / STARTING, f"{watcher}\n", durable=False, tmp_dir=paths.state / "tmp")


def starting(paths: Any) -> int | None:
    """The pid of the watcher still starting the run's runner (:func:`mark_starting`): alive, and a watcher of this
    run (a pid taken by another process since is not); None when there is none."""
    try:
        pid = int((paths.state / STARTING).read_text(encoding="ascii").strip())
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        with open(f"/proc/{pid}/stat", "rb") as fh:  # a zombie (ended, not yet reaped) is not starting anything
            zombie = fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, ValueError, IndexError):
        return None
    if zombie or b"console.watcher" not in argv or os.fsencode(str(paths.root)) not in argv:
        return None
    return pid
