"""This machine's runs read from their own folders, for when the shared store is away (`jobs`, `logs ID`).

The store is an index of the run folders, which stay the source of truth: with the server down, the runs this
machine made (its data dir's ``runs/``) are still listed and followed from each folder's sealed launch record and
``events.jsonl``. Runs of other machines, and ``--in-place`` runs of folders outside the data dir, are the store's
to list: they are named by their folder meanwhile.
"""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from console.engine.store import JobRow

STORE_AWAY = "store away"  # how `jobs` and `logs` mark what they read from the folders instead


def local_rows(runs_dir: Path, seal: Any) -> list[JobRow]:
    """A row for each run folder under ``runs_dir`` that this operator's harness ran (its sealed launch record),
    newest first. Its status from its log's tail: the end recorded after its last start, else running (the
    views' liveness makes that interrupted when no process holds the run's lock)."""
    from console.engine.job import JobPaths
    from console.engine.launch import LaunchError, read_launch
    from console.engine.run_end import ended_status
    from console.runner import last_end

    try:
        names = sorted(os.listdir(runs_dir))
    except OSError:
        return []
    rows = []
    for name in names:
        paths = JobPaths(runs_dir / name)
        if seal is None or not paths.events.is_file():
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
