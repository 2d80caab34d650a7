"""Reading events.jsonl: whole, from an offset, its last sequence number, and its damaged lines."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from console.engine.events.base import EventBase
from console.engine.events.registry import parse_event
from console.engine.log_file import last_seq as last_seq
from console.engine.log_file import open_log as _open_log
from console.engine.log_file import seq_of as seq_of


def read_events(path: Path) -> Iterator[EventBase]:
    """Yield events from a log, tolerating a torn last line and unknown types.

    A crash can leave half a line at the end; newer versions may add types an
    older reader does not know. Neither must stop an operator from reading the log.
    """
    fh = _open_log(path)
    if fh is None:
        return
    with fh:
        for raw in fh:
            raw = raw.strip()
            if not raw:
                continue
            try:
                yield parse_event(raw.decode("utf-8", "replace"))
            except (ValidationError, ValueError, RecursionError):
                continue


def read_new(path: Path, offset: int, limit: int = -1) -> tuple[list[EventBase], int]:
    """Events appended since byte ``offset``, and the offset to continue from.

    Only whole lines are consumed, so a line being written right now is read
    on the next call, not parsed half-way. ``limit``: read about that many bytes at
    most (a huge log is then caught up over several calls; a longer line is read whole).
    """
    fh = _open_log(path)
    if fh is None:
        return [], offset
    with fh:
        fh.seek(offset)
        data = fh.read(limit)
        if 0 < limit <= len(data) and not data.endswith(b"\n"):
            data += fh.readline()  # finish the line the limit cut
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset
    out: list[EventBase] = []
    for raw in data[: end + 1].splitlines():
        if raw.strip():
            try:
                out.append(parse_event(raw.decode("utf-8", "replace")))
            except (ValidationError, ValueError, RecursionError):
                continue
    return out, offset + end + 1


def damaged_lines(path: Path) -> int:
    """How many lines of events.jsonl are not events (damage from outside: ours are whole lines).

    A last line without its newline is a kill's torn write, not damage (the stream cuts it).
    """
    bad = 0
    try:
        with path.open("rb") as fh:
            for raw in fh:
                if raw.strip() and raw.endswith(b"\n") and seq_of(raw) is None:
                    bad += 1
    except OSError:
        return 0
    return bad


def copy_events(src: Path, dest: Path) -> int:
    """Write the lines of ``src`` that are events to ``dest`` (atomically); returns how many were left out."""
    bad = 0
    tmp = dest.with_name(f".{dest.name}.check.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)  # private, like the log
    with src.open("rb") as fh, os.fdopen(fd, "wb") as out:
        for raw in fh:
            if not raw.strip():
                continue
            if raw.endswith(b"\n") and seq_of(raw) is not None:
                out.write(raw)
            else:
                bad += 1
    os.replace(tmp, dest)
    return bad
