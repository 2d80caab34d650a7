"""`run --detach` returns once the run is handed to its runner, before the runner has loaded the engine (seconds),
and the run is found meanwhile and whatever becomes of the runner (issue 33, point 8). Before: it waited for the
runner to take the run's lock (2.5-3.3 s on an idle machine, up to 29 s under load).

The runner is held (or made to fail) by a test hook in its own interpreter: a ``sitecustomize`` on PYTHONPATH,
active in the runner (AGENT_CONSOLE_RUNNER=1) only, that blocks until a gate file exists, either at the import of a
module or at the run's first event write (console.engine.failpoints); or that fails the import of a module. No
duration is asserted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.engine import events as ev
from console.engine.job import JobPaths
from console.engine.launch import read_launch
from console.engine.run_lock import RunLock
from console.engine.starting import starting
from console.runner import ended_code, last_end
from tests.conftest import SAMPLES
from tests.provenance_support import operator_seal

REPO = Path(__file__).resolve().parents[2]

HOLD = """
import os, sys, time
_gate, _module = os.environ.get("TEST_HOLD_GATE"), os.environ.get("TEST_HOLD_MODULE")


def _wait():
    deadline = time.monotonic() + 120  # never for ever, whatever the test does
    while not os.path.exists(_gate) and time.monotonic() < deadline:
        time.sleep(0.01)


if _gate and _module and os.environ.get("AGENT_CONSOLE_RUNNER") == "1" and "console.watcher" not in sys.orig_argv:
    if _module.startswith("fail "):  # the runner cannot start: an import error at once
        class _Fail:
            def find_spec(self, name, path=None, target=None):
                if name == _module[5:]:
                    raise ImportError(f"test hook: {name} cannot be imported")
                return None
        sys.meta_path.insert(0, _Fail())
    elif _module == "first event":
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


