"""The operator's seal (console.engine.seal): one key per data dir, made once and kept private; a MAC holds for
its record's kind, folder and content only; the runs made before seals are the data dir's jobs table's then."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from console.engine.seal import KEY_NAME, KEYS, LEGACY_NAME, Seal, SealError
from console.engine.store import JobStore


def test_the_key_is_made_once_private_and_kept(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = Seal.of(data)
    key = data / KEYS / KEY_NAME
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert key.stat().st_size == 32
    again = Seal.of(data)
    assert again.mac("launch", tmp_path, b"x") == first.mac("launch", tmp_path, b"x")
    assert "data" in repr(first) and key.read_bytes().hex() not in repr(first)  # never the key
    assert [p.name for p in key.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_processes_making_the_key_at_once_agree_on_one(tmp_path: Path) -> None:
    data = tmp_path / "data"
    code = ("import sys; from pathlib import Path; from console.engine.seal import Seal; "
            "print(Seal.of(Path(sys.argv[1])).mac('k', '/', b'x'))")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(data)], stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    macs = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(macs) == 1 and macs == {Seal.of(data).mac("k", "/", b"x")}


def test_a_mac_holds_for_its_kind_folder_and_content_only(tmp_path: Path) -> None:
    seal = Seal.of(tmp_path / "data")
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    mac = seal.mac("launch", one, b"body")
    assert seal.holds("launch", one, b"body", mac)
    assert not seal.holds("launch", two, b"body", mac)  # another folder
    assert not seal.holds("store-id", one, b"body", mac)  # another kind of record
    assert not seal.holds("launch", one, b"bodY", mac)
    assert not seal.holds("launch", one, b"body", mac.upper()) and not seal.holds("launch", one, b"body", None)
    (tmp_path / "link").symlink_to(one)
    assert seal.holds("launch", tmp_path / "link", b"body", mac)  # the folder's real path
    other = Seal.of(tmp_path / "other-data")  # another operator
    assert not other.holds("launch", one, b"body", mac)
    # A sealed JSON record: any field changed, or the MAC moved to another record, and it does not hold.
    text = seal.sealed_json("launch", one, {"provider": "scripted", "unconfined": False})
    doc = json.loads(text)
    assert seal.opens("launch", one, doc)
    assert not seal.opens("launch", one, {**doc, "unconfined": True})
    assert not seal.opens("launch", one, {**doc, "base_url": "http://author/"})


def test_a_damaged_key_is_one_line_naming_what_to_do(tmp_path: Path) -> None:
    key = tmp_path / KEYS / KEY_NAME
    key.parent.mkdir(parents=True)
    key.write_bytes(b"short")
    with pytest.raises(SealError) as exc:
        Seal.of(tmp_path)
    assert "\n" not in str(exc.value) and "move it aside" in str(exc.value)


def test_the_runs_before_the_key_are_the_jobs_tables_then(tmp_path: Path) -> None:
    data = tmp_path / "data"
    before, after = tmp_path / "before", tmp_path / "after"
    store = JobStore(data / "jobs.db")
    store.started(before, "before", "scripted", "m", datetime.now(UTC))
    seal = Seal.of(data)
    store.started(after, "after", "scripted", "m", datetime.now(UTC))
    store.close()
    assert seal.earlier(before) and not seal.earlier(after)
    assert not Seal.of(data).earlier(after)  # the list is made once, with the key
    seal.adopted(before)
    assert not seal.earlier(before)
    assert json.loads((data / KEYS / LEGACY_NAME).read_text()) == {"paths": []}
    assert stat.S_IMODE(os.stat(data / KEYS / LEGACY_NAME).st_mode) == 0o600


def test_the_copies_run_made_before_the_key_are_earlier_runs_too(tmp_path: Path) -> None:
    """An operator of a shared store has no jobs table here: the run folders `run JOB` made are theirs all the
    same (a copy never carries a .console/)."""
    data = tmp_path / "data"
    (data / "runs" / "quickstart-20261126-101500").mkdir(parents=True)
    (data / "runs" / "stray-file").write_text("")
    seal = Seal.of(data)
    (data / "runs" / "quickstart-20261127-090000").mkdir()
    assert seal.earlier(data / "runs" / "quickstart-20261126-101500")
    assert not seal.earlier(data / "runs" / "quickstart-20261127-090000")
    assert not seal.earlier(data / "runs" / "stray-file")
