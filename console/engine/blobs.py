"""Large payloads of the journal, stored once by content: ``.console/blobs/<sha256>``.

A 4 MB write_file argument or a long tool result would otherwise make a
journal line of megabytes. Beyond :data:`INLINE_LIMIT` characters a string is
written here and the line carries ``{"$blob": sha256, "n": length}`` instead;
the same content is stored once however often it recurs. Blobs no longer
referenced by the journal are removed when the journal is rewritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Any

from console.engine.atomic import atomic_write_bytes
from console.engine.state import StateFileError, read_state_file

INLINE_LIMIT = 64 * 1024


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def is_ref(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("$blob"), str)


class BlobStore:
    def __init__(self, folder: Path, tmp_dir: Path) -> None:
        self.folder = folder
        self.tmp_dir = tmp_dir
        self.written: set[str] = set()
        # Bytes stored since the last garbage collection (they count towards the journal's next rewrite).
        self.fresh = 0

    def put(self, text: str) -> dict[str, Any]:
        digest = sha256(text)
        if digest not in self.written:
            path = self.folder / digest
            if not path.is_file():
                data = text.encode("utf-8", "replace")
                atomic_write_bytes(path, data, durable=False, tmp_dir=self.tmp_dir)
                self.fresh += len(data)
            self.written.add(digest)
        return {"$blob": digest, "n": len(text)}

    def get(self, ref: dict[str, Any]) -> str:
        digest = str(ref["$blob"])
        if len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
            raise StateFileError(f"a blob reference is malformed: {digest[:80]!r}")
        data = read_state_file(self.folder / digest)
        if data is None:
            raise StateFileError(f"the blob {digest[:12]}… it refers to is missing")
        text = data.decode("utf-8", "replace")
        if sha256(text) != digest:
            raise StateFileError(f"the blob {digest[:12]}… does not match its digest")
        return text

    def gc(self, keep: set[str]) -> int:
        """Remove blobs not in ``keep``; returns how many."""
        n = 0
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            return 0
        for e in entries:
            if e.name not in keep and len(e.name) == 64:
                with contextlib.suppress(OSError):
                    os.unlink(e.path)
                    n += 1
        self.written &= keep
        self.fresh = 0
        return n
