"""A control group per command, where the machine lets this process make one.

A cgroup bounds what rlimits cannot: the memory of a whole process tree (tmpfs pages included), its number
of tasks whatever user namespace they are in, and it can kill every process of the tree at once, double
forks and ``setsid`` included. Two layouts are supported:

- cgroup v2: a child of this process's own cgroup when that cgroup delegates the ``memory`` and ``pids``
  controllers to its children (a systemd unit with ``Delegate=yes``, a container made for it), or, for
  root, of the hierarchy's root; ``memory.max``, ``memory.swap.max``, ``pids.max``, ``cgroup.kill``;
- cgroup v1 (a hybrid host): children of this process's ``memory`` and ``pids`` cgroups where they are
  writable (root, usually); ``memory.limit_in_bytes``, ``memory.memsw.limit_in_bytes``, ``pids.max``.

Where neither works (an ordinary user on a systemd host: a login session's cgroup is not delegated), there
is no cgroup and the command is bounded by rlimits and its pid namespace (see :mod:`.process`). Which of the
two a run uses is in the run's header. Stdlib only.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

PREFIX = "agent-console-"
_counter = itertools.count(1)
_found: list[Cgroups | None] = []
_lock = threading.Lock()


@dataclass(frozen=True)
class Cgroups:
    """Where this process makes its command cgroups."""

    version: Literal[1, 2]
    memory: Path  # v2: the one parent folder; v1: the memory hierarchy's
    pids: Path  # v2: the same folder; v1: the pids hierarchy's

    @property
    def label(self) -> str:
        return f"cgroup v{self.version}"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(mount point, root inside the hierarchy, fs type, super options) of every cgroup mount."""
    out = []
    for line in _read(Path("/proc/self/mountinfo")).splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        root, point = fields[3], fields[4].replace("\\040", " ")
        out.append((point, root, tail[0], set(tail[2].split(","))))
    return out


def _own(hierarchy: str) -> str | None:
    """This process's cgroup path in a v1 hierarchy (by controller), or in v2 (``""``)."""
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if (hierarchy == "" and parts[0] == "0" and parts[1] == "") or hierarchy in parts[1].split(","):
            return parts[2]
    return None


def _under(point: str, mount_root: str, path: str) -> Path:
    rel = path[len(mount_root):] if mount_root != "/" and path.startswith(mount_root) else path
    return Path(point) / rel.lstrip("/")


def _writable(folder: Path) -> bool:
    return folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)


def _v2() -> Cgroups | None:
    own = _own("")
    for point, root, fstype, _ in _mounts():
        if fstype != "cgroup2" or own is None:
            continue
        choices = [_under(point, root, own)]
        if os.geteuid() == 0:
            choices.append(Path(point))
        for folder in choices:
            delegated = set(_read(folder / "cgroup.subtree_control").split())
            if {"memory", "pids"} <= delegated and _writable(folder):
                return Cgroups(2, folder, folder)
    return None


def _v1() -> Cgroups | None:
    found: dict[str, Path] = {}
    for controller in ("memory", "pids"):
        own = _own(controller)
        for point, root, fstype, options in _mounts():
            if fstype == "cgroup" and controller in options and own is not None:
                folder = _under(point, root, own)
                if _writable(folder) and (folder / "cgroup.procs").exists():
                    found[controller] = folder
                break
    if len(found) == 2:
        return Cgroups(1, found["memory"], found["pids"])
    return None


def find_cgroups(*, refresh: bool = False) -> Cgroups | None:
    """Where commands get a cgroup here (proved by making and removing one), None if nowhere; found once."""
    with _lock:
        if _found and not refresh:
            return _found[0]
        found = None
        for candidate in (_v2(), _v1()):
            if candidate is not None and _try(candidate):
                found = candidate
                break
        _found[:] = [found]
        return found


def _try(cg: Cgroups) -> bool:
    try:
        slot = Slot(cg, memory_bytes=1 << 30, pids=64)
    except OSError:
        return False
    slot.close()
    return True


