"""A run's launch record as it lies on disk (``.console/launch.json``, console.engine.launch), and whether it is
believed: read without following a link, bounded, and opened with this operator's seal (console.engine.seal).

Apart from the record's model (console.engine.launch, pydantic) so that what only asks one thing of it (`jobs`: was
the run started --unconfined) reads it without building that model.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Literal

from console.engine.job_files import JobPaths
from console.engine.seal import FIELD, Seal

LAUNCH_NAME = "launch.json"
SEAL_KIND = "launch"  # what its MAC says it is (console.engine.seal)
MAX_LAUNCH_BYTES = 1 << 20


class LaunchError(ValueError):
    """The record cannot be used (unreadable, not JSON, not a launch record): one line."""


def launch_path(paths: JobPaths) -> Path:
    return paths.state / LAUNCH_NAME


class UnreadableRecord(LaunchError):
    """The file is no launch record at all (not a regular file, too big, not a JSON object): whose it is, nobody
    can say."""


class ForeignRecord(LaunchError):
    """The record is not this operator's: no seal of theirs for this folder (console.engine.seal). ``why``: which."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: not a record of this operator's agent-console ({why})")
        self.why = why


Whose = Literal["sealed", "earlier"]


def _load(paths: JobPaths) -> dict[str, Any] | None:
    """The record's JSON object as it is on disk; None if there is none; LaunchError if it does not read as one."""
    path = launch_path(paths)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnreadableRecord(f"{path}: cannot be read ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnreadableRecord(f"{path}: not a regular file: not a launch record")
        data = fh.read(MAX_LAUNCH_BYTES + 1)
    if len(data) > MAX_LAUNCH_BYTES:
        raise UnreadableRecord(f"{path}: larger than {MAX_LAUNCH_BYTES} bytes: not a launch record")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise UnreadableRecord(f"{path}: not a launch record ({_first(exc)})") from None
    if not isinstance(doc, dict):
        raise UnreadableRecord(f"{path}: not a launch record (not a JSON object)")
    return doc


def _first(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__



def open_record(paths: JobPaths, seal: Seal) -> tuple[dict[str, Any], Whose] | None:
    """The run's record as a JSON object and why it is believed: sealed by this operator for this folder, or a
    record without a seal in a folder of one of this operator's runs made before seals existed ("earlier": see
    console.engine.seal). None if the folder has none. :class:`ForeignRecord` if it is not this operator's;
    :class:`UnreadableRecord` if it is no record at all. Its fields are not checked here (Launch checks them)."""
    doc = _load(paths)
    if doc is None:
        return None
    if seal.opens(SEAL_KIND, paths.root, doc):
        return doc, "sealed"
    if FIELD not in doc and seal.earlier(paths.root):
        return doc, "earlier"
    raise ForeignRecord(launch_path(paths), "its launch record is sealed by another operator, or for another "
                        "folder: if you moved this run here, move it back" if FIELD in doc else
                        "its launch record has no seal")


def ran_unconfined(paths: JobPaths, seal: Seal) -> bool | None:
    """Whether the run's own record (this operator's: :func:`open_record`) says it was started with --unconfined.
    False when it has none, or one not believed or unreadable. Only that field is read where it is a JSON boolean
    (or absent), as this operator's harness writes it from its checked model (a record the model would refuse says
    it all the same: its run never resumes, unconfined or not). None for a field of another kind: only the model
    (console.engine.launch, as a resume reads it: ``"true"`` or ``1`` is true) can say, and a run `jobs` shows
    confined must never resume unconfined."""
    try:
        opened = open_record(paths, seal)
    except LaunchError:
        return False
    if opened is None:
        return False
    value = opened[0].get("unconfined", False)
    return value if isinstance(value, bool) else None
