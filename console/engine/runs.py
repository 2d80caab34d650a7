"""Short run ids: what an operator types instead of a run folder's path.

A run's id is derived from its folder's absolute path (five characters of Crockford's base 32, no I, L, O or U
to misread), so every view (`run`, `jobs`, the console's status line, the headless log, the fleet view) shows
the same id without storing it anywhere, and a run resumed in place keeps its id.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
ID_LENGTH = 5


def run_id(root: Path | str) -> str:
    """``k3f9q``: the run's short id, from its folder (the same folder always gives the same id)."""
    key = os.path.abspath(os.fspath(root)).encode("utf-8", "surrogateescape")
    n = int.from_bytes(hashlib.sha256(key).digest()[:8], "big")
    out = []
    for _ in range(ID_LENGTH):
        n, d = divmod(n, 32)
        out.append(ALPHABET[d])
    return "".join(out)
