"""What tests do that could reach the operator's home: run by tests/test_hermetic.py in a child pytest whose HOME
is a fake operator's home (a config that notifies a loopback canary at each run's end, a jobs.db). Not collected by
the suite itself (not a test_*.py file): each test here passes whether or not the walls hold; the parent checks
the canary and the fake home.

The ways in: a module-scoped fixture (it runs before the per-test fixture that points the data dir and config
away), a test that builds a command's environment from scratch (the settings' variables dropped), a run in the
test's own process, and one after the test undid its monkeypatches (the per-test fixture's went with them: at
2f229d8 that is how three runs of tests/test_startup_interrupt.py notified the operator's channel and registered in
their jobs.db).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "sample_jobs" / "quickstart"


def cli(job: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "console.cli", "run", str(job), "--headless", "--speed", "0"],
                          capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL)


def job(folder: Path) -> Path:
    shutil.copytree(QUICKSTART, folder / "job", ignore=shutil.ignore_patterns(".console"))
    return folder / "job"


@pytest.fixture(scope="module")
def run_before_the_test(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    return cli(job(tmp_path_factory.mktemp("module")), dict(os.environ))


def test_a_run_in_a_module_fixture(run_before_the_test: subprocess.CompletedProcess[str]) -> None:
    assert run_before_the_test.returncode == 0, run_before_the_test.stderr


def test_a_run_whose_environment_is_built_without_the_settings_variables(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_CONSOLE_")}
    done = cli(job(tmp_path), env)
    assert done.returncode == 0, done.stderr


def test_a_run_in_this_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from console.cli import main

    assert main(["run", str(job(tmp_path)), "--headless", "--speed", "0"]) == 0, capsys.readouterr().err


def test_a_run_after_the_test_undid_its_patches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from console.cli import main

    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.undo()  # as tests/test_startup_interrupt.py does to run on unpatched
    assert main(["run", str(job(tmp_path)), "--headless", "--speed", "0"]) == 0, capsys.readouterr().err
