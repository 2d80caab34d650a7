"""Issue 32, point 2, through the file tools: the agent may read a repository's control files but never write them,
by any path (a link, a case variant, a nested repository, a folder shaped as a bare repository). Every test runs
with openat2 and with the manual walk, and without /proc (where the door climbs to tell where a folder is)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.engine.sandbox import Sandbox, SandboxError
from tests.unit.test_sandbox import make

FSMONITOR = "[core] fsmonitor = \"sh -c 'touch /tmp/PWNED; false'\"\n"
# (git), (Mercurial) or (jj): the version control that runs it follows.
INSIDE = "is a repository's control folder, whose config and hooks the operator's version control ("


@pytest.fixture(params=["openat2", "walk", "no-proc"])
def sb(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    root = tmp_path / "job"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".git" / "objects").mkdir()
    (root / ".git" / "refs").mkdir()
    (root / "instructions.md").write_text("# Job\n")
    (root / "sub").mkdir()
    box = make(root, request.param == "openat2")
    if request.param == "no-proc":
        monkeypatch.setattr(box.resolver, "proc_rel", lambda _fd: None)
    yield box
    box.close()


def refused(fn, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(SandboxError) as info:
        fn(*args)
    return str(info.value)


def test_the_agent_cannot_append_fsmonitor_to_git_config(sb: Sandbox) -> None:
    """Found: append_file('.git/config', '[core] fsmonitor = ...') ran as the operator at their next git status."""
    before = (sb.root / ".git" / "config").read_bytes()
    msg = refused(sb.append_bytes, ".git/config", FSMONITOR.encode())
    assert msg.startswith("'.git/config' is refused: a folder named .git " + INSIDE + "git) runs on their machine")
    assert "write_bytes" not in msg and (sb.root / ".git" / "config").read_bytes() == before
    assert "'.git/config' is refused" in refused(sb.write_bytes, ".git/config", FSMONITOR.encode())
    assert "'.git/config' is refused" in refused(sb.check_writable, ".git/config")  # edit_file asks first
    assert sb.read_text(".git/config", max_bytes=1000) == before.decode()  # reading stays allowed


@pytest.mark.parametrize("path", [".git/hooks/pre-commit", ".git/info/exclude", ".git/config.worktree",
                                  ".git/modules/lib/config", ".GIT/config", ".Git/hooks/post-checkout",
                                  "sub/.git/config", "sub/deeper/.git/hooks/pre-commit", ".hg/hgrc",
                                  "sub/.jj/repo/config.toml", "./.git//config", ".git\\config"])
def test_no_path_into_a_repositorys_control_files(sb: Sandbox, path: str) -> None:
    assert INSIDE in refused(sb.write_bytes, path, b"#!/bin/sh\ntouch /tmp/PWNED\n")
    assert INSIDE in refused(sb.append_bytes, path, b"x\n")
    assert not (sb.root / "sub" / ".git").exists() and not (sb.root / ".git" / "modules").exists()
    assert not (sb.root / ".hg").exists() and not (sb.root / "sub" / ".jj").exists()


@pytest.mark.parametrize("name", [".git", "sub/.git", "sub/.GIT", ".hg"])
def test_no_file_or_folder_named_git(sb: Sandbox, name: str) -> None:
    """A `.git` FILE (`gitdir: ...`) would make a repository of the folder, with the config the agent chose."""
    msg = refused(sb.write_bytes, name, b"gitdir: ../evil\n")
    tool = {".hg": "Mercurial", ".jj": "jj"}.get(name.lower(), "git")
    assert f"makes a repository whose config and hooks the operator's version control ({tool}) would run" in msg
    assert not (sb.root / name).exists() or name == ".git"


def test_a_link_to_the_git_folder_leads_nowhere_writable(sb: Sandbox) -> None:
    """A command can make links the file tools then follow: cfg -> .git, deep -> sub/.git's folder, .git/hooks."""
    os.symlink(".git", sb.root / "cfg")
    os.symlink(".git/hooks", sb.root / "h")
    (sb.root / "sub" / "repo" / ".git").mkdir(parents=True)
    os.symlink("sub/repo", sb.root / "r")
    for path in ("cfg/config", "h/pre-commit", "r/.git/config", "cfg/hooks/post-checkout"):
        assert INSIDE in refused(sb.write_bytes, path, FSMONITOR.encode()), path
    assert not (sb.root / ".git" / "hooks" / "pre-commit").exists()
    assert (sb.root / ".git" / "config").read_text() == "[core]\n\tbare = false\n"


