"""Injectable time.

The engine never calls ``datetime.now()`` or ``time.monotonic()`` directly, so
tests can run a whole job on a frozen or stepping clock and get identical
events, archives and summaries every time.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class FakeClock:
    """A clock that only moves when told to (or by ``step`` on every read)."""

    def __init__(self, start: datetime | None = None, step: float = 0.0) -> None:
        self._now = start or datetime(2026, 1, 15, 14, 0, 0, tzinfo=UTC)
        self._mono = 0.0
        self._step = step

    def now(self) -> datetime:
        current = self._now
        if self._step:
            self.advance(self._step)
        return current

    def monotonic(self) -> float:
        return self._mono

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._mono += seconds
