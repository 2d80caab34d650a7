"""The job folder's trip to the pod (console.kube.pack): what is refused when packing, and an unpacking that is
done once, completely or not at all, and never outside the run folder, whatever the archive holds."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

import pytest

from console.kube.pack import MAX_ARCHIVE_BYTES, PackError, main, pack_job, unpack_job


def make_job(root: Path) -> Path:
    (root / "notes").mkdir(parents=True)
    (root / "instructions.md").write_text("do it\n")
    (root / "notes" / "a.md").write_text("a\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / ".console").mkdir()
    (root / ".console" / "events.jsonl").write_text("{}\n")  # an old run's state: a fresh run starts clean
    return root


def names(archive: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return tar.getnames()


def test_pack_is_reproducible_and_leaves_the_harness_state_out(tmp_path) -> None:
    job = make_job(tmp_path / "job")
    one, two = pack_job(job), pack_job(job)
    assert one == two
    assert sorted(names(one)) == ["instructions.md", "notes", "notes/a.md", "run.sh"]
    dest = tmp_path / "work" / "runs" / "r"
    unpack_job(_write(tmp_path, one), dest)
    assert (dest / "notes" / "a.md").read_text() == "a\n" and os.access(dest / "run.sh", os.X_OK)
    assert not (dest / ".console").exists()


def _write(tmp_path: Path, archive: bytes, name: str = "job.tar.gz") -> Path:
    path = tmp_path / name
    path.write_bytes(archive)
    return path


def test_a_second_pod_finds_the_run_folder_and_leaves_it_as_it_is(tmp_path) -> None:
    job = make_job(tmp_path / "job")
    archive = _write(tmp_path, pack_job(job))
    dest = tmp_path / "work" / "runs" / "r"
    assert "unpacked" in unpack_job(archive, dest)
    (dest / "instructions.md").write_text("changed by the run\n")
    (dest / ".console").mkdir()
    assert "resumes" in unpack_job(archive, dest)
    assert (dest / "instructions.md").read_text() == "changed by the run\n" and (dest / ".console").is_dir()


def test_an_unpacking_killed_half_way_is_done_again_whole(tmp_path) -> None:
    archive = _write(tmp_path, pack_job(make_job(tmp_path / "job")))
    dest = tmp_path / "work" / "runs" / "r"
    half = dest.with_name(".r.unpacking")
    half.mkdir(parents=True)
    (half / "instructions.md").write_text("torn")
    unpack_job(archive, dest)
    assert (dest / "instructions.md").read_text() == "do it\n" and not half.exists()


def hostile(tmp_path: Path, *members: tuple[tarfile.TarInfo, bytes]) -> Path:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb") as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
    return _write(tmp_path, buf.getvalue(), "evil.tar.gz")


def _file(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def _link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


@pytest.mark.parametrize("members", [
    [(_file("../escaped"), b"x")],
    [(_file("/tmp/absolute-escape"), b"x")],
    [(_link("out", "/etc"), b""), (_file("out/passwd"), b"x")],
    [(_link("up", "../../.."), b"")],
    [(_link("hard", "/etc/passwd", tarfile.LNKTYPE), b"")],
])
def test_a_hostile_archive_writes_nothing_outside_and_says_so(tmp_path, capsys, members) -> None:
    archive = hostile(tmp_path, *members)
    dest = tmp_path / "work" / "runs" / "r"
    before = set(tmp_path.rglob("*"))
    code = main([str(archive), str(dest)])
    outside = {p for p in tmp_path.rglob("*") if dest not in p.parents and ".r.unpacking" not in str(p)}
    assert outside <= before | {dest, dest.parent, dest.parent.parent}
    assert not Path("/tmp/absolute-escape").exists()
    if code == 0:  # an absolute name is made relative to the run folder (tarfile's "data" filter): inside it
        assert members[0][0].name.startswith("/") and (dest / "tmp" / "absolute-escape").is_file()
        return
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("agent-console: cannot unpack the job") and err.count("\n") == 1
    assert not dest.exists()


def test_a_gzip_bomb_is_refused_before_it_is_written(tmp_path, capsys) -> None:
    big = _file("big")
    archive = hostile(tmp_path, (big, b"\0" * (300 << 20)))
    assert archive.stat().st_size < MAX_ARCHIVE_BYTES
    assert main([str(archive), str(tmp_path / "d")]) == 1 and "MiB unpacked" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_what_cannot_be_sent_is_refused_at_packing(tmp_path) -> None:
    job = make_job(tmp_path / "job")
    os.mkfifo(job / "pipe")
    with pytest.raises(PackError, match="pipe: not a regular file"):
        pack_job(job)
    os.unlink(job / "pipe")
    (job / "etc").symlink_to("/etc")
    with pytest.raises(PackError, match="etc: a link that leads out"):
        pack_job(job)
    os.unlink(job / "etc")
    (job / "notes" / "up").symlink_to("../../outside")
    with pytest.raises(PackError, match="a link that leads out"):
        pack_job(job)
    os.unlink(job / "notes" / "up")
    (job / "notes" / "fine").symlink_to("a.md")  # a link inside the job travels as a link
    assert "notes/fine" in names(pack_job(job))
    (job / "data.bin").write_bytes(os.urandom(MAX_ARCHIVE_BYTES + 1))  # random: gzip cannot shrink it
    with pytest.raises(PackError, match="KiB compressed"):
        pack_job(job)


def test_a_secret_anywhere_in_the_job_is_refused_without_its_value(tmp_path) -> None:
    job = make_job(tmp_path / "job")
    (job / "notes" / "deep.md").write_text("x" * 100_000 + "sk-abcdefgh1234" + "y" * 10)
    with pytest.raises(PackError) as caught:
        pack_job(job, [("$OPENAI_API_KEY", "sk-abcdefgh1234")])
    assert "notes/deep.md holds the value of $OPENAI_API_KEY" in str(caught.value)
    assert "sk-abcdefgh1234" not in str(caught.value)
    assert pack_job(job, [("short", "abc")])  # too short to be a key: no false alarm on "abc"
