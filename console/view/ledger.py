"""The cost ledger: what runs spent, from each run's own ``token_usage`` events. Pure Python: no Textual here.

A run's spend is folded from its log by :class:`Spend`, the one fold of it every view uses (the fleet's row and
today's line, ``agent-console costs``): each ``token_usage`` event's ``cost_usd`` (the engine priced the turn when
it ended, from the model's prices) under the model its session ran, at the event's own time. The engine's running
total (``job_cost_usd``, what the console's header and the fleet's cost column show) is that same sum, added in the
same order, so a run's ledger total equals it.

A turn of a model without prices has no cost: its tokens are counted and said ("unpriced"), never a silent $0.
Days are the operator's local days (the timezone is stated); a run that spans midnight splits by its events.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ValidationError

from console.engine import events as ev
from console.view.format import run_today as run_today  # the fleet's words of a spend, with its other figures
from console.view.format import today_line as today_line

__all__ = ["Charge", "Ledger", "LedgerError", "LedgerJson", "RunSpend", "Spend", "fold_lines", "fold_log",
           "parse_since", "read_run", "run_today", "today_line"]

# The event types the ledger reads; every other line of a log is passed over without being parsed (found by one
# search of the whole log, in C: a log is mostly other events, and parsing each was most of the time).
_TYPES = (b'"token_usage"', b'"session_started"', b'"launch_settings"')
_MARKS = tuple(b'"type":' + t for t in _TYPES)  # as the engine writes them (pydantic's compact JSON)
MAX_LOG = 4 << 30  # a log larger than this is not read whole by the ledger (said, never a MemoryError)


@dataclass(frozen=True, slots=True)
class Charge:
    """One turn's usage: when it ended, its model, its cost (None: the model has no price) and its tokens.
    ``turn``: False for an MCP server's sampling (spend like a turn's, but no turn of the agent's)."""

    ts: datetime
    model: str
    usd: float | None
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    turn: bool = True


class Spend:
    """A run's spend, folded from its events (any order of calls; each event once)."""

    def __init__(self) -> None:
        self.model = ""
        self.charges: list[Charge] = []
        # Each local day's priced cost, summed as the charges come: the fleet asks for today's at every poll.
        self._days: dict[date, float] = {}

    def add(self, events: Iterable[ev.EventBase]) -> None:
        for e in events:
            if isinstance(e, ev.TokenUsage):
                self.charges.append(Charge(e.ts, self.model, e.cost_usd, e.input_tokens, e.output_tokens,
                                           e.cached_input_tokens, not e.source))
                if e.cost_usd is not None:
                    day = e.ts.astimezone().date()
                    self._days[day] = self._days.get(day, 0.0) + e.cost_usd
            elif isinstance(e, ev.SessionStarted | ev.LaunchSettings) and e.model:
                self.model = e.model

    def on(self, day: date) -> float | None:
        """What the run's priced turns cost on ``day`` (the operator's local day); None when none was priced."""
        return self._days.get(day)

    @property
    def total(self) -> float | None:
        costs = [c.usd for c in self.charges if c.usd is not None]
        return sum(costs) if costs else None


def _found(data: bytes) -> list[int]:
    """Where the ledger's event types are named in ``data`` (bytes.find: a search in C, no line split)."""
    out = []
    for word in _MARKS:
        at = data.find(word)
        while at >= 0:
            out.append(at)
            at = data.find(word, at + len(word))
    return out


def fold_log(data: bytes, spend: Spend) -> int:
    """Fold the ledger's events of ``data`` (a log's whole lines) into ``spend``; how many lines were damaged (not
    a JSON object's line, or a ledger event's line that does not parse), counted without reading every line."""
    lines = data.count(b"\n") + (not data.endswith(b"\n") and bool(data))
    blank = data.count(b"\n\n") + data.startswith(b"\n")
    starts = data.count(b"\n{") + data.startswith(b"{")
    ends = data.count(b"}\n") + data.endswith(b"}")
    damaged = max(0, lines - blank - min(starts, ends))
    done = -1
    for at in sorted(_found(data)):
        start = data.rfind(b"\n", 0, at) + 1
        if start <= done:
            continue  # the same line again (the words in a string of it)
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        done = end
        line = data[start:end].strip()
        if not (line.startswith(b"{") and line.endswith(b"}")):
            continue  # counted above
        try:
            spend.add([ev.parse_event(line)])
        except (ValidationError, ValueError, RecursionError):
            damaged += 1
    return damaged


def fold_lines(lines: Iterable[bytes | str], spend: Spend) -> int:
    """Fold the ledger's events of ``lines`` (a log's whole lines) into ``spend``; how many of them were damaged
    (a line that is no JSON object, or a ledger event that does not parse). Lines of other types are not parsed."""
    damaged = 0
    for raw in lines:
        line = raw.encode("utf-8", "replace") if isinstance(raw, str) else raw
        line = line.strip()
        if not line:
            continue
        if not (line.startswith(b"{") and line.endswith(b"}")):
            damaged += 1
            continue
        if not any(t in line for t in _TYPES):
            continue
        try:
            spend.add([ev.parse_event(line)])
        except (ValidationError, ValueError, RecursionError):
            damaged += 1
    return damaged


@dataclass
class RunSpend:
    """One run as the ledger counts it."""

    id: str
    job: str
    machine: str
    spend: Spend = field(default_factory=Spend)
    problem: str = ""  # why its log could not be read (whole): "" when it was


