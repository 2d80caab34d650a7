"""What the operator's config decides of a job's MCP servers: where an HTTP server may be ([mcp] urls, compared
parsed), the operator's own servers ([[mcp.servers]]) that a job names and cannot redefine, and what only the
operator may set (a stdio server's network, an HTTP server's credentials, by the names of variables)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from console.engine.job import JobError, JobPaths
from console.engine.job_config import load_job_config
from console.engine.tools.mcp_config import McpCaps, McpServerConfig, allowed_urls, caps_problem, resolve, url_allowed
from console.settings import load_settings


def job_toml(tmp_path: Path, text: str) -> JobPaths:
    (tmp_path / "instructions.md").write_text("# Task\n")
    (tmp_path / "job.toml").write_text(text)
    return JobPaths(tmp_path)


@pytest.mark.parametrize(("url", "allowed"), [
    ("https://mcp.example.org/mcp", True),
    ("https://MCP.example.org:443/x/y", True),
    ("https://mcp.example.org.evil.net/mcp", False),  # a string prefix, not the host
    ("http://mcp.example.org/mcp", False),  # another scheme
    ("https://mcp.example.org:8443/mcp", False),  # another port
    ("http://127.0.0.1:8931/mcp", True),
    ("http://127.0.0.1:8931", False),  # the origin, not under its /mcp
    ("http://127.0.0.1:8932/mcp", False),
    ("http://127.0.0.1:8931/mcp/../admin", False),  # under /mcp only by its letters
    ("http://localhost:8931/mcp", False),  # another host name, however it resolves
    ("https://docs.example.org/api/mcp", True),
    ("https://docs.example.org/apimcp", False),  # /api/ is a folder, not a string prefix
    ("https://docs.example.org/", False),
])
def test_a_url_is_allowed_by_origin_and_path_prefix(url: str, allowed: bool) -> None:
    prefixes = ["https://mcp.example.org/", "http://127.0.0.1:8931/mcp", "https://docs.example.org/api/"]
    assert url_allowed(url, prefixes) is allowed


def test_a_jobs_http_server_is_refused_unless_the_operator_allows_its_url() -> None:
    job = [McpServerConfig(name="web", url="https://mcp.example.org/mcp?key=abc")]
    refused = caps_problem(job, McpCaps())
    assert refused is not None and "mcp.0.url" in refused and "urls under [mcp]" in refused
    assert "key=abc" not in refused  # a query may carry a credential: never shown
    assert caps_problem(job, McpCaps(urls=["https://mcp.example.org/"])) is None


@pytest.mark.parametrize(("toml", "says"), [
    ('[[mcp]]\nname = "t"\ncommand = ["x"]\nnetwork = true\n', "network is set only by the operator's config"),
    ('[[mcp]]\nname = "w"\nurl = "https://h/mcp"\nbearer_token_env_var = "HOME_TOKEN"\n',
     "bearer_token_env_var is set only by the operator's config"),
    ('[[mcp]]\nname = "w"\nurl = "https://h/mcp"\nenv_http_headers = {X-Key = "K"}\n',
     "env_http_headers is set only by the operator's config"),
    ('[[mcp]]\nname = "w"\nurl = "https://h/mcp"\nheaders = {Authorization = "Bearer abc"}\n', "mcp.0.headers"),
    # A job folder may come from anyone: it never spends the operator's model through its server.
    ('[[mcp]]\nname = "t"\ncommand = ["x"]\nsampling = true\n', "sampling is set only by the operator's config"),
    ('[[mcp]]\nname = "t"\ncommand = ["x"]\nsampling_max_tokens = 9\n',
     "sampling_max_tokens is set only by the operator's config"),
    ('[[mcp]]\nname = "t"\ncommand = ["x"]\nsampling_per_call = 9\n',
     "sampling_per_call is set only by the operator's config"),
    ('[[mcp]]\nname = "github"\nsampling = true\n', "sampling is set only by the operator's config"),
    # Nor does it ask the operator questions of its own server's making.
    ('[[mcp]]\nname = "t"\ncommand = ["x"]\nelicitation = true\n', "elicitation is set only by the operator's config"),
    ('[[mcp]]\nname = "t"\ncommand = ["x"]\nelicitation_timeout = 5\n',
     "elicitation_timeout is set only by the operator's config"),
    ('[[mcp]]\nname = "github"\nelicitation_per_call = 3\n',
     "elicitation_per_call is set only by the operator's config"),
    ('[[mcp]]\nname = "w"\nurl = "https://h/mcp"\nenv = ["TOKEN"]\n', "an HTTP server runs elsewhere"),
    ('[[mcp]]\nname = "w"\nurl = "file:///etc/passwd"\n', "not an http:// or https:// URL"),
    ('[[mcp]]\nname = "w"\nurl = "https://h/mcp"\ncommand = ["x"]\n', "a command (stdio) or a url"),
    ('[[mcp]]\nname = "github"\ncommand = ["x"]\ntools = ["a"]\n[[mcp]]\nname = "ref"\nenv = ["A"]\n',
     "env without a command or a url"),
])
def test_what_only_the_operator_may_set_is_refused_in_job_toml(tmp_path: Path, toml: str, says: str) -> None:
    with pytest.raises(JobError) as caught:
        load_job_config(job_toml(tmp_path, toml))
    assert says in str(caught.value) and "\n" not in str(caught.value)
    assert "Bearer abc" not in str(caught.value)


def test_the_operators_servers_are_named_by_a_job_and_never_redefined(tmp_path: Path) -> None:
    config = Path(os.environ["AGENT_CONSOLE_CONFIG"])  # the test's own (conftest)
    config.write_text('[mcp]\nurls = ["http://127.0.0.1:8931/"]\n'
                      '[[mcp.servers]]\nname = "github"\nurl = "https://api.example.com/mcp/"\n'
                      'bearer_token_env_var = "GITHUB_MCP_TOKEN"\ntools = ["issues", "pulls"]\n'
                      '[[mcp.servers]]\nname = "fetch"\ncommand = ["/opt/mcp/bin/mcp-server-fetch"]\nnetwork = true\n'
                      'sampling = true\nsampling_max_tokens = 256\nelicitation = true\nelicitation_timeout = 120\n')
    caps = load_settings().mcp
    github = caps.server("github")
    assert github is not None and github.bearer_token_env_var == "GITHUB_MCP_TOKEN"

    named = load_job_config(job_toml(tmp_path, '[[mcp]]\nname = "github"\ntools = ["issues", "admin"]\n'
                                               'required = true\n[[mcp]]\nname = "fetch"\n')).mcp
    assert caps_problem(named, caps) is None
    gh, fetch = resolve(named, caps)
    # The operator's URL and credentials; the job narrowed the tools (never widened them) and made it required.
    assert (gh.url, gh.bearer_token_env_var, gh.tools, gh.required) == (
        "https://api.example.com/mcp/", "GITHUB_MCP_TOKEN", ["issues"], True)
    # Sampling: off unless the operator's entry says so, and then with the operator's caps (a job names it alone).
    assert not gh.sampling and (fetch.sampling, fetch.sampling_max_tokens, fetch.sampling_per_call) == (True, 256, 4)
    assert not gh.elicitation and (fetch.elicitation, fetch.elicitation_timeout) == (True, 120)
    assert fetch.command == ["/opt/mcp/bin/mcp-server-fetch"] and fetch.network is True
    # Its requests may go to the operator's own URL (the job's own servers only to [mcp] urls).
    assert allowed_urls(gh, caps) == ("http://127.0.0.1:8931/", "https://api.example.com/mcp/")

    redefined = McpServerConfig(name="github", url="http://127.0.0.1:8931/mcp")
    said = caps_problem([redefined], caps)
    assert said is not None and "cannot redefine" in said
    assert allowed_urls(redefined, caps) == ("http://127.0.0.1:8931/",)
    unknown = caps_problem([McpServerConfig(name="jira")], caps)
    assert unknown is not None and "no server named 'jira'" in unknown


@pytest.mark.parametrize(("entry", "says"), [
    ('name = "x"\n', "needs a command (stdio) or a url"),
    ('name = "x"\nurl = "https://h/"\nbearer_token_env_var = "ghp_abcdef1234"\n', "never the token itself"),
    ('name = "x"\nurl = "https://h/"\nenv_http_headers = {"X-Key" = "sk-live-1"}\n', "never the credential itself"),
    ('name = "x"\ncommand = ["x"]\nsampling = true\nsampling_max_tokens = 100000\n', "less than or equal to 16384"),
    ('name = "x"\ncommand = ["x"]\nsampling = true\nsampling_per_call = 0\n', "greater than or equal to 1"),
    ('name = "x"\ncommand = ["x"]\nelicitation = true\nelicitation_timeout = 0.5\n', "greater than or equal to 1"),
    ('name = "x"\ncommand = ["x"]\nelicitation = true\nelicitation_per_call = 9\n', "less than or equal to 8"),
])
def test_the_operators_server_entries_are_checked(entry: str, says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        McpCaps.model_validate({"servers": [tomllib.loads(entry)]})
    assert says in str(caught.value)


def test_an_http_servers_tool_doc_does_not_say_it_runs_confined() -> None:
    from console.engine.tools.mcp_tools import McpToolInfo, build_mcp_tools

    class Remote:
        config = McpServerConfig(name="web", url="https://mcp.example.org/mcp")
        tools = [McpToolInfo("search", "Search.", {"type": "object", "properties": {}})]

    (tool,) = build_mcp_tools([Remote()]).tools  # type: ignore[list-item]
    assert "reached over HTTP (it runs elsewhere" in tool.details and "confined" not in tool.details


def test_a_jobs_server_gets_only_the_variables_the_operator_lets_it_have() -> None:
    """A job folder may come from anyone: its [[mcp]] env must not pull the operator's API keys or tokens into a
    program the job chose (whose results reach the model and whose files stay in the folder)."""
    from console.engine.tools.mcp_config import McpCaps, McpServerConfig, caps_problem

    server = McpServerConfig(name="evil", command=["./srv.py"], env=["OPENAI_API_KEY", "TZ"])
    why = caps_problem([server], McpCaps())
    assert why is not None and why.startswith("key 'mcp.0.env'") and "OPENAI_API_KEY, TZ" in why
    assert "OPENAI_API_KEY" in (caps_problem([server], McpCaps(env=["TZ"])) or "")
    assert caps_problem([server], McpCaps(env=["TZ", "OPENAI_API_KEY"])) is None  # the operator's own choice
    assert caps_problem([McpServerConfig(name="ok", command=["./srv.py"])], McpCaps()) is None
