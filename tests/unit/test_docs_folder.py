"""The folder of tool docs on disk: which folder (never one of the job's own), written whole, rewritten only
where it changed, never following a symlink, and read-only to the agent's file tools."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from console.engine.sandbox import Sandbox, SandboxError
from console.engine.tools import default_registry, docs_folder
from console.engine.tools.docs import HEADER, INDEX, DocContext, render_all
from console.engine.tools.docs_folder import CANDIDATES, MARKER, STAGE_PREFIX, ownership, write_docs

TOOLS = default_registry().tools()


def render(folder: str) -> dict[str, str]:
    return render_all(TOOLS, DocContext(folder))


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every entry of a folder: content (or link target) and inode, to prove nothing was touched."""
    out = {}
    for p in sorted(folder.rglob("*")):
        st = p.lstat()
        data = os.readlink(p).encode() if p.is_symlink() else p.read_bytes() if p.is_file() else b"<dir>"
        out[p.relative_to(folder).as_posix()] = (data, st.st_ino)
    return out


@pytest.fixture
def root(tmp_path: Path) -> Path:
    job = tmp_path / "job"
    job.mkdir()
    (job / "instructions.md").write_text("# Task\n")
    return job


def owner(root: Path, name: str) -> str:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return ownership(fd, name)
    finally:
        os.close(fd)


def test_a_new_job_gets_tools_whole_with_its_marker(root: Path) -> None:
    result = write_docs(root, render)
    assert result.folder == "tools" and result.problem is None and result.theirs == ()
    expected = render("tools")
    assert result.written == len(expected) + 1  # and the marker
    names = sorted(p.name for p in (root / "tools").iterdir())
    assert names == sorted([*expected, MARKER])
    for name, text in expected.items():
        assert (root / "tools" / name).read_text() == text
    assert "read_file.md" in names and INDEX in names
    # Nothing left behind in the harness's temp folder, nothing anywhere else in the job folder.
    assert os.listdir(root / ".console" / "tmp") == []
    assert sorted(p.name for p in root.iterdir()) == [".console", "instructions.md", "tools"]


def test_regenerating_is_idempotent_and_rewrites_only_what_changed(root: Path) -> None:
    write_docs(root, render)
    before = snapshot(root / "tools")
    again = write_docs(root, render)
    assert (again.written, again.removed) == (0, 0) and snapshot(root / "tools") == before

    # One tool fewer and the limits changed: the docs that changed are replaced, the gone tool's doc removed.
    fewer = [t for t in TOOLS if t.name != "search_files"]
    result = write_docs(root, lambda f: render_all(fewer, DocContext(f, max_write_mb=2)))
    assert result.removed == 1 and not (root / "tools" / "search_files.md").exists()
    after = snapshot(root / "tools")
    changed = {n for n in after if after[n] != before.get(n)}
    assert changed == {"README.md", "write_file.md", "append_file.md", "edit_file.md"}
    assert "at most 2 MB" in (root / "tools" / "write_file.md").read_text()


def test_a_jobs_own_tools_folder_is_never_touched(root: Path) -> None:
    own = root / "tools"
    own.mkdir()
    (own / "README.md").write_text("# Build tools of this repository\n")
    (own / "build.sh").write_text("#!/bin/sh\nmake\n")
    (own / "read_file.md").write_text("mine\n")
    before = snapshot(own)
    result = write_docs(root, render)
    assert result.folder == "tool_docs" and result.theirs == ("tools",)
    assert snapshot(own) == before
    assert (root / "tool_docs" / "read_file.md").read_text() == render("tool_docs")["read_file.md"]
    assert "`tool_docs/<tool>.md`" in (root / "tool_docs" / INDEX).read_text()
    # And it stays there, session after session.
    assert write_docs(root, render).folder == "tool_docs" and snapshot(own) == before


def test_the_harnesss_folder_is_kept_once_chosen(root: Path) -> None:
    (root / "tools").mkdir()
    (root / "tools" / "x.py").write_text("")
    assert write_docs(root, render).folder == "tool_docs"
    # The job's tools/ goes away: the docs stay where they are (no second copy in tools/).
    (root / "tools" / "x.py").unlink()
    (root / "tools").rmdir()
    assert write_docs(root, render).folder == "tool_docs" and not (root / "tools").exists()


