"""atomic_write_bytes makes the folders a write needs only when they are missing (every state file of every turn
goes through it): made, 0700 each, as before; an existing file's folder and its temp folder are used as they are."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from console.engine.atomic import PRIVATE_DIR, atomic_write_bytes


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_the_files_folder_and_the_temp_folder_are_made_0700_when_missing(tmp_path: Path) -> None:
    target = tmp_path / "run" / ".console" / "blobs" / "ab.json"
    target.parent.parent.parent.mkdir()  # the run's folder
    atomic_write_bytes(target, b"{}", durable=False, tmp_dir=target.parent.parent / "tmp")
    assert target.read_bytes() == b"{}"
    assert mode(target.parent) == PRIVATE_DIR and mode(target.parent.parent / "tmp") == PRIVATE_DIR
    target = target.parent.parent / "guardrails.json"
    assert list((target.parent / "tmp").iterdir()) == []  # the temp file was renamed, not left behind
    atomic_write_bytes(target, b'{"a":1}', durable=False, tmp_dir=target.parent / "tmp")  # both there now
    assert target.read_bytes() == b'{"a":1}' and stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_temp_folder_elsewhere_that_is_there_while_the_files_folder_is_not(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    target = tmp_path / "gone" / "experiences.md"
    atomic_write_bytes(target, b"x", durable=False, tmp_dir=tmp)
    assert target.read_bytes() == b"x" and mode(target.parent) == PRIVATE_DIR
    assert list(tmp.iterdir()) == []


def test_without_a_temp_folder_the_file_is_written_beside_itself(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "state.json"
    atomic_write_bytes(target, b"1")
    assert target.read_bytes() == b"1" and mode(target.parent) == PRIVATE_DIR
    assert sorted(p.name for p in target.parent.iterdir()) == ["state.json"]


def test_a_folder_that_cannot_be_made_fails_the_write_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(OSError):
        atomic_write_bytes(tmp_path / "file" / "x.json", b"1", durable=False)
    assert (tmp_path / "file").read_text() == "not a folder"


def test_a_runs_folder_gone_is_never_made_again_by_a_write_into_it(tmp_path: Path) -> None:
    # A run's folder deleted or moved away while a state file is written (the write had looked a moment before:
    # console.engine.state.folder_gone): the write fails, and neither the run's folder nor its .console is made
    # again at its path (a CI run saw .console/todos.json there again after the folder was renamed away).
    run = tmp_path / "run"
    (run / ".console" / "tmp").mkdir(parents=True)
    run.rename(tmp_path / "moved")
    for target in (run / ".console" / "todos.json", run / ".console" / "blobs" / "ab.json"):
        with pytest.raises(FileNotFoundError):
            atomic_write_bytes(target, b"{}", durable=False, tmp_dir=run / ".console" / "tmp")
    assert not run.exists()
    # Its .console alone gone (the run's folder there): made again, as a run's start makes it.
    (tmp_path / "moved").rename(run)
    (run / ".console").rename(tmp_path / "moved")
    atomic_write_bytes(run / ".console" / "todos.json", b"{}", durable=False, tmp_dir=run / ".console" / "tmp")
    assert (run / ".console" / "todos.json").read_bytes() == b"{}" and mode(run / ".console") == PRIVATE_DIR
