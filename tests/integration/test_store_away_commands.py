"""With the shared store away, a machine's own runs are still found by their id and followed from their folders:
`wait ID`, `stop ID` (and every command by id) and `attach ID` read the run's folder, their first line marked
"store away"; runs in place outside the data dir are found too, through the index their starts leave under it
(issue 33, point 6). Before: `jobs` and `logs ID` did, but `wait ID` exited 2 ("the jobs store cannot be read"),
`stop ID` 1 with the store's error, and an in-place run was not listed. Each against a loopback port nothing
listens on (refused at once) and a server that takes the connection and closes it (refused by the server)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.engine.job import JobPaths
from console.engine.run_lock import RunLock
from console.runner import ended_code
from tests.conftest import SAMPLES
from tests.integration.test_detach_start import cli, detach, held_env, wait_for


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(params=["closed port", "server that refuses"])
def away_url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "closed port":
        yield f"postgresql://someone:s3cret@127.0.0.1:{closed_port()}/db"
        return
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    done = threading.Event()

    def refuse() -> None:  # each connection closed as soon as it is taken: the server ends it
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=refuse, daemon=True).start()
    try:
        yield f"postgresql://someone:s3cret@127.0.0.1:{server.getsockname()[1]}/db"
    finally:
        done.set()
        server.close()


def away(env: dict[str, str], url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(*args), env={**env, "AGENT_CONSOLE_STORE": url}, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def marked(done: subprocess.CompletedProcess[str], paths: JobPaths) -> None:
    """The command's first line says the store is away and where the run was read from (never its password)."""
    first = done.stderr.splitlines()[0]
    assert first.startswith("agent-console: store away (") and str(paths.root) in first, done.stderr
    assert "s3cret" not in done.stderr + done.stdout


def test_wait_stop_and_attach_by_id_find_this_machines_run_while_the_store_is_away(tmp_path: Path,
                                                                                   away_url: str) -> None:
    env, gate = held_env(tmp_path, "first event")  # the run holds its lock, held at its first event
    try:
        _, paths = detach(env)
        wait_for(lambda: RunLock(paths).holder(), "the runner to take the run")
        env = dict(os.environ)
        still = away(env, away_url, "wait", paths.run_id, "--timeout", "0")
        assert still.returncode == 5 and "still running" in still.stdout, still
        marked(still, paths)
        attach = away(env, away_url, "attach", paths.run_id)  # no terminal here: it names what works instead
        assert attach.returncode == 2 and f"agent-console logs -f {paths.run_id}" in attach.stderr, attach
        marked(attach, paths)
        stop = away(env, away_url, "stop", paths.run_id, "--wait", "0")
        assert stop.returncode == 0 and "stop: queued" in stop.stdout, stop
        marked(stop, paths)
    finally:
        gate.touch()
    wait_for(lambda: ended_code(paths) is not None, "the run's end")
    stopped = away(env, away_url, "wait", paths.run_id)
    assert stopped.returncode == 3, stopped  # stopped by the operator: the stop sent with the store away
    marked(stopped, paths)


def test_a_run_in_place_outside_the_data_dir_is_listed_and_found_while_the_store_is_away(tmp_path: Path,
                                                                                         away_url: str) -> None:
    job = tmp_path / "elsewhere" / "job"
    shutil.copytree(SAMPLES / "quickstart", job)
    done = subprocess.run(cli("run", "--in-place", str(job), "--headless", "--speed", "0"), capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    paths = JobPaths(job)
    listed = away(dict(os.environ), away_url, "jobs", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["id"], r["status"], r["store"]) for r in rows if r["path"] == str(job)] == [
        (paths.run_id, "completed", "away")]
    waited = away(dict(os.environ), away_url, "wait", paths.run_id)
    assert waited.returncode == 0 and "completed" in waited.stdout, waited
    marked(waited, paths)
