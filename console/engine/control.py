"""Operator commands: one control API, in-process or through the job's inbox on disk.

The console calls :meth:`ControlChannel.submit`; another shell (``agent-console
approve JOB``) drops a JSON file into ``JOB/.console/inbox/``. The engine
drains both at turn boundaries (and while paused or waiting for an approval),
so every command is applied at a point where the conversation is whole, and
every command yields ``operator_command`` events (received, then applied or
rejected), which is how the sender learns what happened.
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from console.engine.atomic import atomic_write_text
from console.engine.job import JobPaths

CommandName = Literal["checkpoint", "rewind", "approve_restart", "deny_restart", "pause", "resume", "stop"]
COMMANDS: tuple[str, ...] = ("checkpoint", "rewind", "approve_restart", "deny_restart", "pause", "resume", "stop")
# How often the engine looks at the inbox while a model is streaming.
POLL_INTERVAL = 0.2


class Command(BaseModel):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    command: CommandName
    args: dict[str, Any] = Field(default_factory=dict)
    source: str = "api"
    issued_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


def write_inbox(paths: JobPaths, command: str, args: dict[str, Any] | None = None, source: str = "cli") -> Command:
    """Queue a command for a run from another process. Atomic: the engine never reads half a file."""
    cmd = Command(command=command, args=args or {}, source=source)  # type: ignore[arg-type]
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
        for entry in sorted(os.scandir(self.inbox), key=lambda e: e.name):
            if not entry.name.endswith(".json") or entry.name.startswith("."):
                continue
            path = Path(entry.path)
            try:
                cmd = Command.model_validate_json(path.read_text(encoding="utf-8"))
            except (OSError, ValidationError, ValueError) as exc:
                # Kept for the operator to look at, never applied.
                path.replace(path.with_suffix(".rejected"))
                self.invalid.append(f"{path.name}: {str(exc).splitlines()[0]}")
                continue
            path.unlink(missing_ok=True)
            out.append(cmd)
        return out

    def wait(self, seconds: float) -> None:
        """Sleep until a command arrives in-process or ``seconds`` pass (the inbox is polled by the caller)."""
        self.wake.wait(seconds)
        self.wake.clear()


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

    def holder(self) -> int | None:
        """The pid of the process running the job, or None."""
        if self._fd is not None:
            return os.getpid()
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                try:
                    return int(json.loads(os.pread(fd, 256, 0) or b"{}").get("pid", 0)) or -1
                except ValueError:
                    return -1
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "since": datetime.now(UTC).isoformat()}).encode(), 0)
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the flock
            self._fd = None
