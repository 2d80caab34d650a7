"""The jobs store: one interface (:class:`Store`), two implementations.

- :class:`JobStore`, embedded: ``jobs.db`` (SQLite) in the data folder, the default that needs nothing set up;
- :class:`~console.engine.store.postgres.PgStore`: a PostgreSQL server shared by several machines
  (``AGENT_CONSOLE_STORE=postgresql://...``); psycopg is imported only when one is opened, so ``jobs`` and the
  operator's commands stay fast to start with the embedded store.

Either is an index of the run folders, which stay the source of truth.
"""

from __future__ import annotations

import os  # noqa: F401  (tests patch console.engine.store.os.stat: the module folder_gone's os is)

from console.engine.store.base import (
    COLUMNS,
    FINISHED,
    GAVE_UP,
    NEEDS_YOU,
    JobRow,
    SharedStore,
    Store,
    StoreError,
    folder_gone,
    is_shared,
    this_host,
)
from console.engine.store.embedded import ADDED_COLUMNS, DB_SUFFIXES, SCHEMA, JobStore
from console.engine.store.url import is_shared_url, open_store, shown_store_url

__all__ = ["ADDED_COLUMNS", "COLUMNS", "DB_SUFFIXES", "FINISHED", "GAVE_UP", "NEEDS_YOU", "SCHEMA", "JobRow",
           "JobStore", "SharedStore", "Store", "StoreError", "folder_gone", "is_shared", "is_shared_url",
           "open_store", "shown_store_url", "this_host"]
