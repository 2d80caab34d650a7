"""Crash-safe session state: one append-only journal, ``.console/checkpoint.jsonl``.

Rewriting a long conversation every turn costs milliseconds per megabyte, so
the conversation is journaled instead: one line per change (append, replace
one message, reset to a new list), and at the end of every turn one
``commit`` line carrying the checkpoint (session, turn, ...). Loading replays
up to the last commit; lines after it belong to a turn that never finished
(a kill -9 mid-turn) and are cut. A resumed run therefore never sees half a
turn: its conversation ends with whole tool pairs, and every todo completion
is already in todos.json.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any, SupportsIndex

from pydantic import BaseModel

from console.engine.atomic import atomic_write_text
from console.engine.messages import Message

# Rewrite the journal as one reset when it holds this many times more lines than messages.
REWRITE_FACTOR = 4
# Every commit survives a killed process (the page cache outlives it); an fsync, which only
# matters for a power cut, is paid every this many commits and when asked for.
FSYNC_EVERY = 20


class Checkpoint(BaseModel):
    v: int = 2
    session: int = 0
    turn: int = 0
    nudges: int = 0
    job_done: bool = False
    updated_at: datetime | None = None


class Conversation(list[Message]):
    """A list of messages that records every change for the journal.

    The loop, masking and compaction use it as a plain list (append, extend,
    item and whole-slice assignment); each change becomes a pending journal op.
    """

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        super().__init__(messages)
        self.pending: list[dict[str, Any]] = [{"op": "reset", "ms": list(self)}]

    def append(self, m: Message) -> None:
        super().append(m)
        self.pending.append({"op": "append", "m": m})

    def extend(self, ms: Iterable[Message]) -> None:
        for m in ms:
            self.append(m)

    def __setitem__(self, key: SupportsIndex | slice, value: Any) -> None:
        if isinstance(key, slice):
            if key != slice(None):
                raise NotImplementedError("only whole-list assignment is journaled")
            super().__setitem__(key, value)
            self.pending.append({"op": "reset", "ms": list(self)})
            return
        i = key.__index__()
        super().__setitem__(i, value)
        self.pending.append({"op": "replace", "i": i if i >= 0 else len(self) + i, "m": value})

    def _unsupported(self, *a: Any, **k: Any) -> None:
        raise NotImplementedError("the conversation only grows, or is replaced whole")

    insert = pop = remove = clear = sort = reverse = __delitem__ = __iadd__ = _unsupported  # type: ignore[assignment]


def _line(op: dict[str, Any]) -> str:
    out: dict[str, Any] = {"op": op["op"]}
    if "i" in op:
        out["i"] = op["i"]
    if "m" in op:
        out["m"] = op["m"].model_dump(mode="json", exclude_defaults=True)
    if "ms" in op:
        out["ms"] = [m.model_dump(mode="json", exclude_defaults=True) for m in op["ms"]]
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


class SessionStore:
    """Owns ``checkpoint.jsonl`` of one job."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "checkpoint.jsonl"
        self.lines = 0
        self._saves = 0

    def load(self) -> tuple[Checkpoint, list[Message]] | None:
        if not self.path.exists():
            return None
        conv: list[Message] = []
        committed: tuple[Checkpoint, list[Message]] | None = None
        n = kept_lines = offset = kept_offset = 0
        with self.path.open("rb") as fh:
            for raw in fh:
                if not raw.endswith(b"\n"):
                    break  # torn by a crash
                try:
                    op = json.loads(raw)
                except ValueError:
                    break
                n += 1
                offset += len(raw)
                kind = op.get("op")
                if kind == "append":
                    conv.append(Message.model_validate(op["m"]))
                elif kind == "replace":
                    conv[op["i"]] = Message.model_validate(op["m"])
                elif kind == "reset":
                    conv = [Message.model_validate(m) for m in op["ms"]]
                elif kind == "commit":
                    committed = (Checkpoint.model_validate(op["cp"]), list(conv))
                    kept_lines, kept_offset = n, offset
        if self.path.stat().st_size > kept_offset:
            # What follows the last commit is a turn that never finished: cut it.
            with self.path.open("rb+") as fh:
                fh.truncate(kept_offset)
        self.lines = kept_lines
        return committed

    def save(self, cp: Checkpoint, conversation: Conversation, *, durable: bool = False) -> None:
        self._saves += 1
        durable = durable or self._saves % FSYNC_EVERY == 0
        commit = {"op": "commit", "cp": json.loads(cp.model_dump_json())}
        if self.lines == 0 or self.lines > REWRITE_FACTOR * (len(conversation) + 8):
            # Start the journal afresh from the current list (rare: after compactions and restarts).
            text = _line({"op": "reset", "ms": list(conversation)}) + "\n" + json.dumps(commit) + "\n"
            atomic_write_text(self.path, text, durable=durable)
            self.lines = 2
        else:
            data = "".join(_line(op) + "\n" for op in conversation.pending) + json.dumps(commit) + "\n"
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(data)
                if durable:
                    fh.flush()
                    os.fsync(fh.fileno())
            self.lines += len(conversation.pending) + 1
        conversation.pending = []


    def sync(self) -> None:
        """Make every commit so far durable (at the end of a run)."""
        if self.path.exists():
            with self.path.open("a", encoding="utf-8") as fh:
                os.fsync(fh.fileno())


def load_checkpoint(state_dir: Path) -> Checkpoint | None:
    """Just the last checkpoint of a job (e.g. to know whether it is done)."""
    loaded = SessionStore(state_dir).load()
    return loaded[0] if loaded else None
