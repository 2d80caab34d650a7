"""``JOB/.console/run.lock``: who runs a job now. Kept apart from the control API (console.engine.control, which
re-exports it) so that `jobs`, `wait` and the fleet ask without loading the typed commands."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from console.engine.atomic import PRIVATE_FILE, private_dir
from console.engine.job_files import JobPaths
from console.engine.log_file import last_seq

ACQUIRE_PATIENCE = 0.5  # seconds a run waits for a probe's shared lock to go (see RunLock.acquire)


def _held(fd: int) -> bool:
    """Whether another open file holds the lock of ``fd`` (tested with a shared lock, dropped at once)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


class RunLock:
    """``JOB/.console/run.lock``: an advisory ``flock`` held for the whole run.

    It stops two processes from running one job at once (the kernel makes the
    check-and-take atomic, and drops the lock when the holder dies, kill -9
    included), and tells the command line whether a command will be picked up
    soon or waits for the next run.
    """

    def __init__(self, paths: JobPaths) -> None:
        self.path = paths.state / "run.lock"
        self._events = paths.events
        self._fd: int | None = None
        self.run_id: str | None = None  # this process's run, once acquired

    def run_id_of_holder(self) -> str | None:
        """The id of the run that holds the lock now (None: no run, or one too old to have an id)."""
        if self._fd is not None:
            return self.run_id
        info = self.holder_info()
        run = info.get("run") if isinstance(info, dict) else None
        return run if isinstance(run, str) and run else None

    def holder(self) -> int | None:
        """The pid of the process running the job, or None."""
        if self._fd is not None:
            return os.getpid()
        info = self.holder_info()
        if info is None:
            return None
        try:
            return int(info.get("pid", 0)) or -1 if isinstance(info, dict) else -1
        except (TypeError, ValueError):
            return -1

    def holder_info(self) -> dict[str, Any] | None:
        """What the holder wrote in the lock ({} if unreadable), or None when nobody holds it."""
        try:
            # Non-blocking: a named pipe where the lock should be must not hang `jobs` or `stop`; a link is
            # never a lock of ours.
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None  # not a lock any run of ours could hold; the next run moves it aside
            if st.st_uid not in (os.geteuid(), self._owner()):
                return None  # another user's file: what it says (or holds) is not a run of this job's user
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

    def _owner(self) -> int:
        """The uid owning the job's ``.console/`` (the run's user), or our own if it cannot be told."""
        try:
            return os.stat(self.path.parent, follow_symlinks=False).st_uid
        except OSError:
            return os.geteuid()

    def _open(self) -> int:
        """The lock file, opened for writing: a regular file of ours, 0600; anything else there is replaced.

        A link is never followed (a run would lock, and truncate, whatever it points at), a pipe or a device
        never opened; a file of another user is not ours to trust (they could hold it open and keep every run
        of the job out) unless a run of theirs holds it now; a lock 0644 would let anyone open it to hold it."""
        private_dir(self.path.parent, follow=False)
        flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        for _ in range(3):
            try:
                mode = os.lstat(self.path).st_mode
            except FileNotFoundError:
                with contextlib.suppress(FileExistsError):  # another run made it meanwhile: look again
                    return os.open(self.path, flags | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
                continue
            why = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
            if stat.S_ISREG(mode):
                try:
                    fd = os.open(self.path, flags)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    if exc.errno in (errno.EACCES, errno.EPERM):
                        raise OSError(exc.errno, f"{self.path} cannot be opened ({exc.strerror}): another user ran "
                                                 "this job; run it as that user, or move their files out of "
                                                 ".console/") from None
                    raise
                st = os.fstat(fd)
                if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                    if stat.S_IMODE(st.st_mode) & 0o077:
                        os.fchmod(fd, PRIVATE_FILE)
                    return fd
                if stat.S_ISREG(st.st_mode) and _held(fd):
                    return fd  # another user's run of this job (root's, say) holds it: busy, never a second run
                os.close(fd)
                why = f"owned by uid {st.st_uid}" if stat.S_ISREG(st.st_mode) else why
            # Replaced, never followed or trusted: the folder is ours, and so is the name in it.
            try:
                if stat.S_ISDIR(mode):
                    os.rmdir(self.path)
                else:
                    os.unlink(self.path)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise OSError(exc.errno, f"{self.path} is {why} and cannot be replaced by a lock of this user "
                                         f"({exc.strerror})") from None
        raise OSError(errno.EAGAIN, f"{self.path}: replaced again and again while a run tried to take it")

    def acquire(self) -> bool:
        fd = self._open()
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
        # "seq": the run's log's last event when this process took it: what is logged up to there was an earlier
        # process's (a need it left is not this one's: `wait` right after `resume`, console.cli.wait).
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "since": datetime.now(UTC).isoformat(),
                                  "run": self.run_id, "seq": last_seq(self._events)}).encode(), 0)
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the flock
            self._fd = None
