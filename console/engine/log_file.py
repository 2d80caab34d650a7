"""The run's log file as bytes: opened without blocking, and the offset past its last whole line.

Apart from :mod:`console.engine.events` (whose package imports every event model, some 0.4 s): an operator command
finds where its answer will start before it writes its inbox file, and must not make the run wait that long for it
(a quick run could end before the command is written)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import BinaryIO


def open_log(path: Path) -> BinaryIO | None:
    """The log opened for reading, or None; never blocks (a named pipe there is not a log)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def line_end(path: Path) -> int:
    """The offset just past the log's last whole line (0 without a log): where ``events.read_new`` starts to read
    only what is appended from now on (a command's answer), without reading the log before it (issue 37: a command
    was confirmed in 1.8 s past 100k events, reading them all)."""
    fh = open_log(path)
    if fh is None:
        return 0
    with fh:
        end = fh.seek(0, os.SEEK_END)
        while end > 0:  # back over the line being written now, if any (a line can be longer than one step)
            start = max(0, end - 65536)
            fh.seek(start)
            found = fh.read(end - start).rfind(b"\n")
            if found >= 0:
                return start + found + 1
            end = start
    return 0


def last_seq(path: Path) -> int:
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return 0
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 65536))
            tail = fh.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return 0
    for raw in reversed(tail):
        seq = seq_of(raw)
        if seq is not None:
            return seq
    return 0


def seq_of(raw: str | bytes) -> int | None:
    """The seq of a log line, or None if the line is not an event we could have written."""
    try:
        data = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    seq = data.get("seq") if isinstance(data, dict) else None
    return seq if type(seq) is int and 0 <= seq < 2**63 else None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON that jq reads")
