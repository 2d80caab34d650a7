"""The job's file catalogue (seed 003 phase 2, option A) and the agent's find_files: what it holds, what it leaves
out, how little a refresh reads, its bounds, and hostile folders (a FIFO, links out, hard links, escape sequences
in first lines, newlines in names, 100,000 files)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from console.engine import events as ev
from console.engine.file_index import HEAD_CHARS, MAX_FILES, FileIndex, first_lines, index_for, terms_of
from console.engine.messages import ToolCall
from console.engine.runtime import Runtime
from console.engine.sandbox import FileInfo, Sandbox
from console.engine.tools import BUILTIN_TOOL_NAMES, ToolOutcome, default_registry
from tests.hostile import ATTACK, SHOWN, raw_controls

REG = default_registry(file_index=True)
OLD = 1_000_000_000.0  # an mtime long past (files written by a test are otherwise "racy" for two seconds)
LATER = lambda: 2_000_000_000.0  # noqa: E731 - the wall clock of an index that sees every file as settled


def write(root: Path, rel: str, data: str | bytes, mtime: float | None = OLD) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


@pytest.fixture
def job(tmp_path: Path) -> Path:
    root = tmp_path / "job"
    write(root, "instructions.md", "# Task\n\nExtract the requirements.\n")
    write(root, "src/auth/login.py", '"""Authentication: login and logout."""\n\nimport os\n')
    write(root, "docs/spec.md", "# Specification\n\nThe system shall authenticate users.\n")
    return root


@pytest.fixture
def sb(job: Path) -> Sandbox:
    with Sandbox(job) as sandbox:
        yield sandbox


def names(index: FileIndex, query: str, limit: int = 10) -> list[str]:
    return [e.rel for e in index.query(terms_of(query), limit)[0]]


def find(rt: Runtime, **args: Any) -> ToolOutcome:
    parsed = REG.parse(ToolCall(id="c1", name="find_files", arguments=json.dumps(args)))
    if isinstance(parsed, ToolOutcome):
        return parsed
    return REG.run(rt, *parsed)


# -- what it holds ------------------------------------------------------------------------------------------------
def test_each_file_has_its_path_size_and_first_lines(sb: Sandbox, job: Path) -> None:
    index = FileIndex(wall=LATER)
    r = index.refresh(sb)
    assert (r.files, r.read, r.binary, r.pending, r.truncated) == (3, 3, 0, 0, False)
    e = index.entry("src/auth/login.py")
    assert e is not None and e.size == (job / "src/auth/login.py").stat().st_size
    assert e.head == '"""Authentication: login and logout.""" ⏎ import os'  # blank lines dropped
    write(job, "long.md", "word " * 500)
    index.refresh(sb)
    assert len(index.entry("long.md").head) == HEAD_CHARS


def test_first_lines_of_text_and_of_binary() -> None:
    assert first_lines(b"a\n\n  b  \r\nc") == "a ⏎ b ⏎ c"
    assert first_lines(b"") == ""
    assert first_lines(b"PNG\x00\x01") is None  # a NUL: binary
    assert first_lines(bytes(range(128, 256)) * 4) is None  # mostly not UTF-8
    assert first_lines("héllo wörld".encode() + "é".encode()[:1]) == "héllo wörld"  # a character cut at the end
    assert first_lines("café, naïve: déjà vu".encode("latin-1")) is not None  # a few stray bytes: still text


def test_binary_generated_hidden_and_harness_files_are_left_out(sb: Sandbox, job: Path) -> None:
    write(job, "logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR auth")
    write(job, "node_modules/auth-lib/index.js", "// auth")
    write(job, "web/node_modules/auth/x.js", "// auth")
    write(job, "pkg/__pycache__/auth.cpython-311.pyc", "auth")
    write(job, ".git/auth", "auth")
    write(job, ".env", "AUTH_TOKEN=secret")
    write(job, ".console/auth.json", "{}")
    index = FileIndex(wall=LATER)
    r = index.refresh(sb)
    assert (r.files, r.binary) == (3, 1)
    assert names(index, "auth") == ["src/auth/login.py", "docs/spec.md"]
    r2 = index.refresh(sb)
    assert r2.read == 0  # the binary file is remembered as binary, not read again


# -- refreshing ---------------------------------------------------------------------------------------------------
def test_a_refresh_reads_only_new_and_changed_files(sb: Sandbox, job: Path) -> None:
    index = FileIndex(wall=LATER)
    assert index.refresh(sb).read == 3
    assert (index.refresh(sb).read, index.refresh(sb).removed) == (0, 0)
    write(job, "docs/spec.md", "# Specification v2\n\nLonger now.\n")  # another size
    write(job, "src/auth/login.py", '"""Authorisation: login and logout."""\n\nimport os\n', mtime=OLD + 5)  # same size
    write(job, "new.md", "# New\n")
    (job / "instructions.md").unlink()
    r = index.refresh(sb)
    assert (r.read, r.removed, r.files) == (3, 1, 3)
    assert index.entry("src/auth/login.py").head.startswith('"""Authorisation')
    assert names(index, "specification v2")[0] == "docs/spec.md"
    assert index.refresh(sb).read == 0


