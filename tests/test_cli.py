"""The command line: exit codes, run folders, the jobs list."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import main
from console.engine.runs import run_id
from console.view.jobs import jobs_table, shorten
from tests.conftest import SAMPLES
from tests.provenance_support import operator_seal


def run_cli(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def first_line(out: str) -> tuple[str, Path]:
    """`run ID: FOLDER`, the first line of `run`: the id and the folder."""
    head, folder = out.splitlines()[0].split(": ", 1)
    assert head.startswith("run ")
    return head.removeprefix("run "), Path(folder)


def test_run_copies_the_job_prints_the_folder_and_exits_0(capsys) -> None:
    code = main(["run", str(SAMPLES / "quickstart"), "--headless", "--speed", "0"])
    out = capsys.readouterr().out
    assert code == 0
    rid, run_dir = first_line(out)
    assert rid == run_id(run_dir) and len(rid) == 5
    assert run_dir.parent == Path(os.environ["AGENT_CONSOLE_DATA_DIR"]) / "runs"
    assert (run_dir / "action_items.md").exists()
    assert not (SAMPLES / "quickstart" / ".console").exists()  # the checkout is untouched
    assert "✔ job complete (confidence 0.85): " in out and "[Review Inputs (1 of 2): 5 tasks]" in out


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
    assert capsys.readouterr().out.splitlines()[0] == f"run {paths.run_id}: {paths.root.resolve()}"
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
    # Five refused stops, then the replay ran out: the model failed (exit 7), not the work.
    assert code == 7
    assert err.strip().splitlines()[-1].startswith("agent-console: run failed: scripted: the replay script has no")


def test_provider_error_exits_1_without_traceback(make_job, tmp_path) -> None:
    script = tmp_path / "err.json"
    script.write_text(json.dumps([{"error": "connection refused"}]))
    paths = make_job()
    proc = run_cli("run", str(paths.root), "--headless", "--in-place", "--script", str(script))
    assert proc.returncode == 7  # failed: the model, not the work
    assert "connection refused" in proc.stderr and "Traceback" not in proc.stderr + proc.stdout


def test_no_command_prints_help_and_exits_2(capsys) -> None:
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert "run" in out
    # Without a terminal (pytest's captured streams): why no fleet opened, and commands that work without one.
    assert "the fleet console opens only on a terminal" in err and "agent-console jobs" in err


def test_corrupt_state_and_database_are_named_not_tracebacks(make_job, capsys) -> None:
    paths = make_job("quickstart")
    assert main(["run", str(paths.root), "--headless", "--in-place", "--speed", "0", "--max-turns", "1"]) == 1
    paths.todos.write_text('{"kind": "nonsense"}')
    capsys.readouterr()
    # A damaged state file is moved aside and reported, never trusted, never deleted; the run goes on.
    assert main(["run", str(paths.root), "--headless", "--in-place", "--speed", "0", "--max-turns", "100"]) == 0
    out, err = capsys.readouterr()
    assert "‼ recovered .console/todos.json: " in out and "Traceback" not in err
    (kept,) = (paths.state / "corrupt").iterdir()
    assert kept.name.startswith("todos.json.") and kept.read_text() == '{"kind": "nonsense"}'
    db = Path(os.environ["AGENT_CONSOLE_DATA_DIR"]) / "jobs.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"this is not sqlite" * 100)
    assert main(["jobs"]) == 2
    assert "jobs database cannot be read" in capsys.readouterr().err


def started_headless(paths) -> subprocess.Popen:
    """A headless run of ``paths`` in a process of its own, once its first turn has started."""
    import time

    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "run", str(paths.root), "--headless", "--in-place",
                             "--speed", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=os.environ.copy())
    deadline = time.monotonic() + 30
    while not (paths.events.exists() and "turn_started" in paths.events.read_text()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return proc


def test_sigterm_stops_cleanly(make_job, capsys) -> None:
    import signal

    paths = make_job("requirements-extraction")
    proc = started_headless(paths)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err  # a signal is an interrupt, not the operator's stop
    *_, reason, resume = err.strip().splitlines()
    assert reason.startswith("agent-console: run ended incomplete (interrupted by SIGTERM)")
    assert resume == f"agent-console: resume run {paths.run_id} with: agent-console resume {paths.run_id}"
    # Every view says the same as the exit code: the signal's stop (its source), the run interrupted, not stopped.
    events = [json.loads(x) for x in paths.events.read_text().splitlines()]
    stops = [e for e in events if e["type"] == "operator_command" and e["command"] == "stop"]
    assert stops and {e["source"] for e in stops} == {"SIGTERM"}
    ended = [e for e in events if e["type"] in ("session_ended", "run_ended")]
    assert [e["reason"] for e in ended[-2:]] == ["interrupted", "interrupted"]
    assert ended[-1]["detail"] == "interrupted by SIGTERM" and ended[-1]["outcome"] == "incomplete"
    capsys.readouterr()
    assert main(["wait", str(paths.root)]) == 6  # interrupted: resume it
    assert (f"run {paths.run_id} interrupted by SIGTERM: resume it with agent-console resume {paths.run_id}"
            in capsys.readouterr().out)
    assert main(["jobs", "--json"]) == 0
    (row,) = [r for r in map(json.loads, capsys.readouterr().out.splitlines()) if r["id"] == paths.run_id]
    assert row["status"] == "interrupted"


def test_ctrl_c_on_a_headless_run_is_an_interrupt_in_every_view(make_job) -> None:
    import signal

    paths = make_job("requirements-extraction")
    proc = started_headless(paths)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err
    events = [json.loads(x) for x in paths.events.read_text().splitlines()]
    assert {e["source"] for e in events if e["type"] == "operator_command"} == {"Ctrl+C"}
    (end,) = [e for e in events if e["type"] == "run_ended"]
    assert (end["reason"], end["detail"]) == ("interrupted", "interrupted by Ctrl+C")


def test_run_without_a_terminal_falls_back_to_headless(capsys) -> None:
    assert main(["run", str(SAMPLES / "quickstart"), "--speed", "0"]) == 0
    captured = capsys.readouterr()
    assert "not a terminal: running headless" in captured.err
    assert "job_complete(" in captured.out and "\ndone: job complete in 1 session(s)" in captured.out


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


def _link_out(job: Path, tmp: Path) -> None:
    """A folder handed over with its task linked elsewhere (a secret): the agent could never read it (the sandbox
    refuses a link out), so the run is refused before any turn."""
    (tmp / "secret").write_text("k")
    (job / "instructions.md").unlink()
    (job / "instructions.md").symlink_to(tmp / "secret")


def _toml_links_out(job: Path, tmp: Path) -> None:
    """A folder handed over with its definition linked elsewhere (here the operator's config): the harness must
    not read it as the job's, nor name its keys."""
    (tmp / "config.toml").write_text('api_token = "x"\nspeed = 0\n')
    (job / "job.toml").unlink(missing_ok=True)
    (job / "job.toml").symlink_to(tmp / "config.toml")


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
    "instructions-links-out": (lambda job, tmp: _link_out(job, tmp) or ["run", job],
                               "instructions.md is a symbolic link to"),
    "instructions-links-out-in-place": (lambda job, tmp: _link_out(job, tmp) or ["run", "--in-place", job],
                                        "outside the job folder"),
    "job-toml-links-out": (lambda job, tmp: _toml_links_out(job, tmp) or ["run", job],
                           "job.toml is a symbolic link to"),
    "job-toml-links-out-in-place": (lambda job, tmp: _toml_links_out(job, tmp) or ["run", "--in-place", job],
                                    "a job's definition must be the folder's own file"),
    "instructions-binary": (lambda job, tmp: (job / "instructions.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00") and
                            ["run", job, "--speed", "0"], "instructions.md is a binary file (a NUL byte at byte 8)"),
    "instructions-binary-in-place": (lambda job, tmp: (job / "instructions.md").write_bytes(b"\x00" * 5000) and
                                     ["run", "--in-place", job], "instructions.md is a binary file"),
    "instructions-not-utf8": (lambda job, tmp: (job / "instructions.md").write_bytes(b"# T\xe2che\n") and
                              ["run", job], "instructions.md is not UTF-8 text (byte 3 is not)"),
    # a command's flag before any command: argparse took its value for the command ("invalid choice: 'nope'")
    "theme-before-command": (lambda job, tmp: ["--theme", "nope"], "--theme is an option of `agent-console run`, "
                             "`resume`, `fleet` and `attach`: give it after the command (agent-console attach --theme"),
    "run-flag-before-command": (lambda job, tmp: ["--headless", job], "--headless is an option of `agent-console run`"),
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
                        and ["run", job], "key 'base_url'"),
    # A console reads where the runs are, its theme and its [keys] (console.locations): a misspelt key anywhere is
    # named by it all the same; another key's bad value, by the commands that use it (as above).
    "config-typo-attach": (lambda job, tmp: Path(os.environ["AGENT_CONSOLE_CONFIG"]).write_text('base-url = "x"')
                           and ["attach", job], "base-url"),
    "config-theme-attach": (lambda job, tmp: Path(os.environ["AGENT_CONSOLE_CONFIG"]).write_text("theme = 5")
                            and ["attach", job], "key 'theme'"),
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


