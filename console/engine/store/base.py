"""What every jobs store is: one row per run (:class:`JobRow`), the words of its status, and the :class:`Store`
protocol the engine and the views use, whichever store it is (the embedded SQLite file, or a PostgreSQL server
shared by several machines: :mod:`console.engine.store.postgres`).

The run's folder stays the source of truth (its journal, ``events.jsonl`` and inbox keep their crash-safety
proofs); a store is an index of it that views read, on this machine or on another.
"""

from __future__ import annotations

import builtins  # the protocol's own `list` method shadows the type in its annotations
import math
import os
import socket
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol, TypeGuard, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from console.engine.cost import MAX_COST_USD

COLUMNS = ("path", "name", "status", "provider", "model", "started_at", "updated_at", "completed_at", "confidence",
           "summary", "detail", "cost_usd", "needs_since")
# The status of a run that waits for its operator (console.engine.needs): every view lists it first.
NEEDS_YOU = "needs you"
# The statuses of a run that has ended. Any other (running, awaiting approval, paused, needs you, a status a newer
# version adds) is a run that lives or waits for its operator: the fleet lists each of those whatever its age.
# ("gave up" is not among them: the agent gave up and the operator is asked, as for any need.)
FINISHED = ("completed", "failed", "stopped", "incomplete", "out of budget", "agent stopped", "interrupted")
GAVE_UP = "gave up"


@dataclass(frozen=True)
class JobRow:
    path: str
    name: str
    status: str
    provider: str
    model: str
    started_at: str
    updated_at: str
    completed_at: str | None
    confidence: float | None
    summary: str | None
    detail: str | None
    # US dollars the whole job cost so far; None when unknown (no price for its model, or an older run).
    cost_usd: float | None = None
    # When the run started needing its operator (ISO time; status "needs you"), else None.
    needs_since: str | None = None
    # The machine whose folder it is ("" in the embedded store: this one). A shared store's rows name theirs.
    host: str = ""
    # A shared store: whether a runner's lease on it is current now (None: no lease is kept, the embedded store).
    leased: bool | None = None
    # A shared store's key of the run (its folder's store id; "" in the embedded store).
    key: str = ""

    def __post_init__(self) -> None:
        # A shared store's row is anyone's: a number that is none (NaN, infinity, text in SQLite's REAL column)
        # reads as unknown, never as "$inf" in `jobs` or as NaN, which is no JSON, in `jobs --json`; and so does
        # one out of its range: a cost below zero or above MAX_COST_USD, a confidence outside 0..1 (-1e308 was
        # printed as 309 digits by serve's page, and cut to "$-10000" by the fleet's column).
        for name, top in (("confidence", 1.0), ("cost_usd", MAX_COST_USD)):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int | float) and not isinstance(value, bool)
                                          and math.isfinite(value) and 0 <= value <= top):
                object.__setattr__(self, name, None)

    @property
    def remote(self) -> bool:
        """True for a run of another machine (its folder, lock and log are there, not here)."""
        return bool(self.host) and self.host != this_host()


def this_host() -> str:
    """The name a shared store knows this machine by (AGENT_CONSOLE_HOST overrides the system's host name: two
    containers of one pod, or a test's two "machines")."""
    return os.environ.get("AGENT_CONSOLE_HOST") or socket.gethostname()


@runtime_checkable
class Store(Protocol):
    """The jobs store: an index of runs for the operator, never the run's state. The engine's updates never raise:
    a problem is in :attr:`error` (the supervisor turns it into one event); the views' reads raise
    :class:`StoreError` (or the embedded store's sqlite3.Error / OSError)."""

    error: str | None
    not_private: list[str]
    # True for a store that other machines read too (runs ship their events and take commands through it).
    shared: bool

    def started(self, path: Path, name: str, provider: str, model: str, now: datetime) -> None: ...
    def completed(self, path: Path, now: datetime, confidence: float, summary: str) -> None: ...
    def ended(self, path: Path, status: str, now: datetime, detail: str = "") -> None: ...
    def needs(self, path: Path, reason: str, message: str, now: datetime, since: datetime | None = None) -> None: ...
    def answered(self, path: Path, now: datetime) -> None: ...
    def paused(self, path: Path, now: datetime) -> None: ...
    def gave_up(self, path: Path, now: datetime, confidence: float, detail: str) -> None: ...
    def unpaused(self, path: Path, now: datetime) -> None: ...
    def acknowledged(self, path: Path, now: datetime) -> None: ...
    def cost(self, path: Path, usd: float | None) -> None: ...
    def list(self, limit: int = 50) -> builtins.list[JobRow]: ...
    def list_live_and_recent(self, recent: int) -> tuple[builtins.list[JobRow], int]: ...
    def get(self, path: Path) -> JobRow | None: ...
    def forget(self, paths: builtins.list[str | Path]) -> int: ...
    def close(self) -> None: ...


class SharedStore(Store, Protocol):
    """What a store shared across machines offers the views besides a :class:`Store`'s rows (the PostgreSQL store:
    :class:`console.engine.store.postgres.PgStore`): the runs' events it carries, the commands it queues for their
    runners, and its leases. :func:`is_shared` says whether a store is one."""

    # This machine's name in the store (console.engine.store.base.this_host, when it was opened).
    host: str

    def by_key(self, key: str) -> JobRow | None: ...
    def last_seqs(self, keys: builtins.list[str]) -> dict[str, int]: ...
    def event_texts_after(self, key: str, seq: int, limit: int = 2000
                          ) -> builtins.list[tuple[int, str | None]]: ...
    def event_lines_after(self, key: str, seq: int, limit: int = 2000
                          ) -> builtins.list[tuple[int, str | None]]: ...
    def events_of_many(self, after: dict[str, int], limit: int = 20000
                       ) -> builtins.list[tuple[str, int, str | None]]: ...
    def last_of_types(self, key: str, before: int, types: Sequence[str]
                      ) -> builtins.list[tuple[int, str | None]]: ...
    def runner_of(self, key: str) -> tuple[str | None, int]: ...
    def send_command(self, key: str, body: dict[str, Any]) -> str: ...
    def withdraw(self, command_id: str) -> Literal["withdrawn", "delivered", "held"]: ...
    def listener(self, *channels: str) -> Any: ...


def is_shared(store: Store) -> TypeGuard[SharedStore]:
    """Whether ``store`` is shared across machines (its declared :attr:`Store.shared`): then it is a
    :class:`SharedStore`."""
    return store.shared


class StoreError(Exception):
    """A shared store that cannot be reached or used now: one line, never the URL's password."""


def shown_store_url(url: str | None) -> str:
    """The URL as logs, events, errors and launch records may show it: the password (and any query string, where
    libpq takes ``password=`` too) left out. ``embedded`` for the default."""
    if not url:
        return "embedded"
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "postgresql://(a URL that does not parse)"
    user = f"{parts.username}@" if parts.username else ""
    if ":" in host:
        host = f"[{host}]"
    return urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, "", ""))


def folder_gone(path: str | Path) -> bool:
    """True if a run's folder no longer exists (deleted or moved): nothing there, or not a folder. A folder that
    cannot be looked at (no permission, an I/O error) is not gone. (A folder on a disk not mounted now reads as
    gone: whoever forgets runs names each one.)"""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except (OSError, ValueError):
        return False
    return not stat.S_ISDIR(st.st_mode)