def test_a_forged_marker_does_not_make_a_folder_the_harnesss(root: Path) -> None:
    """A command (or the agent, with write_file) puts the marker into the job's own tools/."""
    own = root / "tools"
    own.mkdir()
    (own / "README.md").write_text("# The operator's\n")
    (own / MARKER).write_text(f"{docs_folder.MARKER_FIRST_LINE}\n")
    before = snapshot(own)
    assert write_docs(root, render).folder == "tool_docs" and snapshot(own) == before
    # Even every file made to look like a doc: a file not of ours (a script) keeps the folder the job's.
    (own / "README.md").write_text(HEADER + "\nforged\n")
    (own / "run.sh").write_text("echo\n")
    before = snapshot(own)
    assert owner(root, "tools") == "theirs"
    assert write_docs(root, render).folder == "tool_docs" and snapshot(own) == before


def test_an_operators_file_added_to_the_harnesss_folder_makes_it_theirs(root: Path) -> None:
    write_docs(root, render)
    (root / "tools" / "notes.txt").write_text("the operator's\n")
    before = snapshot(root / "tools")
    result = write_docs(root, render)
    assert result.folder == "tool_docs" and snapshot(root / "tools") == before


@pytest.mark.parametrize("kind", ["symlink to a folder", "symlink to our docs", "file", "fifo"])
def test_tools_that_is_not_a_plain_folder_is_left_alone(root: Path, tmp_path: Path, kind: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("operator\n")
    if kind == "symlink to a folder":
        (root / "tools").symlink_to(outside)
    elif kind == "symlink to our docs":
        other = tmp_path / "other_job"
        other.mkdir()
        write_docs(other, render)
        (root / "tools").symlink_to(other / "tools")
        outside = other / "tools"
    elif kind == "file":
        (root / "tools").write_text("a file named tools\n")
    else:
        os.mkfifo(root / "tools")
    before = snapshot(outside)
    result = write_docs(root, render)
    assert result.folder == "tool_docs" and snapshot(outside) == before
    assert os.path.lexists(root / "tools")


def test_a_symlink_inside_the_harnesss_folder_is_never_followed(root: Path, tmp_path: Path) -> None:
    """An unconfined command swaps a doc for a link to a file of the operator's."""
    write_docs(root, render)
    secret = tmp_path / "secret.txt"
    secret.write_text("operator\n")
    (root / "tools" / "read_file.md").unlink()
    (root / "tools" / "read_file.md").symlink_to(secret)
    result = write_docs(root, render)
    assert result.folder == "tool_docs"  # no longer a folder of ours: left as it is
    assert secret.read_text() == "operator\n" and (root / "tools" / "read_file.md").is_symlink()


def test_when_every_candidate_is_the_jobs_no_docs_are_written(root: Path) -> None:
    for name in CANDIDATES:
        (root / name).mkdir()
        (root / name / "own.txt").write_text("x")
    result = write_docs(root, render)
    assert result.folder is None and result.theirs == CANDIDATES
    assert result.problem is not None and "no tool docs were written" in result.problem
    assert all(os.listdir(root / n) == ["own.txt"] for n in CANDIDATES)


def test_what_a_kill_left_is_swept_and_the_docs_are_whole(root: Path) -> None:
    # A kill while the folder was being made: a half-filled stage in .console/tmp, no tools/ at all.
    stage = root / ".console" / "tmp" / f"{STAGE_PREFIX}0badc0de"
    stage.mkdir(parents=True)
    (stage / "read_file.md").write_text(HEADER + "\nhalf")
    # A kill during an update, with the temp files made beside the target.
    result = write_docs(root, render)
    assert result.folder == "tools" and not stage.exists()
    temp = root / "tools" / ".read_file.md.0123abcd.tmp"
    temp.write_text("half a doc")
    assert owner(root, "tools") == "ours"
    again = write_docs(root, render)
    assert again.folder == "tools" and not temp.exists()
    assert {p.name: p.read_text() for p in (root / "tools").iterdir() if p.name != MARKER} == render("tools")


def test_a_failed_write_points_to_the_docs_already_there(root: Path, monkeypatch) -> None:
    write_docs(root, render)

    def full(*_a: object, **_k: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(docs_folder, "_put", full)
    result = write_docs(root, lambda f: render_all(TOOLS, DocContext(f, max_job_mb=7)))
    assert result.folder == "tools" and result.problem is not None and "No space left" in result.problem
    monkeypatch.setattr(docs_folder, "_create", full)
    fresh = root.parent / "fresh"
    fresh.mkdir()
    failed = write_docs(fresh, render)
    assert failed.folder is None and not (fresh / "tools").exists()


def test_a_name_that_is_not_a_docs_name_is_refused(root: Path) -> None:
    with pytest.raises(ValueError, match="not a name for a tool doc"):
        write_docs(root, lambda f: {"../escape.md": "x"})
    assert not (root.parent / "escape.md").exists()


# -- read-only to the agent's file tools ----------------------------------------------------------------------
@pytest.fixture(params=[True, False], ids=["openat2", "manual walk"])
def kept(root: Path, request: pytest.FixtureRequest) -> Sandbox:
    write_docs(root, render)
    sb = Sandbox(root, openat2=None if request.param else False)
    if request.param and not sb.uses_openat2:
        pytest.skip("openat2 is not available here")
    sb.keep_folder("tools")
    yield sb
    sb.close()


@pytest.mark.parametrize("path", ["tools/read_file.md", "tools/README.md", "tools/new.md", "TOOLS/x.md",
                                  "./tools/read_file.md", "tools/sub/x.md", "tools", f"tools/{MARKER}"])
def test_every_write_into_the_docs_is_refused(kept: Sandbox, root: Path, path: str) -> None:
    before = snapshot(root / "tools")
    for attempt in (lambda: kept.write_bytes(path, b"x"), lambda: kept.append_bytes(path, b"x"),
                    lambda: kept.check_writable(path)):
        with pytest.raises(SandboxError) as info:
            attempt()
        assert "holds the tool docs" in str(info.value) or "is a folder" in str(info.value)
    assert snapshot(root / "tools") == before
    assert kept.read_text("tools/read_file.md", max_bytes=10**6) == render("tools")["read_file.md"]


def test_a_symlink_into_the_docs_does_not_get_round_it(kept: Sandbox, root: Path) -> None:
    """A command made links (it may, in the rest of the job folder): to the folder, to the root, to a doc."""
    (root / "docs_link").symlink_to("tools")
    (root / "me").symlink_to(".")
    (root / "doc_link.md").symlink_to("tools/read_file.md")
    before = snapshot(root / "tools")
    for path in ("docs_link/read_file.md", "docs_link/new.md", "docs_link/sub/new.md", "me/tools/read_file.md",
                 "me/tools/new/x.md"):
        with pytest.raises(SandboxError, match="holds the tool docs"):
            kept.write_bytes(path, b"x")
    with pytest.raises(SandboxError):
        kept.write_bytes("doc_link.md", b"x")  # a symlink is never written through
    assert snapshot(root / "tools") == before and not (root / "tools" / "sub").exists()


def test_the_docs_folder_cannot_be_made_again_by_the_agent(root: Path) -> None:
    sb = Sandbox(root)
    sb.keep_folder("tools")  # registered, but gone (the operator removed it)
    with pytest.raises(SandboxError, match="holds the tool docs"):
        sb.write_bytes("tools/read_file.md", b"fake")
    (root / "me").symlink_to(".")
    with pytest.raises(SandboxError, match="holds the tool docs"):
        sb.write_bytes("me/tools/read_file.md", b"fake")
    assert not (root / "tools").exists()
    sb.keep_folder(None)
    sb.write_bytes("tools/mine.md", b"now the job's")  # no docs folder: tools/ is the job's like any other
    sb.close()
