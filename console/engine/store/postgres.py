"""The shared jobs store: PostgreSQL (psycopg 3 and its connection pool), for a fleet across machines.

``runs`` holds one row per run (the embedded store's columns, plus the machine whose folder it is and a
runner's lease), ``events`` every line of each run's ``events.jsonl`` (shipped by the runner's
:class:`~console.engine.store.link.StoreLink`), ``commands`` the operator's commands on their way to a run.
A run is keyed by an id its folder keeps (``.console/store-id``, made at its first start on a shared store):
the run keeps its row and its events when its folder moves to another machine (a volume mounted by the next
pod), and two machines' folders of the same path are two runs. Its short id stays the folder's
(:func:`console.engine.runs.run_id`); its row says which machine runs it now (``host``).

Followers wake on NOTIFY (:data:`EVENTS_CHANNEL`, :data:`COMMANDS_CHANNEL`; the payload is the run's key)
instead of polling. Every error is a :class:`StoreError` of one line that never shows the URL's password.

Why one module of ~570 lines: it is the one place that knows the SQL and psycopg, the store's side of every
update the engine makes, every read the views make and the lease and command queues the links use.
"""

from __future__ import annotations

import builtins  # the class's own `list` method shadows the type in its annotations
import contextlib
import hashlib
import json
import logging
import os
import queue
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from console.engine.bounded_json import MAX_BYTES, BoundsError, loads
from console.engine.seal import Seal, SealError, read_record
from console.engine.store.base import (
    COLUMNS,
    FINISHED,
    GAVE_UP,
    NEEDS_YOU,
    JobRow,
    StoreError,
    shown_store_url,
    this_host,
)
from console.engine.store.schema import EPOCH_SHIFT, SchemaTooNew, migrate

EVENTS_CHANNEL = "agent_console_events"
COMMANDS_CHANNEL = "agent_console_commands"
CONNECT_TIMEOUT = 5  # seconds: a store that cannot be reached is told within this, never waited on for long
POOL_MAX = 4
_ROW = ", ".join(COLUMNS) + ", host, key, (lease_expires IS NOT NULL AND lease_expires > now())"


HEAL_EVERY = 30.0  # seconds between two looks for runs to catch up (the fleet's poll lists often)
# An answer to an MCP server's question (`agent-console answer` to another machine's run) carries what the operator
# typed, a token the server asked for maybe: the store drops its values once the run took it (delivered), and drops
# an answer no run took when its run ends (its question ended with its call) or once it is older than the longest a
# question waits (QUESTION_WAIT_BOUND, elicitation_timeout's bound with an hour to spare), for a run that was killed
# and never resumed.
QUESTION_WAIT_BOUND = 86_400.0 + 3600  # tests/store/test_remote_commands.py holds it above MAX_ELICITATION_TIMEOUT
_UNTAKEN_ANSWERS = "DELETE FROM commands WHERE delivered_at IS NULL AND body->>'command' = 'answer' AND "
DROP_ANSWERS_OF_RUN = _UNTAKEN_ANSWERS + "run_key = %s"
DROP_STALE_ANSWERS = _UNTAKEN_ANSWERS + "created_at < now() - make_interval(secs => %s)"
ENDS = frozenset({"completed", "ended", "gave_up"})  # the UPDATES that end a run (its key their last value)

