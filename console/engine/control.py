"""Operator commands: one control API, in-process or through the job's inbox on disk.

The console calls :meth:`ControlChannel.submit`; another shell (``agent-console
approve JOB``) drops a JSON file into ``JOB/.console/inbox/``. The engine
drains both at turn boundaries (and while paused or waiting for an approval),
so every command is applied at a point where the conversation is whole, and
every command yields ``operator_command`` events (received, then applied or
rejected), which is how the sender learns what happened.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import queue
import stat
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from console.engine.atomic import atomic_write_text
from console.engine.job import JobPaths
from console.engine.state import StateFileError, read_state_file

CommandName = Literal["checkpoint", "rewind", "approve_restart", "deny_restart", "pause", "resume", "stop"]
COMMANDS: tuple[str, ...] = ("checkpoint", "rewind", "approve_restart", "deny_restart", "pause", "resume", "stop")
# How often the engine looks at the inbox while a model is streaming.
POLL_INTERVAL = 0.2
# Commands read per look at the inbox (a flood waits for the next look instead of stalling a turn).
MAX_INBOX = 100
# Commands that only make sense for a running run: with none running, the command line refuses them
# rather than leaving them for the next run (a pause, a checkpoint or a rewind can be queued on purpose).
RUN_SCOPED = frozenset({"stop", "approve_restart", "deny_restart"})


class Command(BaseModel):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    command: CommandName
    args: dict[str, Any] = Field(default_factory=dict)
    source: str = "api"
    issued_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    # The run (RunLock's id) that was running when the command was sent; None: no run was.
    run: str | None = None


def write_inbox(paths: JobPaths, command: str, args: dict[str, Any] | None = None, source: str = "cli",
                run: str | None = None) -> Command:
    """Queue a command for a run from another process. Atomic: the engine never reads half a file.

    The command is addressed to the run that holds the job's lock now (``run`` overrides), so a stop that
    arrives as that run ends is discarded by the next run instead of stopping it."""
    if run is None:
        run = RunLock(paths).run_id_of_holder()
    cmd = Command(command=command, args=args or {}, source=source, run=run)  # type: ignore[arg-type]
    name = f"{time.time_ns():020d}-{cmd.id}.json"
    atomic_write_text(paths.inbox / name, cmd.model_dump_json(), durable=False)
    return cmd


class ControlChannel:
    """Thread-safe command intake. ``poll`` returns new commands in arrival order."""

    def __init__(self, inbox: Path | None = None) -> None:
        self.inbox = inbox
        self._queue: queue.Queue[Command] = queue.Queue()
        self._last_poll = 0.0
        self.wake = threading.Event()
        self.invalid: list[str] = []
        # The run reading this inbox (RunLock's id); run-scoped commands sent to another run are stale.
        self.run_id: str | None = None
        self.stale: list[Command] = []

    def submit(self, command: str, args: dict[str, Any] | None = None, source: str = "console") -> Command:
        cmd = Command(command=command, args=args or {}, source=source)  # type: ignore[arg-type]
        self._queue.put(cmd)
        self.wake.set()
        return cmd

    def poll(self, force: bool = True) -> list[Command]:
        """Commands submitted in-process (always) and from the inbox (rate-limited unless ``force``)."""
        out: list[Command] = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                break
        now = time.monotonic()
        if force or now - self._last_poll >= POLL_INTERVAL:
            self._last_poll = now
            out += self._drain_inbox()
        return out

    def _drain_inbox(self) -> list[Command]:
        if self.inbox is None or not self.inbox.is_dir():
            return []
        out = []
        try:
            entries = sorted(os.scandir(self.inbox), key=lambda e: e.name)
        except OSError:
            return []
        for entry in entries[:MAX_INBOX]:
            if not entry.name.endswith(".json") or entry.name.startswith("."):
                continue
            path = Path(entry.path)
            try:
                # Read without blocking and within a size: a named pipe or a huge file there is not a command.
                data = read_state_file(path, max_bytes=64 * 1024)
                if data is None:
                    continue
                cmd = Command.model_validate_json(data)
            except (StateFileError, ValidationError, ValueError, RecursionError) as exc:
                # Kept for the operator to look at, never applied.
                with contextlib.suppress(OSError):
                    path.replace(path.with_suffix(".rejected"))
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                self.invalid.append(f"{path.name}: {first[:200]}")
                continue
            with contextlib.suppress(OSError):
                path.unlink()
            if cmd.run is not None and cmd.run != self.run_id:
                # Sent to a run that ended before reading it (a stop during a stall): not for this run.
                self.stale.append(cmd)
                continue
            out.append(cmd)
        return out

    def wait(self, seconds: float) -> None:
        """Sleep until a command arrives in-process or ``seconds`` pass (the inbox is polled by the caller)."""
        self.wake.wait(seconds)
        self.wake.clear()


ACQUIRE_PATIENCE = 0.5  # seconds a run waits for a probe's shared lock to go (see RunLock.acquire)


class RunLock:
    """``JOB/.console/run.lock``: an advisory ``flock`` held for the whole run.

    It stops two processes from running one job at once (the kernel makes the
    check-and-take atomic, and drops the lock when the holder dies, kill -9
    included), and tells the command line whether a command will be picked up
    soon or waits for the next run.
    """

    def __init__(self, paths: JobPaths) -> None:
        self.path = paths.state / "run.lock"
        self._fd: int | None = None
        self.run_id: str | None = None  # this process's run, once acquired

    def run_id_of_holder(self) -> str | None:
        """The id of the run that holds the lock now (None: no run, or one too old to have an id)."""
        if self._fd is not None:
            return self.run_id
        info = self._holder_info()
        run = info.get("run") if isinstance(info, dict) else None
        return run if isinstance(run, str) and run else None

    def holder(self) -> int | None:
        """The pid of the process running the job, or None."""
        if self._fd is not None:
            return os.getpid()
        info = self._holder_info()
        if info is None:
            return None
        try:
            return int(info.get("pid", 0)) or -1 if isinstance(info, dict) else -1
        except (TypeError, ValueError):
            return -1

    def _holder_info(self) -> dict[str, Any] | None:
        """What the holder wrote in the lock ({} if unreadable), or None when nobody holds it."""
        try:
            # Non-blocking: a named pipe where the lock should be must not hang `jobs` or `stop`.
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None  # not a lock any run of ours could hold; the next run moves it aside
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                try:
                    data = json.loads(os.pread(fd, 512, 0) or b"{}")
                    return data if isinstance(data, dict) else {}
                except (ValueError, TypeError, OSError, RecursionError):
                    return {}
            except OSError:
                return None
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        # Another process asking who runs the job (`jobs`, an attached console, the fleet view) holds a shared
        # lock for a few microseconds: a run starting at that instant must not be refused as busy. A real
        # holder keeps the lock for the whole run, so trying for a moment more only delays the refusal.
        deadline = time.monotonic() + ACQUIRE_PATIENCE
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(0.005)
        os.ftruncate(fd, 0)
        self.run_id = uuid.uuid4().hex[:12]
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "since": datetime.now(UTC).isoformat(),
                                  "run": self.run_id}).encode(), 0)
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the flock
            self._fd = None