def test_instructions_linked_to_a_file_in_the_folder_run(make_job, capsys) -> None:
    paths = make_job("quickstart")
    (paths.root / "task.md").write_text((paths.root / "instructions.md").read_text())
    (paths.root / "instructions.md").unlink()
    (paths.root / "instructions.md").symlink_to("task.md")
    assert main(["run", str(paths.root), "--headless", "--speed", "0"]) == 0, capsys.readouterr()


def test_a_fifo_in_the_job_folder_is_named_not_hung(make_job, capsys) -> None:
    # The copy skips it, saying so (issue 32: nothing of a run needs a pipe, a socket or a device), and the run goes on.
    paths = make_job()
    os.mkfifo(paths.root / "pipe")
    assert main(["run", str(paths.root), "--headless", "--speed", "0", "--max-turns", "1"]) != 2
    err = capsys.readouterr().err
    assert err.splitlines()[0] == "skipped 'pipe': it is a named pipe, and a run copies files, folders and links only"


def test_a_link_out_of_the_job_folder_is_named_at_the_copy(make_job, tmp_path, capsys) -> None:
    """A job handed over with `notes -> ../shared/notes`: the agent's tools never follow it, so the notes were
    silently absent from every listing. Each link that leaves the folder is named (one inside it is not)."""
    paths = make_job()
    shared = tmp_path / "shared"
    shared.mkdir()
    (paths.root / "notes").symlink_to("../shared")
    (paths.root / "hosts").symlink_to("/etc/hosts")
    (paths.root / "sub").mkdir()
    (paths.root / "sub" / "here").symlink_to("../instructions.md")  # stays inside: fine
    assert main(["run", str(paths.root), "--headless", "--speed", "0", "--max-turns", "1"]) != 2
    said = [line for line in capsys.readouterr().err.splitlines() if "is a link out of the job folder" in line]
    assert said == [
        "'hosts' is a link out of the job folder (to /etc/hosts): the agent cannot read what it names; copy that "
        "into the job folder to give it to the agent",
        "'notes' is a link out of the job folder (to ../shared): the agent cannot read what it names; copy that "
        "into the job folder to give it to the agent"]


