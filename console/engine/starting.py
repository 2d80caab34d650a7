"""A run handed to a runner that has not taken it yet: ``run --detach`` returns before the runner's engine has
loaded (seconds), and says so in the run's folder (``.console/starting``: its watcher's pid). Until the runner holds
the run's lock, `jobs` counts the run as running and a command for it waits for it, instead of finding no process.
Stale once the watcher is gone, which is looked at; only the standard library (`jobs` reads it)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.engine.job_files import JobPaths
from console.engine.run_lock import RunLock

RUNNER_LOG = "runner.log"  # in .console/: what a runner (and its watcher) said, for a start that failed
START_PATIENCE = 20.0  # seconds a runner has to take the run's lock (a slow disk, a big journal to read back)
TELL_AFTER = 1.0  # seconds of waiting for a runner after which the wait says what it waits for
STARTING = "starting"  # in .console/: the pid of the watcher of a runner that was handed the run (run --detach)


def mark_starting(paths: Any, watcher: int) -> None:
    """Say in the run's folder that process ``watcher`` (a runner's watcher) was handed the run: until its runner
    holds the run's lock (its engine takes seconds to load), a command for the run waits for it
    (:func:`await_start`) instead of finding no process. Stale once the watcher is gone, which is looked at."""
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


def await_start(paths: JobPaths, *, tell: Callable[[str], None] | None = None, patience: float = START_PATIENCE,
                sleep: Callable[[float], None] = time.sleep,
                clock: Callable[[], float] = time.monotonic) -> int | None:
    """The pid of the process running the run, once a runner being started (:func:`starting`) holds its lock; None
    when no process runs it (none was being started, or its runner ended before it took the run: its log says
    why). ``tell``: given one line saying what is awaited once the wait passes :data:`TELL_AFTER`."""
    start = clock()
    told = tell is None
    while True:
        holder = RunLock(paths).holder()
        if holder is not None:
            return holder
        watcher = starting(paths)
        if watcher is None or clock() - start > patience:
            return RunLock(paths).holder()  # taken just now, or none
        if not told and clock() - start >= TELL_AFTER:
            told = True
            assert tell is not None
            tell(f"waiting for run {paths.run_id} to start: {awaited_by(paths, watcher)}; its log: "
                 f"{paths.state / RUNNER_LOG}")
        sleep(0.05)


def awaited_by(paths: JobPaths, watcher: int) -> str:
    """What a start waits for now: the watcher ``watcher`` to start the runner, or the runner to take the lock."""
    runner = next((pid for pid in children(watcher)), None)
    if runner is None:
        return f"its watcher (process {watcher}) to start the run's process"
    return f"process {runner} to take the run's lock ({paths.state / 'run.lock'})"


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux: /proc/PID/task/*/children; [] where it cannot be read)."""
    found: list[int] = []
    with contextlib.suppress(OSError, ValueError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", "rb") as fh:
                found += [int(p) for p in fh.read().split()]
    return found
