"""A server that does not stop working on a call it was told to abandon (issue 36, point 3: "Stop and the deadline
cancel a call in flight (MCP cancellation) and then kill the server if it does not stop")."""

from __future__ import annotations

import os

import pytest

from console.engine.tools.confine import Bwrap
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_tools import McpUnavailable
from console.mcp import managed
from console.mcp.client import start_servers
from tests.commands_support import bwrap  # noqa: F401  (the fixture)
from tests.integration.test_mcp import HOSTILE, SERVERS, VENV, WORLD

STUBBORN = McpServerConfig(name="stubborn", command=[os.path.join(VENV, "bin", "python"),
                                                     os.path.join(SERVERS, "stubborn.py")])


def test_a_server_that_ignores_the_cancellation_is_killed_then_restarted(make_job, bwrap: Bwrap,  # noqa: F811
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # A blocked loop answers no ping however long the client waits: the whole grace is waited out, so a short one
    # tells the same (the 10 s default, a hang guard for a busy machine, took 10 of this test's 14 s).
    monkeypatch.setattr(managed, "CANCEL_GRACE", 2.0)
    job = make_job()
    (server,), problems = start_servers([STUBBORN], str(job.root), WORLD)
    assert problems == [] and [n.state for n in server.news()] == ["ready"]
    try:
        assert server.call("where", {}, 30).text
        first = server._live  # the process that will block
        assert first is not None and not first.exited()
        with pytest.raises(McpUnavailable) as got:
            server.call("block", {}, 1.0)
        assert str(got.value).startswith("no answer within 1 s; the server did not stop working on it, so it was "
                                         "killed (it was restarted)")
        news = server.news()
        assert [n.state for n in news] == ["restarted"]
        assert "it did not stop after a call of block was abandoned" in news[0].why
        # The blocked one is gone; a new one answers.
        assert first.exited() and server._live is not first
        assert server.call("where", {}, 30).text
        assert server.restarts == 1 and server.state == "restarted"
    finally:
        server.close()


def test_a_server_that_abandons_the_call_serves_on_unkilled(make_job, bwrap: Bwrap) -> None:  # noqa: F811
    job = make_job()
    (server,), problems = start_servers([HOSTILE], str(job.root), WORLD)
    assert problems == [] and [n.state for n in server.news()] == ["ready"]
    try:
        with pytest.raises(McpUnavailable, match=r"^no answer within 1 s$"):
            server.call("hang", {}, 1.0)
        assert server.news() == [] and server.restarts == 0
    finally:
        server.close()
