"""The marker a run leaves in its folder when its shared store was away at its end (``.console/store-behind.json``),
this machine's pointer to it (``DATA/store-behind/<key>.json``), and ``.console/store-sync.lock``: who keeps the store
in step with the folder now. Read and written by the runner's link (console.engine.store.link) and by the catch-up
(console.engine.store.catchup)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from console.engine import failpoints
from console.engine.atomic import atomic_write_text
from console.engine.job_files import JobPaths
from console.engine.seal import FIELD, Seal, read_record

MARKER = "store-behind.json"  # in the run's .console/, sealed (console.engine.seal)
SEAL_KIND = "store-behind"
SYNC_LOCK = "store-sync.lock"  # in the run's .console/: who keeps the store in step with the folder now
POINTERS = "store-behind"  # in the data dir

Op = Literal["started", "completed", "ended", "needs", "answered", "gave_up", "paused", "unpaused", "cost",
             "acknowledged", "spent"]
# How many values each of the engine's updates takes (console.engine.store.postgres.UPDATES: a test holds them equal).
ARITY: dict[str, int] = {"started": 9, "completed": 5, "ended": 4, "needs": 4, "answered": 2, "gave_up": 5,
                         "paused": 2, "unpaused": 2, "cost": 2, "acknowledged": 2, "spent": 4}
Value = str | float | int | None


# Where the run's key is among each update's values (the row it changes): the first of "started" (its INSERT), the
# last of the others (their WHERE key=%s). A test reads it out of UPDATES' SQL.
KEY_AT: dict[str, int] = {op: (0 if op == "started" else ARITY[op] - 1) for op in ARITY}


class Update(BaseModel):
    model_config = ConfigDict(extra="forbid")
    op: Op
    params: list[Value]

    @model_validator(mode="after")
    def _arity(self) -> Update:
        if len(self.params) != ARITY[self.op]:
            raise ValueError(f"{self.op} takes {ARITY[self.op]} values, not {len(self.params)}")
        return self

    @property
    def run_key(self) -> Value:
        """The key of the run this update changes."""
        return self.params[KEY_AT[self.op]]


class Behind(BaseModel):
    """``.console/store-behind.json``: the store is behind this folder."""

    model_config = ConfigDict(extra="ignore")
    version: Literal[1] = 1
    store: str = Field(max_length=2000)  # the store's URL as it may be shown (no password)
    key: str = Field(pattern=r"^[0-9a-f]{32}$")
    host: str = Field(max_length=300)
    owner: str = Field(max_length=300)  # the lease the ended runner held
    since: str
    updates: list[Update] = Field(default_factory=list, max_length=100_000)

    @model_validator(mode="after")
    def _its_own_run(self) -> Behind:
        """A marker changes its own run's row only: an update naming another run makes the whole marker no marker
        (a forged or damaged one is not applied in part)."""
        for n, update in enumerate(self.updates, 1):
            if update.run_key != self.key:
                raise ValueError(f"update {n} ({update.op}) names another run than the marker's own")
        return self


class Pointer(BaseModel):
    """``DATA/store-behind/<key>.json``: where a folder with a marker is."""

    model_config = ConfigDict(extra="ignore")
    path: str = Field(max_length=4096)
    key: str = Field(pattern=r"^[0-9a-f]{32}$")
    store: str = Field(max_length=2000)


def marker_path(paths: JobPaths) -> Path:
    return paths.state / MARKER


def _load(paths: JobPaths) -> dict[str, Any] | None:
    data = read_record(marker_path(paths), 64 << 20)
    try:
        doc = json.loads(data) if data is not None else None
    except (ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def _ours(paths: JobPaths, doc: dict[str, Any], seal: Seal, earlier: bool) -> bool:
    return seal.opens(SEAL_KIND, paths.root, doc) or (earlier and FIELD not in doc)


def read_marker(paths: JobPaths, seal: Seal | None, *, earlier: bool = False) -> Behind | None:
    """The folder's marker, or None: none, one that does not read (said by the caller's catch-up as stale), or one
    this operator's harness did not write for this folder (its seal; ``earlier``: one without a seal is believed in
    a folder of a run of this operator from before seals, console.engine.seal). No seal (no data dir): none is."""
    doc = _load(paths)
    if doc is None or seal is None or not _ours(paths, doc, seal, earlier):
        return None
    try:
        return Behind.model_validate(doc)
    except (ValidationError, ValueError, RecursionError):
        return None


def sealed_elsewhere(paths: JobPaths, seal: Seal | None, *, earlier: bool = False) -> bool:
    """Whether the folder holds a marker that reads, but not as this operator's: another data dir's (a volume two
    machines mount), or one that came with the folder. Never applied here, and never removed either."""
    doc = _load(paths)
    return doc is not None and (seal is None or not _ours(paths, doc, seal, earlier))


def write_marker(paths: JobPaths, behind: Behind, data_dir: Path | None, seal: Seal) -> None:
    """The marker, sealed (atomically, its temp in .console/tmp), then this machine's pointer to it."""
    text = seal.sealed_json(SEAL_KIND, paths.root, json.loads(behind.model_dump_json()))
    atomic_write_text(marker_path(paths), text, tmp_dir=paths.state / "tmp")
    if data_dir is not None:
        folder = data_dir / POINTERS
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        pointer = Pointer(path=str(paths.root), key=behind.key, store=behind.store)
        atomic_write_text(folder / f"{behind.key}.json", pointer.model_dump_json(), tmp_dir=folder)


def reseal_marker(paths: JobPaths, seal: Seal) -> None:
    """Seal the marker of a run of this operator from before seals (console.engine.provenance.adopt); one that does
    not read, or whose updates name another run, is left as it is (never believed: its catch-up drops it)."""
    behind = read_marker(paths, seal, earlier=True)
    if behind is not None:
        text = seal.sealed_json(SEAL_KIND, paths.root, json.loads(behind.model_dump_json()))
        atomic_write_text(marker_path(paths), text, tmp_dir=paths.state / "tmp")


def clear_marker(paths: JobPaths, key: str, data_dir: Path | None) -> None:
    """The marker first, then the pointer: a kill between the two leaves a pointer that the next look drops."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(marker_path(paths))
    failpoints.hit("store-catchup")
    if data_dir is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(data_dir / POINTERS / f"{key}.json")


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class SyncLock:
    """``.console/store-sync.lock``: held by a runner's link for its life and by a catch-up while it works."""

    def __init__(self, paths: JobPaths) -> None:
        self.path = paths.state / SYNC_LOCK
        self._fd: int | None = None
        self.unavailable = False

    def take(self, wait: bool) -> bool:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
        except OSError:
            self.unavailable = True  # no lock can be had here (a folder not writable): never waited for
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
