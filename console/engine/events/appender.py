"""The event log's appends on a thread of their own: a run's steps go on while their events reach events.jsonl."""

from __future__ import annotations

import os
import threading

from console.engine.background import background_priority


class LogAppender:
    """Appends bytes to one file, in the order given, on a thread of its own.

    A system call that appends to the log costs the loop 10-30 µs, and more when it wakes from its model call on
    cold caches, two or three times a turn (benchmarks/overhead.py: a turn's p50 1.10 → 0.97 ms without them).
    What a step's commit carries is in the journal before it is put here, so a kill before it is appended loses
    nothing: a resume appends what the journal has and the log lacks. A report (a turn starting) is in no journal:
    a kill in the microseconds before its append loses it, as a kill just before its emit would. A failed write is
    raised by the next :meth:`put` or :meth:`flush`, on the caller's thread, as the write itself would have been.
    """

    IDLE_SECONDS = 1.0  # the thread ends after this long with nothing to append (the next put starts another)

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._cond = threading.Condition()
        self._chunks: list[bytes] = []
        self._busy = False  # the thread is appending what it took
        self._thread: threading.Thread | None = None
        self._error: OSError | None = None

    def put(self, data: bytes) -> None:
        with self._cond:
            self._raise()
            self._chunks.append(data)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="event-log", daemon=True)
                self._thread.start()
            else:
                self._cond.notify()

    def flush(self) -> None:
        """Wait until everything put so far is appended (or has failed: raised here)."""
        with self._cond:
            while self._chunks or self._busy:
                self._cond.wait()
            self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _run(self) -> None:
        background_priority()
        while True:
            with self._cond:
                if not self._chunks:
                    self._cond.wait(self.IDLE_SECONDS)
                    if not self._chunks:
                        self._thread = None
                        return
                data = b"".join(self._chunks)
                self._chunks.clear()
                self._busy = True
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view):]
            except OSError as exc:
                with self._cond:
                    self._error = exc
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