class Slot:
    """One command's cgroup (in both v1 hierarchies): limits set at creation, processes added before they
    run anything, killed whole, removed at the end."""

    def __init__(self, cg: Cgroups, *, memory_bytes: int, pids: int) -> None:
        self.cg = cg
        name = f"{PREFIX}{os.getpid()}-{next(_counter)}"
        self.folders = [cg.memory / name] if cg.version == 2 else [cg.memory / name, cg.pids / name]
        made: list[Path] = []
        try:
            for folder in self.folders:
                folder.mkdir(mode=0o700)
                made.append(folder)
            mem, tasks = self.folders[0], self.folders[-1]
            if cg.version == 2:
                _write(mem / "memory.max", str(memory_bytes))
                if (mem / "memory.swap.max").exists():
                    _write(mem / "memory.swap.max", "0")  # bounded in RAM, not pushed out to the host's swap
                _write(tasks / "pids.max", str(pids))
            else:
                _write(mem / "memory.limit_in_bytes", str(memory_bytes))
                if (mem / "memory.memsw.limit_in_bytes").exists():
                    _write(mem / "memory.memsw.limit_in_bytes", str(memory_bytes))
                _write(tasks / "pids.max", str(pids))
        except OSError:
            for folder in reversed(made):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise

    def add(self, pid: int) -> None:
        """Move ``pid`` (all its threads) into the cgroup: its later children are born inside."""
        for folder in self.folders:
            _write(folder / "cgroup.procs", str(pid))

    def pids(self) -> list[int]:
        out: set[int] = set()
        for folder in self.folders:
            out.update(int(p) for p in _read(folder / "cgroup.procs").split() if p.isdigit())
        return sorted(out)

    def oom_killed(self) -> bool:
        """True if the kernel killed a process of this cgroup for going over its memory."""
        mem = self.folders[0]
        text = _read(mem / ("memory.events" if self.cg.version == 2 else "memory.oom_control"))
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit() and int(value) > 0:
                return True
        if self.cg.version == 1 and "oom_kill " not in text:  # a kernel older than 4.13 does not count kills
            return _read(mem / "memory.failcnt").strip() not in ("", "0")
        return False

    def signal_all(self) -> bool:
        """SIGKILL every process of the cgroup now (without waiting); False if it was already empty."""
        kill_file = self.folders[0] / "cgroup.kill"
        if self.cg.version == 2 and kill_file.exists():
            with contextlib.suppress(OSError):
                _write(kill_file, "1")
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        return bool(pids)

    def kill(self) -> None:
        """SIGKILL every process of the cgroup, until none is left (a fork bomb is bounded by pids.max). A zombie
        stays listed until its parent reaps it: the caller reaps its own children first."""
        pause = 0.0002
        for _ in range(200):
            if not self.signal_all():
                return
            time.sleep(pause)  # a killed process leaves the list once it has exited: moments, usually
            pause = min(0.01, pause * 2)

    def close(self) -> None:
        """Kill what is left and remove the cgroup (a process not yet reaped keeps it busy for a moment)."""
        self.kill()
        for folder in self.folders:
            pause = 0.0002
            for _ in range(100):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        break
                    time.sleep(pause)
                    pause = min(0.02, pause * 2)


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def sweep_stale() -> int:
    """Remove the command cgroups of agent-console processes that died (kill -9) before removing theirs,
    killing what still runs in them; returns how many. Called when a run starts."""
    cg = find_cgroups()
    if cg is None:
        return 0
    removed = 0
    for parent in {cg.memory, cg.pids}:
        try:
            names = [n for n in os.listdir(parent) if n.startswith(PREFIX)]
        except OSError:
            continue
        for name in names:
            owner = name[len(PREFIX):].split("-", 1)[0]
            if not owner.isdigit() or int(owner) == os.getpid() or _alive(int(owner)):
                continue
            slot = object.__new__(Slot)
            slot.cg, slot.folders = cg, [parent / name]
            slot.close()
            removed += not (parent / name).exists()
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