def test_jobs_prints_every_status_and_bracketed_text_as_it_is(tmp_path, capsys, monkeypatch) -> None:
    # A status without a colour ("out of budget") once became the markup "[]out of budget[/]" and a
    # traceback; a summary the agent wrote may hold brackets too: both must print verbatim.
    from datetime import UTC, datetime

    from console.engine.store import JobStore
    from console.settings import load_settings

    store = JobStore(load_settings().store_path)
    now = datetime(2026, 11, 22, 13, 0, tzinfo=UTC)
    a, b = tmp_path / "a-20261122-130000", tmp_path / "b-20261122-130000"
    a.mkdir(), b.mkdir()  # folders that exist: a gone one is listed as gone
    store.started(a, "a", "scripted", "scripted-agent", now)
    store.ended(a, "out of budget", now, "token budget spent [/] [bold]x[/bold]")
    store.started(b, "b", "scripted", "scripted-agent", now)
    store.ended(b, "some future status", now, "[red]not red[/]")
    monkeypatch.setenv("COLUMNS", "120")  # room for the whole summaries
    assert main(["jobs"]) == 0
    out = capsys.readouterr().out
    assert "out of budget" in out and "some future status" in out
    assert "token budget spent [/] [bold]x[/bold]" in out
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
    # One in a table: that table's keys, not the top level's.
    config.write_text('[notify]\nurl = "json://127.0.0.1:9/x"\n')
    assert main(["jobs"]) == 2
    err = capsys.readouterr().err
    assert "key 'notify.url': unknown key (did you mean 'notify.urls'? the keys of [notify]: on_end, " in err
    assert "anthropic_api_key" not in err
    # A near miss of a table's name is offered, as job.toml's are (found by a new operator's trial: `[budget]` got
    # the list of 37 keys and no guess).
    config.write_text("[budget]\ndaily_usd = 1\n")
    assert main(["jobs"]) == 2
    assert "key 'budget': unknown key (did you mean 'budgets'? the config file's keys: " in capsys.readouterr().err
    # An unknown binding id in [keys].
    config.write_text('[keys]\nnosuch = "ctrl+k"\n')
    assert main(["run", job, "--headless", "--speed", "0"]) == 2
    assert "[keys] nosuch: unknown key id" in capsys.readouterr().err


# -- run ids: every command takes a run's folder, id or the start of its name -------------------------------------


def _two_quickstart_runs(capsys) -> tuple[tuple[str, Path], tuple[str, Path]]:
    runs = []
    for _ in range(2):
        assert main(["run", str(SAMPLES / "quickstart"), "--headless", "--speed", "0"]) == 0
        runs.append(first_line(capsys.readouterr().out))
    assert runs[0][1] != runs[1][1] and runs[0][0] != runs[1][0]
    return runs[0], runs[1]


def _inbox(folder: Path) -> list[dict]:
    inbox = folder / ".console" / "inbox"
    return [json.loads(p.read_text()) for p in sorted(inbox.glob("*.json"))] if inbox.is_dir() else []


