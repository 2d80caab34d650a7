"""Issue 32, point 6 (and point 2's copy): `run JOB`'s copy is bounded and carries nothing the operator's git runs.

Found at 2f229d8: a 12 KB sparse file became 1 GB on disk in the run folder; a device node in the job folder copied
/dev/zero until the disk was full; a copied ``.git/config`` with ``core.fsmonitor`` (and executable hooks) ran as the
operator at their first ``git status`` in the run folder.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from console.cli import main
from console.engine import run_copy
from console.engine.job import JobError, prepare_run

NOW = datetime(2026, 11, 22, 10, 15, 0)
MB = 2**20


@pytest.fixture
def job(tmp_path: Path) -> Path:
    root = tmp_path / "job"
    root.mkdir()
    (root / "instructions.md").write_text("# Task\n")
    (root / "notes.md").write_text("notes\n")
    return root


def runs(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "runs"
    return sorted(folder.iterdir()) if folder.exists() else []


def test_a_sparse_file_is_copied_sparse(job: Path, tmp_path: Path) -> None:
    """Found: a 12 KB sparse file (1 GB long) became 1 GB on disk."""
    with open(job / "disk.img", "wb") as fh:
        fh.truncate(1000 * MB)
        fh.seek(500 * MB)
        fh.write(b"x" * 12 * 1024)
    said: list[str] = []
    paths = prepare_run(job, tmp_path / "runs", NOW, max_job_mb=1024, say=said.append)
    copy = paths.root / "disk.img"
    assert copy.stat().st_size == 1000 * MB
    assert copy.stat().st_blocks * 512 < 1 * MB, copy.stat().st_blocks  # only its data takes room
    with open(copy, "rb") as fh:
        fh.seek(500 * MB - 1)
        assert fh.read(12 * 1024 + 2) == b"\0" + b"x" * 12 * 1024 + b"\0"
    assert said[0].startswith("copying 1,000 MB (3 files) of ")  # a large copy says so first


def test_a_job_over_max_job_mb_is_refused_before_anything_is_written(job: Path, tmp_path: Path) -> None:
    """A sparse file counts at its full size, as the run's own measure counts it: the run could not hold it."""
    (job / "job.toml").write_text("[limits]\nmax_job_mb = 256\n")
    with open(job / "disk.img", "wb") as fh:
        fh.truncate(300 * MB)
    with pytest.raises(JobError) as info:
        prepare_run(job, tmp_path / "runs", NOW, max_job_mb=256)
    msg = str(info.value)
    # The way on it names is one that works: a larger bound (how large, and in which file) or a smaller job; never
    # a run in place, which is held to the same bound (its every write refused past it).
    assert msg.endswith("cannot be copied to a run folder: it holds 300 MB as a run counts it (1 file smaller on "
                        "disk than its size counted at it), over its max_job_mb of 256 MB; set max_job_mb under "
                        f"[limits] in {job / 'job.toml'} to 301 or more, or make the job smaller"), msg
    assert "\n" not in msg and "--in-place" not in msg
    assert runs(tmp_path) == []