def test_a_file_read_while_it_was_still_changing_is_read_again(sb: Sandbox, job: Path) -> None:
    """Two writes of the same size within one timestamp tick look unchanged: an entry read less than two seconds
    after its mtime is read again at the next refresh (git's racy entries)."""
    now = [OLD + 1]
    index = FileIndex(wall=lambda: now[0])
    assert index.refresh(sb).read == 3
    write(job, "docs/spec.md", "# Specification\n\nThe system shall authorise users.\n", mtime=OLD)  # same size
    assert index.refresh(sb).read == 3  # all three were within the racy window: read again
    assert "authorise" in index.entry("docs/spec.md").head
    now[0] = OLD + 10
    assert index.refresh(sb).read == 3  # the last read was still racy (its wall clock was OLD + 1)
    assert index.refresh(sb).read == 0  # settled


def test_reading_is_bounded_in_time_and_what_is_left_is_matched_by_its_path(sb: Sandbox, job: Path) -> None:
    ticks = iter(range(1000))
    index = FileIndex(read_seconds=1.5, monotonic=lambda: float(next(ticks)), wall=LATER)
    r = index.refresh(sb)
    assert (r.read, r.pending) == (1, 2)  # the clock moves one second per look: one file read in time
    assert index.entry("src/auth/login.py").read is False
    assert names(index, "login") == ["src/auth/login.py"]  # by its path
    assert names(index, "logout") == []  # its first lines are not known yet
    index.read_seconds = 100.0
    r = index.refresh(sb)
    assert (r.read, r.pending) == (2, 0)
    assert names(index, "logout") == ["src/auth/login.py"]


def test_out_of_time_an_unchanged_entry_keeps_what_was_read(sb: Sandbox, job: Path) -> None:
    index = FileIndex(wall=lambda: OLD + 1)  # every entry racy: each would be read again
    index.refresh(sb)
    index.read_seconds = 0.0
    r = index.refresh(sb)
    assert r.read == 0 and r.pending == 0
    assert "logout" in index.entry("src/auth/login.py").head


def test_the_number_of_files_is_bounded(sb: Sandbox, job: Path) -> None:
    for i in range(20):
        write(job, f"many/f{i:02d}.txt", f"file {i}")
    index = FileIndex(max_files=10, wall=LATER)
    r = index.refresh(sb)
    assert r.truncated and len(index) == 10 and r.read == 10


# -- querying -----------------------------------------------------------------------------------------------------
def test_more_words_matched_then_the_name_then_shallower_paths_rank_first(sb: Sandbox, job: Path) -> None:
    write(job, "a/b/c/auth.md", "notes")
    write(job, "auth.md", "notes")
    write(job, "readme.md", "How auth works")
    index = FileIndex(wall=LATER)
    index.refresh(sb)
    assert names(index, "AUTH") == ["auth.md", "a/b/c/auth.md", "src/auth/login.py", "readme.md",
                                    "docs/spec.md"]
    assert names(index, "auth login")[0] == "src/auth/login.py"  # both words
    assert names(index, "auth", limit=2) == ["auth.md", "a/b/c/auth.md"]
    assert index.query(terms_of("auth"), 2)[1] == 5
    assert names(index, "auth login") == names(index, "auth login")  # deterministic
    assert names(index, "nothing-like-this") == []


def test_terms_are_words_each_once_and_bounded() -> None:
    assert terms_of("  Auth  login AUTH\tx ") == ["auth", "login", "x"]
    assert terms_of("   ") == []
    assert len(terms_of(" ".join(f"w{i}" for i in range(50)))) == 8
    assert terms_of("y" * 500) == ["y" * 100]


# -- the tool -------------------------------------------------------------------------------------------------------
@pytest.fixture
def rt(make_job, clock) -> Runtime:
    paths = make_job(files={"src/auth/login.py": '"""Authentication: login and logout."""\n',
                            "docs/spec.md": "# Specification\n"})
    return Runtime(paths, clock, ev.EventStream(paths.events, clock))


def test_find_files_is_a_tool_only_when_the_job_asks_for_it() -> None:
    assert "find_files" not in default_registry().names
    assert "find_files" in REG.names and "find_files" in BUILTIN_TOOL_NAMES
    assert "find_files" in REG.guide()


def test_find_files_answers_path_size_and_first_lines(rt: Runtime) -> None:
    out = find(rt, query="auth")
    assert out.ok
    size = (rt.paths.root / "src/auth/login.py").stat().st_size
    assert out.content == (f"1 of 3 indexed files match 'auth' (path, size, first lines):\n"
                           f'src/auth/login.py ({size} bytes): """Authentication: login and logout."""')
    none = find(rt, query="kubernetes")
    assert none.ok and none.content.startswith("No indexed file matches 'kubernetes' (3 files indexed")
    many = find(rt, query="md py", limit=1)
    assert many.content.splitlines()[0] == "3 of 3 indexed files match 'md py'; the best 1 (path, size, first lines):"
    assert len(many.content.splitlines()) == 2


