"""The fleet budget: a daily spend limit across every run of the operator (``[budgets] daily_usd`` in their config,
and optional per-job ones, ``[budgets.jobs] NAME = usd``), over this machine's runs or a shared store's.

The engine owns the port (:class:`FleetBudget`) and asks it at each turn boundary, next to the run's own budgets;
whoever runs the run (the command line, over the jobs store: console.engine.store.fleet) implements it. When the day's
spend of a scope reaches its limit, a hold (:class:`FleetHold`) is open for that (day, scope, limit): every run in the
scope pauses at its next turn boundary, asking its operator (a ``needs_operator`` event, reason ``fleet_budget``),
and exactly one of them (:attr:`FleetHold.tell`) tells the operator's channels. The hold lifts when the limit is
raised (the config, or ``agent-console budget --raise`` / ``--resume``, recorded in the store) or the day ends: the
paused runs look again every :data:`RECHECK_SECONDS` and go on by themselves. ``agent-console resume RUN`` lets one
run go on past that limit, today.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from console.engine.cost import format_cost

# How often a run held by the fleet budget looks whether the hold was lifted (a raise, a new day).
RECHECK_SECONDS = 3.0
# The scope of the whole fleet's limit; a job's is "job:NAME".
FLEET = "fleet"
SCOPE_LINE = "scope: "  # the evidence's line that names the hold's scope (read back by the channels: scope_of)


def local_day(now: datetime) -> str:
    """The operator's local day of ``now`` (as the cost ledger's days: console.view.ledger), ISO."""
    return now.astimezone().date().isoformat()


def scope_words(scope: str) -> str:
    """``the fleet`` or ``job quickstart``: a scope in the operator's words."""
    return "the fleet" if scope == FLEET else f"job {scope.removeprefix('job:')}"


def job_flag(scope: str) -> str:
    """`` --job NAME`` (quoted for a shell) for a job's scope, "" for the fleet's: the flag the answers need."""
    return "" if scope == FLEET else f" --job {shlex.quote(scope.removeprefix('job:'))}"


def scope_of(evidence: Sequence[str]) -> str:
    """The scope a fleet budget need's evidence (:meth:`FleetHold.evidence`) names; the fleet's if none does."""
    for line in evidence:
        if line.startswith(f"{SCOPE_LINE}job "):
            return f"job:{line.removeprefix(f'{SCOPE_LINE}job ')}"
    return FLEET


def held_in(detail: str, scope: str) -> bool:
    """Whether a run whose store detail is ``detail`` (``reason: message``: console.engine.store's ``needs``; the
    message maybe after a ``[not told: ...]`` note) waits on a hold of ``scope``: its need is the fleet budget's and
    its message (:meth:`FleetHold.message`) names that scope first."""
    if not detail.startswith("fleet_budget: "):
        return False
    message = detail.removeprefix("fleet_budget: ")
    if message.startswith("[not told: ") and "] " in message:
        message = message.split("] ", 1)[1]
    return message.startswith(f"{scope_words(scope)} spent ")


@dataclass(frozen=True)
class FleetHold:
    """An open hold: ``scope``'s spend on ``day`` (``spent_usd``) reached ``limit_usd``. ``tell``: this run is the
    one that tells the operator's channels (it created the hold, or took over a telling that its claimer never
    finished); every other run records its need without telling anyone again. ``running``: the runs of the scope
    that were live when the hold was created (they pause at their next turn boundary)."""

    day: str
    scope: str
    limit_usd: float
    spent_usd: float
    tell: bool = False
    running: int = 0

    @property
    def key(self) -> tuple[str, str, float]:
        return (self.day, self.scope, self.limit_usd)

    def message(self) -> str:
        """What the need says (and so the channels): the figures and the commands that answer it."""
        who = scope_words(self.scope)
        n = self.running
        runs = ("" if not n else "; 1 live run pauses at its next turn" if n == 1 else
                f"; {n} live runs pause at their next turn")
        job = job_flag(self.scope)
        return (f"{who} spent {format_cost(self.spent_usd)} today ({self.day}), reaching its daily budget of "
                f"{format_cost(self.limit_usd)}{runs}. `agent-console budget{job} --raise USD` raises today's "
                f"budget by USD, `agent-console budget{job} --resume` grants one more day's budget, both for every "
                "paused run; `agent-console resume RUN` lets one run go on today")

    def evidence(self) -> list[str]:
        return [f"spent today: {format_cost(self.spent_usd)}", f"daily budget: {format_cost(self.limit_usd)}",
                f"{SCOPE_LINE}{scope_words(self.scope)}"]


