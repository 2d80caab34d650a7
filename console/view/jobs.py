"""The jobs table (``agent-console jobs``): each run of the jobs store as one line, the state as the engine decides it
(:func:`console.engine.runs.liveness`: the lock says whether a process still runs it). No Textual here; Rich is
imported where a table is drawn, so ``jobs --json`` does not pay for it."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.engine.runs import GAVE_UP, GONE, INTERRUPTED, NEEDS, STORED_LIVE, liveness, run_id
from console.engine.store.base import JobRow
from console.engine.text import safe_text

if TYPE_CHECKING:  # pydantic's models: imported by who sends one, never by `jobs`
    from console.engine.commands import AnyCommand


def one_line(text: str) -> str:
    """A message as one printable line: its lines joined, control characters (escape sequences) shown escaped
    (:func:`console.engine.text.safe_text`). Messages carry paths, names and text from the job and the agent."""
    return safe_text(str(text), one_line=True, join=True)


def as_now(r: JobRow, holder: Any = None) -> JobRow:
    """The store's row ``r`` with the state it has now: a run whose folder is gone says so (``jobs --prune``
    forgets it); one the store records as live that no process runs died (kill -9, power cut) without writing its
    end: interrupted. ``holder``: the pid holding a run's lock, from its folder (default: its run lock's answer)."""
    from console.engine.store import folder_gone

    if r.remote:  # a run of another machine (a shared store): its runner's lease says
        gone, pid, leased = False, None, bool(r.leased)
    else:
        gone, leased = folder_gone(r.path), False
        # The lock is asked only where it can change the answer: a run the store records as live.
        pid = (holder or _lock_holder)(Path(r.path)) if not gone and r.status in STORED_LIVE else None
    live = liveness(r.status, pid, gone=gone, detail=r.detail or "", leased=leased)
    if live.state == r.status:
        return r
    if live.state == GONE:
        return replace(r, status=GONE, detail="its folder no longer exists; agent-console jobs --prune forgets it")
    if live.state == INTERRUPTED:
        # (A row that says "needs you" with no reason, a forged or damaged one, read "it needed you (None)".)
        why = f" ({r.detail})" if r.detail else ""
        detail = f"it needed you{why} when its process ended" if r.status == NEEDS else r.detail
        return replace(r, status=INTERRUPTED, needs_since=None, detail=detail or "no process runs it; resume "
                       f"with: agent-console resume {run_id(r.path)}")
    return replace(r, status=live.state)


def unconfined(r: JobRow, seal: Any) -> bool:
    """Whether the run was started with --unconfined (its commands run without a sandbox): its own launch record
    says, read from its folder (a run of another machine's folder is not here: its console and logs say). Only a
    record this operator's harness sealed (``seal``: console.engine.seal) says anything: a folder's own record
    from elsewhere is not the run's; None: none is read."""
    from console.engine.job_files import JobPaths

    if seal is None or r.remote or r.status == GONE:
        return False
    return launched_unconfined(JobPaths(Path(r.path)), seal)


def launched_unconfined(paths: Any, seal: Any) -> bool:
    """Whether the run's record says --unconfined as a resume reads it: its one field without building its model
    where it is a boolean (console.engine.launch_record), the model where it is not (``"true"``, ``1``)."""
    from console.engine.launch_record import ran_unconfined

    said = ran_unconfined(paths, seal)
    if said is not None:
        return said
    from console.engine.launch import LaunchError, read_launch  # pydantic: for those records only

    try:
        record = read_launch(paths, seal)
    except LaunchError:
        return False
    return record is not None and record.unconfined


def remote_run(ref: str, settings: Any) -> Any:
    """The shared store's row of the run ``ref`` names when it is a run of another machine; None when it is not (a
    folder, a run of this machine, or the embedded store): the local ways then apply. RunLookupError if ``ref``
    names no run or several; StoreError if the store cannot be read."""
    import os

    from console.engine.runs import looks_like_a_path, resolve_run

    if not settings.store_url or looks_like_a_path(ref) or os.path.isdir(ref):
        return None
    store = settings.open_store()
    try:
        rows = store.list(10**6)
    finally:
        store.close()
    path = str(resolve_run(ref, rows))
    row = next((r for r in rows if r.path == path), None)
    return row if row is not None and row.remote else None


def send_remote(url: str, embedded: Path, key: str, command: AnyCommand, source: str,
                command_id: str | None = None) -> str | None:
    """Queue ``command`` for a run of another machine through the shared store (a row and a NOTIFY: that run's
    link writes it into its inbox); what went wrong in one line, or None. With ``command_id`` (a web form's, an
    action link's) it is sent once: sent again with the same id, the store keeps the first, and the run's link
    writes it into the inbox once (console.engine.store.link), as :func:`console.view.answering.send_local` does
    for a run of this machine."""
    import hashlib
    import uuid

    from console.engine.commands import CommandError
    from console.engine.control import make_command
    from console.engine.store import StoreError, is_shared, open_store

    # The store's ids are UUIDs: the caller's id becomes one, the same each time (16 bytes of its hash).
    cid = uuid.uuid4().hex if command_id is None else uuid.UUID(
        bytes=hashlib.sha256(command_id.encode()).digest()[:16]).hex
    try:
        cmd = make_command(command, source=source, id=cid)
        store = open_store(url, embedded)
        try:
            if not is_shared(store):
                return "not a shared store"
            store.send_command(key, cmd.model_dump(mode="json", include={"id", "command", "args", "source"}))
        finally:
            store.close()
    except (CommandError, StoreError) as exc:
        return f"{command.kind} could not be sent: {exc}"
    return None


def _lock_holder(root: Path) -> int | None:
    from console.engine.job_files import JobPaths
    from console.engine.run_lock import RunLock  # not control: the lock alone, so `jobs` starts fast
    from console.engine.starting import starting

    paths = JobPaths(root)
    # A run handed to a runner that is still loading (run --detach returned): running, its watcher's pid.
    return RunLock(paths).holder() or starting(paths)


def needs_first(r: Any) -> bool:
    """The sort key that lists the runs needing their operator first (one whose agent gave up does too, until the
    operator acknowledged it: `ack` clears its needs_since, console.engine.acknowledge)."""
    return not (r.status == NEEDS or (r.status == GAVE_UP and r.needs_since))


# The jobs table: its columns in order, and which go first when the terminal is narrow (the id, the state and
# the job always stay; the summary is shortened at a word before it goes).
JOBS_HEADERS = {"id": "id", "state": "state", "job": "job", "host": "machine", "started": "started", "cost": "cost",
                "conf": "conf.", "summary": "summary / reason"}
JOBS_RIGHT = frozenset({"cost", "conf"})
# (The machine column is shown with a shared store only: the embedded store's rows have none.)
JOBS_DROP_ORDER = ("conf", "cost", "host", "started", "summary")
HOST_MAX = 20
JOBS_GAP = 2
JOB_NAME_MAX = 28
SUMMARY_MIN = 20  # narrower, a summary says next to nothing: a column goes first
NEEDS_SUMMARY_MIN = 44  # a need's "since HH:MM, reason: ..." keeps at least this much (its message's start)
UNCONFINED_MARK = " UNCONFINED"  # after the state: the run's commands run without a sandbox (run --unconfined)
STATE_STYLE = {"completed": "green", "running": "cyan", "paused": "yellow", "failed": "red", "stopped": "yellow",
               "interrupted": "yellow", "awaiting approval": "magenta", "out of budget": "yellow",
               "incomplete": "yellow", "needs you": "bold reverse magenta", "gave up": "bold reverse magenta",
               "gone": "dim"}


def need_summary(r: Any) -> str:
    """A run that needs its operator, for the jobs table: ``since 14:02, stuck: no todo completed in 40 turns``.
    The time first: a narrow terminal cuts the end of the cell, and how long a run has waited is what decides
    which to answer first (the reason is in the state column's family, the message in --json and `wait`)."""
    from console.engine.needs import label

    reason, _, message = (r.detail or "").partition(": ")
    since = ""
    if r.needs_since:
        with contextlib.suppress(ValueError):
            since = f"since {datetime.fromisoformat(r.needs_since).astimezone():%H:%M}, "
    what = label(reason) if reason else "needs you"
    return f"{since}{what}: {message}" if message else f"{since}{what}"


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` terminal cells, cut only between words, with "…" where it was cut.

    A cut falls at a space when one is in the second half of the room, else at the last place that is not
    inside a word (a path or a hyphenated name is cut at its punctuation); a first word too long for the
    room leaves "…" alone. A word is never split."""
    from rich.cells import cell_len, get_character_cell_size

    if cell_len(text) <= width:
        return text
    if width < 1:
        return ""
    room, used, fit = width - 1, 0, 0  # one cell for "…"
    for ch in text:
        used += get_character_cell_size(ch)
        if used > room:
            break
        fit += 1
    at_word = fit  # back to the start of the word the room ends in
    while 0 < at_word < len(text) and _is_word(text[at_word - 1]) and _is_word(text[at_word]):
        at_word -= 1
    space = fit if text[fit].isspace() else text.rfind(" ", 0, fit)
    cut = space if space >= max(1, room // 2) else at_word
    return text[:cut].rstrip(" ,;:-") + "…"


def jobs_table(rows: list[JobRow], width: int, seal: Any = None) -> tuple[list[Any], list[str]]:
    """The jobs table as lines (rich Text, one per row after the header, none wider than ``width`` when the id,
    state and job columns fit), and the headers of the columns left out to fit. ``seal``: the operator's key, to
    read each run's record (:func:`unconfined`)."""
    from rich.cells import cell_len
    from rich.text import Text

    from console.engine.cost import format_cost
    from console.engine.runs import job_name

    def short(ts: str | None) -> str:
        # The operator's local time, as every other view shows it (the store keeps UTC: it showed UTC, unsaid).
        try:
            return f"{datetime.fromisoformat(ts or '').astimezone():%m-%d %H:%M}"
        except ValueError:  # a shared store's row is anyone's: no time is shown for one that is none
            return ""

    cells: dict[str, list[str]] = {key: [] for key in JOBS_HEADERS}
    for r in rows:  # every text cell through one_line: names and summaries come from the job and the agent
        cells["id"].append(run_id(r.path))
        # Every view says a run's commands run without a sandbox (the fleet, the console, logs): so does this one.
        cells["state"].append(one_line(r.status) + (UNCONFINED_MARK if unconfined(r, seal) else ""))
        name = job_name(r.path)
        cells["job"].append(shorten(one_line(name), JOB_NAME_MAX))
        cells["host"].append(shorten(one_line(r.host or ""), HOST_MAX))  # a NULL column reads None
        cells["started"].append(one_line(short(r.started_at)))
        cells["cost"].append("" if r.cost_usd is None else format_cost(r.cost_usd))
        cells["conf"].append("" if r.confidence is None else f"{r.confidence:.2f}")
        cells["summary"].append(one_line(need_summary(r) if r.status == "needs you" else r.summary or r.detail or ""))
    # A column with nothing in it (no cost known, nothing completed yet) is not worth its width.
    shown = [key for key in JOBS_HEADERS if key in ("id", "state", "job") or any(cells[key])]
    widths = {key: max(cell_len(JOBS_HEADERS[key]), *(cell_len(c) for c in cells[key])) for key in shown}

    def fixed(keys: list[str]) -> int:  # the columns' widths and gaps, the summary's own width aside
        return sum(widths[k] for k in keys if k != "summary") + JOBS_GAP * (len(keys) - 1)

    # A run that needs you: why, and since when, is what the row is for; the columns go first rather than cut it
    # to a word (found at 80 columns: "since 16:53…", the started column kept).
    needs = [cell_len(c) for r, c in zip(rows, cells["summary"], strict=True) if r.status == "needs you"]
    room = width - fixed([k for k in ("id", "state", "job", "summary") if k in shown])  # the others all gone
    summary_min = max(SUMMARY_MIN, min(NEEDS_SUMMARY_MIN, max(needs, default=0), room))

    def need(keys: list[str]) -> int:
        return fixed(keys) + (summary_min if "summary" in keys else 0)

    hidden: list[str] = []
    for key in JOBS_DROP_ORDER:
        if need(shown) <= width:
            break
        if key in shown:
            shown.remove(key)
            hidden.append(JOBS_HEADERS[key])
    if "summary" in shown:
        widths["summary"] = min(widths["summary"], max(summary_min, width - fixed(shown)))
        cells["summary"] = [shorten(c, widths["summary"]) for c in cells["summary"]]
    over = fixed(shown) + (widths["summary"] if "summary" in shown else 0) - width
    if over > 0 and widths["job"] - over >= cell_len(JOBS_HEADERS["job"]):
        widths["job"] -= over  # a very narrow terminal: the names give way too, still at a word
        cells["job"] = [shorten(c, widths["job"]) for c in cells["job"]]

    def line(values: dict[str, str], header: bool = False) -> Any:
        out = Text(style="bold" if header else "")
        for n, key in enumerate(shown):
            value, pad = values[key], " " * (widths[key] - cell_len(values[key]))
            if n:
                out.append(" " * JOBS_GAP)
            style = "" if header or key != "state" else STATE_STYLE.get(value.removesuffix(UNCONFINED_MARK), "")
            # Text, not markup: a state without a style, or a summary with brackets in it, prints as it is.
            out.append(pad if key in JOBS_RIGHT else "")
            out.append(value, style=style)
            out.append("" if key in JOBS_RIGHT else pad)
        out.rstrip()
        return out

    lines = [line(JOBS_HEADERS, header=True)]
    lines += [line({key: cells[key][i] for key in shown}) for i in range(len(rows))]
    return lines, hidden