def test_find_files_sees_a_file_written_a_moment_ago(rt: Runtime) -> None:
    assert "todo.txt" not in find(rt, query="todo").content
    parsed = REG.parse(ToolCall(id="w", name="write_file", arguments=json.dumps(
        {"path": "notes/todo.txt", "content": "Remember the milk"})))
    assert not isinstance(parsed, ToolOutcome)
    assert REG.run(rt, *parsed).ok
    assert "notes/todo.txt (17 bytes): Remember the milk" in find(rt, query="milk").content


@pytest.mark.parametrize(("args", "needle"), [
    ({"query": ""}, "'query': String should have at least 1 character"),
    ({"query": "x" * 201}, "'query': String should have at most 200 characters"),
    ({"query": "auth", "limit": 51}, "'limit': Input should be less than or equal to 50"),
    ({"query": "auth", "limit": 0}, "'limit': Input should be greater than or equal to 1"),
    ({"query": "auth", "path": "."}, "'path': unknown argument"),
])
def test_find_files_arguments_are_checked(rt: Runtime, args: dict, needle: str) -> None:
    out = find(rt, **args)
    assert not out.ok and needle in out.content, out.content


def test_a_blank_query_is_an_error_that_says_what_to_give(rt: Runtime) -> None:
    out = find(rt, query=" \t ")
    assert not out.ok and "give one or more words to look for" in out.content


# -- hostile folders ------------------------------------------------------------------------------------------------
def test_a_fifo_a_link_out_a_hard_link_escapes_and_newlines_are_handled(rt: Runtime, tmp_path: Path) -> None:
    root = rt.paths.root
    outside = write(tmp_path, "outside/secret.txt", "TOP SECRET auth")
    os.mkfifo(root / "auth-pipe.txt")  # a read would block forever
    (root / "auth-link.txt").symlink_to(outside)
    (root / "auth-dir").symlink_to(outside.parent, target_is_directory=True)
    os.link(outside, root / "auth-hard.txt")  # the same inode as a file outside
    (root / "auth-inside.txt").symlink_to("src/auth/login.py")  # inside: as good as the file
    write(root, "evil.md", f"auth {ATTACK}\nsecond line")
    write(root, "auth\nforged.py (1 bytes): fake", "x")
    out = find(rt, query="auth")
    assert out.ok
    assert "TOP SECRET" not in out.content and "secret.txt" not in out.content
    assert all(bad not in out.content for bad in ("auth-pipe", "auth-link", "auth-dir", "auth-hard"))
    assert "auth-inside.txt" in out.content
    assert f"evil.md ({(root / 'evil.md').stat().st_size} bytes): auth {SHOWN} ⏎ second line" in out.content
    assert "auth\\nforged.py (1 bytes): fake (1 bytes): x" in out.content  # the newline shown, one line
    assert not raw_controls(out.content)
    lines = out.content.splitlines()
    assert len(lines) == 1 + int(lines[0].split(" of ")[0])  # one line per file: no name forged a line


def test_a_file_swapped_for_a_fifo_after_the_walk_is_left_out(sb: Sandbox, job: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    os.mkfifo(job / "swapped.txt")
    real = sb.walk

    def walk(*args: Any, **kw: Any) -> list[FileInfo]:  # as if it had been a regular file when listed
        return [*real(*args, **kw), FileInfo("swapped.txt", "file", 10, OLD, 1)]

    monkeypatch.setattr(sb, "walk", walk)
    index = FileIndex(wall=LATER)
    r = index.refresh(sb)
    assert r.files == 3 and index.entry("swapped.txt") is None


def test_a_folder_of_many_more_files_than_the_index_holds_is_bounded(rt: Runtime) -> None:
    big = rt.paths.root / "big"
    big.mkdir()
    fd = os.open(big, os.O_RDONLY | os.O_DIRECTORY)
    n = 2 * MAX_FILES + 1  # twice over the bound shows it as well as ten times, at a fifth of the files made
    try:
        for i in range(n):
            os.close(os.open(f"f{i:06d}.txt", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fd))
    finally:
        os.close(fd)
    out = find(rt, query=f"f{n - 1:06d} auth", limit=50)
    assert out.ok
    index = index_for(rt.sandbox)
    assert len(index) == MAX_FILES and index.last is not None and index.last.truncated
    assert index.last.read <= MAX_FILES
    assert f"[the folder has more than {MAX_FILES} files: only the first {MAX_FILES} are indexed" in out.content
    assert len(out.content) < 10_000
    assert index.refresh(rt.sandbox).read <= MAX_FILES  # files just written are read again, never more
