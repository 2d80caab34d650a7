"""The job folder's measure (the disk bound of commands) against a hostile command's folder.

Found: as an ordinary operator (not root), a command that wrote its data into a folder and then made it
unreadable (``chmod 000``, or ``chmod 400``: listed but not searchable) hid all of it from the measure, and so
from ``max_job_mb``: 50 MB counted as 4 KB, and nothing bounded what it could put there. And the measure listed
each folder whole in the harness's memory (about 750 bytes an entry: 300 MB for a folder of 400,000 empty files,
which a command makes in 11 s) at every measure and every look of the watch.
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
import tracemalloc
from pathlib import Path

import pytest

from console.engine.tools.folder_size import folder_bytes, measure_folder

NOBODY = 65534


def _hide_and_measure(root: str, mode: int) -> dict[str, object]:
    os.mkdir(os.path.join(root, "hide"))
    with open(os.path.join(root, "hide", "data"), "wb") as fh:
        fh.write(b"x" * (8 << 20))
    os.chmod(os.path.join(root, "hide"), mode)
    try:
        m = measure_folder(root)
    finally:
        os.chmod(os.path.join(root, "hide"), 0o700)
    return {"bytes": m.bytes, "unmeasurable": m.unmeasurable}


def _measure_as_user(mode: int) -> dict[str, object]:
    """As an ordinary user: root reads any folder whatever its mode (as root, in a child that becomes one)."""
    with tempfile.TemporaryDirectory() as top:
        if os.geteuid() != 0:
            return _hide_and_measure(top, mode)
        os.chmod(top, 0o755)
        root = os.path.join(top, "job")
        os.mkdir(root)
        os.chown(root, NOBODY, NOBODY)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child)
            code = 1
            try:
                os.close(r)
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                os.write(w, json.dumps(_hide_and_measure(root, mode)).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r, "rb") as fh:
            out = fh.read()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        return dict(json.loads(out))


@pytest.mark.parametrize("mode", [0o000, 0o400, 0o300], ids=["no-access", "list-only", "write-only"])
def test_a_folder_the_harness_cannot_read_counts_as_over_the_limit(mode: int) -> None:
    got = _measure_as_user(mode)
    assert "hide" in str(got["unmeasurable"]) and "cannot be read" in str(got["unmeasurable"]), got


def test_a_folder_that_cannot_be_read_is_over_any_limit(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "a").mkdir()
    real_open = os.open

    def refuse(path, flags, mode=0o777, *, dir_fd=None):  # what a non-root harness meets at "a" after chmod 000
        if path == "a" and dir_fd is not None:
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", refuse)
    assert folder_bytes(str(tmp_path), stop_above=1 << 30) > 1 << 30


def test_a_folder_that_vanishes_mid_walk_is_not_a_failure(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b.txt").write_bytes(b"x" * 4096)
    real_open = os.open

    def gone(path, flags, mode=0o777, *, dir_fd=None):  # a running command removed it between list and open
        if path == "a" and dir_fd is not None:
            raise FileNotFoundError(2, "No such file or directory")
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", gone)
    m = measure_folder(str(tmp_path))
    assert m.unmeasurable == "" and m.bytes >= 4096


def test_a_wide_folder_is_measured_without_holding_its_listing(tmp_path: Path) -> None:
    wide = tmp_path / "wide"
    wide.mkdir()
    n = 20_000
    for i in range(n):
        os.close(os.open(wide / f"f{i:06d}", os.O_CREAT | os.O_WRONLY, 0o644))
    tracemalloc.start()
    try:
        m = measure_folder(str(tmp_path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert m.bytes >= n * 512 and m.unmeasurable == ""
    # Listed whole, 20,000 entries held about 15 MB at once; read as counted, a few KB.
    assert peak < 1 << 20, peak


def _chain(top: str, depth: int) -> int:
    """``depth`` folders named d, one in the other (made by descriptor: the path is longer than PATH_MAX), with a
    setuid file and 1 KB at the bottom; the descriptor of the deepest, for the caller to close."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        deeper = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = deeper
    tool = os.open("tool", os.O_CREAT | os.O_WRONLY, 0o755, dir_fd=fd)
    os.write(tool, b"x" * 1024)
    os.close(tool)
    os.chmod("tool", 0o4755, dir_fd=fd)
    return fd


def _unchain(top: str) -> None:
    """Remove what :func:`_chain` made, a level at a time (shutil.rmtree holds a descriptor a level)."""
    d, moved = os.path.join(top, "d"), os.path.join(top, "moved")
    while os.path.isdir(os.path.join(d, "d")):
        os.rename(os.path.join(d, "d"), moved)
        os.rmdir(d)
        os.rename(moved, d)
    for name in os.listdir(d):
        os.unlink(os.path.join(d, name))
    os.rmdir(d)


