"""console.view.jobs.launched_unconfined (what `jobs` says of a run's --unconfined, read without building the
record's model) says what the record's model says, as a resume reads it (console.engine.launch.read_launch): the
run `jobs` shows confined is never resumed unconfined."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from console.engine.job_files import JobPaths
from console.engine.launch import LaunchError, read_launch
from console.engine.launch_record import SEAL_KIND, launch_path
from console.engine.seal import Seal
from console.view.jobs import launched_unconfined


class _Absent:
    def __repr__(self) -> str:  # a stable test id (xdist's workers compare them)
        return "absent"


ABSENT = _Absent()
VALUES: list[Any] = [True, False, "true", "True", "yes", "on", "1", 1, 1.0, 0, "false", "no", None, "maybe", [1],
                     {"a": 1}, 2, ABSENT]


def _resumed_unconfined(paths: JobPaths, seal: Seal) -> bool:
    """What `jobs` said before the light reader: the record's model's field, False where there is none believed."""
    try:
        record = read_launch(paths, seal)
    except LaunchError:
        return False
    return record is not None and record.unconfined


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Seal, Path, Path]:
    """The seal of a data dir, a run folder made before its key (an earlier run) and one made after."""
    data = tmp_path / "data"
    before = data / "runs" / "job-20261126-101500"
    (before / ".console").mkdir(parents=True)
    seal = Seal.of(data)
    after = data / "runs" / "job-20261127-090000"
    (after / ".console").mkdir(parents=True)
    return seal, before, after


@pytest.mark.parametrize("value", VALUES, ids=repr)
@pytest.mark.parametrize("whose", ["sealed", "earlier", "unsealed", "sealed, incomplete", "earlier, incomplete"])
def test_jobs_says_unconfined_where_a_resume_would_run_unconfined(folders: tuple[Seal, Path, Path], whose: str,
                                                                   value: Any) -> None:
    seal, before, after = folders
    doc: dict[str, Any] = {"version": 2, "provider": "scripted", "model": "demo"}
    if "incomplete" in whose:
        del doc["model"]  # not a record the model reads: neither says unconfined
    if value is not ABSENT:
        doc["unconfined"] = value
    root = before if whose.startswith("earlier") else after
    paths = JobPaths(root)
    text = seal.sealed_json(SEAL_KIND, root, doc) if whose.startswith("sealed") else json.dumps(doc)
    launch_path(paths).write_text(text)
    said = launched_unconfined(paths, seal)
    if "incomplete" in whose and value is True:
        # Its one field read (no model built: `jobs`'s CPU) where the model refuses the record: shown unconfined, as
        # it says, and never resumed (a resume refuses the record).
        assert said is True and _resumed_unconfined(paths, seal) is False
    else:
        assert said == _resumed_unconfined(paths, seal)


@pytest.mark.parametrize("text", ["{not json", "[]", '"x"', "", "{}"])
def test_a_damaged_record_is_not_unconfined(folders: tuple[Seal, Path, Path], text: str) -> None:
    seal, before, _ = folders
    paths = JobPaths(before)
    launch_path(paths).write_text(text)
    assert launched_unconfined(paths, seal) is _resumed_unconfined(paths, seal) is False
