"""This machine's runs read from their own folders, for when the shared store is away (`jobs`, `logs ID`).

The store is an index of the run folders, which stay the source of truth: with the server down, the runs this
machine made (its data dir's ``runs/``) are still listed and followed from each folder's sealed launch record and
``events.jsonl``; this machine's ``--in-place`` runs of folders outside the data dir are found by the index their
starts leave under the data dir (``in_place/``: one small file per folder, naming it). Runs of other machines are
the store's to list. A command given a run by its id finds it the same way (:func:`find_run`), and says so.
"""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from console.engine.store import JobRow

STORE_AWAY = "store away"  # how `jobs` and `logs` mark what they read from the folders instead
IN_PLACE = "in_place"  # under the data dir: the index of this machine's runs in folders outside runs/


def remember_in_place(runs_dir: Path, root: Path) -> None:
    """Index ``root``, a run in place outside ``runs_dir``, under the data dir: with the store away, `jobs` lists it
    and a command finds it by its id. One file per folder (named by a hash of its path, so a start again rewrites
    it), written atomically; never the folder's content (its sealed launch record says whose run it is)."""
    import hashlib
    import secrets

    from console.engine.atomic import private_dir

    root = root.absolute()
    if runs_dir.absolute() in root.parents:
        return  # listed from runs/ already
    index = runs_dir.parent / IN_PLACE
    name = hashlib.sha256(os.fsencode(str(root))).hexdigest()[:32]
    tmp = index / f".{name}.{secrets.token_hex(4)}.tmp"
    # Written and renamed here, not by console.engine.atomic: an index entry is no step of a run (the engine's writes
    # are its kill points, console.engine.failpoints); one that is torn or missing only leaves the run to the store.
    try:
        index.mkdir(mode=0o700, parents=True, exist_ok=True)
        private_dir(index)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(str(root))
        os.replace(tmp, index / name)
    except OSError:  # an index that cannot be written: the store still lists the run
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _in_place(runs_dir: Path) -> list[Path]:
    """The folders the in-place index names (those that still exist)."""
    index = runs_dir.parent / IN_PLACE
    out = []
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(index)):
            if name.startswith("."):
                continue  # an entry being written
            with contextlib.suppress(OSError, UnicodeDecodeError):
                folder = Path((index / name).read_text(encoding="utf-8").strip())
                if folder.is_absolute() and folder.is_dir():
                    out.append(folder)
    return out


def local_rows(runs_dir: Path, seal: Any) -> list[JobRow]:
    """A row for each run folder under ``runs_dir`` (and in the in-place index beside it) that this operator's
    harness ran (its sealed launch record), newest first. Its status from its log's tail: the end recorded after its
    last start, else running (the views' liveness makes that interrupted when no process holds the run's lock)."""
    from console.engine.job_files import JobPaths
    from console.engine.launch import LaunchError, read_launch
    from console.engine.run_end import ended_status
    from console.runner import last_end

    try:
        folders = [runs_dir / name for name in sorted(os.listdir(runs_dir))]
    except OSError:
        folders = []
    rows = []
    for folder in [*folders, *_in_place(runs_dir)]:
        paths = JobPaths(folder)
        if seal is None:
            continue
        try:
            launch = read_launch(paths, seal)
        except (LaunchError, OSError, ValueError):
            continue  # not this operator's run (or a record that does not read): not listed as one
        if launch is None:
            continue
        end, completed = last_end(paths)
        status = "running" if end is None else ("completed" if completed and end.outcome in (None, "completed")
                                               else ended_status(end))
        updated = _mtime(paths.events)
        started = launch.started_at.isoformat(timespec="seconds") if launch.started_at else updated
        rows.append(JobRow(path=str(paths.root), name=paths.root.name, status=status, provider=launch.provider,
                           model=launch.model, started_at=started, updated_at=updated, completed_at=None,
                           confidence=None, summary=None, detail=None))
    rows.sort(key=lambda r: (r.started_at, r.path), reverse=True)
    return rows


def _mtime(path: Path) -> str:
    with contextlib.suppress(OSError):
        return datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec="seconds")
    return ""


def own_rows(settings: Any) -> list[Any]:
    """This machine's runs read from their folders, for when the store is away (none when the operator's seal
    cannot be read: a run's record is believed only with it)."""
    from console.engine.seal import Seal, SealError

    try:
        return local_rows(settings.runs_dir, Seal.of(settings.data_dir))
    except SealError:
        return []
