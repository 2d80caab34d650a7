"""`run --detach` returns once the runner holds the run (its lock), not after its first turn, and says what it
waits for when that takes longer than a second (issue 33, point 8). Before: it printed nothing while it waited
(3-5 s on an idle machine, up to 29 s under load).

The runner is held by a test hook in its own interpreter: a ``sitecustomize`` on PYTHONPATH, active in the runner
(AGENT_CONSOLE_RUNNER=1) only, that blocks until a gate file exists, either at the import of a module or at the
run's first event write (console.engine.failpoints). No duration is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.engine import events as ev
from console.engine.job import JobPaths
from console.engine.run_lock import RunLock
from console.runner import ended_code
from tests.conftest import SAMPLES

REPO = Path(__file__).resolve().parents[2]

HOLD = """
import os, sys, time
_gate, _module = os.environ.get("TEST_HOLD_GATE"), os.environ.get("TEST_HOLD_MODULE")


def _wait():
    deadline = time.monotonic() + 120  # never for ever, whatever the test does
    while not os.path.exists(_gate) and time.monotonic() < deadline:
        time.sleep(0.01)


if _gate and _module and os.environ.get("AGENT_CONSOLE_RUNNER") == "1":
    if _module == "first event":
        from console.engine import failpoints

        failpoints.install(lambda name, tear: _wait() if name == "events" else None)
    else:
        class _Hold:
            def find_spec(self, name, path=None, target=None):
                if name == _module:
                    _wait()
                return None
        sys.meta_path.insert(0, _Hold())
"""


def held_env(tmp_path: Path, module: str) -> tuple[dict[str, str], Path]:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOLD)
    gate = tmp_path / "gate"
    env = {**os.environ, "PYTHONPATH": f"{hook}{os.pathsep}{REPO}", "TEST_HOLD_GATE": str(gate),
           "TEST_HOLD_MODULE": module}
    return env, gate


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "console.cli", *args]


def wait_for(what: Callable[[], Any], name: str, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := what():
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {name}")


def started(paths: JobPaths) -> bool:
    return paths.events.exists() and any(isinstance(e, ev.SessionStarted) for e in ev.read_events(paths.events))


def test_detach_returns_once_the_runner_holds_the_run_before_its_first_turn(tmp_path: Path) -> None:
    env, gate = held_env(tmp_path, "first event")  # the runner stops at its first event, before any turn
    try:
        done = subprocess.run(cli("run", str(SAMPLES / "quickstart"), "--detach", "--speed", "0"), env=env,
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        paths = JobPaths(Path(done.stdout.split(": ", 1)[1].splitlines()[0]))
        runner = int(done.stdout.split("(process ", 1)[1].split(")", 1)[0])
        # Returned while the runner is held: the run is its (the lock), and no event of the run is written yet.
        assert RunLock(paths).holder() == runner
        assert not paths.events.exists() or not list(ev.read_events(paths.events))
        assert "running in the background" in done.stdout
    finally:
        gate.touch()
    # Let go, the runner goes on as it would have: the run starts and completes.
    wait_for(lambda: ended_code(paths) is not None, "the run's end")
    assert ended_code(paths) == 0 and started(paths)


def test_a_start_that_waits_says_what_it_waits_for(tmp_path: Path) -> None:
    env, gate = held_env(tmp_path, "console.engine.run_lock")  # the runner stops before it takes the lock
    proc = subprocess.Popen(cli("run", str(SAMPLES / "quickstart"), "--detach", "--speed", "0"), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
    reader.start()
    try:
        said = wait_for(lambda: next((s for s in lines if s.startswith("waiting for the run to start: ")), None),
                        "the line saying what the start waits for")
    finally:
        gate.touch()  # the line is there (or the test failed): the runner may go on
    out, _ = proc.communicate(timeout=120)
    reader.join(timeout=10)
    assert proc.returncode == 0, lines
    paths = JobPaths(Path(out.split(": ", 1)[1].splitlines()[0]))
    # What it waits for, by name, and where to look: the runner's log.
    assert ("to take the run's lock" in said or "to start the run's process" in said), said
    assert str(paths.state / "runner.log") in said
    assert sum(1 for s in lines if s.startswith("waiting for the run to start")) == 1  # said once
    wait_for(lambda: ended_code(paths) is not None, "the run's end")