def read_run(path: Path, run: RunSpend) -> RunSpend:
    """Read ``path`` (a run's events.jsonl) once, whole lines only (a live run's unterminated last line is read
    next time), into ``run``; a log that cannot be read, or has damaged lines, is said in ``run.problem``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return run  # no log yet (a run that never started a turn): nothing spent
    except OSError as exc:
        run.problem = f"its log cannot be read ({exc.strerror or exc})"
        return run
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            run.problem = "its log is not a file"
            return run
        if info.st_size > MAX_LOG:
            run.problem = f"its log is {info.st_size >> 20} MB, more than the ledger reads"
            return run
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read()
    except OSError as exc:
        run.problem = f"its log cannot be read ({exc.strerror or exc})"
        return run
    finally:
        os.close(fd)
    end = data.rfind(b"\n")
    damaged = fold_log(data[: end + 1], run.spend) if end >= 0 else 0
    if damaged:
        run.problem = f"{damaged} damaged line{'s' if damaged != 1 else ''} in its log (passed over)"
    return run


class LedgerError(ValueError):
    """A --since that is no time."""


def parse_since(text: str, now: datetime) -> datetime:
    """``--since``: an ISO date or time (local when it names no zone), ``24h``/``7d``/``90m``, ``today`` or
    ``yesterday`` (the operator's local midnight). ``now``: aware."""
    word = text.strip().lower()
    local_now = now.astimezone()
    midnight = datetime.combine(local_now.date(), time(), local_now.tzinfo)
    if word == "today":
        return midnight
    if word == "yesterday":
        return (midnight - timedelta(days=1)).astimezone()
    units = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    if len(word) > 1 and word[-1] in units and word[:-1].isdigit():
        seconds = int(word[:-1]) * units[word[-1]]
        if seconds > 100 * 365 * 86400:
            raise LedgerError(f"--since {text}: more than a hundred years")
        return now - timedelta(seconds=seconds)
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise LedgerError(f"--since {text!r} is no time: give an ISO date or time (2026-01-15, 2026-01-15T08:00), "
                          "a span back from now (24h, 7d, 90m) or today / yesterday") from None
    return when.astimezone() if when.tzinfo is None else when  # a time without a zone is the operator's local one


class Line(BaseModel):
    """One row of the ledger: its key, what was spent and the tokens used."""

    key: str
    cost_usd: float | None  # None: nothing priced (see unpriced_tokens)
    runs: int
    turns: int
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    unpriced_tokens: int  # input + output tokens of turns whose model has no price: not in cost_usd


class Unreadable(BaseModel):
    id: str
    machine: str
    problem: str


class LedgerJson(BaseModel):
    """``agent-console costs --json``: one object (schema 1). Times are ISO 8601 with their offset; ``timezone``
    names the operator's, in which ``day`` keys are dates."""

    schema_version: Literal[1] = 1
    by: str
    since: str | None
    timezone: str
    rows: list[Line]
    total: Line  # key "total"
    runs_unpriced: list[str]  # ids of the runs with unpriced usage in the window
    unreadable: list[Unreadable]  # runs whose log could not be read whole (counted as far as it was)


@dataclass
class Ledger:
    """Every run's spend since ``since`` (None: all time), grouped ``by`` a key."""

    by: str
    since: datetime | None
    runs: Sequence[RunSpend]

    def _key(self, run: RunSpend, c: Charge) -> str:
        if self.by == "job":
            return run.job
        if self.by == "model":
            return c.model or "(unknown model)"
        if self.by == "machine":
            return run.machine
        return c.ts.astimezone().date().isoformat()

    def build(self) -> LedgerJson:
        acc: dict[str, _Tally] = {}
        total = _Tally()
        unpriced: list[str] = []
        for run in self.runs:
            run_unpriced = False
            for c in run.spend.charges:
                if self.since is not None and c.ts < self.since:
                    continue
                for slot in (acc.setdefault(self._key(run, c), _Tally()), total):
                    slot.count(run.id, c)
                run_unpriced |= c.usd is None
            if run_unpriced:
                unpriced.append(run.id)
        order = sorted(acc) if self.by == "day" else sorted(acc, key=lambda k: (-acc[k].cost, k))
        tz = datetime.now().astimezone().tzname() or "local"
        return LedgerJson(by=self.by, since=self.since.isoformat() if self.since else None, timezone=tz,
                          rows=[acc[k].line(k) for k in order], total=total.line("total"), runs_unpriced=unpriced,
                          unreadable=[Unreadable(id=r.id, machine=r.machine, problem=r.problem)
                                      for r in self.runs if r.problem])


@dataclass
class _Tally:
    """One row's sums, as the charges come (each run's in its own order: a run's cost adds up as the engine's)."""

    cost: float = 0.0
    priced: bool = False
    runs: set[str] = field(default_factory=set)
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    unpriced_tokens: int = 0

    def count(self, run: str, c: Charge) -> None:
        self.runs.add(run)
        self.turns += c.turn
        self.input_tokens += c.input_tokens
        self.output_tokens += c.output_tokens
        self.cached_input_tokens += c.cached_input_tokens
        if c.usd is None:
            self.unpriced_tokens += c.input_tokens + c.output_tokens
        else:
            self.cost += c.usd
            self.priced = True

    def line(self, key: str) -> Line:
        return Line(key=key, cost_usd=self.cost if self.priced else None, runs=len(self.runs), turns=self.turns,
                    input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                    cached_input_tokens=self.cached_input_tokens, unpriced_tokens=self.unpriced_tokens)