def test_commands_take_the_id_a_prefix_or_the_folder(make_job, capsys, tmp_path, monkeypatch) -> None:
    (id1, run1), (id2, run2) = _two_quickstart_runs(capsys)
    # The id (in any case): a pause is queued in that run's folder, and only there.
    assert main(["pause", id1, "--wait", "0"]) == 0
    assert capsys.readouterr().out == f"pause: queued for {run1}\n"
    assert [c["command"] for c in _inbox(run1)] == ["pause"] and _inbox(run2) == []
    assert main(["checkpoint", id2.upper(), "--note", "n", "--wait", "0"]) == 0
    assert capsys.readouterr().out == f"checkpoint: queued for {run2}\n"
    assert [c["command"] for c in _inbox(run2)] == ["checkpoint"]
    # The whole folder name, and the start of one that only one run has.
    assert main(["checkpoint", run1.name, "--wait", "0"]) == 0
    assert capsys.readouterr().out == f"checkpoint: queued for {run1}\n"
    # resume of a run nobody runs goes on with it, or says in one line why not: this one is complete.
    assert main(["resume", run1.name]) == 1
    assert capsys.readouterr().err == (f"agent-console: resume: run {id1} ({run1}) is complete: there is nothing "
                                       "to resume\n")
    # A folder run in place is named "quickstart": that whole name is it, though the copies' names start so too.
    job = make_job("quickstart")
    assert main(["run", str(job.root), "--in-place", "--headless", "--speed", "0"]) == 0
    capsys.readouterr()
    assert main(["pause", "quickstart", "--wait", "0"]) == 0
    assert capsys.readouterr().out == f"pause: queued for {job.root}\n"
    # A stop needs a running run: refused, naming the run the id resolved to (complete: nothing to resume).
    assert main(["stop", id2]) == 1
    assert capsys.readouterr().err == (f"agent-console: stop: run {id2} ({run2}) is complete: there is nothing to "
                                       "stop\n")
    # run --in-place ID goes on with that run (this one is complete).
    assert main(["run", "--in-place", id1, "--headless", "--speed", "0"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"run {id1}: {run1}" and f"job already complete: {run1}" in out
    # attach ID: the run is found (then it needs a terminal, and names the run's own log).
    assert main(["attach", id1]) == 2
    assert capsys.readouterr().err == ("agent-console: attach opens the console and needs a terminal; for the story "
                                       f"use: agent-console logs -f {id1}\n")


def test_an_ambiguous_or_unknown_run_is_an_error_listing_the_candidates(capsys, tmp_path, monkeypatch) -> None:
    (id1, run1), (id2, run2) = _two_quickstart_runs(capsys)
    for ref, command in [("qu", ["approve", "qu"]), ("quick", ["deny", "quick"]), ("qu", ["stop", "qu"]),
                         ("quickstart-", ["attach", "quickstart-"]), ("qu", ["rewind", "qu", "the issue"]),
                         ("q", ["run", "--in-place", "q", "--headless"])]:
        assert main(command) == 2, command
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1, err
        assert err.startswith(f"agent-console: ambiguous: 2 runs match {ref!r}: "), err
        assert f"{id1}  {run1.name}  completed" in err and f"{id2}  {run2.name}  completed" in err
    assert main(["approve", "zzzzz"]) == 2
    assert capsys.readouterr().err == ("agent-console: no run folder, id or run name matches 'zzzzz'; see "
                                       "agent-console jobs\n")
    # A copy is made of a job folder only: `run` without --in-place does not look runs up.
    assert main(["run", id1, "--headless", "--speed", "0"]) == 2
    assert f"{id1}: no such job folder" in capsys.readouterr().err
    # A folder that exists is the folder, even where its name is also the start of run names.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "qu").mkdir()
    assert main(["stop", "qu"]) == 2
    assert "qu: missing instructions.md" in capsys.readouterr().err
    # and a path is a path: a missing one is named as a missing folder, never looked up.
    assert main(["stop", "./quick"]) == 2
    assert "quick: no such job folder" in capsys.readouterr().err


def test_an_operator_stop_exits_3_and_names_the_run_to_resume(make_job) -> None:
    import time

    paths = make_job("requirements-extraction")
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "run", str(paths.root), "--headless", "--in-place",
                             "--speed", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=os.environ.copy())
    try:
        deadline = time.monotonic() + 30
        while not (paths.events.exists() and "turn_started" in paths.events.read_text()):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        stop = run_cli("stop", paths.run_id, "--wait", "30")  # by its id, from another process
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert stop.returncode == 0 and stop.stdout.startswith("stop: applied"), (stop.stdout, stop.stderr)
    assert out.splitlines()[0] == f"run {paths.run_id}: {paths.root}"
    assert proc.returncode == 3 and "Traceback" not in err
    *_, reason, resume = err.strip().splitlines()
    assert reason.startswith("agent-console: run ended incomplete (stopped): stopped by the operator")
    assert resume == f"agent-console: resume run {paths.run_id} with: agent-console resume {paths.run_id}"
    # Stopped, it is not running any more: another stop is refused with the command that goes on.
    again = run_cli("stop", paths.run_id)
    assert again.returncode == 1
    assert again.stderr == (f"agent-console: stop: no process is running {paths.root} now, so there is nothing to "
                            f"stop; {resume[len('agent-console: '):]}\n")


# -- the jobs table: id and state first, 80 columns, no word cut ------------------------------------------------

LONG_SUMMARY = ("Extracted forty-two requirements from the specification documents, grouped them by subsystem, "
                "checked https://example.com/specs/requirements-index.html and wrote traceability notes for each")
LONG_NAME = "requirements-extraction-for-the-northern-warehouse-integration"


# No process holds these runs' locks: `jobs` shows a run the table says is waiting as interrupted.
LIVE_STATE = {"awaiting approval": "interrupted"}


def _store_rows(tmp_path: Path) -> list[tuple[Path, str, str]]:
    """Runs of every kind in the jobs table: (folder, state, the text its summary column comes from)."""
    from datetime import UTC, datetime

    from console.engine.store import JobStore
    from console.settings import load_settings

    store = JobStore(load_settings().store_path)
    now = datetime(2026, 11, 22, 13, 0, tzinfo=UTC)
    out = []
    for n, (name, state, text) in enumerate([
        (f"{LONG_NAME}-20261122-130000", "completed", LONG_SUMMARY),
        ("quickstart-20261122-130001", "awaiting approval", "restart pending"),
        ("quickstart-20261122-130002", "failed", "a_single_identifier_that_is_far_longer_than_any_summary_column_"
                                                 "could_ever_be_on_an_ordinary_terminal_of_eighty_columns"),
        ("quickstart-20261122-130003", "out of budget", "token budget spent: 1,000,000 tokens of 1,000,000"),
    ]):
        folder = tmp_path / name
        folder.mkdir()  # a folder that is gone is listed as gone
        store.started(folder, name, "scripted", "scripted-agent", now.replace(minute=n))
        if state == "completed":
            store.completed(folder, now.replace(minute=n, second=30), 0.85, text)
            store.cost(folder, 0.0123)
        else:
            store.ended(folder, state, now, text)
        out.append((folder, state, text))
    return out[::-1]  # newest first, as `jobs` lists them


def _words(text: str) -> list[str]:
    import re

    return re.findall(r"\w+", text)


@pytest.mark.parametrize("width", [60, 80, 100, 200])
def test_jobs_fits_the_terminal_without_cutting_a_word(tmp_path, capsys, monkeypatch, width: int) -> None:
    runs = _store_rows(tmp_path)
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["jobs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, rows, footer = lines[0], lines[1:1 + len(runs)], lines[1 + len(runs):]
    assert header.split()[:2] == ["id", "state"]
    # Every word shown is a whole word of what the table was made from: a name, a state, a summary, a date...
    source = " ".join([LONG_NAME, "quickstart", "id state job started cost conf. summary / reason", "interrupted",
                       "11-22 13:00 13:01 13:02 13:03 $0.01 0.85", *(f"{run_id(f)} {s} {t}" for f, s, t in runs)])
    vocabulary = set(_words(source))
    for line in [header, *rows]:
        assert len(line) <= width, (width, line)
        assert set(_words(line)) <= vocabulary, (width, line, set(_words(line)) - vocabulary)
    # One line per run, in order, each starting with its id and its state.
    for line, (folder, state, _text) in zip(rows, runs, strict=True):
        assert line.startswith(f"{run_id(folder)}  {LIVE_STATE.get(state, state)}")
    # The summary is there whole when there is room, else cut at a word with "…" (never folded onto a new line).
    summary = next(line for line in rows if line.startswith(run_id(runs[-1][0])))
    if "Extracted" in summary:  # shown from 80 columns on
        start = summary.index("Extracted")
        shown = summary[start:]
        if width - start >= len(LONG_SUMMARY):
            assert shown == LONG_SUMMARY
        else:
            assert shown.endswith("…") and LONG_SUMMARY.startswith(shown[:-1])
            assert not LONG_SUMMARY[len(shown) - 1].isalnum()  # the cut falls between words
            rest = LONG_SUMMARY[len(shown) - 1:].split()
            assert len(summary) + len(rest[0]) > width  # and uses the room there is: the next word would not fit
    else:
        assert width < 80
    # The notes under the table fit too (a part is moved to its own line, never split), the runs folder aside.
    assert "4 run(s), newest first" in footer[0]
    for line in footer:
        assert len(line) <= width or line.startswith("run folders: "), line
    if width <= 80:
        assert any("hidden to fit: conf." in line for line in footer)
    else:
        assert not any("hidden" in line for line in footer)


def _many_runs(tmp_path: Path, live: int, finished: int) -> None:
    """``live`` runs waiting for approval and ``finished`` completed ones in the jobs table, a minute apart."""
    from datetime import UTC, datetime, timedelta

    from console.engine.store import JobStore
    from console.settings import load_settings

    store = JobStore(load_settings().store_path)
    start = datetime(2026, 11, 22, 13, 0, tzinfo=UTC)
    for n in range(live + finished):
        name = f"job{n}-20261122-13{n:02d}00"
        folder = tmp_path / name
        folder.mkdir()
        when = start + timedelta(minutes=n)
        store.started(folder, name, "scripted", "scripted-agent", when)
        if n < finished:  # the oldest ones are the finished ones: --limit leaves the oldest of them out
            store.completed(folder, when, 0.9, "done")
        else:
            store.ended(folder, "awaiting approval", when, "restart pending")


def test_jobs_says_how_many_runs_it_leaves_out_and_the_limit_that_lists_them(tmp_path, capsys,
                                                                             monkeypatch) -> None:
    # 45 runs: 6 waiting (always listed) and 39 finished, of which the default --limit (30) lists the newest 30.
    _many_runs(tmp_path, live=6, finished=39)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["jobs"]) == 0
    out = capsys.readouterr().out
    assert "36 of 45 runs, newest first" in out
    assert "9 older finished not shown: jobs --limit 39 shows them all" in out
    # The command it names works: every run, and no note of a cut.
    assert main(["jobs", "--limit", "39"]) == 0
    out = capsys.readouterr().out
    assert "45 run(s), newest first" in out and "not shown" not in out
    # --json: stdout is JSON lines, one a run, as before; the cut is said on stderr, with the flag that lifts it.
    assert main(["jobs", "--json"]) == 0
    got = capsys.readouterr()
    assert len([json.loads(line) for line in got.out.splitlines()]) == 36
    assert "36 of 45 runs listed" in got.err
    assert "9 older finished not listed: jobs --json --limit 39 lists them all" in got.err
    assert main(["jobs", "--json", "--limit", "39"]) == 0
    got = capsys.readouterr()
    assert len([json.loads(line) for line in got.out.splitlines()]) == 45 and got.err == ""


def test_jobs_json_keeps_the_whole_record_and_the_id(tmp_path, capsys) -> None:
    runs = _store_rows(tmp_path)
    assert main(["jobs", "--json"]) == 0
    records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["id"] for r in records] == [run_id(f) for f, _s, _t in runs]
    assert [r["path"] for r in records] == [str(f) for f, _s, _t in runs]
    completed = records[-1]
    assert completed["summary"] == LONG_SUMMARY and completed["confidence"] == 0.85
    assert completed["cost_usd"] == 0.0123 and completed["completed_at"] == "2026-11-22T13:00:30+00:00"
    assert set(completed) == {"id", "path", "name", "status", "provider", "model", "started_at", "updated_at",
                              "completed_at", "confidence", "summary", "detail", "cost_usd", "needs_since",
                              "unconfined"}
    assert not any(r["unconfined"] for r in records)
    # A run the table says is running with no process behind it (kill -9) is shown as interrupted.
    assert records[2]["status"] == "interrupted" and records[2]["detail"] == "restart pending"


