"""`run` with a job whose job.toml declares [[mcp]] servers: started confined by the process that runs the run,
their tools called through the gate, ended with the run; a required one that does not start is exit 2 in one line."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from console.cli import main
from console.engine import events as ev
from console.engine.tools.confine import Bwrap
from tests.commands_support import PY_HOME, bwrap  # noqa: F401  (the fixture)
from tests.test_cli import first_line

VENV = os.path.realpath(sys.prefix)


def make_job(tmp_path: Path, mcp: str) -> Path:
    job = tmp_path / "job"
    job.mkdir()
    (job / "instructions.md").write_text("# Task\n\nTell the time.\n")
    (job / "job.toml").write_text(f'[sandbox]\nread_only = ["{PY_HOME}", "{VENV}"]\n\n{mcp}')
    # The operator lets jobs show their commands these two folders (the default caps grant none of a home).
    Path(os.environ["AGENT_CONSOLE_CONFIG"]).write_text("[sandbox_limits]\nread_only = true\n")
    return job


def test_a_run_calls_the_time_servers_tool_and_ends_the_server(tmp_path, capsys, bwrap: Bwrap) -> None:  # noqa: F811
    job = make_job(tmp_path, f'[[mcp]]\nname = "time"\ncommand = ["{VENV}/bin/mcp-server-time"]\nrequired = true\n'
                             'tools = ["get_current_time"]\n')
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"calls": [{"name": "mcp__time__get_current_time",
                                              "arguments": {"timezone": "Europe/Paris"}}]},
                                  {"calls": [{"name": "mcp__time__convert_time", "arguments": {}}]},
                                  {"error": "end of script"}]))
    code = main(["run", str(job), "--headless", "--speed", "0", "--script", str(script)])
    out = capsys.readouterr().out
    _, folder = first_line(out)
    results = [e for e in ev.read_events(folder / ".console" / "events.jsonl") if isinstance(e, ev.ToolResult)]
    assert [(r.tool, r.ok) for r in results] == [("mcp__time__get_current_time", True),
                                                ("mcp__time__convert_time", False)]
    assert '"timezone": "Europe/Paris"' in results[0].content
    assert "Unknown tool 'mcp__time__convert_time'" in results[1].content  # not on the job's allow-list
    assert code != 2


def test_a_required_server_that_does_not_start_is_exit_2_in_one_line(tmp_path, capsys, bwrap) -> None:  # noqa: F811
    job = make_job(tmp_path, '[[mcp]]\nname = "gone"\ncommand = ["/usr/bin/false"]\nrequired = true\n')
    code = main(["run", str(job), "--headless", "--speed", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "MCP server gone did not start" in err[0] and f"agent-console run {job}" in err[0]
    runs = Path(os.environ["AGENT_CONSOLE_DATA_DIR"]) / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []  # no run was made: its copy is gone


def test_a_job_declaring_an_http_server_the_operator_did_not_allow_is_exit_2_in_one_line(tmp_path, capsys) -> None:
    job = make_job(tmp_path, '[[mcp]]\nname = "web"\nurl = "https://example.com/mcp"\n')
    code = main(["run", str(job), "--headless", "--speed", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "is not at a URL the operator's config allows" in err[0]


def test_the_operator_may_forbid_mcp_servers(tmp_path, capsys) -> None:
    job = make_job(tmp_path, '[[mcp]]\nname = "time"\ncommand = ["mcp-server-time"]\n')
    config = Path(os.environ["AGENT_CONSOLE_CONFIG"])
    config.write_text(config.read_text() + "\n[mcp]\nallow = false\n")
    code = main(["run", str(job), "--headless", "--speed", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "does not allow MCP servers" in err[0]


def test_a_command_named_like_an_mcp_tool_is_exit_2_in_one_line(tmp_path, capsys, bwrap: Bwrap) -> None:  # noqa: F811
    job = make_job(tmp_path, f'[[mcp]]\nname = "time"\ncommand = ["{VENV}/bin/mcp-server-time"]\n\n'
                             '[[tools]]\nname = "mcp__time__get_current_time"\ndescription = "x"\ncommand = ["true"]\n')
    code = main(["run", str(job), "--headless", "--speed", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "two tools would be named mcp__time__get_current_time" in err[0]


TIME_SERVER = f'[[mcp]]\nname = "time"\ncommand = ["{VENV}/bin/mcp-server-time"]\n'


def test_a_policy_may_name_a_tool_of_a_declared_server(tmp_path, capsys, bwrap: Bwrap) -> None:  # noqa: F811
    job = make_job(tmp_path, TIME_SERVER + '\n[[guardrails.policies]]\ntype = "sequential"\n'
                                           'dependencies = { mcp__time__get_current_time = ["list_files"] }\n')
    script = tmp_path / "script.json"
    now = {"name": "mcp__time__get_current_time", "arguments": {"timezone": "UTC"}}
    script.write_text(json.dumps([{"calls": [now]}, {"calls": [{"name": "list_files"}]}, {"calls": [now]},
                                  {"error": "end of script"}]))
    code = main(["run", str(job), "--headless", "--speed", "0", "--script", str(script)])
    out = capsys.readouterr().out
    _, folder = first_line(out)
    evs = list(ev.read_events(folder / ".console" / "events.jsonl"))
    assert [(e.tool, e.policy) for e in evs if isinstance(e, ev.ToolDenied)] == [
        ("mcp__time__get_current_time", "sequential")]
    assert [(r.tool, r.ok) for r in evs if isinstance(r, ev.ToolResult)] == [
        ("mcp__time__get_current_time", False), ("list_files", True), ("mcp__time__get_current_time", True)]
    # The headless header lists the server: its state, its tools, its confinement.
    (head,) = [ln for ln in out.splitlines() if "MCP server time" in ln]
    assert "MCP server time ready: 2 tools: get_current_time, convert_time · confined by bubblewrap" in head
    assert code != 2


def test_a_policy_naming_a_tool_the_server_does_not_offer_is_exit_2_in_one_line(tmp_path, capsys,
                                                                                 bwrap: Bwrap) -> None:  # noqa: F811
    job = make_job(tmp_path, TIME_SERVER + '\n[[guardrails.policies]]\ntype = "sequential"\n'
                                           'dependencies = { mcp__time__get_time = ["list_files"] }\n')
    code = main(["run", str(job), "--headless", "--speed", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert ("key 'guardrails.policies.0': 'mcp__time__get_time' is not a tool the MCP server time offers (it "
            "offers: convert_time, get_current_time)") in err[0]
    assert f"fix [guardrails] in job.toml, then start it again: agent-console run {job}" in err[0]
    runs = Path(os.environ["AGENT_CONSOLE_DATA_DIR"]) / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []  # no run was made


def test_a_policy_naming_a_tool_of_no_declared_server_is_refused_at_the_check(tmp_path, capsys) -> None:
    job = make_job(tmp_path, TIME_SERVER + 'tools = ["get_current_time"]\n\n[[guardrails.policies]]\n'
                                           'type = "sequential"\ndependencies = { mcp__time__convert_time = '
                                           '["list_files"], mcp__clock__now = ["list_files"] }\n')
    code = main(["run", str(job), "--headless", "--speed", "0"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "'mcp__time__convert_time' is not a tool of this job" in err
