"""A runner's link to a shared store: a thread of its own, never on a turn's path.

The run's folder stays the source of truth; the link keeps the store's copy of it and carries commands in:

- **events**: every line of ``events.jsonl`` after the store's last seq, in batches (INSERT ... ON CONFLICT DO
  NOTHING, then NOTIFY): a kill -9 of the runner, of the connection or of the server loses nothing, since the
  next look (or the next run's link) starts again from the store's last seq and the file;
- **the runs table**: the engine's updates (started, needs, cost...) are queued and applied here, in order,
  retried while the store is down (a turn never waits on the network);
- **commands**: rows of ``commands`` for this run are written into the run's own inbox (the crash-safe path, with
  the row's id as the command's), then marked delivered. An id already in the inbox, or already in the log as an
  ``operator_command`` event, is only marked: a kill between the inbox write and the mark delivers it once;
- **the lease**: renewed every :data:`HEARTBEAT` seconds for :data:`LEASE_SECONDS` (the server's clock); views on
  other machines show the run as interrupted once it expires.

A store that stays down past ``down_limit`` seconds asks the operator (a ``needs_operator`` event, reason
``store_down``, the run going on from its folder), cleared when the store is back and caught up.
"""

from __future__ import annotations

import contextlib
import os
import queue
import random
import select
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from console.engine import events as ev
from console.engine.control import write_inbox
from console.engine.job_files import JobPaths
from console.engine.needs import OperatorState, answered, ask_operator
from console.engine.store.base import StoreError
from console.engine.store.marker import (
    MARKER,
    Behind,
    SyncLock,
    Update,
    clear_marker,
    now_text,
    read_marker,
    write_marker,
)
from console.engine.store.postgres import COMMANDS_CHANNEL, CONNECT_TIMEOUT, PgStore
from console.engine.store.schema import EPOCH_SHIFT
from console.engine.store.shipper import LogShipper

LEASE_SECONDS = 25.0
HEARTBEAT = 5.0
TICK = 0.2  # how often the log is looked at for new lines (a command's NOTIFY wakes the link at once)
COMMAND_SWEEP = 5.0  # commands are also looked for this often: a NOTIFY sent while the link was away is not lost
DOWN_LIMIT = 120.0
BACKOFF_FIRST, BACKOFF_CAP = 0.5, 10.0
# Seconds a closing run waits at most for a store that is away to take its last events and its final status
# (AGENT_CONSOLE_STORE_EXIT_WAIT); past it the run leaves a marker and whatever next opens the store on this machine
# catches it up (console.engine.store.catchup).
EXIT_WAIT = 30.0


class LeaseHeld(Exception):
    """Another runner holds a current lease on this run (another machine runs it)."""