def test_jobs_says_a_run_is_unconfined_as_every_view_does(tmp_path, capsys, monkeypatch) -> None:
    from console.engine.job import JobPaths
    from console.engine.launch import Launch, launch_path, write_launch

    seal = operator_seal()  # the runs below are this version's: none is from before seals
    runs = _store_rows(tmp_path)
    folder = runs[0][0]  # out of budget
    JobPaths(folder).state.mkdir(parents=True)
    write_launch(JobPaths(folder), Launch(provider="scripted", model="scripted-agent", unconfined=True), seal)
    # A record the folder came with says nothing: only this operator's harness's record is the run's.
    shipped = JobPaths(runs[2][0])
    shipped.state.mkdir(parents=True)
    launch_path(shipped).write_text('{"provider": "scripted", "model": "scripted-agent", "unconfined": true}')

    damaged = JobPaths(runs[1][0])
    damaged.state.mkdir(parents=True)
    launch_path(damaged).write_text('{"unconfined": true')  # a record that cannot be read says nothing
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["jobs"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:1 + len(runs)]
    assert [" UNCONFINED" in line for line in rows] == [True, False, False, False]
    assert rows[0].startswith(f"{run_id(folder)}  out of budget UNCONFINED  ")
    assert main(["jobs", "--json"]) == 0
    records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["unconfined"] for r in records] == [True, False, False, False]