@pytest.mark.parametrize("depth", [300, 5000])
def test_a_setuid_file_at_any_depth_loses_its_bit_and_the_folder_is_measured(tmp_path: Path, depth: int) -> None:
    """Found: a setuid file 300 folders deep survived the sweep after a call (the walk stopped at 256 levels, holding
    a descriptor a level). Now every level is walked with at most WINDOW open, whatever the depth."""
    from console.engine.tools import folder_size

    (tmp_path / "tool").write_bytes(b"#!/bin/sh\n")
    os.chmod(tmp_path / "tool", 0o4755)
    deepest = _chain(str(tmp_path), depth)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        # Far fewer descriptors than levels (a descriptor a level would run out at once): the walk keeps its window.
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, len(os.listdir("/proc/self/fd")) + 300), hard))
        try:
            m = measure_folder(str(tmp_path), strip_setid=True)
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert m.unmeasurable == "" and len(m.unset) == 2 and m.unset[0] == "tool", m
        assert m.unset[1].startswith("...") and m.unset[1].endswith("/d/d/tool") and len(m.unset[1]) <= 80
        assert not os.stat("tool", dir_fd=deepest).st_mode & 0o6000
        assert m.bytes >= depth * folder_size.ENTRY_BYTES + 1024
        assert measure_folder(str(tmp_path), strip_setid=True).unset == []
    finally:
        os.close(deepest)
        _unchain(str(tmp_path))


def test_a_deep_walk_comes_back_up_to_each_folder_where_it_left_it(tmp_path: Path, monkeypatch) -> None:
    """With two levels open at once, a tree of folders in folders is measured as os.walk sees it, every setuid bit
    found: a level closed on the way down is reopened through ".." and its listing goes on after what was taken."""
    import random
    import stat as st

    from console.engine.tools import folder_size, folder_walk

    rng = random.Random(7)
    folders = [tmp_path]
    for i in range(300):
        parent = rng.choice(folders[-4:] if rng.random() < 0.7 else folders)
        if rng.random() < 0.5:
            folders.append(parent / f"d{i}")
            folders[-1].mkdir()
        else:
            (parent / f"f{i}").write_bytes(b"x" * rng.randint(0, 5000))
            if rng.random() < 0.2:
                os.chmod(parent / f"f{i}", 0o4755)
    total, setid = 0, []
    for folder, dirs, files in os.walk(tmp_path):
        for name in dirs + files:
            s = os.lstat(os.path.join(folder, name))
            total += max(s.st_size, s.st_blocks * 512, folder_size.ENTRY_BYTES)
            if st.S_ISREG(s.st_mode) and s.st_mode & 0o6000:
                rel = os.path.relpath(os.path.join(folder, name), tmp_path)
                setid.append(rel if len(rel) <= 80 else "..." + rel[-77:])  # as the result shows a long one
    monkeypatch.setattr(folder_walk, "WINDOW", 2)
    m = measure_folder(str(tmp_path), strip_setid=True)
    assert (m.bytes, sorted(m.unset), m.unmeasurable) == (total, sorted(setid), "")
    assert len(setid) > 10


def test_the_file_tools_first_count_holds_no_listing_either(tmp_path: Path) -> None:
    from console.engine.sandbox import Sandbox

    job = tmp_path / "job"
    (job / "wide").mkdir(parents=True)
    n = 20_000
    for i in range(n):
        os.close(os.open(job / "wide" / f"f{i:06d}", os.O_CREAT | os.O_WRONLY, 0o644))
    (job / "notes.md").write_bytes(b"x" * 100)
    with Sandbox(str(job)) as sb:
        tracemalloc.start()
        try:
            total = sb.job_bytes()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert total == 100
    assert peak < 1 << 20, peak  # listed whole: about 15 MB


def test_a_command_stopped_for_an_unreadable_folder_is_told_why() -> None:
    from console.engine.tools.commands import CommandToolConfig, _render
    from console.engine.tools.limits import CommandWorld
    from console.engine.tools.process import RunResult

    why = "the folder 'hide' cannot be read (Permission denied); make it readable (chmod u+rwx)"
    res = RunResult("folder", None, 1.0, b"", b"", 0, folder_bytes=(1 << 30) + 1, unmeasurable=why)
    text = _render(CommandToolConfig(name="t", description="d", command=["true"]), res, CommandWorld())
    assert text.splitlines()[0] == (f"stopped: the job folder could not be measured ({why}), so it counts as past "
                                    "its limit of 1,024 MB (max_job_mb)")
    assert text.count("could not be measured") == 1


def test_listing_a_huge_folder_holds_only_what_it_returns(tmp_path: Path, monkeypatch) -> None:
    """list_files, find_files and search_files walk the job: a folder of 20,000 entries was sorted whole in the
    harness's memory (about 15 MB; 89 MB measured for 400,000, 450 MB for the 2 million max_job_mb allows)."""
    from console.engine.sandbox import Sandbox, listing

    monkeypatch.setattr(listing, "BIG_FOLDER", 1000)  # 50,000 in use: the test makes fewer files
    job = tmp_path / "job"
    (job / "wide").mkdir(parents=True)
    n = 20_000
    for i in range(n):
        name = f".h{i:06d}" if i % 3 == 0 else f"f{i:06d}"  # hidden ones are skipped when asked: room for them
        os.close(os.open(job / "wide" / name, os.O_CREAT | os.O_WRONLY, 0o644))
    (job / "wide" / "sub").mkdir()
    (job / "wide" / "sub" / "a.md").write_text("x")
    with Sandbox(str(job)) as sb:
        tracemalloc.start()
        try:
            got = sb.walk("wide", limit=100, hidden_files=False)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert [f.rel for f in got] == [f"wide/f{i:06d}" for i in range(n) if i % 3][:100]
        assert peak < 1 << 20, peak
        # A small folder is listed exactly as before: files first, then each sub-folder's.
        assert [f.rel for f in sb.walk("wide", limit=n + 10)][-1] == "wide/sub/a.md"
