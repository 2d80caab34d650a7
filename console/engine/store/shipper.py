"""Shipping a run's ``events.jsonl`` to a shared store: every line the store lacks, in batches, from the folder
that stays the source of truth. A runner's link (console.engine.store.link) ships as the run goes; a catch-up
(console.engine.store.catchup) ships what a run that ended while its store was away left behind.

The first pass reads the log from its start against the seqs the store holds (a server that crashed may have lost
what it acknowledged: every hole is filled), then only what comes after the last seq. A log moved aside and begun
again is a new generation of it in the store (schema 2), never dropped as duplicates.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from console.engine.job_files import JobPaths
from console.engine.store.postgres import BadLines, PgStore
from console.engine.store.schema import EPOCH_SHIFT

BATCH = 500


class LogShipper:
    def __init__(self, store: PgStore, paths: JobPaths, now: Callable[[], datetime]) -> None:
        self.store = store
        self.paths = paths
        self.now = now
        self.key = store.key(paths.root)
        self.offset = 0  # the byte of events.jsonl read up to
        self.shipped = 0  # the highest seq shipped (of the current generation)
        # While the log is read again from its start (the first pass, and after the store was away): the seqs the
        # store holds (with the generation and digest of each copy), so that every hole is filled.
        self.have: dict[int, list[tuple[int, int | None]]] | None = None
        self.epoch = 0  # the generation of the log the store is given (a log moved aside and begun again: +1)
        self.file_max = 0  # the highest seq read in the log while it is read again
        self.inode: int | None = None
        self.rescan = True
        self.seen_commands: set[str] = set()  # command ids in the log (operator_command events)

    def _rewind(self) -> None:
        """Read the log again from its start, shipping every event the store lacks."""
        self.offset, self.have, self.rescan = 0, None, True

    def _ship(self) -> bool:
        """Send one batch of the log's lines the store lacks; True if there may be more.

        A log moved aside and begun again (repair.py keeps its good lines; a log that was not a file starts from
        nothing) may give seqs the store holds for other lines: while the log is read again from its start, a seq
        the store holds in the current generation with another digest, or a store that holds seqs of it past the
        log's last, starts a new generation (:meth:`PgStore.new_epoch`): both are kept."""
        if self.rescan:
            # Its row first (a store that was away at the start missed it): the events belong to it.
            self.store.ensure_run(self.paths.root, self.paths.root.name, self.now())
            self.epoch, self.have = self.store.held(self.key)
            self.rescan, self.file_max = False, 0
        try:
            st = os.stat(self.paths.events)
        except OSError:
            return False
        size = st.st_size
        if size < self.offset or (self.inode is not None and st.st_ino != self.inode):
            self.inode = st.st_ino  # moved aside and begun again under the link: read whole, against the store
            self._rewind()
            return True
        self.inode = st.st_ino
        if size == self.offset:
            if self.have is not None:
                self._rescanned()
            return False
        with open(self.paths.events, "rb") as fh:
            fh.seek(self.offset)
            # What is there, never a 4 MB buffer asked for on every look (its allocation was most of the link's CPU).
            data = fh.read(min(size - self.offset, 4 << 20))
        end = data.rfind(b"\n")
        if end < 0:
            return False  # a line being written: its end comes with the next look
        batch: list[tuple[int, str | None, str, str]] = []
        raws: list[bytes] = []
        sums: list[int | None] = []
        used = 0
        for raw in data[: end + 1].splitlines(keepends=True):
            if len(batch) >= BATCH:
                break
            line = self._line(raw)
            digest = None
            if line is not None and self.have is not None:
                self.file_max = max(self.file_max, line[0])
                copies = self.have.get(line[0])
                if copies:
                    digest = _digest(raw)
                    if any(d is None or d == digest for _, d in copies):
                        line = None  # the store has it
                    elif any(e == self.epoch for e, _ in copies):  # the log was begun again
                        if batch:
                            break  # what is batched belongs to the generation before: sent first
                        self.epoch = self.store.new_epoch(self.key)
            elif line is not None and line[0] <= self.shipped:
                line = None
            used += len(raw)
            if line is not None:
                batch.append(line)
                raws.append(raw)
                sums.append(digest if digest is not None else _digest(raw))
        if batch:
            try:
                self.store.append_events(self.key, batch, self.epoch, sums)
            except BadLines:  # a line our writer's shape let through is no JSON: each read whole, then sent
                kept = [(line, d) for raw, d in zip(raws, sums, strict=True)
                        if (line := self._line(raw, whole=True)) is not None]
                batch, sums = [x for x, _ in kept], [d for _, d in kept]
                self.store.append_events(self.key, batch, self.epoch, sums)
            if self.have is not None:
                for (seq, *_), d in zip(batch, sums, strict=True):
                    self.have.setdefault(seq, []).append((self.epoch, d))
            elif batch:
                self.shipped = max(self.shipped, max(seq for seq, *_ in batch))
        self.offset += used
        if self.have is not None and self.offset >= size:
            self._rescanned()
        return self.offset < size

    def _rescanned(self) -> None:
        """The log read again whole: from here on, what is new is after its last seq. A store holding seqs of the
        current generation past the log's last had a log that was cut: what comes next is a new generation."""
        assert self.have is not None
        ahead = max((seq for seq, copies in self.have.items() if any(e == self.epoch for e, _ in copies)), default=0)
        if ahead > self.file_max:
            self.epoch = self.store.new_epoch(self.key)
        self.shipped, self.have = self.file_max, None

    def _line(self, raw: bytes, whole: bool = False) -> tuple[int, str | None, str, str] | None:
        """(seq, ts, type, the JSON) of one log line, or None for a line that is no event we wrote.

        A line in the shape the engine writes is read from its head only (the link shares the run's GIL: parsing
        every line whole cost the turn's thread more than anything else the link does); the server checks that it
        is JSON (:class:`BadLines`: then ``whole``). Any other line, a command's, or one with a NUL is read whole."""
        if not whole and (head := _HEAD.match(raw)) is not None and b"\\u0000" not in raw:
            kind = head.group(3).decode("ascii", "replace")
            if kind != "operator_command":
                ts = head.group(1).decode("ascii", "replace")
                return int(head.group(2)), _timestamp(ts), kind, raw.decode("utf-8", "replace").strip()
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            return None
        if not isinstance(doc, dict):
            return None
        seq, kind, ts = doc.get("seq"), doc.get("type"), doc.get("ts")
        if type(seq) is not int or not 0 <= seq < 2**EPOCH_SHIFT or not isinstance(kind, str):
            return None
        if kind == "operator_command" and isinstance(cid := doc.get("command_id"), str):
            self.seen_commands.add(cid)
        body = raw.decode("utf-8", "replace").strip()
        if "\\u0000" in body:  # jsonb cannot hold NUL: the store's copy shows it as U+FFFD (the file keeps it)
            body = json.dumps(_no_nul(doc), ensure_ascii=False)
        return seq, _timestamp(ts), kind[:100], body


# The head of a line as the engine writes it (pydantic's field order: v, ts, seq, session, type; the same for the
# lines the journal appends again). Quotes and backslashes excluded: the groups cannot run into a string's inside.
_HEAD = re.compile(rb'\{"v":\d{1,9},"ts":"([0-9T:.+Z-]{10,40})","seq":(\d{1,12}),"session":-?\d{1,18},'
                   rb'"type":"([a-z_]{1,100})"')


def _digest(raw: bytes) -> int:
    """Eight bytes of a line's hash, as PostgreSQL's bigint: two lines of one seq that differ are two events."""
    return int.from_bytes(hashlib.blake2b(raw.strip(), digest_size=8).digest(), "big", signed=True)


def _timestamp(value: object) -> str | None:
    """An event's ``ts`` if it is one PostgreSQL takes (a line that says otherwise is still stored, without it)."""
    if not isinstance(value, str):
        return None
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return None
    return value


def _no_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_no_nul(k): _no_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nul(v) for v in value]
    return value