def test_jobs_table_narrower_still_keeps_id_state_and_whole_words(tmp_path) -> None:
    from console.engine.store import JobStore
    from console.settings import load_settings

    _store_rows(tmp_path)
    rows = JobStore(load_settings().store_path).list()
    lines, hidden = jobs_table(rows, 44)
    assert hidden == ["conf.", "cost", "started", "summary / reason"]
    assert [line.plain.split("  ")[0] for line in lines[1:]] == [run_id(r.path) for r in rows]
    assert all(len(line.plain) <= 44 for line in lines)
    # the job names give way too, at a word: 44 - id, state and gaps leaves 22 cells
    assert any(line.plain.endswith("  requirements…") for line in lines)
    wide, _ = jobs_table(rows, 100)
    assert any("  requirements-extraction-for…  " in line.plain for line in wide)  # at most 28 cells


def test_jobs_shows_local_start_times_and_none_for_a_row_whose_time_is_no_time(tmp_path, monkeypatch) -> None:
    """The store keeps UTC; `jobs` printed that text as it was (unsaid), and a shared store's row whose start was
    "not a date" as "date"."""
    import dataclasses
    import time as clock

    from console.engine.store import JobStore
    from console.settings import load_settings

    _store_rows(tmp_path)
    row = JobStore(load_settings().store_path).list()[0]
    monkeypatch.setenv("TZ", "XST-3")  # three hours east of UTC
    clock.tzset()
    try:
        good = dataclasses.replace(row, started_at="2026-01-15T22:30:00+00:00")
        bad = dataclasses.replace(row, started_at="not a date")
        lines, _ = jobs_table([good, bad], 120)
    finally:
        monkeypatch.undo()
        clock.tzset()
    assert "01-16 01:30" in lines[1].plain and "22:30" not in lines[1].plain
    assert lines[2].plain.startswith(f"{run_id(row.path)}  out of budget  quickstart               token budget")