class StoreLink(LogShipper):
    def __init__(self, store: PgStore, paths: JobPaths, events: ev.EventStream, operator: OperatorState, *,
                 owner: str, now: Callable[[], datetime], down_limit: float = DOWN_LIMIT,
                 rng: random.Random | None = None, exit_wait: float = EXIT_WAIT,
                 say: Callable[[str], None] | None = None) -> None:
        super().__init__(store, paths, now)
        self.events = events
        self.operator = operator
        self.owner = owner
        self.down_limit = down_limit
        self.rng = rng or random.Random()
        self.written: set[str] = set()  # command ids this link wrote into the inbox
        self.down_since: float | None = None
        self.asked = False
        self.failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._listen: Any = None
        self._next_lease = 0.0
        self._next_sweep = 0.0
        self._wanted = True  # look for commands at the next step
        self.outbox: queue.Queue[tuple[str, tuple[Any, ...]]] = queue.Queue()
        self.exit_wait = exit_wait
        self.say = say or _say
        self.sync = SyncLock(paths)
        self._marker_seen = False
        self._marked = 0  # updates of an earlier run's marker still first in the outbox (then the marker goes)

    # -- lifecycle ------------------------------------------------------------------------------------------
    def start(self, lease_wait: float = LEASE_SECONDS + HEARTBEAT) -> None:
        """Take the lease (:class:`LeaseHeld` if another runner holds a current one), then run the thread. A store
        that cannot be reached now is no reason not to run: the link catches up once it is back."""
        try:
            self.store.ensure_run(self.paths.root, self.paths.root.name, self.now())
            # A runner of another machine that died holds its lease until it expires: waited for (a pod that
            # resumes an evicted one's run from their volume starts within the lease's time).
            deadline = time.monotonic() + lease_wait
            while self.store.take_lease(self.key, self.owner, LEASE_SECONDS, self.paths.root) is None:
                if time.monotonic() >= deadline:
                    raise LeaseHeld(f"{self.paths.root}: another runner holds this run's lease in the store "
                                    f"{self.store.shown}: it runs on another machine")
                time.sleep(1.0)
            self._next_lease = time.monotonic() + HEARTBEAT
        except StoreError as exc:
            self._went_down(exc)
        self.store.outbox = self.outbox
        self._thread = threading.Thread(target=self._run, name="store-link", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the thread, then give the store its last events, the queued updates and the lease back, waiting
        for it (with the run's backoff) up to :attr:`exit_wait` seconds; a store still away then gets a marker in
        the folder (and its pointer), so that this machine catches it up later (console.engine.store.catchup)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=CONNECT_TIMEOUT + 5)
        self.store.outbox = None
        self._close_listen()
        deadline = time.monotonic() + self.exit_wait
        if self.sync._fd is None:  # the thread never had it (a catch-up held it all the run's short life)
            while not self.sync.take(wait=False) and not self.sync.unavailable and time.monotonic() < deadline:
                time.sleep(0.1)
            if self.sync._fd is not None:
                self._take_marker()
        told = False
        while True:
            try:
                self._flush()
                break
            except Exception as exc:  # a StoreError, or a link bug: the marker keeps what is owed
                if not told:
                    told = True
                    # Written before the wait too: a runner killed while it waits leaves what it owes behind.
                    self._leave_marker(exc, final=False)
                    if self.exit_wait > 0:
                        self.say(f"the shared store {self.store.shown} is away ({_short(exc)}): waiting up to "
                                 f"{self.exit_wait:g}s for it to take the run's last events and its final status")
                left = deadline - time.monotonic()
                if left <= 0:
                    self._leave_marker(exc)
                    break
                time.sleep(min(self._backoff(), left))
        self.sync.release()

    def _flush(self) -> None:
        """Everything owed to the store: the queued updates, every line of the log, the lease; the marker of an
        earlier end, if any, goes once they are in."""
        self._drain_outbox()
        while self._ship():
            pass
        self.store.drop_lease(self.key, self.owner)
        if self._marker_seen:
            clear_marker(self.paths, self.key, self.store.data_dir)

    def _leave_marker(self, exc: BaseException, final: bool = True) -> None:
        updates = [Update(op=op, params=list(params)) for op, params in list(self.outbox.queue)]
        behind = Behind(store=self.store.shown, key=self.key, host=self.store.host, owner=self.owner,
                        since=now_text(), updates=updates)
        try:
            if (seal := self.store.seal) is None:
                raise OSError("no data dir holds the operator's key to seal it")
            write_marker(self.paths, behind, self.store.data_dir, seal)
            self._marker_seen = True  # the store's catching up removes it (this link's own flush included)
            self._marked = 0  # every update it lists is still in the outbox, and it goes once they are applied
        except OSError as mexc:
            self.say(f"the shared store {self.store.shown} is still away ({_short(exc)}) and the marker that would "
                     f"catch it up cannot be written ({mexc.strerror or mexc}): resume the run once the store is "
                     "back to bring it up to date")
            return
        if not final:
            return
        self.say(f"the shared store {self.store.shown} is still away ({_short(exc)}): the run's last events and "
                 f"status wait in its folder (.console/{MARKER}); `agent-console store sync` (or jobs, run, the "
                 "fleet) on this machine sends them once the store is back")

    def _take_marker(self) -> None:
        """An earlier end's marker (this folder's store was away then): its updates go first, then it goes."""
        # Only a marker this operator's harness left for this folder, whose updates are all its own run's.
        behind = read_marker(self.paths, self.store.seal)
        self._marker_seen = behind is not None
        if behind is None or behind.key != self.key:
            return
        with self.outbox.mutex:
            self.outbox.queue.extendleft((u.op, tuple(u.params)) for u in reversed(behind.updates))
        self._marked = len(behind.updates)

    # -- the thread -----------------------------------------------------------------------------------------
    def _run(self) -> None:
        # Who keeps the store in step with this folder: a catch-up of another process that holds it ends soon.
        while not self.sync.take(wait=False) and not self.sync.unavailable:
            if self._stop.wait(0.2):
                return
        self._take_marker()
        while not self._stop.is_set():
            try:
                self._step()
                if self.down_since is not None:
                    self._came_back()
                self._wait(TICK)
            except StoreError as exc:
                self._went_down(exc)
                self._close_listen()
                self._stop.wait(self._backoff())
            except Exception as exc:  # never take the run down: said once, then tried again
                self._went_down(StoreError(f"store link: {type(exc).__name__}: {str(exc)[:200]}"))
                self._stop.wait(self._backoff())

    def _step(self) -> None:
        self._drain_outbox()
        while self._ship():
            pass
        now = time.monotonic()
        if now >= self._next_lease:
            last = self.store.take_lease(self.key, self.owner, LEASE_SECONDS, self.paths.root)
            if last is None:
                self.events.emit(ev.ErrorEvent, message="another runner took this run's lease in the shared store",
                                 where="store", recoverable=True)
            elif last < (self.epoch << EPOCH_SHIFT) + self.shipped and self.have is None:
                self._rewind()  # the server lost commits it had acknowledged (a crash): they are shipped again
            self._next_lease = now + HEARTBEAT
        if self._wanted or now >= self._next_sweep:
            self._wanted = False
            self._next_sweep = now + COMMAND_SWEEP
            self._deliver()

    def _wait(self, seconds: float) -> None:
        """Sleep until a command's NOTIFY or ``seconds``; the listening connection is made here, and again after
        a drop."""
        if self._listen is None:
            self._listen = self.store.listener(COMMANDS_CHANNEL)
            self._wanted = True  # what was sent while the link did not listen
            return
        try:
            # The socket waited on without the GIL: psycopg's notifies(timeout=...) polls while it waits, taking
            # the run's GIL thousands of times a second (4 ms of CPU a second here, against 0.5 this way).
            ready, _, _ = select.select([self._listen.fileno()], [], [], seconds)
            if ready:
                for note in self._listen.notifies(timeout=0, stop_after=1000):
                    if note.payload == self.key:
                        self._wanted = True
        except Exception as exc:  # the connection dropped: made again at the next wait
            self._close_listen()
            raise StoreError(f"store {self.store.shown}: the listening connection dropped ({type(exc).__name__})"
                             ) from None

    def _close_listen(self) -> None:
        if self._listen is not None:
            with contextlib.suppress(Exception):
                self._listen.close()
            self._listen = None

    def _backoff(self) -> float:
        """Exponential with full jitter, capped: runners that lost one server do not all come back at once."""
        self.failures += 1
        return float(self.rng.uniform(0, min(BACKOFF_CAP, BACKOFF_FIRST * 2 ** min(self.failures, 10))))

    # -- store down and back --------------------------------------------------------------------------------
    def _went_down(self, exc: StoreError) -> None:
        self._rewind()  # when it is back: a server that crashed may have lost what it acknowledged last
        now = time.monotonic()
        if self.down_since is None:
            self.down_since = now
            self.events.emit(ev.ErrorEvent, message=f"{exc}; the run goes on from its folder and the store catches "
                             "up when it is back", where="store", recoverable=True)
        elif not self.asked and now - self.down_since >= self.down_limit and self.operator.needs is None:
            self.asked = True
            ask_operator(self.events, self.operator, "store_down",
                         f"the shared store has been unreachable for {int(now - self.down_since)}s; the run goes on "
                         "from its folder, and other machines do not see it until the store is back",
                         [str(exc)], pause=False)

    def _came_back(self) -> None:
        self._next_lease = 0.0
        self.down_since, self.failures = None, 0
        if self.asked and self.operator.needs == "store_down":
            answered(self.events, self.operator, "the store is back")
        self.asked = False

    # -- the runs table -------------------------------------------------------------------------------------
    def _drain_outbox(self) -> bool:
        """Apply the engine's queued updates in order; one that fails stays first in line. True if any was."""
        did = False
        while True:
            try:
                op, params = self.outbox.queue[0]
            except IndexError:
                return did
            self.store.apply(op, params)
            self.outbox.get_nowait()
            did = True
            if self._marked:
                self._marked -= 1
                if not self._marked and self._marker_seen:  # an earlier end's updates are in: its marker goes
                    clear_marker(self.paths, self.key, self.store.data_dir)
                    self._marker_seen = False

    # -- commands -------------------------------------------------------------------------------------------
    def _deliver(self) -> None:
        pending = self.store.undelivered(self.key)
        if not pending:
            return
        while self._ship():  # the log's operator_command events first: they say which ids were received
            pass
        try:
            inbox = {n.rsplit("-", 1)[-1].removesuffix(".json") for n in os.listdir(self.paths.inbox)}
        except OSError:
            inbox = set()
        for cid, body in pending:
            hexid = cid.replace("-", "")
            if hexid not in self.seen_commands | self.written | inbox:
                self._write(hexid, body)
            self.store.delivered(cid)

    def _write(self, hexid: str, body: dict[str, Any]) -> None:
        from console.engine.commands import CommandError

        self.written.add(hexid)
        try:
            args = body.get("args") if isinstance(body.get("args"), dict) else {}
            source = claimed_source(body.get("source"))
            if not isinstance(body.get("command"), str):
                raise CommandError("it names no command")
            # Sent to the runner that held the run then (its lease's owner): addressed to that run, so that a
            # runner taking the run later discards it (a stop meant for a run that ended meanwhile).
            owner, run = body.get("for"), None  # None: for this runner (the one that holds the run now)
            if isinstance(owner, str) and owner != self.owner:
                run = owner.rsplit(":", 1)[-1][:64] or "another-process"  # the owner is "host:pid:run"
            write_inbox(self.paths, str(body.get("command")), args, source=source, command_id=hexid, run=run)
        except (CommandError, ValueError) as exc:
            self.events.emit(ev.ErrorEvent, message=f"a command from the store is not one: {str(exc)[:200]}",
                             where="store", recoverable=True)
        except OSError as exc:
            self.written.discard(hexid)
            raise StoreError(f"the inbox cannot be written: {exc.strerror or exc}") from None


def claimed_source(claim: object) -> str:
    """Who a store command says sent it: any machine writing the store writes that, so it is their claim, kept as
    text of one line. Never one of the sources a signal or a folder gone gives a stop (console.engine.operator's
    SIGNALS: the run would end "interrupted", not stopped by its operator): that claim is said as one."""
    from console.engine.control import SIGNALS
    from console.engine.text import safe_text

    text = safe_text(str(claim or "store"), one_line=True, join=True)[:64] or "store"
    return f"store, claiming {text}"[:64] if text in SIGNALS else text


def _say(text: str) -> None:
    """The runner's own output (its log): the events file is closed by the time the link's last words come."""
    with contextlib.suppress(Exception):
        print(f"agent-console: {text}", file=sys.stderr, flush=True)


def _short(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]


def exit_wait_setting() -> float:
    """AGENT_CONSOLE_STORE_EXIT_WAIT (seconds, 0 to 3600), else :data:`EXIT_WAIT`."""
    try:
        value = float(os.environ.get("AGENT_CONSOLE_STORE_EXIT_WAIT", EXIT_WAIT))
    except ValueError:
        return EXIT_WAIT
    return min(3600.0, max(0.0, value)) if value == value else EXIT_WAIT


def link_run(store: object, paths: JobPaths, events: ev.EventStream, operator: OperatorState, run: str | None,
             now: Callable[[], datetime]) -> StoreLink | None:
    """The started link of a run whose store is shared (None for the embedded store). :class:`LeaseHeld` when
    another runner holds the run's lease."""
    if not isinstance(store, PgStore):
        return None
    link = StoreLink(store, paths, events, operator, owner=f"{store.host}:{os.getpid()}:{run or ''}"[:200], now=now,
                     exit_wait=exit_wait_setting())
    link.start()
    return link
