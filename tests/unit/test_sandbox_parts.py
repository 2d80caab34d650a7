"""Each part of the sandbox built alone, on a Root of its own, without a Sandbox (test_sandbox.py tests the door
whole, through its public face)."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.engine.sandbox import SandboxError
from console.engine.sandbox.guards import Guards
from console.engine.sandbox.listing import Listing
from console.engine.sandbox.quota import Quota
from console.engine.sandbox.resolve import Resolver
from console.engine.sandbox.root import Root
from console.engine.sandbox.temp import TempFiles
from console.engine.sandbox.writes import Writes

PACKAGE = Path(__file__).resolve().parents[2] / "console" / "engine" / "sandbox"


@pytest.fixture
def job(tmp_path: Path) -> Path:
    root = tmp_path / "job"
    (root / ".console").mkdir(parents=True)
    (root / ".console" / "todos.json").write_text("{}")
    (root / "job.toml").write_text('endpoint = "https://example.invalid"\n')
    (root / "notes.md").write_text("hello\n")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("bb")
    return root


@pytest.fixture
def root(job: Path) -> Iterator[Root]:
    r = Root(job, openat2=False)
    yield r
    r.close()


def test_root_holds_the_folder_by_fd_and_scans_it_without_the_harness_folder(root: Root, job: Path) -> None:
    assert root.path == job.resolve() and root.dir_key(root.fd) == root.key == (job.stat().st_dev,
                                                                                 job.stat().st_ino)
    seen: list[str] = []
    root.scan(lambda _fd, entry: seen.append(entry.name))
    assert sorted(seen) == ["b.txt", "job.toml", "notes.md"]  # never todos.json, in the harness folder
    root.release(root.fd)  # the root's own fd is never closed by a part
    os.fstat(root.fd)
    root.close()
    assert root.fd == -1
    root.close()  # twice is fine


def test_root_keeps_the_tool_docs_folder(root: Root, job: Path) -> None:
    (job / "tools").mkdir()
    assert not root.in_kept_folder(root.fd, "tools")
    root.keep_folder("tools")
    assert root.kept_dir is not None and root.in_kept_folder(root.fd, "TOOLS")
    fd = os.open(job / "tools", os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert root.in_kept_folder(fd, "anything.md")  # in it, by the folder's key, whatever the name
    finally:
        os.close(fd)
    assert "tools/ holds the tool docs" in root.kept_folder_refusal("tools/x.md")
    root.keep_folder(None)
    assert not root.in_kept_folder(root.fd, "tools")


def test_a_root_of_a_missing_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Root(tmp_path / "absent")


@pytest.mark.parametrize("openat2", [None, False], ids=["openat2-if-any", "walk"])
def test_resolver_alone_opens_beneath_the_root_and_refuses_the_way_out(job: Path, tmp_path: Path,
                                                                      openat2: bool | None) -> None:
    (tmp_path / "secret.txt").write_text("secret")
    (job / "sub" / "up").symlink_to("../notes.md")
    (job / "sub" / "out").symlink_to(tmp_path / "secret.txt")
    root = Root(job, openat2=openat2)
    try:
        resolver = Resolver(root)
        assert resolver.check("./sub//b.txt") == ("sub/b.txt", ["sub", "b.txt"], "./sub//b.txt")
        for bad, why in (("../x", "'..' would leave"), ("/etc/passwd", "absolute paths"),
                         (".console/todos.json", "harness's own state")):
            with pytest.raises(SandboxError, match=why):
                resolver.check(bad)
        fd = resolver.open_target(["sub", "up"], "sub/up", os.O_RDONLY)
        try:
            assert os.read(fd, 10) == b"hello\n"
        finally:
            os.close(fd)
        with pytest.raises(SandboxError, match="leads outside the job folder"):
            resolver.open_target(["sub", "out"], "sub/out", os.O_RDONLY)
        parent, name = resolver.locate(["sub", "up"], "sub/up")  # where a write through the link lands
        try:
            assert name == "notes.md" and resolver.proc_rel(parent) in (".", None)
        finally:
            root.release(parent)
    finally:
        root.close()
    with pytest.raises(SandboxError, match="the job folder is closed"):
        resolver.check("notes.md")


def test_guards_alone_refuse_the_operators_files_and_what_a_protected_link_leads_to(root: Root, job: Path) -> None:
    (job / "real.md").write_text("the instructions")
    (job / "instructions.md").symlink_to("real.md")
    root.close()
    root = Root(job, openat2=False)
    try:
        guards = Guards(root, Resolver(root), protected=("job.toml", "instructions.md"))
        for name in ("job.toml", "JOB.TOML", "real.md"):
            with pytest.raises(SandboxError, match="only the operator may change"):
                guards.name(root.fd, name, name)
        guards.name(root.fd, "notes.md", "notes.md")  # anything else may be written
        for bad, why in ((".git/config", "repository's control folder"), (".", "is a folder, not a file")):
            with pytest.raises(SandboxError, match=why):
                guards.file_path(bad)
        os.link(job / "notes.md", job / "twin.md")
        with pytest.raises(SandboxError, match="several hard links"):
            guards.open_regular("twin.md")
        fd, st, shown = guards.open_regular("sub/b.txt")
        os.close(fd)
        assert (st.st_size, shown) == (2, "sub/b.txt")
    finally:
        root.close()


def test_quota_alone_counts_the_folder_and_refuses_past_its_limits(root: Root) -> None:
    quota = Quota(root, max_write_bytes=10, max_job_bytes=100)
    assert quota.job_bytes() == len('endpoint = "https://example.invalid"\n') + len("hello\n") + 2
    with pytest.raises(SandboxError, match="over the limit of 10 bytes for one write"):
        quota.check_write_size(11, "big.txt")
    quota.set_job_bytes(90)
    quota.check_growth(10, "a.txt")
    with pytest.raises(SandboxError, match="would grow to 101 bytes"):
        quota.reserve(11, "a.txt")
    quota.reserve(10, "a.txt")
    assert quota.job_bytes() == 100
    quota.release(10)
    assert quota.job_bytes() == 90


def test_temp_files_alone_replace_a_file_at_once_and_clean_what_a_kill_left(root: Root, job: Path) -> None:
    temp = TempFiles(root)
    (job / "run.sh").write_text("old")
    (job / "run.sh").chmod(0o755)
    temp.replace(root.fd, "run.sh", b"new", os.stat(job / "run.sh"), durable=True)
    assert (job / "run.sh").read_text() == "new" and os.stat(job / "run.sh").st_mode & 0o777 == 0o755
    assert list((job / ".console" / "tmp").iterdir()) == []  # the temp was made there, never beside the file
    (job / ".console" / "tmp" / "left.tmp").write_text("x")
    assert temp.clean_tmp() == 1
    temp.close()
    temp.close()


def test_writes_alone_write_and_append_through_the_guards_and_the_quota(root: Root, job: Path) -> None:
    resolver = Resolver(root)
    quota = Quota(root, max_write_bytes=1000, max_job_bytes=10_000)
    temp = TempFiles(root)
    writes = Writes(root, resolver, Guards(root, resolver, ("job.toml",)), quota, temp)
    before = quota.job_bytes()
    assert writes.write_bytes("new/a.txt", b"abc").existed is False
    assert writes.append_bytes("new/a.txt", b"de").new_size == 5
    assert (job / "new" / "a.txt").read_bytes() == b"abcde" and quota.job_bytes() == before + 5
    with pytest.raises(SandboxError, match="only the operator may change"):
        writes.check_writable("job.toml")
    temp.close()


def test_listing_alone_walks_in_order_without_the_harness_folder(root: Root, job: Path) -> None:
    (job / ".hidden").mkdir()
    (job / ".hidden" / "x").write_text("x")
    listing = Listing(root, Resolver(root))
    assert [f.rel for f in listing.walk()] == ["job.toml", "notes.md", "sub/b.txt"]
    assert [f.rel for f in listing.walk("sub")] == ["sub/b.txt"]
    assert listing.walk(limit=1)[0].rel == "job.toml"


def test_the_sandbox_is_one_class_over_parts_not_a_chain() -> None:
    """No class of the door extends another of its classes (the refusals may: they are exceptions), and no
    module of it is longer than 300 lines."""
    defined: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.glob("*.py")):
        assert len(path.read_text().splitlines()) <= 300, path.name
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                defined[node.name] = [b.id for b in node.bases if isinstance(b, ast.Name)]
    chained = {name: bases for name, bases in defined.items()
               if any(b in defined for b in bases) and "SandboxError" not in bases}
    assert {"Sandbox", "Root", "Resolver", "Guards", "Quota", "TempFiles", "Writes", "Listing"} <= set(defined)
    assert chained == {}