# The engine's updates of the runs table, by name: queued by a runner's link, and kept by name in the marker of a
# run whose store was away at its end (console.engine.store.catchup), never as SQL read back from a file.
UPDATES: dict[str, str] = {
    "started": """INSERT INTO runs (key, id, host, path, name, status, provider, model, started_at, updated_at)
               VALUES (%s, %s, %s, %s, %s, 'running', %s, %s, %s, %s)
               ON CONFLICT (key) DO UPDATE SET status='running', provider=EXCLUDED.provider, model=EXCLUDED.model,
               updated_at=EXCLUDED.updated_at, detail=NULL, needs_since=NULL, host=EXCLUDED.host, path=EXCLUDED.path,
               id=EXCLUDED.id WHERE runs.status <> 'completed'""",
    "completed": "UPDATE runs SET status='completed', completed_at=%s, updated_at=%s, confidence=%s, summary=%s, "
                 "needs_since=NULL WHERE key=%s",
    "ended": "UPDATE runs SET status=%s, updated_at=%s, detail=%s, needs_since=NULL WHERE key=%s AND "
             "status <> 'completed'",
    "needs": f"UPDATE runs SET status='{NEEDS_YOU}', updated_at=%s, detail=%s, needs_since=COALESCE(needs_since, %s) "
             "WHERE key=%s AND status <> 'completed'",
    "answered": f"UPDATE runs SET status='running', updated_at=%s, detail=NULL, needs_since=NULL WHERE key=%s AND "
                f"status='{NEEDS_YOU}'",
    "gave_up": f"UPDATE runs SET status='{GAVE_UP}', updated_at=%s, detail=%s, confidence=%s, "
               "needs_since=COALESCE(needs_since, %s) WHERE key=%s AND status <> 'completed'",
    "acknowledged": f"UPDATE runs SET status=CASE WHEN status='{NEEDS_YOU}' THEN 'interrupted' ELSE status END, "
                    "updated_at=%s, needs_since=NULL WHERE key=%s AND status <> 'completed'",
    "paused": "UPDATE runs SET status='paused', updated_at=%s WHERE key=%s AND status='running'",
    "unpaused": "UPDATE runs SET status='running', updated_at=%s WHERE key=%s AND status='paused'",
    "cost": "UPDATE runs SET cost_usd=%s WHERE key=%s",
    # The run's spend of its day so far (console.engine.store.pg_fleet): a figure, not an increment, so applying it
    # again (a marker's catch-up) ends the same; never lowered within a day, never back to an earlier day.
    "spent": """INSERT INTO fleet_spend (day, job, usd, key) SELECT %s, %s, %s, key FROM runs WHERE key=%s
               ON CONFLICT (key) DO UPDATE SET
               usd=CASE WHEN fleet_spend.day=EXCLUDED.day THEN GREATEST(fleet_spend.usd, EXCLUDED.usd)
                   ELSE EXCLUDED.usd END, day=EXCLUDED.day, job=EXCLUDED.job
               WHERE EXCLUDED.day >= fleet_spend.day""",
}


STORE_ID = "store-id"  # in the run's .console/: its key in a shared store, sealed (console.engine.seal)
SEAL_KIND = "store-id"


def run_key(host: str, path: str | Path) -> str:
    """A key from a machine and a folder: a run whose folder cannot hold its store id (not writable), or whose
    id cannot be sealed (no data dir to hold the operator's key)."""
    return hashlib.sha256(f"{host}\0{path}".encode("utf-8", "surrogateescape")).hexdigest()[:32]


def read_store_id(path: str | Path, seal: Seal, *, earlier: bool = False) -> str | None:
    """The key the folder ``path`` keeps, if this operator's harness made it for this folder (its seal on the line
    after it); ``earlier``: a key without a seal is believed too (a run of this operator from before seals: see
    console.engine.seal). None: none, or one that is not this operator's (a job folder from elsewhere naming a
    run of the store it does not own)."""
    data = read_record(Path(path) / ".console" / STORE_ID, 200)
    if data is None:
        return None
    lines = data.decode("ascii", "replace").split("\n")
    key = lines[0].strip()
    if not _HEX32.fullmatch(key):
        return None
    mac = lines[1].strip().removeprefix("seal ") if len(lines) > 1 else ""
    if seal.holds(SEAL_KIND, path, key.encode(), mac) or (earlier and not mac):
        return key
    return None


def write_store_id(path: str | Path, key: str, seal: Seal) -> None:
    """The key and its seal, in one atomic write."""
    from console.engine.atomic import atomic_write_text

    state = Path(path) / ".console"
    atomic_write_text(state / STORE_ID, f"{key}\nseal {seal.mac(SEAL_KIND, path, key.encode())}\n",
                      tmp_dir=state / "tmp")


def folder_key(path: str | Path, host: str, seal: Seal | None) -> str:
    """The run's key in a shared store: the id its folder keeps (sealed), made (atomically) the first time it is
    asked. A folder's id that is not this operator's is never used: a new one replaces it."""
    if seal is None:
        return run_key(host, path)
    earlier = seal.earlier(path)  # a run of this operator from before seals: its id is sealed now
    key = read_store_id(path, seal, earlier=earlier)
    if key is not None:
        if earlier:
            with contextlib.suppress(OSError):
                write_store_id(path, key, seal)
        return key
    key = uuid.uuid4().hex
    try:
        write_store_id(path, key, seal)
    except OSError:
        return run_key(host, path)
    return key


def reseal_store_id(paths: Any, seal: Seal) -> None:
    """Seal the store id of a run of this operator from before seals (console.engine.provenance.adopt)."""
    key = read_store_id(paths.root, seal, earlier=True)
    if key is not None:
        write_store_id(paths.root, key, seal)


