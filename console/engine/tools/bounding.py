"""Bounding a command's processes: the rlimits set on it before it runs, and the child subreaper that
collects what an unconfined command leaves behind."""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import threading
import time

from console.engine.tools.limits import MB, CommandLimits

# How long the harness goes on killing what an unconfined command left (a chain of orphans a thousand deep is
# killed a level at a time).
REAP_SECONDS = 10.0


# CPU time: the soft limit sends SIGXCPU (which says why), the hard one SIGKILL this much later.
CPU_GRACE = 5


def rlimits(limits: CommandLimits, *, nproc_base: int | None = 0, memory: bool = True) -> list[tuple[int, int, int]]:
    """(resource, soft, hard) of every rlimit a command gets; it cannot raise them past the hard one.

    ``nproc_base``: the tasks RLIMIT_NPROC already counts for the command's user (0 in a user namespace of its
    own, where only the command's are counted); None leaves RLIMIT_NPROC alone (it does not apply to root)."""
    out = [(resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + CPU_GRACE),
           (resource.RLIMIT_NOFILE, limits.open_files, limits.open_files),
           (resource.RLIMIT_FSIZE, limits.file_size_mb * MB, limits.file_size_mb * MB), (resource.RLIMIT_CORE, 0, 0)]
    if nproc_base is not None:
        n = nproc_base + limits.processes
        out.append((resource.RLIMIT_NPROC, n, n))
    if memory:
        out.append((resource.RLIMIT_DATA, limits.memory_mb * MB, limits.memory_mb * MB))
    return out


def user_tasks(uid: int) -> int:
    """The tasks (threads) of processes whose real uid is ``uid``: what RLIMIT_NPROC counts for it."""
    total = 0
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/status", "rb") as fh:
                    text = fh.read(4096)
            except OSError:
                continue
            uid_line = text.partition(b"\nUid:")[2].split(None, 1)
            if uid_line and uid_line[0] == str(uid).encode():
                threads = text.partition(b"\nThreads:")[2].split(None, 1)
                total += int(threads[0]) if threads and threads[0].isdigit() else 1
    return total


def apply_rlimits(pid: int, values: list[tuple[int, int, int]]) -> None:
    """Set each limit on ``pid``, never above what the harness itself may grant (its own hard limit)."""
    for res, soft, hard in values:
        _own_soft, own_hard = resource.getrlimit(res)
        if own_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, own_hard), min(hard, own_hard)
        resource.prlimit(pid, res, (soft, hard))


_PR_SET_CHILD_SUBREAPER = 36


class _Subreaper:
    """While an unconfined command runs, this process is the "child subreaper" of what the command leaves
    behind (Linux prctl): a ``setsid``'d grandchild or a double fork is handed to it, not to init, so it can be
    killed and reaped. Only for that while: a process that is always a subreaper collects every orphan of every
    child it ever has (a caller's own ``os.wait()`` would get them). Counted, so overlapping calls share it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0

    def _set(self, on: bool) -> bool:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0)
        except Exception:  # not Linux, or no libc: nothing outlives a call only where a cgroup is used
            return False

    def enter(self) -> bool:
        with self._lock:
            if self._users == 0 and not self._set(True):
                return False
            self._users += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                self._set(False)


SUBREAPER = _Subreaper()


def my_children() -> set[int]:
    out: set[int] = set()
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{os.getpid()}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{os.getpid()}/task/{task}/children") as fh:
                out.update(int(p) for p in fh.read().split())
    return out


def reap_orphans(before: set[int], keep: int | None = None) -> int:
    """Kill and reap the children this (subreaper) process inherited since ``before``; returns how many.

    Killing an orphan hands its own children to us in turn, so this goes on until a look finds none."""
    killed = 0
    until = time.monotonic() + REAP_SECONDS
    while time.monotonic() < until:
        # An orphan is handed over as its parent exits, and each one killed here is reaped (waited for)
        # before the next look: a look that finds none has found them all.
        orphans = my_children() - before - ({keep} if keep is not None else set())
        if not orphans:
            break
        for pid in orphans:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
            killed += 1
    return killed