def test_a_job_just_over_its_bound_says_by_how_much_without_sparse_files_it_has_not(job: Path, tmp_path: Path) -> None:
    """Its size reads as the bound does, rounded up where it is just over (never "1.0 MB, over 1 MB"); no sparse
    file is named where there is none; a job without a job.toml is told where one goes."""
    (job / "job.toml").unlink(missing_ok=True)
    with open(job / "data.bin", "wb") as fh:
        fh.write(b"x" * (MB + MB // 1000))
    with pytest.raises(JobError) as info:
        prepare_run(job, tmp_path / "runs", NOW, max_job_mb=1)
    msg = str(info.value)
    assert "it holds 1.1 MB as a run counts it, over its max_job_mb of 1 MB; set max_job_mb under [limits] in a " \
           f"job.toml beside its instructions.md ({job / 'job.toml'}) to 2 or more" in msg, msg
    assert "smaller on disk" not in msg


def test_a_job_nested_deeper_than_a_copy_goes_is_told_to_run_in_place(job: Path, tmp_path: Path) -> None:
    """A run in place measures any depth (console.engine.tools.folder_walk); the copy's walk stops at MAX_DEPTH
    and says so, naming the way that works."""
    from console.engine.run_copy import MAX_DEPTH

    os.makedirs(job.joinpath(*["d"] * (MAX_DEPTH + 1)))
    with pytest.raises(JobError) as info:
        prepare_run(job, tmp_path / "runs", NOW)
    assert f"it nests folders more than {MAX_DEPTH} deep (at 'd/d/" in str(info.value)
    assert str(info.value).endswith(f"deeper than a copy goes; run it where it is: agent-console run --in-place {job}")
    assert runs(tmp_path) == []


def test_growing_past_the_bound_while_copied_stops_the_copy(job: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted again while copying: a folder that grew after it was measured (another process writing in it) does
    not push the copy past max_job_mb, and the failed copy leaves no run folder."""
    (job / "big.bin").write_bytes(b"b" * 3 * MB)
    # as measured a moment before
    monkeypatch.setattr(run_copy, "measure", lambda src, skip=frozenset(): (1024, 2, 0, 1024))
    with pytest.raises(JobError) as info:
        prepare_run(job, tmp_path / "runs", NOW, max_job_mb=2)
    assert "it grew past its max_job_mb of 2 MB while it was copied (at 'big.bin')" in str(info.value)
    assert runs(tmp_path) == []


def test_pipes_and_sockets_are_skipped_with_a_line(job: Path, tmp_path: Path) -> None:
    os.mkfifo(job / "pipe")
    (job / "sub").mkdir()
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(job / "sub" / "api.sock"))
        said: list[str] = []
        paths = prepare_run(job, tmp_path / "runs", NOW, say=said.append)
    assert said == ["skipped 'pipe': it is a named pipe, and a run copies files, folders and links only",
                    "skipped 'sub/api.sock': it is a socket, and a run copies files, folders and links only"]
    assert sorted(p.name for p in paths.root.rglob("*")) == ["instructions.md", "notes.md", "sub"]


@pytest.mark.parametrize("device", [(1, 3), (1, 5)], ids=["null", "zero"])
def test_a_device_is_skipped_never_read(job: Path, tmp_path: Path, device: tuple[int, int]) -> None:
    """Found: a device node (/dev/zero's numbers) in the folder was read until the disk was full."""
    try:
        os.mknod(job / "dev", 0o600 | stat.S_IFCHR, os.makedev(*device))
    except PermissionError as exc:
        pytest.skip(f"cannot create a character device here (mknod: {exc.strerror}); needs root")
    said: list[str] = []
    paths = prepare_run(job, tmp_path / "runs", NOW, say=said.append)
    assert said == ["skipped 'dev': it is a device, and a run copies files, folders and links only"]
    assert not (paths.root / "dev").exists()


def test_what_a_copy_keeps(job: Path, tmp_path: Path) -> None:
    """Links stay links, modes and times are kept (never setuid), .console and __pycache__ are left out."""
    (job / "run.sh").write_text("#!/bin/sh\n")
    (job / "run.sh").chmod(0o4755)
    os.utime(job / "notes.md", ns=(1_000_000_000, 2_000_000_000))
    os.symlink("notes.md", job / "link.md")
    os.symlink("/etc/passwd", job / "out")
    for name in (".console", "__pycache__", "src/__pycache__"):
        (job / name).mkdir(parents=True)
        (job / name / "state.json").write_text("{}")
    (job / "ro").mkdir(mode=0o555)
    said: list[str] = []
    paths = prepare_run(job, tmp_path / "runs", NOW, say=said.append)
    root = paths.root
    # A .console/ left out is said (one a folder came with is another's: the operator learns it was not used), and
    # a link out of the folder (kept: the agent's tools never follow it, so what it names is not the agent's).
    assert said == ["left out .console/: the job's own harness state (of a run in place, or one it came with); "
                    "this run starts clean and uses nothing of it",
                    "'out' is a link out of the job folder (to /etc/passwd): the agent cannot read what it names; "
                    "copy that into the job folder to give it to the agent"], said
    assert stat.S_IMODE((root / "run.sh").stat().st_mode) == 0o755
    assert (root / "notes.md").stat().st_mtime_ns == 2_000_000_000
    assert os.readlink(root / "link.md") == "notes.md" and os.readlink(root / "out") == "/etc/passwd"
    assert not (root / ".console").exists() and not (root / "__pycache__").exists()
    assert sorted(p.name for p in (root / "src").iterdir()) == []
    assert stat.S_IMODE((root / "ro").stat().st_mode) == 0o555


def git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    home = folder.parent / "operator-home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CEILING_DIRECTORIES": str(folder.parent), "GIT_AUTHOR_NAME": "o", "GIT_AUTHOR_EMAIL": "o@x.invalid",
           "GIT_COMMITTER_NAME": "o", "GIT_COMMITTER_EMAIL": "o@x.invalid"}
    return subprocess.run(["git", *args], cwd=folder, env=env, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.skipif(shutil.which("git") is None, reason="the operator's git is what this attack aims at")
def test_a_copy_carries_nothing_its_repositories_would_run(job: Path, tmp_path: Path) -> None:
    """Found: `run JOB` kept .git as it was: a config with core.fsmonitor and executable hooks ran as the operator
    at their first git status in the run folder (in their data dir)."""
    marker = tmp_path / "PWNED"
    assert git(job, "init", "-q", "-b", "main").returncode == 0
    assert git(job, "add", "-A").returncode == 0 and git(job, "commit", "-qm", "job").returncode == 0
    with open(job / ".git" / "config", "a") as fh:
        fh.write(f'[core]\n\tfsmonitor = "touch {marker}; false"\n[remote "origin"]\n\turl = https://x.invalid/r\n')
    for hook in ("pre-commit", "post-checkout"):
        (job / ".git" / "hooks" / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (job / ".git" / "hooks" / hook).chmod(0o755)
    (job / "vendor").mkdir()  # a bare repository inside, and a .git file naming a folder out of the job
    assert git(job / "vendor", "init", "-q", "--bare", "lib.git").returncode == 0
    (job / "vendor" / "lib.git" / "config").write_text(f"[core]\n\tbare = true\n\tpager = touch {marker}\n")
    (job / "wt").mkdir()
    (job / "wt" / ".git").write_text("gitdir: ../../elsewhere/.git\n")
    said: list[str] = []
    paths = prepare_run(job, tmp_path / "runs", NOW, say=said.append)
    root = paths.root
    assert said == [
        "in the copy, removed core.fsmonitor from '.git/config': only plain keys are kept (the format's, user, "
        "remote, branch, submodule URLs)",
        "in the copy, made '.git/hooks/post-checkout' not executable (git would run it on the operator's machine)",
        "in the copy, made '.git/hooks/pre-commit' not executable (git would run it on the operator's machine)",
        "in the copy, removed core.pager from 'vendor/lib.git/config': only plain keys are kept (the format's, user, "
        "remote, branch, submodule URLs)",
        "in the copy, removed 'wt/.git': it names by a relative path a folder outside the copy, which git would take "
        "for this folder's repository"], said
    config = (root / ".git" / "config").read_text()
    assert "fsmonitor" not in config and "https://x.invalid/r" in config  # its remote kept
    assert (job / ".git" / "config").read_text().count("fsmonitor") == 1  # the job itself is left as it is
    for args in (("status",), ("checkout", "-q", "-b", "b"), ("commit", "-q", "--allow-empty", "-m", "x")):
        git(root, *args)
    git(root / "vendor" / "lib.git", "log")
    assert not marker.exists()
    assert git(root, "log", "--oneline").stdout.count("\n") == 2  # still the repository it was


def test_the_cli_says_what_the_copy_skipped_and_refuses_a_job_over_its_bound(job: Path, tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(job / "pipe")
    assert main(["run", str(job), "--headless", "--speed", "0", "--max-turns", "1"]) in (0, 1)
    _out, err = capsys.readouterr()
    assert "skipped 'pipe': it is a named pipe, and a run copies files, folders and links only" in err
    with open(job / "disk.img", "wb") as fh:
        fh.truncate(2048 * MB)
    assert main(["run", str(job), "--headless", "--speed", "0"]) == 2
    _out, err = capsys.readouterr()
    assert err.startswith(f"agent-console: {job}: cannot be copied to a run folder: it holds 2,048 MB as a run "
                          "counts it")
    assert " to 2049 or more" in err  # as job.toml takes it: "2,049" is no TOML number and err.count("\n") == 1, err


def test_a_copy_that_would_fill_the_disk_is_refused_before_it_starts(job: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Within its max_job_mb, a job whose copy needs more than the disk has free (a file with a thousand hard
    links is a thousand files once copied) is refused before a byte is written: filling the disk would fail
    other programs' writes before the copy's own. A run in place copies nothing: the line names it."""
    from console.engine import run_copy

    (job / "data.bin").write_bytes(b"x" * 64 * 1024)
    for n in range(20):
        os.link(job / "data.bin", job / f"link{n}.bin")
    monkeypatch.setattr(run_copy, "_free", lambda folder: 512 * 1024)
    with pytest.raises(JobError) as info:
        prepare_run(job, tmp_path / "runs", NOW)
    msg = str(info.value)
    assert "its copy would take about 1.3 MB on disk" in msg or "its copy would take about 1.4 MB on disk" in msg
    assert msg.endswith(f" MB on disk and {tmp_path / 'runs'} has 0.5 MB free; run it where it is: agent-console "
                        f"run --in-place {job}"), msg
    assert runs(tmp_path) == []


def test_a_size_over_its_bound_never_reads_as_the_bound() -> None:
    from console.engine.run_copy import megabytes

    assert megabytes(int(1024.07 * MB), over=int(1024.06 * MB)) == "1,024.2"  # the bound reads 1,024.1
    assert megabytes(int(1024.06 * MB)) == "1,024.1"
    assert megabytes(MB + 1, over=MB) == "1.1" and megabytes(300 * MB) == "300"
    assert megabytes(int(0.01 * MB), over=1) == "0.1"
