"""Every ending names a next step that works, and each test RUNS that step: a stop's last line gives
`agent-console resume ID` (not only the long `run --in-place FOLDER`), and that resume goes on; an auth failure
(401) names the key's variable, then the resume, in its last line and its notification, and that resume (the key
fixed) asks the model again with the new key; a run whose folder was deleted offers no resume anywhere."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from console import cli as cli_module
from console.engine.control import RunLock
from console.engine.job import JobPaths
from console.engine.runs import run_id
from tests.conftest import SAMPLES
from tests.notify_server import loopback as webhook
from tests.processes import cli, wait_for
from tests.wire.loopback import Loopback, openai_auth_error

RESUME = re.compile(r"resume run (\w{5}) with: agent-console resume (\w{5})$")


def _stopped(paths: JobPaths, timeout: float = 60) -> None:
    wait_for(lambda: RunLock(paths).holder() is None, timeout, "the runner to let go of the run")


def _stop_runner(paths: JobPaths) -> None:
    holder = RunLock(paths).holder()
    if holder is not None:
        os.kill(holder, signal.SIGTERM)  # the runner this test's resume started, by its id
        _stopped(paths)


def test_a_stopped_run_ends_with_its_resume_by_id_which_goes_on(tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "quickstart", job)
    paths = JobPaths(job)
    proc = subprocess.Popen(cli("run", str(job), "--in-place", "--headless", "--speed", "0.3"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: paths.events.exists() and b"turn_started" in paths.events.read_bytes(), 60,
                 "the run's first turn")
        stop = subprocess.run(cli("stop", paths.run_id, "--wait", "0"), capture_output=True, text=True, timeout=60)
        assert stop.returncode == 0, stop.stderr
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 3, err
    last = err.strip().splitlines()[-1]
    m = RESUME.search(last)
    assert m is not None, last
    assert m.group(1) == m.group(2) == paths.run_id and "--in-place" not in last
    # The step it names, run as it is: the run goes on (in the background) where it was.
    try:
        went_on = subprocess.run(cli("resume", m.group(2), "--speed", "0"), capture_output=True, text=True,
                                 timeout=120)
        assert went_on.returncode == 0, went_on.stderr
        assert f"run {paths.run_id}: {job}" in went_on.stdout
        wait_for(lambda: b'"reason":"resume"' in paths.events.read_bytes(), 60, "the resumed session")
    finally:
        _stop_runner(paths)


def test_an_auth_failure_names_the_key_then_the_resume_which_works_once_it_is_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "quickstart", job)
    paths = JobPaths(job)
    monkeypatch.delenv("AGENT_CONSOLE_OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-0000")
    with Loopback() as model, webhook() as hook:
        model.push(openai_auth_error("sk-wrong-0000"))
        code = cli_module.main(["run", "--in-place", str(job), "--headless", "--provider", "openai", "--model",
                                "gpt-4.1", "--base-url", model.openai_url, "--notify",
                                hook.url("json", "calls")])
        _out, err = capsys.readouterr()
        assert code == 7, err
        lines = err.strip().splitlines()
        assert "authentication failed (401) - check OPENAI_API_KEY" in lines[-2]
        assert lines[-1] == (f"agent-console: set OPENAI_API_KEY to a working key, then resume run {paths.run_id} "
                             f"with: agent-console resume {paths.run_id}")
        [ended] = [r for r in hook.wait_for(1) if "ended" in r.body["title"]]
        assert ended.body["message"].endswith(
            f"Go on with: set OPENAI_API_KEY to a working key, then agent-console resume {paths.run_id}")
        # The fix, then the step it names: the resumed run asks the model again, with the key now set.
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fixed-1111")
        try:
            assert cli_module.main(["resume", paths.run_id]) == 0, capsys.readouterr().err
            wait_for(lambda: any(r.headers.get("authorization") == "Bearer sk-fixed-1111" for r in model.requests),
                     60, "the resumed run's request with the fixed key")
        finally:
            _stop_runner(paths)


@pytest.mark.parametrize("where", ["environment", "config file"])
def test_an_auth_failure_names_where_the_operator_set_the_key(
        where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # A key given through agent-console's own settings is not read from OPENAI_API_KEY: a fix naming that variable
    # sends the operator to set a key the run then ignores (the settings' key wins).
    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "quickstart", job)
    paths = JobPaths(job)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("AGENT_CONSOLE_OPENAI_API_KEY", raising=False)
    if where == "environment":
        monkeypatch.setenv("AGENT_CONSOLE_OPENAI_API_KEY", "sk-wrong-0000")
        named = "AGENT_CONSOLE_OPENAI_API_KEY"
    else:
        config = Path(os.environ["AGENT_CONSOLE_CONFIG"])
        config.write_text('openai_api_key = "sk-wrong-0000"\n')
        named = f"openai_api_key in {config}"
    with Loopback() as model:
        model.push(openai_auth_error("sk-wrong-0000"))
        code = cli_module.main(["run", "--in-place", str(job), "--headless", "--provider", "openai", "--model",
                                "gpt-4.1", "--base-url", model.openai_url])
        _out, err = capsys.readouterr()
    assert code == 7, err
    lines = err.strip().splitlines()
    assert f"authentication failed (401) - check {named}" in lines[-2]
    assert lines[-1] == (f"agent-console: set {named} to a working key, then resume run {paths.run_id} "
                         f"with: agent-console resume {paths.run_id}")
    assert "sk-wrong" not in err


def test_a_run_whose_folder_was_deleted_offers_no_resume_in_its_notification(tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "quickstart", job)
    events = job / ".console" / "events.jsonl"
    with webhook() as hook:
        proc = subprocess.Popen(cli("run", str(job), "--in-place", "--headless", "--speed", "0.3", "--notify",
                                    hook.url("json", "calls")), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            wait_for(lambda: events.exists() and b"turn_started" in events.read_bytes(), 60, "the run's first turn")
            # Deleted at once: renamed away first (an rmtree in place races the run's writes into .console/:
            # "Directory not empty" on a busy machine), then the moved copy deleted.
            job.rename(tmp_path / "deleted")
            shutil.rmtree(tmp_path / "deleted", ignore_errors=True)
            _out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 130, err
        [ended] = [r for r in hook.wait_for(1, timeout=30) if "ended" in r.body["title"]]
    rid = run_id(job)
    assert "agent-console resume" not in ended.body["message"], ended.body
    assert ended.body["message"].endswith("Nothing to resume: its folder was deleted or moved away.")
    assert err.strip().splitlines()[-1].endswith("there is nothing left there to resume")
    # What the notification would have offered fails indeed: nothing is left to resume.
    went_on = subprocess.run(cli("resume", rid), capture_output=True, text=True, timeout=60)
    assert went_on.returncode == 2 and "Traceback" not in went_on.stderr
