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
from dataclasses import dataclass
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


# -- liveness: how a run stands, in one place --------------------------------------------------------------
# The words every view shows (the fleet sorts by them, most urgent first). A run that needs its operator (a restart
# to approve, stuck, a budget reached, the provider down, a crash, the agent gave up...) is "needs you", whatever
# the reason; "awaiting approval" is the store's older word for one kind of it.
NEEDS, RUNNING, PAUSED, STARTING = "needs you", "running", "paused", "starting"
INTERRUPTED, STOPPED, FAILED, COMPLETED = "interrupted", "stopped", "failed", "completed"
GAVE_UP = "gave up"  # the store's word for a run whose agent gave up: it needs its operator
GONE = "gone"  # the run's folder no longer exists: only its row is left
AWAITING = "awaiting approval"
LIVE = frozenset({NEEDS, RUNNING, PAUSED, STARTING})
# What the store records while a process runs the run: with no process holding its lock, it was interrupted.
STORED_LIVE = frozenset({RUNNING, PAUSED, AWAITING, NEEDS, INTERRUPTED})
# The store's words for an ended run that did not complete (shown as they are: "out of budget" says more).
FAILED_LIKE = frozenset({FAILED, "incomplete", "out of budget", "agent stopped"})


@dataclass(frozen=True)
class Seen:
    """What a run's own log says about it (a fold of its events), for :func:`liveness`."""

    needs: str = ""  # why it needs its operator now ("" nothing); "crashed" when it crashed before its end
    restart_pending: bool = False
    paused: bool = False
    started: bool = True  # a session has started
    outcome: str = ""  # its last process's outcome in words ("" while it runs): completed | gave up | failed | ...
    ended: bool = False  # its last process logged its end
    acknowledged: bool = False  # the operator acknowledged that end (agent-console ack): it asks no more


@dataclass(frozen=True)
class Liveness:
    """``state``: the word shown; ``kind``: its family (needs | running | paused | starting | interrupted | stopped
    | failed | completed | gone), which decides the style, the sort and what the operator may do."""

    state: str
    kind: str

    @property
    def live(self) -> bool:
        return self.state in LIVE


def liveness(stored: str, pid: int | None, *, gone: bool = False, detail: str = "", seen: Seen | None = None,
             leased: bool = False) -> Liveness:
    """How a run stands: the one answer the fleet, ``jobs`` and the console give.

    ``stored`` is the jobs store's word for it, ``pid`` the process holding its run lock (None: none does), ``gone``
    whether its folder no longer exists, ``detail`` the store's note, ``seen`` what its log says (None: not read,
    as in ``jobs``; the store's word then stands wherever the lock does not contradict it). A run the store records
    as live whose lock nobody holds died (kill -9, power cut) without writing its end: it is interrupted, unless
    it crashed needing its operator (resume it) or its agent gave up (the operator decides).

    ``leased``: a run of another machine sharing the store, whose runner's lease is current (its heartbeats stand
    in for the lock this machine cannot look at; a runner that died stops renewing it, and the run is then
    interrupted once it expires). Its folder is not here: ``gone`` is never said of it."""
    if leased:
        pid, gone = pid if pid is not None else 0, False
    if pid is None and gone:
        return Liveness(GONE, GONE)
    if pid is not None:
        if seen is None:
            return Liveness(stored or RUNNING, _kind_of(stored or RUNNING))
        if seen.needs or seen.restart_pending:
            return Liveness(NEEDS, "needs")
        if seen.paused:
            return Liveness(PAUSED, "paused")
        return Liveness(RUNNING, "running") if seen.started else Liveness(STARTING, "starting")
    if stored == COMPLETED or (seen is not None and seen.outcome == COMPLETED):
        return Liveness(COMPLETED, "completed")
    crashed = seen.needs == "crashed" and not seen.ended if seen is not None else \
        stored == NEEDS and detail.startswith("crashed:")
    if crashed:
        return Liveness(NEEDS, "needs")  # it crashed before it could record its end: resume it
    if stored == GAVE_UP or (seen is not None and seen.outcome == GAVE_UP):
        # The agent gave up: the operator decides (resume it once the cause is fixed). Told as needing them
        # where the reason is shown beside (the fleet); the store's word where it is not (``jobs``).
        # Once they acknowledged it (console.engine.acknowledge) it keeps its outcome and asks no more.
        if seen is not None and seen.acknowledged:
            return Liveness(GAVE_UP, "stopped")
        return Liveness(NEEDS if seen is not None else GAVE_UP, "needs")
    if stored in STORED_LIVE:
        return Liveness(INTERRUPTED, "interrupted")  # no process holds the lock: it died, or was killed
    if stored == STOPPED:
        return Liveness(STOPPED, "stopped")
    if stored in FAILED_LIKE:
        # The store's word ("out of budget" says more); the work is not done but the run can go on.
        return Liveness(stored, "failed" if stored == FAILED else "stopped")
    return Liveness(stored or FAILED, "failed")


def _kind_of(stored: str) -> str:
    """The family of a live run's stored word (no log read)."""
    if stored in (NEEDS, AWAITING, GAVE_UP):
        return "needs"
    return {PAUSED: "paused", STARTING: "starting"}.get(stored, "running")
