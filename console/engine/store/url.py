"""Which store a setting names, and how a store URL may be shown (never with its password)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from urllib.parse import urlsplit

from console.engine.store.base import Store, StoreError, shown_store_url

__all__ = ["SCHEMES", "check_store_url", "is_shared_url", "open_store", "shown_store_url"]

SCHEMES = ("postgresql", "postgres")


def is_shared_url(url: str | None) -> bool:
    """True for a PostgreSQL URL (``postgresql://...``); None or "" is the embedded store."""
    return bool(url) and urlsplit(url or "").scheme.lower() in SCHEMES


def check_store_url(url: str) -> str:
    """``url`` if it names a store this version can use; ValueError (one line, no password) if not."""
    if not is_shared_url(url):
        raise ValueError(f"{shown_store_url(url) if '://' in url else 'the value'}: a store is a postgresql:// URL "
                         "(or unset: the embedded store)")
    return url


def open_store(url: str | None, embedded_path: Path, *, lenient: bool = False) -> Store:
    """The store a setting names: PostgreSQL for a ``postgresql://`` URL, else the embedded SQLite file at
    ``embedded_path``. :class:`StoreError` (one line, no password) when a PostgreSQL store cannot be used
    (``lenient``: only when it never could, such as a schema too new; one away now is in its ``error``).
    A PostgreSQL store catches up this machine's runs whose end it missed (:meth:`PgStore.heal`)."""
    if is_shared_url(url):
        from console.engine.store.postgres import PgStore  # psycopg only when a shared store is used

        assert url is not None
        from console.engine.store.catchup import healer

        store = PgStore(url, lenient=lenient)
        # Runs of this machine that ended while the store was away are caught up by whatever opens it next (one
        # look at a folder of the data dir when none waits; see console.engine.store.catchup).
        store.data_dir = embedded_path.parent
        store.healer = healer(store, store.data_dir)
        if store.error is None:
            store.heal()
            with contextlib.suppress(StoreError):  # a look of its own: an open that cannot make it is not refused
                store.drop_stale_answers()
        return store
    if url:
        raise StoreError(f"store {shown_store_url(url)!r}: not a postgresql:// URL")
    from console.engine.store.embedded import JobStore

    return JobStore(embedded_path)