def test_the_agent_cannot_build_a_bare_repository(sb: Sandbox) -> None:
    """git takes a folder holding HEAD, objects/ and refs/ for a bare repository when the operator cds into it, and
    runs what its config says: the write completing that shape is refused, and leaves no folder behind."""
    sb.write_bytes("evil/HEAD", b"ref: refs/heads/main\n")
    sb.write_bytes("evil/refs/heads/.keep", b"")
    sb.write_bytes("evil/config", FSMONITOR.encode())
    msg = refused(sb.write_bytes, "evil/objects/.keep", b"")
    assert msg == ("'evil/objects/.keep' is refused: it would make 'evil' hold HEAD, objects/ and refs/, the shape "
                   "of a git repository, whose config and hooks the operator's git would run on their machine; use "
                   "another name.")
    assert not (sb.root / "evil" / "objects").exists()
    if shutil.which("git"):  # and git agrees: it is no repository
        done = subprocess.run(["git", "-C", str(sb.root / "evil"), "rev-parse", "--git-dir"], capture_output=True,
                              env={"PATH": os.environ["PATH"], "GIT_CEILING_DIRECTORIES": str(sb.root),
                                   "HOME": str(sb.root)}, check=False)
        assert done.returncode != 0 and b"not a git repository" in done.stderr
    # The same shape the other way round: objects/ and refs/ first, then HEAD; or a commondir instead.
    sb.write_bytes("other/objects/.keep", b"")
    sb.write_bytes("other/refs/.keep", b"")
    assert "would make 'other' hold HEAD" in refused(sb.write_bytes, "other/HEAD", b"ref: refs/heads/x\n")
    sb.write_bytes("wt/HEAD", b"0" * 40 + b"\n")
    assert "would make 'wt' hold HEAD" in refused(sb.append_bytes, "wt/commondir", b"../other\n")


def test_a_folder_a_command_shaped_as_a_repository_is_not_written(sb: Sandbox) -> None:
    for name in ("HEAD", "objects", "refs"):
        (sb.root / "sub" / "bare" / name).mkdir(parents=True) if name != "HEAD" else None
    (sb.root / "sub" / "bare" / "HEAD").write_text("ref: refs/heads/main\n")
    for path in ("sub/bare/config", "sub/bare/hooks/post-checkout", "sub/bare/info/attributes", "sub/bare/x/y"):
        assert "'sub/bare' is shaped as a git repository" in refused(sb.write_bytes, path, FSMONITOR.encode())
    assert not (sb.root / "sub" / "bare" / "config").exists()
    sb.write_bytes("sub/notes.md", b"elsewhere is fine\n")  # the folders around it stay the agent's
    assert sb.read_text("sub/bare/HEAD", max_bytes=100) == "ref: refs/heads/main\n"


def test_ordinary_names_stay_writable(sb: Sandbox) -> None:
    for path in ("gitconfig", ".gitignore", ".gitattributes", ".github/workflows/ci.yml", "docs/.git-notes.md",
                 "HEAD", "refs/x.md", "git/config", "src/objects/a.py"):
        sb.write_bytes(path, b"ok\n")
        assert (sb.root / path).read_bytes() == b"ok\n"


def test_what_the_repository_runs_from_elsewhere_in_the_folder_is_not_written(tmp_path: Path) -> None:
    """A .git/hooks that links to a folder of the job (a common set-up), a config that is a link, core.hooksPath
    (husky's .husky/_): the operator's git runs or reads what is there, so the file tools write none of it."""
    root = tmp_path / "job"
    (root / ".git").mkdir(parents=True)
    (root / "githooks").mkdir()
    (root / "githooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (root / "githooks" / "pre-commit").chmod(0o755)
    (root / "cfg").write_text("[core]\n\thooksPath = .husky/_\n")
    os.symlink("../githooks", root / ".git" / "hooks")
    os.symlink("../cfg", root / ".git" / "config")
    (root / "instructions.md").write_text("# Job\n")
    for mode in (True, False):
        with make(root, mode) as box:
            for path in ("githooks/pre-commit", "githooks/post-checkout", "cfg", ".husky/_/pre-commit", ".husky/_"):
                msg = refused(box.write_bytes, path, b"#!/bin/sh\ntouch /tmp/PWNED\n")
                assert "is where the repository's .git has git read its config or run its hooks" in msg, (path, msg)
            box.write_bytes(".husky/pre-commit", b"npm test\n")  # the project's own script, as any other file
    assert (root / "githooks" / "pre-commit").read_text() == "#!/bin/sh\nexit 0\n"
    assert not (root / ".husky" / "_").exists()
