"""A job's MCP servers while they start, and what a server's garbage is called: real processes (unconfined servers,
which need no bubblewrap; their confinement is tests/integration/test_mcp.py's).

- the servers start together: three that hang are all running at once (one after the other, three broken servers
  were three start bounds of silence);
- Ctrl+C or SIGTERM while a server starts is the command's interrupt, never the server's failure: the start ends
  as interrupted (exit 130, nothing made, the server gone), not as an optional server that "did not start" followed
  by the whole run;
- an answer of the wrong shape is said to be one ("a malformed result"), not "no answer within N s".

No test times anything: the ceilings below only catch a hang.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from console.engine.tools.limits import CommandWorld
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_tools import McpUnavailable
from console.mcp.client import start_servers
from tests.conftest import SAMPLES
from tests.processes import alive, cli, wait_for

SERVERS = Path(__file__).parent.parent / "mcp_servers"
HANG = str(SERVERS / "hang.py")
GARBAGE = str(SERVERS / "garbage.py")
UNCONFINED = CommandWorld(unconfined=True)
CEILING = 60.0  # a start bound is 30 s: past twice that, the command hangs


def pid_in(marker: Path) -> int:
    return int(marker.read_text()) if marker.exists() else 0


def test_the_servers_start_together(tmp_path: Path) -> None:
    markers = [tmp_path / f"up-{i}" for i in range(3)]
    configs = [McpServerConfig(name=f"hang{i}", command=[sys.executable, HANG, str(m)], tools=["slow"])
               for i, m in enumerate(markers)]
    job = tmp_path / "job"
    job.mkdir()
    got: dict[str, Any] = {}

    def start() -> None:
        # A bound long enough for three interpreters to start on a loaded machine, no longer: the test waits it out.
        got["servers"], got["problems"] = start_servers(configs, str(job), UNCONFINED, start_seconds=8)

    starting = threading.Thread(target=start, daemon=True)
    starting.start()
    try:
        wait_for(lambda: all(m.exists() for m in markers) or not starting.is_alive(), 20, "the three servers to run")
        assert all(m.exists() for m in markers), "not all three ran within the start bound"
        pids = [pid_in(m) for m in markers]
        # All three at once: one after the other, the first was ended (its start bound past) before the next began.
        assert all(alive(pid) for pid in pids), pids
    finally:
        starting.join(CEILING)
    assert not starting.is_alive()
    problems = got["problems"]
    assert len(problems) == 3 and all("did not start: it did not answer within 8 s" in p for p in problems), problems
    for server in got["servers"]:
        server.close()
    wait_for(lambda: not any(alive(pid) for pid in pids), 30, "the servers to be ended")


def test_a_malformed_answer_is_said_to_be_one_not_no_answer(tmp_path: Path) -> None:
    config = McpServerConfig(name="garbage", command=[sys.executable, GARBAGE], timeout=3)
    (server,), problems = start_servers([config], str(tmp_path), UNCONFINED)
    assert problems == []
    try:
        said = {}
        for tool in ("string", "shape", "silent"):
            with pytest.raises(McpUnavailable) as caught:
                server.call(tool, {}, 3)
            said[tool] = str(caught.value)
    finally:
        server.close()
    # The SDK's own validation, in one line: where the answer was wrong and how.
    assert said["string"] == "it answered with a malformed result (result: Input should be an object)", said
    assert said["shape"].startswith("it answered with a malformed result (content:"), said
    # Nothing valid came: no answer, and the garbage that came instead is named.
    assert said["silent"] == "no answer within 3 s (it wrote a line that is not a valid message meanwhile: not JSON)"


def hang_job(tmp_path: Path, marker: Path) -> Path:
    job = tmp_path / "m3"
    shutil.copytree(SAMPLES / "quickstart", job, ignore=shutil.ignore_patterns(".console"))
    with (job / "job.toml").open("a") as fh:
        fh.write(f'\n[[mcp]]\nname = "hang"\ncommand = ["{sys.executable}", "{HANG}", "{marker}"]\n'
                 'tools = ["slow"]\ntimeout = 5\n')
    return job


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_a_server_starts_ends_the_start_as_interrupted(tmp_path: Path, sig: int) -> None:
    marker = tmp_path / "up"
    job = hang_job(tmp_path, marker)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.Popen(cli("run", str(job), "--headless", "--unconfined", "--speed", "1"), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            start_new_session=True)
    try:
        wait_for(lambda: marker.exists() or proc.poll() is not None, CEILING, "the server to be starting")
        server = pid_in(marker)
        assert server and proc.poll() is None
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=CEILING)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert "did not start" not in err and "KeyboardInterrupt" not in err, err
    assert "interrupted before run" in err and "nothing was made" in err, err
    assert "run " not in out  # no run began: no `run ID: FOLDER` line, no story
    # Nothing made: no run folder left that no command lists (resume would call it a job that never ran).
    runs = Path(os.environ["AGENT_CONSOLE_DATA_DIR"]) / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []
    wait_for(lambda: not alive(server), 30, "the server to be ended")
