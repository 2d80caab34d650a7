"""A job folder made again at the same path after its run completed (``rm -rf job && cp -r template job``, then
``run job --in-place``) is a new run: the jobs table no longer says "completed" of it (a completed row is final to
every later update of the same run, so the earlier run's row is forgotten when a new run starts there)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.conftest import SAMPLES
from tests.processes import cli


def _row(run_id: str) -> dict[str, object]:
    jobs = subprocess.run(cli("jobs", "--json"), capture_output=True, text=True, timeout=60)
    return next(r for r in map(json.loads, jobs.stdout.splitlines()) if r["id"] == run_id)


def test_a_new_run_in_a_remade_folder_is_not_the_completed_one(tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "quickstart", job)
    first = subprocess.run(cli("run", str(job), "--in-place", "--headless", "--speed", "0"), capture_output=True,
                           text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    run_id = first.stdout.split(": ", 1)[0].removeprefix("run ")
    assert _row(run_id)["status"] == "completed"
    shutil.rmtree(job)
    shutil.copytree(SAMPLES / "quickstart", job)
    second = subprocess.run(cli("run", str(job), "--in-place", "--headless", "--speed", "0", "--max-turns", "3"),
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 1, second.stderr  # incomplete: a turn limit
    assert second.stdout.split(": ", 1)[0].removeprefix("run ") == run_id  # the same folder, the same id
    row = _row(run_id)
    assert row["status"] != "completed" and row["completed_at"] is None and row["confidence"] is None, row
    # A resume of a completed run is still told it is complete, its row kept.
    shutil.rmtree(job)
    shutil.copytree(SAMPLES / "quickstart", job)
    done = subprocess.run(cli("run", str(job), "--in-place", "--headless", "--speed", "0"), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and _row(run_id)["status"] == "completed"
    again = subprocess.run(cli("run", str(job), "--in-place", "--headless", "--speed", "0"), capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0 and "already complete" in again.stdout and _row(run_id)["status"] == "completed"
