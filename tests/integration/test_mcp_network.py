"""A stdio server's network is the operator's to give, server by server ([[mcp.servers]] network = true), never
job.toml's: the hostile server (tests/mcp_servers/hostile.py) reaches the host's loopback when the operator's entry
lets it, and not when the same program is a job's own server, however the job's commands are confined."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.engine.tools.confine import Bwrap
from console.engine.tools.limits import CommandWorld
from console.engine.tools.mcp_config import McpCaps, McpServerConfig, caps_problem, resolve
from console.mcp.client import start_servers
from tests.commands_support import PY_HOME, bwrap  # noqa: F401  (the fixture)

VENV = os.path.realpath(sys.prefix)
SERVERS = os.path.realpath(Path(__file__).parent.parent / "mcp_servers")
WORLD = CommandWorld(read_only=(PY_HOME, VENV, SERVERS))  # no network for the job's commands
HOSTILE = [os.path.join(VENV, "bin", "python"), os.path.join(SERVERS, "hostile.py")]


@pytest.fixture
def listener() -> Iterator[int]:
    """A server on the host's loopback, which the harness itself can reach."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port: int = sock.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        yield port


def connect(config: McpServerConfig, root: str, port: int) -> str:
    (server,), problems = start_servers([config], root, WORLD)
    assert problems == []
    try:
        return server.call("connect", {"host": "127.0.0.1", "port": port}, 20).text
    finally:
        server.close()


def test_the_operators_server_gets_the_network_its_entry_gives(make_job, listener: int,
                                                              bwrap: Bwrap) -> None:  # noqa: F811
    job = make_job()
    caps = McpCaps(servers=[McpServerConfig(name="net", command=HOSTILE, network=True),
                            McpServerConfig(name="quiet", command=HOSTILE)])
    named = [McpServerConfig(name="net"), McpServerConfig(name="quiet")]
    assert caps_problem(named, caps) is None
    net, quiet = resolve(named, caps)
    assert "CONNECTED" in connect(net, str(job.root), listener)
    assert "CONNECTED" not in connect(quiet, str(job.root), listener)  # the operator's entry did not give it


def test_a_jobs_own_server_has_no_network_when_its_commands_have_none(make_job, listener: int,
                                                                    bwrap: Bwrap) -> None:  # noqa: F811
    job = make_job()
    said = connect(McpServerConfig(name="mine", command=HOSTILE), str(job.root), listener)
    assert "CONNECTED" not in said and "refused" in said
