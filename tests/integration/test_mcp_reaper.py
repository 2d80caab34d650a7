"""console.mcp.reaper: what an unconfined server leaves (a setsid'd double fork) ends with it, whether the server
exits, the client ends it (SIGTERM), or the harness dies (kill -9)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

from tests.integration.test_mcp import holding

# A "server" that leaves a process in a session of its own (a double fork), says so, then serves until told.
LEAVES = """
import os, subprocess, sys, time
left = subprocess.Popen([sys.executable, "-c", "import os, sys, time\\nif os.fork(): os._exit(0)\\nos.setsid()\\n"
                         "print('up', flush=True)\\ntime.sleep(300)", sys.argv[1]], stdout=subprocess.PIPE)
sys.stdout.write(left.stdout.readline().decode() + sys.stdin.readline())
sys.stdout.flush()
if sys.argv[2] == "serve":
    time.sleep(300)
"""


def reaper(token: str, then: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "console.mcp.reaper", "--", sys.executable, "-c", LEAVES, token,
                             then], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True)


def up(proc: subprocess.Popen[str]) -> None:
    """The grandchild is up, in a session of its own, and the server answered through the reaper's pipes."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("hello\n")
    proc.stdin.flush()
    assert [proc.stdout.readline(), proc.stdout.readline()] == ["up\n", "hello\n"]


def gone(token: str) -> bool:
    deadline = time.monotonic() + 30  # the kill is at once; reaping is waited on, not timed
    while holding(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    return holding(token) == []


def test_the_servers_end_ends_what_it_left() -> None:
    token = f"reaped-{uuid.uuid4().hex}"
    proc = reaper(token, "exit")
    up(proc)
    assert proc.wait(timeout=60) == 0
    assert gone(token)


def test_the_clients_sigterm_ends_the_server_and_what_it_left() -> None:
    token = f"reaped-{uuid.uuid4().hex}"
    proc = reaper(token, "serve")
    up(proc)
    assert len(holding(token)) == 3  # the reaper, the server, what it left
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGKILL  # the server was killed: its status said so
    assert gone(token)


def test_the_harness_killed_ends_the_server_and_what_it_left() -> None:
    token = f"reaped-{uuid.uuid4().hex}"
    # A harness of its own (a process that starts the reaper, says the grandchild is up, then waits), killed -9.
    harness = subprocess.Popen([sys.executable, "-c", f"""
import subprocess, sys
p = subprocess.Popen([sys.executable, "-m", "console.mcp.reaper", "--", sys.executable, "-c", {LEAVES!r},
                      {token!r}, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
p.stdin.write("hello\\n"); p.stdin.flush()
print([p.stdout.readline(), p.stdout.readline()], flush=True)
p.wait()
"""], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert harness.stdout is not None
    assert harness.stdout.readline().strip() == "['up\\n', 'hello\\n']"
    assert len(holding(token)) == 4  # the harness, the reaper, the server, what it left
    os.kill(harness.pid, signal.SIGKILL)
    harness.wait()
    assert gone(token)


def test_a_program_that_cannot_start_is_said() -> None:
    proc = subprocess.run([sys.executable, "-m", "console.mcp.reaper", "--", "/nonexistent/server"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 127 and proc.stderr == "cannot start /nonexistent/server: No such file or directory\n"
    usage = subprocess.run([sys.executable, "-m", "console.mcp.reaper"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and usage.stderr.startswith("usage:")


def test_an_unconfined_servers_whole_tree_ends_with_it(make_job) -> None:
    """As test_mcp's confined test_the_servers_whole_tree_ends_with_it, run --unconfined: it outlived the run."""
    from console.engine.tools.limits import CommandWorld
    from console.mcp.client import start_servers
    from tests.integration.test_mcp import HOSTILE

    job = make_job()
    (server,), problems = start_servers([HOSTILE], str(job.root), CommandWorld(unconfined=True))
    assert problems == [] and server.confined_by == "UNCONFINED (run --unconfined)"
    token = f"linger-{uuid.uuid4().hex}"
    try:
        assert server.call("linger", {"token": token}, 30).text == "LEFT"
        assert holding(token)  # a process in a session of its own
    finally:
        server.close()
    assert gone(token)


def test_a_console_package_planted_in_the_job_folder_is_not_what_runs(make_job) -> None:
    """The reaper starts in the job folder, unconfined: a job's own console/mcp/reaper.py must not be imported."""
    from console.engine.tools.limits import CommandWorld
    from console.mcp.client import start_servers
    from tests.integration.test_mcp import HOSTILE

    job = make_job()
    planted = job.root / "console" / "mcp"
    planted.mkdir(parents=True)
    (job.root / "console" / "__init__.py").write_text("")
    (planted / "__init__.py").write_text("")
    (planted / "reaper.py").write_text("open('PWNED', 'w').close()\n")
    (server,), problems = start_servers([HOSTILE], str(job.root), CommandWorld(unconfined=True))
    try:
        assert problems == [] and server.call("huge", {}, 30).text
    finally:
        server.close()
    assert not (job.root / "PWNED").exists()
