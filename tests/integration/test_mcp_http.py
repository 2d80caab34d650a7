"""Streamable-HTTP MCP servers: a loopback server made with the SDK's own server side (tests/mcp_servers/http_server.py)
reached through the SDK's streamable-HTTP client, only at URLs the operator's config allows, with the operator's
credentials, which no line shows; its tools called by the scripted model through the one gate."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from console.cli import main
from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.job import JobPaths
from console.engine.store import JobStore
from console.engine.supervisor import Supervisor
from console.engine.tools.limits import CommandWorld
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_tools import McpUnavailable
from console.mcp import http as mcp_http
from console.mcp.client import start_servers
from console.mcp.http import HttpServer
from console.mcp.world import McpStartError
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedTurn as T
from tests.conftest import Recording, run_settings
from tests.mcp_servers.http_server import serve
from tests.test_cli import first_line

TOKEN = "tok-5f3a9c1e-operators-only"
ENV = {"LOOPBACK_MCP_TOKEN": TOKEN}


def web(url: str, **more: Any) -> McpServerConfig:
    return McpServerConfig(name="web", url=url, bearer_token_env_var="LOOPBACK_MCP_TOKEN", required=True, **more)


def results(job: JobPaths) -> list[ev.ToolResult]:
    return [e for e in ev.read_events(job.events) if isinstance(e, ev.ToolResult)]


def test_the_loopback_servers_tools_are_called_through_the_gate_with_the_operators_token(make_job, tmp_path) -> None:
    job = make_job()
    with serve(token=TOKEN) as srv:
        server = HttpServer(web(srv.mcp), [f"{srv.base}/"], ENV)
        try:
            assert server.confined_by.startswith("elsewhere: HTTP at http://127.0.0.1:")
            script = [T(calls=[C(name="mcp__web__add", arguments={"a": 2, "b": 40})]),
                      T(calls=[C(name="mcp__web__add", arguments={"a": "two"})]),
                      T(calls=[C(name="mcp__web__whoami")]),
                      T(error="end of script")]
            clock = FakeClock()
            provider = Recording(clock=clock, script=script)
            Supervisor(job, run_settings(), provider, clock=clock, store=JobStore(tmp_path / "jobs.db"),
                       mcp=[server]).run()
        finally:
            server.close()
        assert srv.seen_auth and set(srv.seen_auth) == {f"Bearer {TOKEN}"}  # the operator's credential, each time
    offered = {t.name for t in provider.requests[0].tools}
    assert {"mcp__web__add", "mcp__web__huge", "mcp__web__whoami"} <= offered
    got = results(job)
    assert [(r.tool, r.ok) for r in got] == [("mcp__web__add", True), ("mcp__web__add", False),
                                            ("mcp__web__whoami", True)]
    assert got[0].content == "42"
    assert "Invalid arguments for mcp__web__add" in got[1].content  # the server's schema, checked before sending
    # A server that says the credential back does not put it in the run's log, nor before the agent.
    assert got[2].content == "you sent [credential]"
    assert TOKEN not in job.events.read_text()


def test_a_failing_servers_error_line_never_holds_the_token() -> None:
    with serve(token=TOKEN) as srv:
        with pytest.raises(McpStartError) as caught:
            HttpServer(web(f"{srv.base}/echo-denied"), [f"{srv.base}/"], ENV, start_seconds=20)
        assert srv.seen_auth == []  # only /mcp is recorded: the request went to /echo-denied
    line = str(caught.value)
    assert line.startswith("MCP server web did not start: bad credentials: [credential]") and "\n" not in line
    assert TOKEN not in line


def test_a_redirect_to_another_origin_or_outside_the_allowed_path_is_not_followed() -> None:
    with serve(token=TOKEN) as other, serve(token=TOKEN, other_origin=other.base) as srv:
        with pytest.raises(McpStartError) as away:
            HttpServer(web(f"{srv.base}/away"), [f"{srv.base}/", f"{other.base}/"], ENV, start_seconds=20)
        assert other.seen_auth == []  # the token never went to the other origin
        assert f"Redirect to {other.base}/mcp not followed" in str(away.value)
        # Same origin, another path: the operator allowed /away only.
        with pytest.raises(McpStartError) as elsewhere:
            HttpServer(web(f"{srv.base}/elsewhere"), [f"{srv.base}/elsewhere"], ENV, start_seconds=20)
        assert srv.seen_auth == []
    assert f"a request to {srv.base}/mcp was refused: not at a URL the operator's config allows" in str(
        elsewhere.value)


def test_a_url_the_operator_did_not_allow_is_never_asked() -> None:
    with serve(token=TOKEN) as srv:
        with pytest.raises(McpStartError, match="is not at a URL the operator's config allows"):
            HttpServer(web(srv.mcp), ["http://127.0.0.1:1/"], ENV)
        assert srv.seen_auth == []


def test_an_answer_past_the_bound_is_unavailable_not_held(monkeypatch) -> None:
    monkeypatch.setattr(mcp_http, "MAX_BODY", 64 * 1024)
    with serve(token=TOKEN, huge_bytes=1_000_000) as srv:
        server = HttpServer(web(srv.mcp), [f"{srv.base}/"], ENV)
        try:
            with pytest.raises(McpUnavailable, match="longer than 65,536 bytes"):
                server.call("huge", {}, 20)
            assert server.call("add", {"a": 1, "b": 1}, 20).text == "2"  # the session serves on
        finally:
            server.close()


def test_the_operators_environment_must_hold_the_credential() -> None:
    with pytest.raises(McpStartError, match="the operator's environment has no LOOPBACK_MCP_TOKEN"):
        HttpServer(web("http://127.0.0.1:1/mcp"), ["http://127.0.0.1:1/"], {})
    # Without a way to reach one (the CLI gives it), an HTTP server is not started.
    with pytest.raises(McpStartError, match="an HTTP server cannot be reached from here"):
        start_servers([web("http://127.0.0.1:1/mcp")], "/tmp", CommandWorld())


# -- the CLI ---------------------------------------------------------------------------------------------------
def make_cli_job(tmp_path: Path, mcp: str, config: str) -> Path:
    job = tmp_path / "job"
    job.mkdir()
    (job / "instructions.md").write_text("# Task\n\nAdd.\n")
    (job / "job.toml").write_text(mcp)
    Path(os.environ["AGENT_CONSOLE_CONFIG"]).write_text(config)
    return job


def test_a_run_names_the_operators_http_server_and_calls_it(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("LOOPBACK_MCP_TOKEN", TOKEN)
    with serve(token=TOKEN) as srv:
        job = make_cli_job(tmp_path, '[[mcp]]\nname = "calc"\nrequired = true\n',
                           f'[[mcp.servers]]\nname = "calc"\nurl = "{srv.mcp}"\n'
                           'bearer_token_env_var = "LOOPBACK_MCP_TOKEN"\ntools = ["add"]\n')
        script = tmp_path / "script.json"
        script.write_text(json.dumps([{"calls": [{"name": "mcp__calc__add", "arguments": {"a": 3, "b": 4}}]},
                                      {"error": "end of script"}]))
        code = main(["run", str(job), "--headless", "--speed", "0", "--script", str(script)])
        assert set(srv.seen_auth) == {f"Bearer {TOKEN}"}
    out = capsys.readouterr().out
    _, folder = first_line(out)
    got = [e for e in ev.read_events(folder / ".console" / "events.jsonl") if isinstance(e, ev.ToolResult)]
    assert [(r.tool, r.ok, r.content) for r in got] == [("mcp__calc__add", True, "7")]
    assert code != 2 and TOKEN not in out


def test_a_jobs_own_url_not_allowed_by_the_operator_is_exit_2_in_one_line(tmp_path, capsys) -> None:
    job = make_cli_job(tmp_path, '[[mcp]]\nname = "web"\nurl = "http://127.0.0.1:1/mcp"\n',
                       '[mcp]\nurls = ["https://mcp.example.org/"]\n')
    code = main(["run", str(job), "--headless", "--speed", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "key 'mcp.0.url': http://127.0.0.1:1/mcp is not at a URL the operator's config allows" in err[0]


def test_a_required_http_server_that_refuses_is_exit_2_without_the_token(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("LOOPBACK_MCP_TOKEN", TOKEN)
    with serve(token=TOKEN) as srv:
        job = make_cli_job(tmp_path, '[[mcp]]\nname = "calc"\nrequired = true\n',
                           f'[[mcp.servers]]\nname = "calc"\nurl = "{srv.base}/echo-denied"\n'
                           'bearer_token_env_var = "LOOPBACK_MCP_TOKEN"\n')
        code = main(["run", str(job), "--headless", "--speed", "0"])
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "MCP server calc did not start: bad credentials: [credential]" in err[0]
    assert f"agent-console run {job}" in err[0]
    assert TOKEN not in captured.err and TOKEN not in captured.out