@pytest.mark.parametrize(("text", "width", "expected"), [
    ("short", 10, "short"),
    ("the quick brown fox", 12, "the quick…"),
    ("requirements-extraction", 16, "requirements…"),
    ("https://example.com/a/b", 15, "https://…"),
    ("averyveryverylongword and more", 10, "…"),
    ("日本語 テキスト です", 9, "日本語…"),  # two cells a character
    ("", 5, ""),
])
def test_shorten_cuts_only_between_words(text: str, width: int, expected: str) -> None:
    from rich.cells import cell_len

    assert shorten(text, width) == expected
    assert cell_len(shorten(text, width)) <= width


def test_a_stop_not_confirmed_says_how_to_stop_now(make_job, capsys, monkeypatch) -> None:
    """A tool call may be running (the stop applies after it): the answer says a second stop stops it now."""
    from console.engine.control import RunLock

    job = make_job("quickstart")
    assert main(["run", str(job.root), "--in-place", "--headless", "--speed", "0", "--max-turns", "1"]) == 1
    capsys.readouterr()
    monkeypatch.setattr(RunLock, "holder", lambda self: os.getpid())  # a process holds it, and never answers
    assert main(["stop", str(job.root), "--wait", "0.3"]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"stop: sent to process {os.getpid()}; not confirmed within 0.3s")
    assert f"agent-console stop {job.run_id} again stops the run now" in said
    assert main(["pause", str(job.root), "--wait", "0.3"]) == 0
    assert "again" not in capsys.readouterr().out


def test_jobs_at_80_columns_gives_a_need_its_words_before_the_started_column(tmp_path) -> None:
    """Found at 80 columns: the started column kept, a need's cell cut to "since 16:53…"."""
    from console.engine.store.base import JobRow

    def row(name: str, status: str, detail: str | None, since: str | None = None) -> JobRow:
        return JobRow(path=str(tmp_path / name), name=name, status=status, provider="scripted", model="m",
                      started_at="2026-11-26T16:40:00+00:00", updated_at="2026-11-26T16:50:00+00:00",
                      completed_at=None, confidence=None, summary=None, detail=detail, needs_since=since)

    rows = [row("requirements-extraction-164906", "needs you",
                "stuck: the agent looks stuck: 3 nudges without progress did not help", "2026-11-26T16:53:00+00:00"),
            row("quickstart-164330", "running", None)]
    lines, hidden = jobs_table(rows, 80)
    assert "started" in hidden
    assert all(len(line.plain) <= 80 for line in lines)
    assert re.search(r"since \d\d:\d\d, stuck: the agent looks", lines[1].plain), lines[1].plain
    # Without a need, the started column stays as before.
    _, hidden = jobs_table([rows[1], row("quickstart-164331", "completed", None)], 80)
    assert "started" not in hidden


def test_a_turn_limit_after_a_resume_says_it_counts_from_the_resume(make_job, capsys) -> None:
    """Found: "turn limit reached after 20 turns (reached max_turns (10) in one session)" after a resume."""
    from console.engine import events as ev

    job = make_job("quickstart")
    run = ["run", str(job.root), "--in-place", "--headless", "--speed", "0", "--max-turns", "3"]
    assert main(run) == 1
    assert main(run) == 1
    capsys.readouterr()
    ends = [e.detail for e in ev.read_events(job.events) if isinstance(e, ev.SessionEnded)]
    assert ends[0].endswith("reached max_turns (3) in one session"), ends
    assert ends[-1].endswith("reached max_turns (3) since this session was resumed"), ends