def detach(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], JobPaths]:
    """`run --detach` of the quickstart: what it said, and its run."""
    done = subprocess.run(cli("run", str(SAMPLES / "quickstart"), "--detach", "--speed", "0", *args), env=env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done, JobPaths(Path(done.stdout.split(": ", 1)[1].splitlines()[0]))


def listed(paths: JobPaths) -> dict[str, Any] | None:
    import json

    out = subprocess.run(cli("jobs", "--json"), capture_output=True, text=True, timeout=60).stdout
    return next((r for line in out.splitlines() if (r := json.loads(line))["path"] == str(paths.root)), None)


def runner_of(paths: JobPaths) -> int | None:
    """The runner the start's watcher started (the watcher's child), while it is starting."""
    from console.engine.starting import children as _children

    watcher = starting(paths)
    return next(iter(_children(watcher)), None) if watcher is not None else None


def test_detach_returns_before_the_runner_has_loaded_and_a_stop_waits_for_it(tmp_path: Path) -> None:
    env, gate = held_env(tmp_path, "console.engine.job_config")  # the runner is held before it checks the job
    stop: subprocess.Popen[str] | None = None
    try:
        done, paths = detach(env)  # before: blocked until the runner held the run's lock (a timeout here)
        # Returned while the runner loads: it holds nothing yet, and the run has no event. But the run is one: its
        # sealed launch record (resume ID starts it) and its jobs row (listed, as running: it is being started).
        assert RunLock(paths).holder() is None and not paths.events.exists()
        record = read_launch(paths, operator_seal())
        assert record is not None and record.provider == "scripted" and record.speed == 0
        row = listed(paths)
        assert row is not None and row["status"] == "running", row
        # What to type next, by the run's id.
        assert f"agent-console attach {paths.run_id}" in done.stdout
        assert f"agent-console stop {paths.run_id}" in done.stdout
        # A stop meanwhile waits for the run to start (and says so), instead of finding no process.
        stop = subprocess.Popen(cli("stop", paths.run_id, "--wait", "60"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(stop.stderr or ()), daemon=True)
        reader.start()
        said = wait_for(lambda: next((s for s in lines if "waiting for run" in s), None), "the stop's waiting line")
        assert f"waiting for run {paths.run_id} to start" in said and str(paths.state / "runner.log") in said
    finally:
        gate.touch()
    assert stop is not None
    out, _ = stop.communicate(timeout=120)
    assert stop.returncode == 0 and "stop: applied" in out, (out, lines)
    wait_for(lambda: ended_code(paths) is not None, "the run's end")
    end, _ = last_end(paths)
    assert end is not None and end.reason == "user_shutdown"
    launches = [e for e in ev.read_events(paths.events) if isinstance(e, ev.LaunchSettings)]
    assert [(x.source, x.by) for x in launches] == [("start", "detach")]  # the start it was, not a resume


def test_a_runner_killed_while_it_loads_leaves_a_run_that_resume_starts(tmp_path: Path) -> None:
    """SIGTERM to the runner before it took the run (the start had returned): the folder keeps its sealed record,
    `jobs` lists it as interrupted and `resume ID` starts it. (Taking the lock first in the runner, tried before,
    left a folder without its record here, which resume refused.)"""
    env, gate = held_env(tmp_path, "console.engine.job_config")
    try:
        _, paths = detach(env)
        runner = wait_for(lambda: runner_of(paths), "the runner")
        os.kill(runner, signal.SIGTERM)  # our own child's child, by its id
        wait_for(lambda: starting(paths) is None, "the watcher to end with its runner")
    finally:
        gate.touch()
    row = listed(paths)
    assert row is not None and row["status"] == "interrupted" and f"resume {paths.run_id}" in row["detail"], row
    waited = subprocess.run(cli("wait", paths.run_id), capture_output=True, text=True, timeout=120)
    assert waited.returncode == 6 and f"agent-console resume {paths.run_id}" in waited.stdout, waited
    resumed = subprocess.run(cli("resume", paths.run_id, "--speed", "0"), capture_output=True, text=True, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    done = subprocess.run(cli("wait", paths.run_id), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done
    launches = [e for e in ev.read_events(paths.events) if isinstance(e, ev.LaunchSettings)]
    assert [x.source for x in launches] == ["start"]  # its first start, begun by the resume


def test_a_runner_that_cannot_start_is_told_and_the_next_command_works(tmp_path: Path) -> None:
    env, _gate = held_env(tmp_path, "fail console.engine.job_config")  # an import error in the runner, at once
    _, paths = detach(env)
    wait_for(lambda: starting(paths) is None, "the watcher to end with its runner")
    # Its log says why; jobs, wait and resume say what it is and what to type.
    assert "cannot be imported" in (paths.state / "runner.log").read_text()
    row = listed(paths)
    assert row is not None and row["status"] == "interrupted", row
    waited = subprocess.run(cli("wait", paths.run_id), capture_output=True, text=True, timeout=120)
    assert waited.returncode == 6 and f"agent-console resume {paths.run_id}" in waited.stdout, waited
    resumed = subprocess.run(cli("resume", paths.run_id, "--speed", "0"), capture_output=True, text=True, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    done = subprocess.run(cli("wait", paths.run_id), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done


def test_a_runner_whose_process_cannot_be_made_is_told_with_the_resume(tmp_path: Path,
                                                                     monkeypatch: Any, capsys: Any) -> None:
    """The runner's process cannot be made (an interpreter gone, no memory): one line, the run found."""
    from console import cli as console_cli
    from console import runner

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise FileNotFoundError(2, "No such file or directory", "/gone/python")

    monkeypatch.setattr(runner, "spawn_runner", refused)
    assert console_cli.main(["run", str(SAMPLES / "quickstart"), "--detach", "--speed", "0"]) == 1
    out, err_text = capsys.readouterr()
    paths = JobPaths(Path(out.split(": ", 1)[1].splitlines()[0]))
    assert err_text.strip().splitlines() == [
        f"agent-console: the run could not be started: No such file or directory; once that is fixed, resume run "
        f"{paths.run_id} with: agent-console resume {paths.run_id}"]
    monkeypatch.undo()
    resumed = subprocess.run(cli("resume", paths.run_id, "--speed", "0"), capture_output=True, text=True, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    done = subprocess.run(cli("wait", paths.run_id), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done


HANDED_OVER = ("console.engine.supervisor", "console.engine.tool_setup", "console.engine.runtime",
               "console.providers.scripted",
               # Checking job.toml reads its config models, not the implementations they configure: the command
               # tool, the guardrails' machinery, the event log, the sandbox (issue 33: run --detach returns fast).
               "console.engine.tools.commands", "console.engine.guardrails.guardrails", "console.engine.events.log",
               "console.engine.sandbox", "console.engine.guardrails.feedback", "console.engine.guardrails.policies",
               "console.engine.tools.files")


def test_the_start_does_not_load_what_the_runner_loads() -> None:
    """The command that hands the run over loads what it checks, not the run's engine nor the scripted model."""
    code = ("import json, sys; from console.cli import main; rc = main(['run', sys.argv[1], '--detach', '--speed', "
            "'0']); print(json.dumps({'rc': rc, 'loaded': [m for m in sys.argv[2:] if m in sys.modules]}))")
    done = subprocess.run([sys.executable, "-c", code, str(SAMPLES / "quickstart"), *HANDED_OVER],
                          capture_output=True, text=True, timeout=60)
    import json

    got = json.loads(done.stdout.splitlines()[-1])
    assert got == {"rc": 0, "loaded": []}, (got, done.stderr)
    paths = JobPaths(Path(done.stdout.split(": ", 1)[1].splitlines()[0]))
    assert subprocess.run(cli("wait", paths.run_id), capture_output=True, timeout=120).returncode == 0