class FleetBudget(Protocol):
    """The fleet's daily budget as a run sees it. Every method is quick (one indexed query of the store) and never
    raises: a store that cannot answer holds nobody (the run's own budgets still apply)."""

    # Seconds between two looks of a held run (:data:`RECHECK_SECONDS`; a test's fake clock: 0).
    recheck_seconds: float
    # Whether the last check had the store's answer: a held run stays held while the store cannot say the hold
    # was lifted (a run not held is not held on a figure nobody knows).
    known: bool
    # Whether this run has a channel to tell a hold to (set by the supervisor from its run's notifier): one
    # without never takes the telling, which a held run with a channel does.
    tells: bool

    def limited(self) -> bool:
        """Whether the operator's config sets a daily limit now (the fleet's or any job's)."""

    def spent(self, now: datetime, usd: float) -> None:
        """Count ``usd`` (a turn's priced cost) in this run's spend of ``now``'s day."""

    def check(self, now: datetime) -> FleetHold | None:
        """The open hold this run is in now (the fleet's before its job's), None if none."""

    def lifted(self, hold: FleetHold, now: datetime) -> str:
        """Why ``hold`` no longer holds (its last check found it lifted): who raised what, or a new day."""

    def waive(self, hold: FleetHold) -> None:
        """The operator's resume of this run answered ``hold``: this run goes on past it (that day, that limit)."""

    def told(self, hold: FleetHold, now: datetime) -> None:
        """The hold's notification is done: the operator's channels took it (:class:`Telling`); nobody takes it
        over."""

    def pass_on(self, hold: FleetHold) -> None:
        """This run claimed the telling of ``hold`` but has no channel to tell it to: its claim is given up, for the
        next held run that has one."""


class Telling:
    """The hold this run tells, marked told in the store only once the operator's channels took its need: the run's
    notifier says so from its thread (:meth:`heard`, with the need's seq), and the engine marks it at its next look
    (:meth:`due`). A kill -9 between the need's record and its sending leaves the hold unmarked, and another held run
    takes the telling over once the claim is stale: told at least once, never zero times. A run without a channel
    (``confirms`` False: nobody to tell) passes the telling on (:meth:`FleetBudget.pass_on`): marked told, its hold
    was never told to the channels of the runs it held afterwards (a run started without channels made the hold,
    and the runs with a webhook were held in silence all night)."""

    def __init__(self) -> None:
        self.confirms = False  # set by whoever runs the run when its notifier has a channel and reports sendings
        self._lock = threading.Lock()
        self._pending: tuple[FleetHold, int] | None = None  # the hold told, and its need's seq
        self._heard: set[int] = set()  # the needs' seqs the channels took (a late word may come before `start`)

    def start(self, hold: FleetHold, seq: int) -> None:
        """The need of ``hold`` was recorded (``seq``) and is being told to this run's channels (``confirms``): it is
        marked told once they took it (:meth:`due`)."""
        with self._lock:
            self._pending = (hold, seq)

    def heard(self, seq: int) -> None:
        """The operator's channels took (or every one of them refused) the need ``seq``: the notifier's thread."""
        with self._lock:
            self._heard.add(seq)

    def due(self) -> FleetHold | None:
        """The hold to mark told now (its need heard), once."""
        with self._lock:
            if self._pending is None or self._pending[1] not in self._heard:
                return None
            hold, _ = self._pending
            self._pending = None
            self._heard.clear()
            return hold