def test_a_resume_on_another_provider_leaves_a_recorded_script_behind(make_job, capsys, tmp_path, monkeypatch):
    """A run started with --script and resumed with --switch-model on a real model exited 2 ("--script replays
    turns with the scripted provider only"), and nothing could drop the recorded script. Now the resume says in
    one line that the script stays behind and goes on with the model; the record no longer names the script."""
    from console.engine.job import JobPaths
    from console.engine.launch import read_launch
    from tests.wire.loopback import Loopback, Reply

    script = tmp_path / "turns.jsonl"
    script.write_text("\n".join(json.dumps({"text": "thinking"}) for _ in range(5)))
    paths = make_job()
    assert main(["run", str(paths.root), "--headless", "--in-place", "--script", str(script), "--speed", "0",
                 "--max-turns", "1"]) == 1
    capsys.readouterr()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with Loopback() as server:
        server.push(Reply(text=["still working"]))
        code = main(["run", str(paths.root), "--headless", "--in-place", "--switch-model", "--provider", "openai",
                     "--model", "local-model", "--base-url", server.openai_url, "--max-turns", "1"])
        err = capsys.readouterr().err
        assert server.accepted, err  # the model was asked
    assert code == 1, err  # incomplete after its one turn: the resume ran
    said = [line for line in err.splitlines() if "--script" in line]
    assert said == [f"the recorded --script {script} is left behind: the run goes on with openai local-model"]
    record = read_launch(JobPaths(paths.root), operator_seal())
    assert record is not None and record.provider == "openai" and record.script is None
    # Without --switch-model, nothing changes: the run is refused as before.
    assert main(["run", str(paths.root), "--headless", "--in-place", "--provider", "scripted", "--script",
                 str(script), "--max-turns", "1"]) == 2
    # One line: each flag that changes the model, with what the run was started with, and the way to do it anyway.
    assert capsys.readouterr().err.strip() == (
        "agent-console: resuming this run with --provider scripted (the run was started with openai) makes it "
        "another model's run: add --switch-model to do so")


def test_a_run_in_place_says_what_its_repository_would_run_and_leaves_it(make_job, capsys) -> None:
    """Found by a new operator's trial: a folder someone handed over, run in place, whose .git/config sets
    core.fsmonitor (run by the operator's own `git status`, outside every sandbox) and whose hook is executable:
    the run rightly leaves them (it is the operator's repository), but said nothing. Now its start says what and
    how to look; a repository with plain keys only is not mentioned."""
    paths = make_job("quickstart")
    git = paths.root / ".git"
    (git / "hooks").mkdir(parents=True)
    config = b'[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "sh -c \'touch /tmp/pwned\'"\n'
    (git / "config").write_bytes(config)
    hook = git / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    (git / "hooks" / "pre-push.sample").write_text("#!/bin/sh\n")  # a sample never runs
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    plain = paths.root / "vendor" / ".git"
    plain.mkdir(parents=True)
    (plain / "config").write_text("[core]\n\tbare = false\n[user]\n\tname = x\n")
    assert main(["run", str(paths.root), "--headless", "--in-place", "--speed", "0"]) == 0
    err = capsys.readouterr().err
    warning = next(line for line in err.splitlines() if "your own git may run" in line)
    assert "'.git/config' sets core.fsmonitor" in warning and "'.git/hooks/pre-commit' is an executable hook" in warning
    assert "sample" not in warning and "vendor" not in warning
    assert f"git -C {paths.root} config --list --local" in warning
    # Left as it came: it is the operator's repository.
    assert (git / "config").read_bytes() == config and hook.stat().st_mode & 0o111


def test_a_row_that_needed_its_operator_with_no_reason_reads_without_none(tmp_path: Path) -> None:
    """Found trying forged store rows: a row saying "needs you" with no reason (anyone's, in a shared store),
    whose process is gone, read "it needed you (None) when its process ended" in `jobs`."""
    import sqlite3
    from contextlib import closing

    from console.engine.store import JobStore
    from console.view.jobs import as_now

    db = tmp_path / "jobs.db"
    JobStore(db)
    run = tmp_path / "runs" / "a-run"
    (run / ".console").mkdir(parents=True)
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("INSERT INTO jobs (path, name, status, started_at, updated_at) VALUES (?, 'a', 'needs you', "
                     "'2026-12-01T05:10:00+00:00', '2026-12-01T05:10:00+00:00')", (str(run),))
    row = JobStore(db).get(run)
    assert row is not None and row.detail is None
    now = as_now(row, holder=lambda _: None)
    assert now.status == "interrupted" and now.detail == "it needed you when its process ended", now.detail
