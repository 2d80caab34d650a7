"""A run whose folder is deleted or moved away under it is stopped, as by a signal: its files are gone, its agent's
tools fail, and no command of its operator can reach it (the inbox was in that folder). The control channel looks
at the folder while it has no inbox, every FOLDER_LOOK seconds (these tests move the last look back instead of
waiting), and hands the run one stop, source FOLDER_GONE, which ends it interrupted."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from console.engine import control
from console.engine.control import FOLDER_GONE, ControlChannel
from console.engine.job import JobPaths
from console.engine.operator import SIGNALS
from tests.conftest import SAMPLES
from tests.processes import cli, wait_for


def _channel(tmp_path: Path) -> tuple[ControlChannel, Path]:
    root = tmp_path / "job"
    (root / ".console").mkdir(parents=True)
    return ControlChannel(JobPaths(root).inbox), root


def _look(ch: ControlChannel) -> list[str]:
    ch._folder_at -= control.FOLDER_LOOK  # as if the time between two looks had passed
    return [f"{c.command}:{c.source}" for c in ch.poll()]


def test_a_deleted_folder_stops_the_run_once(tmp_path: Path) -> None:
    ch, root = _channel(tmp_path)
    assert _look(ch) == []  # no inbox yet, the folder there: nothing
    shutil.rmtree(root)
    assert ch.poll() == []  # not looked at again before FOLDER_LOOK
    assert _look(ch) == [f"stop:{FOLDER_GONE}"]
    assert ch.gone is not None and str(root) in ch.gone
    assert _look(ch) == []  # once
    assert FOLDER_GONE in SIGNALS  # the run ends interrupted, not stopped by its operator


def test_another_folder_in_its_place_is_not_the_run_s(tmp_path: Path) -> None:
    ch, root = _channel(tmp_path)
    shutil.rmtree(root)
    (root / ".console").mkdir(parents=True)  # restored from a copy, or another job made there
    assert _look(ch) == [f"stop:{FOLDER_GONE}"]


def test_a_folder_moved_away_is_gone_and_a_channel_without_an_inbox_never_is(tmp_path: Path) -> None:
    ch, root = _channel(tmp_path)
    root.rename(tmp_path / "elsewhere")
    assert _look(ch) == [f"stop:{FOLDER_GONE}"]
    bare = ControlChannel()  # in-process runs (tests, the console's own): no folder to tell by
    bare._folder_at -= control.FOLDER_LOOK
    assert bare.poll() == [] and bare.gone is None


def test_a_folder_that_cannot_be_looked_at_is_not_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ch, _root = _channel(tmp_path)
    real = os.stat

    def denied(path: object, *a: object, **k: object) -> os.stat_result:
        if Path(str(path)) == _root:
            raise PermissionError(13, "Permission denied")
        return real(path, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", denied)
    assert _look(ch) == []
    assert ch.gone is None


def test_a_headless_run_whose_folder_is_deleted_ends_interrupted(tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "quickstart", job)
    proc = subprocess.Popen(cli("run", str(job), "--in-place", "--headless", "--speed", "0.3"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (job / ".console" / "events.jsonl").exists()
                 and b"turn_started" in (job / ".console" / "events.jsonl").read_bytes(), 60, "the run's first turn")
        # Deleted at once: renamed away first (an rmtree in place races the run's writes into .console/), then
        # the moved copy deleted.
        job.rename(tmp_path / "deleted")
        shutil.rmtree(tmp_path / "deleted", ignore_errors=True)
        gone = time.monotonic()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
    # Stopped within a look or two (a bound for a loaded machine, not a pace), interrupted, and said so.
    assert time.monotonic() - gone < 30
    assert proc.returncode == 130, err
    assert "interrupted by its folder's removal" in err
    assert f"its folder {job} was deleted or moved away: there is nothing left there to resume" in err
    assert "Traceback" not in err + out and "resume run" not in err
    # Its state files were not written again (they would have made the folder again at its path).
    assert not (job / ".console" / "todos.json").exists() and not (job / ".console" / "memory.json").exists()
