"""`run` with the operator's [mcp] tool_search_share: the real mcp-server-time's tools, past that share of the
window, are found and loaded through mcp_tool_search before they can be called."""

from __future__ import annotations

import json
import os
from pathlib import Path

from console.cli import main
from console.engine import events as ev
from console.engine.tools.confine import Bwrap
from tests.commands_support import bwrap  # noqa: F401  (the fixture)
from tests.test_cli import first_line
from tests.test_cli_mcp import VENV, make_job

NOW = "mcp__time__get_current_time"


def test_the_operators_share_defers_the_servers_tools_behind_the_search(tmp_path, capsys,
                                                                        bwrap: Bwrap) -> None:  # noqa: F811
    job = make_job(tmp_path, f'[[mcp]]\nname = "time"\ncommand = ["{VENV}/bin/mcp-server-time"]\nrequired = true\n')
    config = Path(os.environ["AGENT_CONSOLE_CONFIG"])
    config.write_text(config.read_text() + "\n[mcp]\ntool_search_share = 0.001\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"calls": [{"name": NOW, "arguments": {"timezone": "UTC"}}]},
                                  {"calls": [{"name": "mcp_tool_search", "arguments": {"query": "current time"}}]},
                                  {"calls": [{"name": "mcp_tool_search", "arguments": {"load": [NOW]}}]},
                                  {"calls": [{"name": NOW, "arguments": {"timezone": "UTC"}}]},
                                  {"error": "end of script"}]))
    code = main(["run", str(job), "--headless", "--speed", "0", "--script", str(script)])
    _, folder = first_line(capsys.readouterr().out)
    results = [e for e in ev.read_events(folder / ".console" / "events.jsonl") if isinstance(e, ev.ToolResult)]
    assert [(r.tool, r.ok) for r in results] == [(NOW, False), ("mcp_tool_search", True),
                                                ("mcp_tool_search", True), (NOW, True)]
    assert "mcp_tool_search" in results[0].content and "not loaded" in results[0].content
    assert f"- {NOW}:" in results[1].content
    assert '"timezone": "UTC"' in results[3].content
    assert code != 2


def test_a_share_out_of_bounds_is_exit_2_in_one_line(tmp_path, capsys) -> None:
    job = make_job(tmp_path, '[[mcp]]\nname = "time"\ncommand = ["mcp-server-time"]\n')
    config = Path(os.environ["AGENT_CONSOLE_CONFIG"])
    config.write_text(config.read_text() + "\n[mcp]\ntool_search_share = 2\n")
    code = main(["run", str(job), "--headless", "--speed", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "tool_search_share" in err[0]
