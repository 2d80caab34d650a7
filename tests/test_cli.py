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
        ({}, ["--headless", "--max-turns", "0"], "--max-turns 0: expected a whole number from 1 to"),
        ({}, ["--headless", "--speed", "-1"], "--speed -1: expected a number from 0 to 100"),
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
    # A damaged state file is moved aside and reported, never trusted, never deleted; the run goes on.
    assert main(["run", str(paths.root), "--headless", "--in-place", "--speed", "0"]) == 0
    out, err = capsys.readouterr()
    assert "recovered: .console/todos.json: " in out and "Traceback" not in err
    (kept,) = (paths.state / "corrupt").iterdir()
    assert kept.name.startswith("todos.json.") and kept.read_text() == '{"kind": "nonsense"}'
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
    *_, reason, resume = err.strip().splitlines()
    assert "stopped by the operator" in reason
    assert resume == f"agent-console: resume with: agent-console run --in-place {paths.root}"
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


# -- every bad input: exit 2, one line naming it, no traceback ----------------------------------------------


def _nested_script(path: Path) -> None:
    path.write_text("[" * 100_000 + "]" * 100_000)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


BAD_INPUTS = {
    # flags
    "base-url-ipv6": (lambda job, tmp: ["run", job, "--base-url", "http://[::1"], "--base-url 'http://[::1'"),
    "base-url-ipv6-openai": (lambda job, tmp: ["run", job, "--provider", "openai", "--base-url", "http://[::1"],
                             "Invalid IPv6 URL"),
    "base-url-ftp": (lambda job, tmp: ["run", job, "--base-url", "ftp://x"], "http:// or https://"),
    "base-url-no-host": (lambda job, tmp: ["run", job, "--base-url", "http://"], "no host"),
    "speed-negative": (lambda job, tmp: ["run", job, "--speed", "-1"], "--speed -1"),
    "speed-nan": (lambda job, tmp: ["run", job, "--speed", "nan"], "--speed nan"),
    "speed-inf": (lambda job, tmp: ["run", job, "--speed", "inf"], "--speed inf"),
    "max-turns-zero": (lambda job, tmp: ["run", job, "--max-turns", "0"], "--max-turns 0"),
    "max-turns-negative": (lambda job, tmp: ["run", job, "--max-turns", "-5"], "--max-turns -5"),
    "max-turns-abc": (lambda job, tmp: ["run", job, "--max-turns", "abc"], "--max-turns"),
    "max-turns-5000-digits": (lambda job, tmp: ["run", job, "--max-turns", "9" * 5000], "--max-turns"),
    "context-window-zero": (lambda job, tmp: ["run", job, "--context-window", "0"], "--context-window 0"),
    "context-window-absurd": (lambda job, tmp: ["run", job, "--context-window", str(10**30)], "--context-window"),
    "max-restarts-negative": (lambda job, tmp: ["run", job, "--max-restarts", "-1"], "--max-restarts -1"),
    "unknown-flag": (lambda job, tmp: ["run", job, "--bogus"], "--bogus"),
    "unknown-command": (lambda job, tmp: ["bogus"], "bogus"),
    "jobs-limit-zero": (lambda job, tmp: ["jobs", "--limit", "0"], "--limit 0"),
    "wait-negative": (lambda job, tmp: ["pause", job, "--wait", "-1"], "--wait -1"),
    "wait-nan": (lambda job, tmp: ["stop", job, "--wait", "nan"], "--wait nan"),
    # --script
    "script-missing": (lambda job, tmp: ["run", job, "--script", tmp / "nope.json"], "no such file"),
    "script-directory": (lambda job, tmp: ["run", job, "--script", tmp], "is a directory"),
    "script-not-json": (lambda job, tmp: (tmp / "s.json").write_text("not json {") and
                        ["run", job, "--script", tmp / "s.json"], "neither a JSON list of turns nor JSON Lines"),
    "script-not-utf8": (lambda job, tmp: (tmp / "s.json").write_bytes(b"[\xff]") and
                        ["run", job, "--script", tmp / "s.json"], "not UTF-8"),
    "script-nested": (lambda job, tmp: _nested_script(tmp / "s.json") or ["run", job, "--script", tmp / "s.json"],
                      "nested too deeply"),
    "script-wrong-shape": (lambda job, tmp: (tmp / "s.json").write_text('[{"calls": [{"arguments": {}}]}]') and
                           ["run", job, "--script", tmp / "s.json"], "turn 1: key 'calls.0.name'"),
    "script-list-of-ints": (lambda job, tmp: (tmp / "s.json").write_text("[1, 2]") and
                            ["run", job, "--script", tmp / "s.json"], "turn 1"),
    "script-huge-number": (lambda job, tmp: (tmp / "s.json").write_text("[" + "9" * 5000 + "]") and
                           ["run", job, "--script", tmp / "s.json"], "--script"),
    "script-fifo": (lambda job, tmp: _fifo(tmp / "s.json") or ["run", job, "--script", tmp / "s.json"],
                    "not a regular file"),
    # JOB
    "job-is-a-file": (lambda job, tmp: ["run", job / "instructions.md"], "not a file"),
    "job-missing": (lambda job, tmp: ["run", tmp / "missing"], "no such job folder"),
    "instructions-is-a-dir": (lambda job, tmp: (job / "instructions.md").unlink() or
                              (job / "instructions.md").mkdir() or ["run", job], "instructions.md is a directory"),
    "instructions-is-a-fifo": (lambda job, tmp: (job / "instructions.md").unlink() or
                               _fifo(job / "instructions.md") or ["run", job], "instructions.md is not a regular"),
    "attach-a-file": (lambda job, tmp: ["attach", job / "instructions.md"], "not a file"),
    "pause-missing": (lambda job, tmp: ["pause", tmp / "missing"], "no such job folder"),
    # job.toml
    "job-toml-directory": (lambda job, tmp: (job / "job.toml").mkdir() or ["run", job], "job.toml: is a directory"),
    "job-toml-fifo": (lambda job, tmp: _fifo(job / "job.toml") or ["run", job], "job.toml: is not a regular file"),
    "job-toml-too-large": (lambda job, tmp: (job / "job.toml").write_text("#" * (2 << 20)) and ["run", job],
                           "job.toml: too large"),
    "job-toml-not-utf8": (lambda job, tmp: (job / "job.toml").write_bytes(b"name = '\xff'") and ["run", job],
                          "job.toml: not UTF-8"),
    "job-toml-syntax": (lambda job, tmp: (job / "job.toml").write_text("[model\n") and ["run", job],
                        "job.toml: not valid TOML"),
    "job-toml-nested": (lambda job, tmp: (job / "job.toml").write_text("a = " + "[" * 3000 + "]" * 3000) and
                        ["run", job], "nested too deeply"),
    "job-toml-yes": (lambda job, tmp: (job / "job.toml").write_text('[limits]\nauto_restart = "yes"\n') and
                     ["run", job], "key 'limits.auto_restart'"),
    "job-toml-two-errors": (lambda job, tmp: (job / "job.toml").write_text("speed = 1\n[limits]\nmax_turns = 0\n")
                            and ["run", job], "key 'limits.max_turns'"),
    "job-toml-base-url": (lambda job, tmp: (job / "job.toml").write_text('[model]\nbase_url = "http://[::1"\n') and
                          ["run", job], "key 'model.base_url'"),
    # the config file
    "config-directory": (lambda job, tmp: Path(os.environ["AGENT_CONSOLE_CONFIG"]).unlink() or
                         Path(os.environ["AGENT_CONSOLE_CONFIG"]).mkdir() or ["run", job],
                         "the settings file): is a directory"),
    "config-fifo": (lambda job, tmp: Path(os.environ["AGENT_CONSOLE_CONFIG"]).unlink() or
                    _fifo(Path(os.environ["AGENT_CONSOLE_CONFIG"])) or ["jobs"],
                    "the settings file): is not a regular file"),
    "config-syntax": (lambda job, tmp: Path(os.environ["AGENT_CONSOLE_CONFIG"]).write_text("speed =") and
                      ["run", job], "the settings file): not valid TOML"),
    "config-yes": (lambda job, tmp: Path(os.environ["AGENT_CONSOLE_CONFIG"]).write_text('auto_restart = "yes"') and
                   ["run", job], "key 'auto_restart'"),
    "config-base-url": (lambda job, tmp: Path(os.environ["AGENT_CONSOLE_CONFIG"]).write_text('base_url = "ftp://x"')
                        and ["attach", job], "key 'base_url'"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_every_bad_input_exits_2_with_one_line(make_job, tmp_path, capsys, case: str) -> None:
    make_args, needle = BAD_INPUTS[case]
    job = make_job().root
    tmp = tmp_path / "inputs"
    tmp.mkdir()
    args = [str(a) for a in make_args(job, tmp)]
    code = main([*args, "--headless"] if args[0] == "run" else args)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == 2, (out, err)
    assert len(lines) == 1 and lines[0].startswith("agent-console: ") and lines[0] != "agent-console: ", err
    assert needle in lines[0]
    assert "Traceback" not in err + out
    runs = Path(os.environ["AGENT_CONSOLE_DATA_DIR"]) / "runs"
    assert not runs.exists() or not any(runs.iterdir())  # a failed start leaves no run folder behind


def test_a_fifo_in_the_job_folder_is_named_not_hung(make_job, capsys) -> None:
    paths = make_job()
    os.mkfifo(paths.root / "pipe")
    assert main(["run", str(paths.root), "--headless", "--speed", "0"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "cannot be copied to a run folder" in err and "pipe" in err


def test_jobs_prints_every_status_and_bracketed_text_as_it_is(tmp_path, capsys) -> None:
    # A status without a colour ("out of budget") once became the markup "[]out of budget[/]" and a
    # traceback; a summary the agent wrote may hold brackets too: both must print verbatim.
    from datetime import UTC, datetime

    from console.engine.store import JobStore
    from console.settings import load_settings

    store = JobStore(load_settings().store_path)
    now = datetime(2026, 11, 22, 13, 0, tzinfo=UTC)
    a, b = tmp_path / "a-20261122-130000", tmp_path / "b-20261122-130000"
    store.started(a, "a", "scripted", "scripted-agent", now)
    store.ended(a, "out of budget", now, "token budget spent [/] [bold]x[/bold]")
    store.started(b, "b", "scripted", "scripted-agent", now)
    store.ended(b, "some future status", now, "[red]not red[/]")
    assert main(["jobs"]) == 0
    out = capsys.readouterr().out
    assert "out of budget" in out and "some future status" in out
    assert "[/] [bold]x[/bold]" in out.replace("\n", " ") or "[bold]x[/bold]" in out
    assert "[red]not red[/]" in out


def test_config_mistakes_are_errors_not_silence(tmp_path, monkeypatch, capsys) -> None:
    job = str(SAMPLES / "quickstart")
    # A theme that does not exist: exit 2 with the list, headless or not.
    assert main(["run", job, "--headless", "--theme", "nope", "--speed", "0"]) == 2
    err = capsys.readouterr().err
    assert "--theme 'nope': no such theme" in err and "agent-dark" in err and "agent-light" in err
    # AGENT_CONSOLE_CONFIG naming no file.
    monkeypatch.setenv("AGENT_CONSOLE_CONFIG", str(tmp_path / "typo.toml"))
    assert main(["run", job, "--headless", "--speed", "0"]) == 2
    assert "AGENT_CONSOLE_CONFIG names" in capsys.readouterr().err
    # An unknown top-level key, named as a key of the config file (not of job.toml).
    config = tmp_path / "config.toml"
    monkeypatch.setenv("AGENT_CONSOLE_CONFIG", str(config))
    config.write_text("bogus = 1\n")
    assert main(["jobs"]) == 2
    err = capsys.readouterr().err
    assert "key 'bogus': unknown key" in err and "the config file's keys: " in err and "job.toml" not in err
    # An unknown binding id in [keys].
    config.write_text('[keys]\nnosuch = "ctrl+k"\n')
    assert main(["run", job, "--headless", "--speed", "0"]) == 2
    assert "[keys] nosuch: unknown key id" in capsys.readouterr().err
