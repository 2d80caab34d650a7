"""The suite never touches the operator's machine (tests/hermetic.py): proved by running tests that could in a child
pytest under a fake operator's home, whose config notifies a loopback canary at each run's end and whose data dir
holds a jobs.db, then checking that the canary heard nothing and the home is byte-for-byte as it was."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from console.engine.store import JobStore
from tests import hermetic
from tests.conftest import Hang, cpu_limit, time_limit
from tests.notify_server import loopback

REPO = Path(__file__).resolve().parents[1]
PROBE = Path(__file__).with_name("hermetic_probe.py")
LEAK = Path(__file__).with_name("hermetic_leak_probe.py")


def operator_home(folder: Path, canary: str) -> Path:
    """A home as a new user of agent-console has it: a config that notifies at each run's end, a store with a run."""
    home = folder / "operator"
    config = home / ".config" / "agent-console" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[notify]\nurls = ["{canary}"]\non_end = true\n')
    data = home / ".local" / "share" / "agent-console"
    data.mkdir(parents=True)
    JobStore(data / "jobs.db").started(Path("/srv/their-job"), "their-job", "openai", "gpt-4o",
                                       datetime(2026, 1, 1, tzinfo=UTC))
    (home / ".bashrc").write_text("# theirs\n")
    return home


def as_the_operator(home: Path) -> dict[str, str]:
    """This environment as the operator's own shell has it: their HOME, no XDG or agent-console variable (the
    platform's folders under HOME are the defaults), and not inside this session's walls."""
    env = {k: v for k, v in os.environ.items() if not hermetic.removed(k) and k != hermetic.MARK}
    env["HOME"] = str(home)
    return env


def test_no_test_reaches_the_operators_home_or_channel(tmp_path: Path) -> None:
    with loopback() as canary:
        home = operator_home(tmp_path, canary.url("json", "/operator-channel"))
        before = hermetic.tree_digest(home)
        # On one xdist worker: the walls must hold in a worker as in the process that started it.
        child = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "1",
                                "--basetemp", str(tmp_path / "child"), str(PROBE)],
                               cwd=REPO, env=as_the_operator(home), capture_output=True, text=True, timeout=600,
                               stdin=subprocess.DEVNULL)
        assert child.returncode == 0 and "4 passed" in child.stdout, child.stdout[-3000:] + child.stderr[-3000:]
        assert canary.requests == []
        assert hermetic.tree_digest(home) == before

        # The control: the same runs as the operator's own, outside the suite, do notify and register (so the
        # silence above is the walls', not a config that could not reach the canary).
        mine = tmp_path / "control"
        shutil.copytree(home, mine)
        job = tmp_path / "job"
        shutil.copytree(REPO / "sample_jobs" / "quickstart", job, ignore=shutil.ignore_patterns(".console"))
        done = subprocess.run([sys.executable, "-m", "console.cli", "run", str(job), "--headless", "--speed", "0"],
                              env=as_the_operator(mine), capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        assert "completed" in canary.wait_for(1, timeout=60)[0].body["title"]
        data = mine / ".local" / "share" / "agent-console"
        rows = JobStore(data / "jobs.db").list()
        assert len(rows) == 2 and any(Path(r.path).parent == data / "runs" for r in rows), rows


def test_a_test_that_breaks_the_walls_fails_the_run(tmp_path: Path) -> None:
    """The check at the run's end: a test that writes under the real home, or reaches for an address off this
    machine, passes on its own but fails the run, which names what it did."""
    home = operator_home(tmp_path, "json://127.0.0.1:9/unused")
    env = as_the_operator(home) | {"HERMETIC_PROBE_REAL_HOME": str(home)}
    child = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0",
                            "--basetemp", str(tmp_path / "child"), str(LEAK)],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    out = child.stdout
    assert child.returncode == 1 and "1 passed" in out, out[-3000:] + child.stderr[-3000:]
    config = home / ".config" / "agent-console" / "config.toml"
    assert f"changed under the real home: {config}: -rw-r--r--" in out, out[-3000:]
    assert ("tried to reach an address off this machine: tests/hermetic_leak_probe.py::test_a_test_that_writes_in_"
            "the_real_home_and_looks_up_an_outside_address: socket.getaddrinfo '192.0.2.1'") in out, out[-3000:]


def test_a_cpu_limit_counts_work_not_waiting() -> None:
    """tests/conftest.cpu_limit, the bound the complexity tests use instead of the wall clock: a wait costs it
    nothing (as other work on a loaded machine's cores does not), work past it fails."""
    with cpu_limit(0.2):
        time.sleep(0.5)
    with time_limit(120), pytest.raises(Hang, match="CPU"), cpu_limit(0.2):
        while True:
            pass
