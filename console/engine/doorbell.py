"""The run's doorbell: a named pipe (``.console/doorbell``) that wakes the run's loop when a command comes.

Without it the loop looks at the inbox every :data:`~console.engine.model_call.TICK` (0.2 s) to act on a stop
within that, and each look wakes its thread: five times a second for every run, whether anyone sends a command or
not (issue 37: ~0.14 ms of CPU a wake on this machine, most of it the kernel's; a third of a headless runner's CPU
while its model streams). With it, :func:`~console.engine.control.write_inbox` rings after it writes a command, and
the loop, waiting on the pipe, wakes at once; it then looks at the inbox every second or few only for a writer that
cannot ring (an inbox filled by hand) and for what it watches on a clock (a deadline, a silent stream).

A FIFO because any process of the operator's can ring it with an open and a one-byte write, on Linux and macOS, and
nothing is kept (the pipe is removed when the run ends): a ring is a hint to look, never a command (the inbox stays
the one way in, read as untrusted input). The run holds a reader and a writer of its own: the writer keeps the
reader from seeing an end of file (a FIFO with no writer reads as readable for ever) and is how this process rings
itself (the worker of a model call at its end, a signal's stop, the console's commands). What is rung:
:data:`OPERATOR` by a command's sender (the inbox must be read now), :data:`WORK` by the run's own threads (what
they hand over is taken).

Fail open to the polling it replaces: a file system that makes no FIFO, or anything else at the path (a file, a
link, another user's pipe: never touched), leaves the run without a doorbell, looking every TICK as before. A
sender never waits and never fails for it: no reader (no run, or an older version's), a full pipe (rung already),
anything but a FIFO of the sender's own user at the path: nothing is written.
"""

from __future__ import annotations

import contextlib
import os
import select
import stat
import threading
import time
from pathlib import Path

NAME = "doorbell"  # in the run's .console/
# How often (seconds) a run with a doorbell looks at its inbox by itself while it waits (a model call nobody shows,
# a pause, a restart's approval): its senders ring, so this is only for a command written by hand and for what the
# waits watch on a clock (a deadline, a fleet budget raised). Without one, every TICK (0.2 s) as before.
LOOK = 1.0
# The same while a model call nobody shows streams, where only a deadline and a silent stream are watched on a clock
# (each acted on within a look): each look wakes the loop's thread (~0.5 ms of CPU on the shared 2-core VM, issue 37),
# and once a second they were three or four wake-ups of a fleet runner's turn of a few seconds.
CALL_LOOK = 5.0
OPERATOR = b"o"  # a command was written to the inbox: look at it now
WORK = b"w"  # the run's own threads handed something over
# Never blocks, never passed to a child, never through a link, never a terminal made the controlling one.
_OPEN = os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY | getattr(os, "O_NOFOLLOW", 0)


def _ours(fd: int) -> os.stat_result | None:
    """``fd``'s stat when it is a FIFO of this process's user, else None."""
    st = os.fstat(fd)
    return st if stat.S_ISFIFO(st.st_mode) and st.st_uid == os.geteuid() else None


class Doorbell:
    """The run's end of the pipe: :meth:`wait` until a ring or a timeout, :meth:`ring` from any thread (or a signal
    handler: one non-blocking write). Made by :meth:`open`; :meth:`close` when the run ends."""

    def __init__(self, path: Path, reader: int, writer: int) -> None:
        self.path = path
        st = os.fstat(reader)
        self._inode = (st.st_dev, st.st_ino)  # what close() removes, only if it is still at the path
        self._reader = reader
        self._writer: int | None = writer
        # poll, not select: a process with many files open (MCP servers, a command's pipes) may have numbers past
        # select's 1,024.
        self._poll = select.poll()
        self._poll.register(reader, select.POLLIN)
        # A ring and the close never overlap (a ring after it would write to whatever file took the number); a ring
        # that finds it taken rings no more: another ring's byte wakes the loop as well, or the run is closing.
        # Never waited for, so a signal's handler cannot deadlock on its own thread's hold.
        self._lock = threading.Lock()
        # Set by a wait that read an operator's ring, cleared by whoever reads the inbox (ControlChannel).
        self.operator_rang = False

    @classmethod
    def open(cls, path: Path) -> Doorbell | None:
        """The doorbell at ``path``, made if nothing is there; None when it cannot be one (see the module)."""
        try:
            os.mkfifo(path, 0o600)
        except FileExistsError:
            pass  # a kill's leftover (reused), or something else (then left alone, below)
        except OSError:
            return None  # no FIFO on this file system, or no folder
        reader = writer = -1
        try:
            reader = os.open(path, os.O_RDONLY | _OPEN)
            writer = os.open(path, os.O_WRONLY | _OPEN)
            mine, again = _ours(reader), os.fstat(writer)
            if mine is None or (mine.st_dev, mine.st_ino) != (again.st_dev, again.st_ino):
                raise OSError("not this run's doorbell")
        except OSError:
            for fd in (reader, writer):
                if fd >= 0:
                    os.close(fd)
            return None
        return cls(path, reader, writer)

    def ring(self, what: bytes = WORK) -> None:
        if not self._lock.acquire(blocking=False):
            return
        try:
            if self._writer is not None:
                with contextlib.suppress(OSError):  # full: rung already, one wake is enough
                    os.write(self._writer, what)
        finally:
            self._lock.release()

    def wait(self, timeout: float) -> None:
        """Until a ring (taken: every byte rung so far is read) or ``timeout`` seconds."""
        if self._writer is None:  # closed: the pipe's number may be another file's now
            time.sleep(max(0.0, timeout))
            return
        with contextlib.suppress(InterruptedError):  # a signal's handler rings when it matters
            if self._poll.poll(max(0, round(timeout * 1000))):
                self._take()

    def _take(self) -> None:
        while True:
            try:
                data = os.read(self._reader, 4096)
            except OSError:  # BlockingIOError among them: every byte rung so far is read
                return
            if not data:
                return
            if OPERATOR in data:
                self.operator_rang = True

    def close(self) -> None:
        with self._lock:
            writer, self._writer = self._writer, None
        if writer is None:
            return
        os.close(writer)
        os.close(self._reader)
        # Removed as the run ends (a kill's leftover is reused by the next run): a pipe left in .console/ would stop
        # whatever copies the folder afterwards (shutil.copytree refuses a named pipe).
        with contextlib.suppress(OSError):
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self._inode:
                os.unlink(self.path)


def ring(path: Path) -> None:
    """Ring the run's doorbell at ``path`` from a command's sender: never waits, never raises (see the module)."""
    try:
        fd = os.open(path, os.O_WRONLY | _OPEN)
    except OSError:
        return  # no run reading it (ENXIO), none ever made (ENOENT), a link (ELOOP): the run looks by itself
    try:
        if _ours(fd) is not None:
            os.write(fd, OPERATOR)
    except OSError:
        pass  # full: rung already
    finally:
        os.close(fd)