_HEX32 = re.compile(r"[0-9a-f]{32}")


def _row(r: Sequence[Any]) -> JobRow:
    values = dict(zip((*COLUMNS, "host", "key"), r, strict=False))
    return JobRow(**values, leased=bool(r[-1]))


class PgStore:
    """The jobs store on a PostgreSQL server (see the module). ``host``: the machine this process is."""

    shared = True

    def __init__(self, url: str, *, host: str | None = None, pool_max: int = POOL_MAX, lenient: bool = False,
                 data_dir: Path | None = None) -> None:
        """``lenient``: a server that cannot be reached now is no error (a run starting while its store is away:
        :attr:`error` says so, and the schema is checked at the first connection that works). ``data_dir``: this
        machine's (the operator's key, which seals each folder's store id, and the catch-up's pointers)."""
        import psycopg  # lazily: only a shared store pays for it
        from psycopg_pool import ConnectionPool

        self.url = url
        self.shown = shown_store_url(url)
        self.host = host or this_host()
        self.error: str | None = None
        self.not_private: list[str] = []
        # Set while a runner's link runs: the engine's updates go through it (never block a turn).
        self.outbox: queue.Queue[tuple[str, tuple[Any, ...]]] | None = None
        self._keys: dict[str, str] = {}
        # This machine's data dir (set by open_store): where the runs that ended while the store was away are
        # listed (:meth:`heal`). None: nothing is caught up by this store object.
        self.data_dir: Path | None = data_dir
        self._seal: Seal | None = None
        self.healer: Callable[[], object] | None = None
        self._next_heal = 0.0
        self._psycopg = psycopg
        # The pool logs each failed reconnection attempt as a warning on stderr (a runner's log, under the story
        # of the run): a dozen lines a minute while the store is away. The store says it once, in its own words.
        logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)
        # One connection of our own first: the pool retries a refused one (with backoff) until its timeout, so a
        # server that refused at once was told only after CONNECT_TIMEOUT. A refusal is told now; a server that
        # never answers still gets its bound (connect_timeout).
        away = self._reach()
        if away is not None and not lenient:
            raise StoreError(away)
        try:
            self.pool = ConnectionPool(url, min_size=1, max_size=pool_max, timeout=CONNECT_TIMEOUT, open=True,
                                       kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT},
                                       configure=_bounded_jsonb,
                                       check=ConnectionPool.check_connection, name="agent-console-store")
        except Exception as exc:  # a URL the library refuses: its message may quote the URL
            raise StoreError(f"store {self.shown}: {self._say(exc)}") from None
        self._migrated = False
        # The server could not be reached at the last look: the next call looks again with one connection of its
        # own (told at once when refused) before it waits on the pool, whose wait for a connection is its whole
        # timeout while the server refuses (a run starting beside a store that is down made three calls before its
        # first turn: 15 s late).
        self._away = away is not None
        if away is not None:  # lenient: the run goes on; the pool connects once the server is back
            self.error = away
            return
        try:
            with self.connection():
                pass  # migrated there
        except StoreError as exc:
            if not lenient or "newer than this agent-console" in str(exc):
                self.pool.close()
                raise
            self.error = str(exc)
        except Exception:
            self.pool.close()
            raise

    def _reach(self) -> str | None:
        """None when the server takes a connection now; else one line saying why not (refused at once, no answer
        within CONNECT_TIMEOUT, a login refused...)."""
        try:
            conn = self._psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
        except self._psycopg.Error as exc:
            return f"store {self.shown}: cannot be reached ({self._say(exc)})"
        with contextlib.suppress(Exception):
            conn.close()
        return None

    def _say(self, exc: BaseException) -> str:
        """One line about ``exc``, with the password cut out wherever the library quoted it."""
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        with contextlib.suppress(ValueError):
            from urllib.parse import urlsplit

            password = urlsplit(self.url).password
            if password:
                text = text.replace(password, "***")
        return text.replace(self.url, self.shown)

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled connection (autocommit); :class:`StoreError` when the server cannot be reached or fails."""
        from psycopg_pool import PoolTimeout

        if self._away:
            if (away := self._reach()) is not None:
                raise StoreError(away)
            self._away = False
        try:
            with self.pool.connection() as conn:
                if not self._migrated:  # the first connection that works brings the schema up to date
                    migrate(conn)
                    self._migrated = True
                yield conn
        except SchemaTooNew as exc:
            raise StoreError(f"store {self.shown}: {exc}") from None
        except PoolTimeout:
            self._away = True
            raise StoreError(f"store {self.shown}: cannot be reached (no connection within {CONNECT_TIMEOUT}s)"
                             ) from None
        except self._psycopg.Error as exc:
            raise StoreError(f"store {self.shown}: {self._say(exc)}") from None

    @property
    def seal(self) -> Seal | None:
        """The operator's key (console.engine.seal), from :attr:`data_dir`; None without one, or when it cannot be
        had: no folder's store id is believed then (each run is keyed by its machine and path)."""
        if self._seal is None and self.data_dir is not None:
            with contextlib.suppress(SealError):
                self._seal = Seal.of(self.data_dir)
        return self._seal

    def key(self, path: str | Path) -> str:
        """The key of a run of this machine (its folder's store id, if this operator's harness made it there)."""
        where = str(path)
        if where not in self._keys:
            self._keys[where] = folder_key(where, self.host, self.seal)
        return self._keys[where]

    # -- the engine's updates (never raise: :attr:`error` says what failed) -----------------------------------
    def _update(self, op: str, params: tuple[Any, ...]) -> None:
        if self.outbox is not None:
            self.outbox.put((op, params))  # the runner's link applies it, in order, retrying while down
            return
        try:
            self.apply(op, params)
        except StoreError as exc:
            self.error = str(exc)

    def apply(self, op: str, params: tuple[Any, ...] | builtins.list[Any]) -> None:
        """Apply one of the engine's updates (:data:`UPDATES`, by name: a marker of a run whose store was away
        keeps the names and values, never SQL). Each sets values, so applying a sequence again ends the same."""
        self.execute(UPDATES[op], tuple(params))
        if op in ENDS:
            self.execute(DROP_ANSWERS_OF_RUN, (params[-1],))

    def drop_stale_answers(self) -> None:
        """Drop the answers no run took within the longest a question waits (see DROP_STALE_ANSWERS)."""
        self.execute(DROP_STALE_ANSWERS, (QUESTION_WAIT_BOUND,))

    def execute(self, sql: str, params: tuple[Any, ...]) -> None:
        with self.connection() as conn:
            conn.execute(sql, params)

    def started(self, path: Path, name: str, provider: str, model: str, now: datetime) -> None:
        ts = now.isoformat(timespec="seconds")
        self._update("started", (self.key(path), _short_id(path), self.host, str(path), name, provider, model, ts, ts))

    def completed(self, path: Path, now: datetime, confidence: float, summary: str) -> None:
        ts = now.isoformat(timespec="seconds")
        self._update("completed", (ts, ts, confidence, summary, self.key(path)))

    def ended(self, path: Path, status: str, now: datetime, detail: str = "") -> None:
        self._update("ended", (status, now.isoformat(timespec="seconds"), detail, self.key(path)))

    def needs(self, path: Path, reason: str, message: str, now: datetime, since: datetime | None = None) -> None:
        ts = now.isoformat(timespec="seconds")
        first = (since or now).isoformat(timespec="seconds")
        self._update("needs", (ts, f"{reason}: {message}"[:2000], first, self.key(path)))

    def answered(self, path: Path, now: datetime) -> None:
        self._update("answered", (now.isoformat(timespec="seconds"), self.key(path)))

    def gave_up(self, path: Path, now: datetime, confidence: float, detail: str) -> None:
        ts = now.isoformat(timespec="seconds")
        self._update("gave_up", (ts, detail[:2000], confidence, ts, self.key(path)))

    def acknowledged(self, path: Path, now: datetime) -> None:
        self._update("acknowledged", (now.isoformat(timespec="seconds"), self.key(path)))

    def paused(self, path: Path, now: datetime) -> None:
        self._update("paused", (now.isoformat(timespec="seconds"), self.key(path)))

    def unpaused(self, path: Path, now: datetime) -> None:
        self._update("unpaused", (now.isoformat(timespec="seconds"), self.key(path)))

    def cost(self, path: Path, usd: float | None) -> None:
        if usd is not None and not (usd >= 0 and usd < float("inf")):
            return
        self._update("cost", (usd, self.key(path)))

    def heal(self, force: bool = False) -> None:
        """Catch up this machine's runs that ended while the store was away (:attr:`healer`, set by open_store:
        console.engine.store.catchup): one look at a folder of the data dir when none is waiting; at most every
        :data:`HEAL_EVERY` seconds."""
        if self.data_dir is None or self.healer is None:
            return
        now = time.monotonic()
        if not force and now < self._next_heal:
            return
        self._next_heal = now + HEAL_EVERY
        try:
            if not os.listdir(self.data_dir / "store-behind"):
                return  # the usual case: nothing waits, and nothing more is read
        except OSError:
            return
        with contextlib.suppress(StoreError, OSError):
            self.healer()

    # -- the views' reads (raise StoreError) ------------------------------------------------------------------
    def list(self, limit: int = 50) -> builtins.list[JobRow]:
        self.heal()
        with self.connection() as conn:
            rows = conn.execute(f"SELECT {_ROW} FROM runs ORDER BY started_at DESC, path DESC LIMIT %s",
                                (limit,)).fetchall()
        return [_row(r) for r in rows]

    def list_live_and_recent(self, recent: int) -> tuple[builtins.list[JobRow], int]:
        done = builtins.list(FINISHED)
        self.heal()
        with self.connection() as conn:
            live = conn.execute(f"SELECT {_ROW} FROM runs WHERE status <> ALL(%s)", (done,)).fetchall()
            ended = conn.execute(f"SELECT {_ROW} FROM runs WHERE status = ANY(%s) ORDER BY started_at DESC, "
                                 "path DESC LIMIT %s", (done, recent)).fetchall()
            counted = conn.execute("SELECT COUNT(*) FROM runs WHERE status = ANY(%s)", (done,)).fetchone()
        finished = int(counted[0]) if counted else 0
        rows = sorted((_row(r) for r in (*live, *ended)), key=lambda r: (r.started_at, r.path), reverse=True)
        return rows, max(0, finished - len(ended))

    def get(self, path: Path | str, host: str | None = None) -> JobRow | None:
        """The row of the run in the folder ``path`` of ``host`` (default: this machine)."""
        with self.connection() as conn:
            r = conn.execute(f"SELECT {_ROW} FROM runs WHERE host=%s AND path=%s ORDER BY updated_at DESC LIMIT 1",
                             (host or self.host, str(path))).fetchone()
        return _row(r) if r else None

    def by_key(self, key: str) -> JobRow | None:
        with self.connection() as conn:
            r = conn.execute(f"SELECT {_ROW} FROM runs WHERE key=%s", (key,)).fetchone()
        return _row(r) if r else None

    def forget(self, paths: builtins.list[str | Path]) -> int:
        """Remove the rows (their events and commands with them) of these runs of this machine (by folder: a
        folder that is gone holds no store id any more)."""
        with self.connection() as conn:
            return int(conn.execute("DELETE FROM runs WHERE host=%s AND path = ANY(%s)",
                                    (self.host, [str(p) for p in paths])).rowcount)

    # -- events ---------------------------------------------------------------------------------------------
    def shipped(self, key: str) -> int:
        """The last seq of the run's events the store holds (0: none; -1: the run has no row yet)."""
        with self.connection() as conn:
            r = conn.execute("SELECT last_seq FROM runs WHERE key=%s", (key,)).fetchone()
        return int(r[0]) if r else -1

    def seqs(self, key: str) -> set[int]:
        """Every seq of the run's events the store holds, whatever the generation of its log."""
        with self.connection() as conn:
            return {int(s) for (s,) in conn.execute("SELECT seq FROM events WHERE run_key=%s", (key,))}

    def held(self, key: str) -> tuple[int, dict[int, builtins.list[tuple[int, int | None]]]]:
        """The run's current log generation, and for each seq the store holds: (generation, digest) of each copy
        (a link's catch-up looks for the holes, and for a log started again)."""
        with self.connection() as conn:
            r = conn.execute("SELECT log_epoch FROM runs WHERE key=%s", (key,)).fetchone()
            out: dict[int, builtins.list[tuple[int, int | None]]] = {}
            for seq, epoch, digest in conn.execute("SELECT seq, epoch, digest FROM events WHERE run_key=%s", (key,)):
                out.setdefault(int(seq), []).append((int(epoch), None if digest is None else int(digest)))
        return (int(r[0]) if r else 0), out

    def new_epoch(self, key: str) -> int:
        """Start a new generation of the run's log in the store (its log was moved aside and begun again)."""
        with self.connection() as conn:
            r = conn.execute("UPDATE runs SET log_epoch = log_epoch + 1 WHERE key=%s RETURNING log_epoch",
                             (key,)).fetchone()
        if r is None:
            raise StoreError(f"store {self.shown}: no such run")
        return int(r[0])

    def ensure_run(self, path: Path, name: str, now: datetime) -> None:
        """A row for a run whose start the store missed (it was down): its events need one to belong to."""
        ts = now.isoformat(timespec="seconds")
        self.execute("INSERT INTO runs (key, id, host, path, name, status, started_at, updated_at) "
                     "VALUES (%s, %s, %s, %s, %s, 'running', %s, %s) ON CONFLICT (key) DO NOTHING",
                     (self.key(path), _short_id(path), self.host, str(path), name, ts, ts))

    def append_events(self, key: str, lines: builtins.list[tuple[int, str | None, str, str]],
                      epoch: int = 0, digests: builtins.list[int | None] | None = None) -> None:
        """Store events (seq, ts, type, the JSON line) of one run, in generation ``epoch`` of its log; those it has
        already are left as they are (a redelivery after a kill). One statement (the rows, the run's last pos, then
        NOTIFY so that followers wake): one round trip, and little of the runner's CPU. :class:`BadLines` when a
        line is no JSON the server takes (none of the batch is stored then)."""
        if not lines:
            return
        seqs, stamps, kinds, bodies = (builtins.list(column) for column in zip(*lines, strict=True))
        sums = digests if digests is not None else [None] * len(seqs)
        try:
            with self.connection() as conn:
                conn.execute(
                    "WITH rows AS (INSERT INTO events (run_key, epoch, seq, ts, type, body, digest) "
                    "SELECT %s, %s, s, t, k, b::jsonb, d FROM unnest(%b::bigint[], %b::timestamptz[], %b::text[], "
                    "%b::text[], %b::bigint[]) AS u(s, t, k, b, d) ON CONFLICT (run_key, epoch, seq) DO NOTHING), "
                    "seen AS (UPDATE runs SET last_seq = GREATEST(last_seq, %s) WHERE key=%s) "
                    "SELECT pg_notify(%s, %s)",
                    (key, epoch, seqs, stamps, kinds, bodies, sums, (epoch << EPOCH_SHIFT) + max(seqs), key,
                     EVENTS_CHANNEL, key))
        except StoreError as exc:
            if isinstance(exc.__context__, self._psycopg.errors.DataError):
                raise BadLines(str(exc)) from None
            raise

    def events_after(self, key: str, seq: int, limit: int = 2000) -> builtins.list[tuple[int, Any]]:
        """The run's events after ``seq``, in order (at most ``limit``), each body parsed with bounds (None for a
        body that is no JSON within them: one bad row). ``seq`` is the store's order of the run's events (``pos``):
        the events' own seq for a log never moved aside, then each later generation's."""
        return [(pos, _loads(text)) for pos, text in self.event_texts_after(key, seq, limit)]

    def event_texts_after(self, key: str, seq: int, limit: int = 2000) -> builtins.list[tuple[int, str | None]]:
        """:meth:`events_after` with each body as its JSON text (None: larger than a body may be); a reader parses
        it once, with bounds (:func:`console.engine.bounded_json.loads`, or the event models)."""
        with self.connection() as conn:
            rows = conn.execute(f"SELECT pos, {_bounded('t')} FROM (SELECT pos, body::text AS t FROM events "
                                "WHERE run_key=%s AND pos > %s ORDER BY pos LIMIT %s) AS page",
                                (key, seq, limit)).fetchall()
        return [(int(s), b) for s, b in rows]

    def events_of_many(self, after: dict[str, int], limit: int = 20000
                       ) -> builtins.list[tuple[str, int, str | None]]:
        """The events after each run's seq in ``after`` (run key -> seq), in one query: the fleet's catch-up. Each
        body is its JSON text (None: larger than a body may be), for the reader to parse with bounds."""
        if not after:
            return []
        keys, seqs = zip(*after.items(), strict=True)
        with self.connection() as conn:
            rows = conn.execute(f"SELECT k, pos, {_bounded('t')} FROM (SELECT e.run_key AS k, e.pos, e.body::text "
                                "AS t FROM unnest(%s::text[], %s::bigint[]) AS c(k, s) JOIN events e ON e.run_key = "
                                "c.k AND e.pos > c.s ORDER BY e.run_key, e.pos LIMIT %s) AS page",
                                (builtins.list(keys), builtins.list(seqs), limit)).fetchall()
        return [(k, int(s), b) for k, s, b in rows]

    def last_seqs(self, keys: builtins.list[str]) -> dict[str, int]:
        with self.connection() as conn:
            rows = conn.execute("SELECT key, last_seq FROM runs WHERE key = ANY(%s)", (keys,)).fetchall()
        return {k: int(s) for k, s in rows}

    # -- commands -------------------------------------------------------------------------------------------
    def send_command(self, key: str, body: dict[str, Any]) -> str:
        """Queue a command (the inbox file's JSON) for the run ``key``; its id. The run's link is woken. A command
        of an id queued before is not queued again (a web page's form sent twice, an answer retried after a lost
        reply or a kill of its sender): it reaches the run once."""
        cid = str(uuid.UUID(hex=body["id"])) if _is_uuid(body.get("id")) else str(uuid.uuid4())
        with self.connection() as conn, conn.transaction():
            row = conn.execute("SELECT CASE WHEN lease_expires >= now() THEN lease_owner END FROM runs WHERE key=%s "
                               "FOR SHARE", (key,)).fetchone()
            if row is None:
                raise StoreError(f"store {self.shown}: no such run")
            # For the runner that holds the run now (its lease's owner): one that takes the run later (a resume)
            # discards it, as a local inbox's command addressed to an ended run is (console.engine.control).
            # None: no runner holds it, the next one takes the command.
            sent = {**body, "for": row[0]} if row[0] else body
            conn.execute("INSERT INTO commands (id, run_key, body) VALUES (%s, %s, %s) ON CONFLICT (id) DO NOTHING",
                         (cid, key, json.dumps(sent)))
            conn.execute("SELECT pg_notify(%s, %s)", (COMMANDS_CHANNEL, key))
        return cid

    def undelivered(self, key: str) -> builtins.list[tuple[str, dict[str, Any]]]:
        """The run's commands not yet delivered, oldest first: (id, body). A body that is no JSON object within the
        bounds (another machine's writer is not trusted) is ``{}``: no command, which the link says it refuses."""
        with self.connection() as conn:
            rows = conn.execute(f"SELECT id, {_bounded('body::text')} FROM commands WHERE run_key=%s AND "
                                "delivered_at IS NULL ORDER BY created_at, id", (key,)).fetchall()
        out: builtins.list[tuple[str, dict[str, Any]]] = []
        for i, text in rows:
            body = _loads(text)
            out.append((str(i), body if isinstance(body, dict) else {}))
        return out

    def withdraw(self, command_id: str) -> Literal["withdrawn", "delivered", "held"]:
        """Take back a command that no runner can take now. ``withdrawn``: it was undelivered and no runner holds
        its run's lease (the run ended, or its runner was killed and the lease lapsed): it never will be delivered;
        ``delivered``: it reached the run's inbox already (or is gone); ``held``: a runner holds the lease (again),
        and takes it. The run's row is locked meanwhile, so a runner that takes the lease and then looks for
        commands does so either before (then ``held``) or after (then the command is gone)."""
        cid = str(uuid.UUID(command_id))
        with self.connection() as conn, conn.transaction():
            r = conn.execute("SELECT r.lease_owner IS NOT NULL AND r.lease_expires >= now() FROM commands c "
                             "JOIN runs r ON r.key = c.run_key WHERE c.id=%s AND c.delivered_at IS NULL "
                             "FOR UPDATE OF r", (cid,)).fetchone()
            if r is None:
                # Delivered (its row is kept, values dropped), or gone: an answer its run's end dropped, which no run
                # ever took.
                gone = conn.execute("SELECT 1 FROM commands WHERE id=%s", (cid,)).fetchone() is None
                return "withdrawn" if gone else "delivered"
            if r[0]:
                return "held"
            conn.execute("DELETE FROM commands WHERE id=%s", (cid,))
            return "withdrawn"

    def delivered(self, command_id: str) -> None:
        # An answer's values (what the operator typed for an MCP server's question: a token it asked for) are the
        # run's now, in its inbox: the shared store keeps the row (a retry of its id is still not queued again),
        # never the values.
        self.execute("UPDATE commands SET delivered_at=now(), body = CASE WHEN body->>'command' = 'answer' "
                     "THEN body - 'args' ELSE body END WHERE id=%s AND delivered_at IS NULL", (command_id,))

    # -- leases ---------------------------------------------------------------------------------------------
    def take_lease(self, key: str, owner: str, seconds: float, path: str | Path) -> int | None:
        """Hold (or renew) the run's lease for ``seconds`` of the server's clock: the store's last seq of the run
        then (a server that crashed may have lost commits: the link ships them again), or None if another owner
        holds a current lease. The holder's machine and folder are the run's from then on (a folder mounted by
        another machine, the next pod, moves the run there)."""
        # A lease of this machine is taken over: the caller holds the run's lock here, so no process of this
        # machine runs it any more (a runner killed -9 is resumed at once, not 25 s later).
        with self.connection() as conn:
            r = conn.execute("UPDATE runs SET lease_owner=%s, lease_expires=now() + make_interval(secs => %s), "
                             "host=%s, path=%s, id=%s WHERE key=%s AND (lease_owner IS NULL OR lease_owner=%s "
                             "OR lease_expires IS NULL OR lease_expires < now() OR starts_with(lease_owner, %s)) "
                             "RETURNING last_seq", (owner, seconds, self.host, str(path), _short_id(path), key,
                                                    owner, f"{self.host}:")).fetchone()
        return int(r[0]) if r is not None else None

    def drop_lease(self, key: str, owner: str) -> None:
        self.execute("UPDATE runs SET lease_owner=NULL, lease_expires=NULL WHERE key=%s AND lease_owner=%s",
                     (key, owner))

    def listener(self, *channels: str) -> Any:
        """A connection of its own (not the pool's) listening on ``channels``: wait on it with ``notifies()``."""
        try:
            conn = self._psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
            for channel in channels:
                conn.execute(f"LISTEN {channel}")
        except self._psycopg.Error as exc:
            raise StoreError(f"store {self.shown}: {self._say(exc)}") from None
        return conn

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.pool.close()

    # -- reads of a console attached from another machine (console.tui.store_follow, `wait`) -------------------
    def runner_of(self, key: str) -> tuple[str | None, int]:
        """(the owner of the run's current lease, None when no lease is current; the last seq stored, -1: no
        such run)."""
        with self.connection() as conn:
            r = conn.execute("SELECT CASE WHEN lease_expires > now() THEN lease_owner END, last_seq FROM runs "
                             "WHERE key=%s", (key,)).fetchone()
        return (None, -1) if r is None else (r[0], int(r[1]))

    def event_lines_after(self, key: str, seq: int, limit: int = 2000) -> builtins.list[tuple[int, str | None]]:
        """The run's events after its own ``seq``, each body as its JSON text (None: larger than a body may be),
        parsed once by the reader, by the event models (whose parser bounds the depth), not twice."""
        with self.connection() as conn:
            rows = conn.execute(f"SELECT seq, {_bounded('t')} FROM (SELECT seq, body::text AS t FROM events WHERE "
                                "run_key=%s AND seq > %s ORDER BY seq LIMIT %s) AS page", (key, seq, limit)).fetchall()
        return [(int(s), b) for s, b in rows]

    def last_of_types(self, key: str, before: int, types: Sequence[str]
                      ) -> builtins.list[tuple[int, str | None]]:
        """The last event of each of ``types`` before seq ``before``, and the run's first ``session_started``, in
        order: what fills a console's panes before the whole history is folded."""
        with self.connection() as conn:
            rows = conn.execute(
                f"(SELECT DISTINCT ON (type) seq, {_bounded('body::text')} FROM events WHERE run_key=%s AND seq < %s "
                f"AND type = ANY(%s) ORDER BY type, seq DESC) UNION (SELECT seq, {_bounded('body::text')} FROM "
                "events WHERE run_key=%s AND seq < %s AND type='session_started' ORDER BY seq LIMIT 1) ORDER BY seq",
                (key, before, builtins.list(types), key, before)).fetchall()
        return [(int(s), b) for s, b in rows]


