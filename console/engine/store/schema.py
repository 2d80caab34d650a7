"""The shared store's schema, versioned: numbered migrations that a newer version applies when it starts.

``schema_version`` holds one row per migration applied. A process takes a transaction-level advisory lock
around the check so two runners starting together never migrate at once (the second finds the work done); a
store whose schema is newer than this version knows is refused (one line), never written by an older reader.
"""

from __future__ import annotations

from typing import Any

# pg_advisory_xact_lock's key for migrating: any fixed 64-bit number (this one is "agent-console schema").
MIGRATE_LOCK = 0x61632D736368656D

# Each migration: its number (applied in order, never edited once released: a change is a new one).
MIGRATIONS: tuple[tuple[int, str], ...] = (
    (1, """
CREATE TABLE runs (
    key TEXT PRIMARY KEY,
    id TEXT NOT NULL,
    host TEXT NOT NULL,
    path TEXT NOT NULL,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    provider TEXT NOT NULL DEFAULT '',
    model TEXT NOT NULL DEFAULT '',
    started_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    completed_at TEXT,
    confidence DOUBLE PRECISION,
    summary TEXT,
    detail TEXT,
    cost_usd DOUBLE PRECISION,
    needs_since TEXT,
    last_seq BIGINT NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_expires TIMESTAMPTZ
);
CREATE INDEX runs_newest ON runs (started_at DESC, path DESC);
CREATE INDEX runs_status ON runs (status);
CREATE INDEX runs_id ON runs (id);
CREATE TABLE events (
    run_key TEXT NOT NULL REFERENCES runs (key) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    ts TIMESTAMPTZ,
    type TEXT NOT NULL,
    body JSONB NOT NULL,
    PRIMARY KEY (run_key, seq)
);
CREATE TABLE commands (
    id UUID PRIMARY KEY,
    run_key TEXT NOT NULL REFERENCES runs (key) ON DELETE CASCADE,
    body JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    delivered_at TIMESTAMPTZ
);
CREATE INDEX commands_undelivered ON commands (run_key, created_at) WHERE delivered_at IS NULL;
"""),
    # A run's log moved aside (damaged lines, or not a file) and started again may reuse seqs the store holds:
    # its events are a new generation (epoch) of the run's log, kept beside the old one, never dropped as
    # duplicates. digest: of the line as the file has it (a seq held with another digest is a new generation).
    # pos: the order followers read in, and the cursor they keep (the seq itself for a log never moved aside).
    # runs.last_seq is the last pos.
    (2, """
ALTER TABLE events ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN digest BIGINT;
ALTER TABLE events ADD COLUMN pos BIGINT GENERATED ALWAYS AS ((epoch::bigint << 40) + seq) STORED;
ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events ADD PRIMARY KEY (run_key, epoch, seq);
CREATE UNIQUE INDEX events_pos ON events (run_key, pos);
ALTER TABLE runs ADD COLUMN log_epoch INTEGER NOT NULL DEFAULT 0;
"""),
    # The fleet's daily budget (console.engine.store.fleet): each run's spend of its day (kept when a run's row is
    # forgotten: what was spent today was spent), the operator's raises of a day's limits, and the holds.
    (3, """
CREATE TABLE fleet_spend (
    key TEXT PRIMARY KEY,
    day TEXT NOT NULL,
    job TEXT NOT NULL,
    usd DOUBLE PRECISION NOT NULL
);
CREATE INDEX fleet_spend_day ON fleet_spend (day, job);
CREATE TABLE fleet_raises (
    day TEXT NOT NULL,
    scope TEXT NOT NULL,
    usd DOUBLE PRECISION NOT NULL,
    by TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (day, scope)
);
CREATE TABLE fleet_holds (
    day TEXT NOT NULL,
    scope TEXT NOT NULL,
    limit_usd DOUBLE PRECISION NOT NULL,
    spent_usd DOUBLE PRECISION NOT NULL,
    running INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    created_by TEXT NOT NULL,
    claimed_by TEXT,
    claimed_at TIMESTAMPTZ,
    told_at TEXT,
    PRIMARY KEY (day, scope, limit_usd)
);
CREATE TABLE fleet_waivers (
    day TEXT NOT NULL,
    scope TEXT NOT NULL,
    limit_usd DOUBLE PRECISION NOT NULL,
    key TEXT NOT NULL,
    PRIMARY KEY (day, scope, limit_usd, key)
);
"""),
)
EPOCH_SHIFT = 40  # pos = epoch << 40 + seq: a log's seqs stay below 2**40
LATEST = MIGRATIONS[-1][0]


class SchemaTooNew(Exception):
    """The store was migrated by a newer version of agent-console."""


def migrate(conn: Any) -> int:
    """Bring the schema up to :data:`LATEST` on ``conn`` (a psycopg connection); the version it is at.

    One transaction: the advisory lock is held until it commits, and a migration that fails leaves nothing."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATE_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                     "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
        row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()
        have = int(row[0]) if row else 0
        if have > LATEST:
            raise SchemaTooNew(f"the store's schema is version {have}, newer than this agent-console knows "
                               f"({LATEST}): upgrade agent-console on this machine")
        for number, sql in MIGRATIONS:
            if number > have:
                conn.execute(sql)
                conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (number,))
        return max(have, LATEST)
