"""The command line: exit codes, run folders, the jobs list."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import main
from tests.conftest import SAMPLES


def run_cli(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def test_run_copies_the_job_prints_the_folder_and_exits_0(capsys) -> None:
    code = main(["run", str(SAMPLES / "quickstart"), "--headless", "--speed", "0"])
    out = capsys.readouterr().out
    assert code == 0
    first = out.splitlines()[0]
    assert first.startswith("run folder: ")
    run_dir = Path(first.removeprefix("run folder: "))
    assert run_dir.parent == Path(os.environ["AGENT_CONSOLE_DATA_DIR"]) / "runs"
    assert (run_dir / "action_items.md").exists()
    assert not (SAMPLES / "quickstart" / ".console").exists()  # the checkout is untouched
    assert "job_complete:" in out and "[Phase 1/2 Review Inputs]" in out


def test_jobs_lists_completed_runs(capsys) -> None:
    assert main(["run", str(SAMPLES / "quickstart"), "--headless", "--speed", "0"]) == 0
    capsys.readouterr()
    assert main(["jobs", "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert rows[0]["status"] == "completed" and rows[0]["confidence"] == 0.85 and rows[0]["summary"]
    assert main(["jobs"]) == 0
    table = capsys.readouterr().out
    assert "completed" in table and "0.85" in table


def test_jobs_with_no_runs(capsys) -> None:
    assert main(["jobs"]) == 0
    assert "no runs yet" in capsys.readouterr().out


def test_in_place_runs_in_the_given_folder(make_job, capsys) -> None:
    paths = make_job("quickstart")
    assert main(["run", str(paths.root), "--headless", "--in-place", "--speed", "0"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"run folder: {paths.root.resolve()}"
    assert paths.events.exists()
    # running a finished job again says so and succeeds
    assert main(["run", str(paths.root), "--headless", "--in-place", "--speed", "0"]) == 0
    assert "job already complete" in capsys.readouterr().out


@pytest.mark.parametrize(
    "setup, args, message",
    [
        (None, ["run", "/nonexistent/job", "--headless"], "no such job folder"),
        ({"job.toml": "[model]\nprovider = 'gpt'\n"}, ["--headless"], "key 'model.provider'"),
        ({}, ["--headless", "--max-turns", "0"], "--max-turns must be positive"),
        ({}, ["--headless", "--speed", "-1"], "--speed must be 0 or more"),
        ({}, ["--headless", "--provider", "openai", "--script", "x.json"], "scripted provider only"),
    ],
)
def test_bad_input_exits_2_with_one_line(make_job, capsys, setup, args, message) -> None:
    if setup is None:
        code = main(args)
    else:
        paths = make_job(files=setup)
        code = main(["run", str(paths.root), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_run_that_does_not_complete_exits_1_with_reason(make_job, capsys, tmp_path) -> None:
    script = tmp_path / "stop.jsonl"
    script.write_text("\n".join(json.dumps({"text": "done?"}) for _ in range(5)))
    paths = make_job()
    code = main(["run", str(paths.root), "--headless", "--in-place", "--script", str(script)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip().splitlines()[-1].startswith("agent-console: run ended without job_complete: error:")


def test_provider_error_exits_1_without_traceback(make_job, tmp_path) -> None:
    script = tmp_path / "err.json"
    script.write_text(json.dumps([{"error": "connection refused"}]))
    paths = make_job()
    proc = run_cli("run", str(paths.root), "--headless", "--in-place", "--script", str(script))
    assert proc.returncode == 1
    assert "connection refused" in proc.stderr and "Traceback" not in proc.stderr + proc.stdout


def test_no_command_prints_help_and_exits_2(capsys) -> None:
    assert main([]) == 2
    assert "run" in capsys.readouterr().out


def test_corrupt_state_and_database_are_named_not_tracebacks(make_job, capsys) -> None:
    paths = make_job("quickstart")
    paths.state.mkdir()
    paths.todos.write_text('{"kind": "nonsense"}')
    assert main(["run", str(paths.root), "--headless", "--in-place", "--speed", "0"]) == 2
    err = capsys.readouterr().err
    assert "todos.json: harness state cannot be read" in err and "Traceback" not in err
    db = Path(os.environ["AGENT_CONSOLE_DATA_DIR"]) / "jobs.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"this is not sqlite" * 100)
    assert main(["jobs"]) == 2
    assert "jobs database cannot be read" in capsys.readouterr().err


def test_sigterm_stops_cleanly(make_job) -> None:
    import signal
    import time

    paths = make_job("requirements-extraction")
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "run", str(paths.root), "--headless", "--in-place",
                             "--speed", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=os.environ.copy())
    deadline = time.monotonic() + 30
    while not (paths.events.exists() and "turn_started" in paths.events.read_text()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err
    assert "stopped by the operator" in err.strip().splitlines()[-1]
    ended = [json.loads(x) for x in paths.events.read_text().splitlines() if '"session_ended"' in x]
    assert ended and ended[-1]["reason"] == "user_shutdown"


def test_run_without_a_terminal_falls_back_to_headless(capsys) -> None:
    assert main(["run", str(SAMPLES / "quickstart"), "--speed", "0"]) == 0
    captured = capsys.readouterr()
    assert "not a terminal: running headless" in captured.err
    assert "job_complete:" in captured.out


def test_attach_needs_a_run_and_a_terminal(make_job, capsys) -> None:
    paths = make_job("quickstart")
    assert main(["attach", str(paths.root)]) == 2
    assert "no events yet" in capsys.readouterr().err
    assert main(["run", str(paths.root), "--headless", "--in-place", "--speed", "0"]) == 0
    capsys.readouterr()
    assert main(["attach", str(paths.root)]) == 2
    assert "needs a terminal" in capsys.readouterr().err
