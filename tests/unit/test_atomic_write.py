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
    target = tmp_path / "run" / ".console" / "guardrails.json"
    atomic_write_bytes(target, b"{}", durable=False, tmp_dir=target.parent / "tmp")
    assert target.read_bytes() == b"{}"
    assert mode(target.parent) == PRIVATE_DIR and mode(target.parent / "tmp") == PRIVATE_DIR
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
