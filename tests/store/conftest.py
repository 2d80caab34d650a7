"""The store tests' fixtures: a real PostgreSQL server per test session (per xdist worker), a database per test,
and ``store_url``: the store a test runs against, once embedded ("") and once PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg_server import PgServer
from tests.store.machines import kill_leftovers


@pytest.fixture(autouse=True)
def _no_runner_left() -> Iterator[None]:
    """A test that fails half-way leaves no runner process behind (each is killed, its whole group)."""
    yield
    kill_leftovers()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    server = PgServer()
    try:
        server.start()
        yield server
    finally:
        server.remove()


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    if pg_server.proc is None:  # a test stopped it (the faults' tests): up again for the next one
        pg_server.start()
    return pg_server.new_database()


@pytest.fixture(params=["embedded", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """"" (the embedded store) or a fresh PostgreSQL database's URL: a contract test runs against both."""
    if request.param == "embedded":
        return ""
    return str(request.getfixturevalue("pg_url"))
