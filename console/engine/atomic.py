"""Crash-safe file writes for the harness's own files (``JOB/.console/``).

A reader, or a run resumed after kill -9, sees either the old file or the new
one, never a torn one. Temp files are created in a folder of their own
(``.console/tmp/`` when the caller gives it) so a kill between the write and the
rename leaves nothing where anyone lists files, and :func:`clean_temp` sweeps
what a kill left behind at the next start. Files written by the agent's tools
go through :mod:`console.engine.sandbox`, which follows the same rules.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

from console.engine import failpoints

TMP_SUFFIX = ".tmp"


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True, tmp_dir: Path | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    where = tmp_dir if tmp_dir is not None else path.parent
    where.mkdir(parents=True, exist_ok=True)
    tmp = where / f".{path.name}.{secrets.token_hex(4)}{TMP_SUFFIX}"
    failpoints.hit(f"write {path.name}")
    # 0o666 less the umask: the usual 0644, where mkstemp would give 0600.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        failpoints.hit(f"rename {path.name}")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str, *, durable: bool = True, tmp_dir: Path | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8", "replace"), durable=durable, tmp_dir=tmp_dir)


def atomic_write_json(path: Path, data: Any, *, durable: bool = True, tmp_dir: Path | None = None) -> None:
    atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=1), durable=durable, tmp_dir=tmp_dir)


def fsync_dir(directory: Path) -> None:
    # The rename itself is only durable once the directory entry is flushed.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def clean_temp(*folders: Path) -> int:
    """Delete temp files a killed process left behind in these folders; returns how many."""
    n = 0
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            if e.name.startswith(".") and e.name.endswith(TMP_SUFFIX) and e.is_file(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.unlink(e.path)
                    n += 1
    return n
