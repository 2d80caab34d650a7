"""Short run ids: what an operator types instead of a run folder's path.

A run's id is derived from its folder's absolute path (five characters of Crockford's base 32, no I, L, O or U
to misread), so every view (`run`, `jobs`, the console's status line, the headless log, the fleet view) shows
the same id without storing it anywhere, and a run resumed in place keeps its id.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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


class RunLookupError(ValueError):
    """A run reference that names no run, or several (``candidates``: their one-line descriptions)."""

    def __init__(self, message: str, candidates: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.candidates = candidates


# Candidates listed by an ambiguous reference; the rest are counted (`agent-console jobs` lists them all).
MAX_CANDIDATES = 8


def looks_like_a_path(ref: str) -> bool:
    """A reference that can only be a folder: it has a path separator or starts with ``~`` or ``.``.

    Run ids and run names never do, so such a reference is never looked up in the jobs table (and a
    missing folder is reported as the missing folder it is)."""
    return os.sep in ref or (os.altsep is not None and os.altsep in ref) or ref.startswith(("~", "."))


def run_name(root: Path | str) -> str:
    """``quickstart-20261122-101500``: the run's folder name (what a name prefix is matched against)."""
    return os.path.basename(os.fspath(root).rstrip(os.sep)) or os.fspath(root)


def job_name(root: Path | str) -> str:
    """``quickstart`` for the run folder ``quickstart-20261122-101500-2`` (the name without the stamp that
    ``prepare_run`` adds; a folder run in place keeps its whole name)."""
    name = run_name(root)
    return _STAMP.sub("", name) or name


_STAMP = re.compile(r"-\d{8}-\d{6}(-\d+)?$")


def normalize_id(text: str) -> str:
    """An id as typed, in the alphabet's terms: any case, and the letters it leaves out read as the digits
    they look like (``O`` as ``0``, ``I`` and ``L`` as ``1``)."""
    return text.lower().translate(_LOOKALIKES)


_LOOKALIKES = str.maketrans("oil", "011")


def describe_run(row: Any) -> str:
    """``k3f9q  quickstart-20261122-101500  running``: a run as a candidate line names it."""
    return f"{run_id(row.path)}  {run_name(row.path)}  {row.status}"


def resolve_run(ref: str, rows: Iterable[Any]) -> Path:
    """The folder of the run ``ref`` names among ``rows`` (the jobs table's rows: ``path`` and ``status``).

    In order: the runs whose id is ``ref`` (see :func:`normalize_id`); else those whose folder name is ``ref``;
    else those whose id or folder name starts with ``ref``. The first step with a match decides: one match is
    the run; several, or none at any step, raise :class:`RunLookupError` (the matches are its candidates).
    Whether ``ref`` is an existing folder is the caller's question, asked first.
    """
    rows = list(rows)
    if not ref:
        raise RunLookupError("an empty run reference; give a run folder, a run id or the start of a run's name")
    key = normalize_id(ref)
    steps = (
        [r for r in rows if run_id(r.path) == key],
        [r for r in rows if run_name(r.path) == ref],
        [r for r in rows if run_id(r.path).startswith(key) or run_name(r.path).startswith(ref)],
    )
    for matches in steps:
        if len(matches) == 1:
            return Path(matches[0].path)
        if matches:
            shown = tuple(describe_run(r) for r in matches)
            more = len(shown) - MAX_CANDIDATES
            listed = "; ".join(shown[:MAX_CANDIDATES]) + (f"; and {more} more (agent-console jobs)" if more > 0 else "")
            raise RunLookupError(f"ambiguous: {len(matches)} runs match {ref!r}: {listed}; give the id, more of the "
                                 "name, or the folder", shown)
    raise RunLookupError(f"no run folder, id or run name matches {ref!r}; see agent-console jobs")