class BadLines(StoreError):
    """A batch of log lines the server refused as data (a line that is no JSON it takes): none was stored."""


def _bounded(text: str) -> str:
    """SQL for the JSON text ``text``, or NULL when it is larger than a body may be (MAX_BYTES): such a body is one
    bad row, and never crosses the network."""
    return f"CASE WHEN octet_length({text}) <= {MAX_BYTES:d} THEN {text} END"


def _loads(text: str | bytes | None) -> Any:
    """A body read from the store, parsed with bounds; None for one that is no JSON within them (one bad row)."""
    if text is None:
        return None
    try:
        return loads(text)
    except BoundsError:
        return None


def _bounded_jsonb(conn: Any) -> None:
    """A pooled connection reads json and jsonb with :func:`_loads`, not ``json.loads`` (psycopg's default, which
    a body 5,000 levels deep ended in RecursionError): the store's queries read bodies as text and parse them
    themselves, and this keeps any other read of a body bounded too."""
    from psycopg.types.json import set_json_loads

    set_json_loads(_loads, conn)


def _short_id(path: str | Path) -> str:
    from console.engine.runs import run_id

    return run_id(path)


def _is_uuid(value: object) -> bool:
    try:
        uuid.UUID(hex=str(value))
    except ValueError:
        return False
    return True
