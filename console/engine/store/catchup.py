"""A run whose shared store was away when it ended: the marker it leaves, and the catch-up that heals the store.

At its end a runner's link waits for the store a bounded time (:data:`~console.engine.store.link.EXIT_WAIT`);
if the store is still away it leaves ``.console/store-behind.json`` in the run's folder (atomically): the store,
the run's key, its lease's owner and the runs-table updates the store never got (by name and values:
:data:`~console.engine.store.postgres.UPDATES`). A pointer to the folder goes into this machine's data dir
(``store-behind/<key>.json``) so that catching up costs one look at one folder when nothing waits.

Whatever next opens the store on this machine (``run``, ``jobs``, the fleet's poll, ``logs``, ``store sync``)
catches each such run up: ships the log's events the store lacks (by seq: idempotent), applies the updates in
order, drops the old lease, then removes the marker and the pointer. Each of those steps may be done again after
a kill -9 and ends the same; ``.console/store-sync.lock`` (flock) keeps two processes from doing it at once, and a
run whose lock a runner holds is left to that runner's link (which applies the marker's updates first).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from console.engine import failpoints
from console.engine.job_files import JobPaths
from console.engine.store.base import FINISHED, StoreError, folder_gone
from console.engine.store.marker import POINTERS, Pointer, SyncLock, clear_marker, read_marker, sealed_elsewhere

BUDGET = 10.0  # seconds a catch-up spends at most (the runs left wait for the next one)


@dataclass
class Outcome:
    path: str
    done: bool
    why: str


def catch_up_machine(store: Any, data_dir: Path, *, budget: float = BUDGET) -> list[Outcome]:
    """Catch up every run of this machine that left a pointer for ``store`` (a PgStore); what became of each.
    One ``listdir`` when none waits."""
    folder = data_dir / POINTERS
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except OSError:
        return []
    deadline = time.monotonic() + budget
    out = []
    for name in names:
        if time.monotonic() >= deadline:
            break
        try:
            pointer = Pointer.model_validate_json((folder / name).read_bytes()[: 1 << 16])
        except (OSError, ValidationError, ValueError):
            with contextlib.suppress(OSError):
                os.unlink(folder / name)  # not ours to read: the folder's marker stays the truth (store sync)
            continue
        if pointer.store != store.shown:
            continue  # a run of another store this data dir was pointed at: healed when that one is opened
        out.append(catch_up_run(store, JobPaths(Path(pointer.path)), data_dir, deadline=deadline,
                                key=pointer.key))
    return out


def catch_up_run(store: Any, paths: JobPaths, data_dir: Path | None, *, deadline: float,
                 key: str | None = None) -> Outcome:
    """Heal the store's copy of one run of this machine from its folder (see the module)."""
    where = str(paths.root)
    if folder_gone(paths.root) or folder_gone(paths.state):
        if key is not None:
            _folder_gone(store, key)
            clear_marker(paths, key, data_dir)
        return Outcome(where, True, "its folder is gone: the store says so")
    seal = store.seal
    earlier = seal is not None and seal.earlier(paths.root)  # a run of this operator from before seals
    first = read_marker(paths, seal, earlier=earlier)
    if first is not None and first.host != store.host:  # looked at before any lock: the other machine's to take
        return Outcome(where, False, f"a run of {first.host}: only that machine catches it up")
    if sealed_elsewhere(paths, seal, earlier=earlier):  # another operator's key sealed it: theirs, never ours to apply
        return Outcome(where, False, "its marker is not this operator's (another data dir sealed it, or it came "
                                     "with the folder): only that machine catches it up")
    lock = SyncLock(paths)
    if not lock.take(wait=False):
        return Outcome(where, False, "another process is catching it up")
    try:
        from console.engine.run_lock import RunLock

        if RunLock(paths).holder() is not None:
            return Outcome(where, False, "a runner runs it: its link catches the store up")
        behind = read_marker(paths, seal, earlier=earlier)
        if behind is None and sealed_elsewhere(paths, seal, earlier=earlier):
            return Outcome(where, False, "its marker is not this operator's: only that machine catches it up")
        if behind is None:
            if key is not None:
                clear_marker(paths, key, data_dir)  # caught up by its next run, or a marker that does not read
            return Outcome(where, True, "nothing to catch up")
        if behind.host != store.host:
            return Outcome(where, False, f"a run of {behind.host}: only that machine catches it up")
        if behind.store != store.shown or behind.key != store.key(paths.root):
            return Outcome(where, False, "its marker is for another store")
        ship_log(store, paths, deadline)
        for update in behind.updates:
            store.apply(update.op, update.params)
            failpoints.hit("store-catchup")
        store.drop_lease(behind.key, behind.owner)
        failpoints.hit("store-catchup")
        clear_marker(paths, behind.key, data_dir)
        return Outcome(where, True, f"caught up ({len(behind.updates)} update(s))")
    except StoreError as exc:
        return Outcome(where, False, str(exc))
    finally:
        lock.release()


def ship_log(store: Any, paths: JobPaths, deadline: float) -> None:
    """Every line of the folder's log the store lacks (by seq and digest: what it has is not sent again)."""
    from console.engine.store.shipper import LogShipper  # only when a marker waits: `jobs` stays light

    shipper = LogShipper(store, paths, now=lambda: datetime.now(UTC))
    while shipper._ship():
        failpoints.hit("store-catchup")
        if time.monotonic() >= deadline:
            raise StoreError("the catch-up ran out of time: the rest is shipped by the next one")


def healer(store: Any, data_dir: Path) -> Any:
    """What a store calls to catch this machine's runs up (PgStore.heal): bound to its data dir."""
    return lambda: catch_up_machine(store, data_dir)


def _folder_gone(store: Any, key: str) -> None:
    """A run whose folder was deleted before its store caught up: its row says so (unless its end is known)."""
    store.execute("UPDATE runs SET status='interrupted', detail=%s, lease_owner=NULL, lease_expires=NULL "
                  "WHERE key=%s AND host=%s AND status <> ALL(%s) AND (lease_expires IS NULL OR "
                  "lease_expires < now() OR starts_with(lease_owner, %s))",
                  ("its folder was deleted before the store caught up: the events after the store's last are lost",
                   key, store.host, list(FINISHED), f"{store.host}:"))
