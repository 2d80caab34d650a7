"""The sandbox: every test runs with openat2 and with the manual walk, attacks included."""

from __future__ import annotations

import contextlib
import errno
import os
import platform
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from console.engine.sandbox import FileInfo, Sandbox, SandboxError, WriteResult, kernel, resolve

SECRET = b"TOP SECRET sk-live-123"
OUTSIDE_MSG = "it is a symlink that leads outside the job folder."
HARNESS_MSG = ".console/ holds the harness's own state. Use the todo and workspace tools instead."
PROTECTED_MSG = "is refused: it is part of the job's definition, which only the operator may change."


@pytest.fixture(params=[True, False], ids=["openat2", "walk"])
def mode(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def job(tmp_path: Path) -> Path:
    root = tmp_path / "job"
    (root / ".console").mkdir(parents=True)
    (root / ".console" / "todos.json").write_text('{"harness": "state"}')
    (root / "instructions.md").write_text("# Job\n")
    (root / "job.toml").write_text('endpoint = "https://example.invalid"\n')
    (root / "notes.md").write_text("hello\n")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("b")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_bytes(SECRET)
    return out


def make(root: Path, mode: bool, **kw: Any) -> Sandbox:
    try:
        return Sandbox(root, openat2=mode, **kw)
    except OSError as exc:  # pragma: no cover - only on kernels without openat2
        # Linux has had openat2 since 5.6: there, ENOSYS is a broken probe, not a reason to skip.
        if exc.errno == errno.ENOSYS and not _kernel_has_openat2():
            pytest.skip(f"openat2 is not available here: {exc}")
        raise


def _kernel_has_openat2() -> bool:
    release = platform.release().split("-")[0].split(".")
    try:
        return platform.system() == "Linux" and (int(release[0]), int(release[1])) >= (5, 6)
    except (IndexError, ValueError):
        return False


@pytest.fixture
def sb(job: Path, mode: bool) -> Iterator[Sandbox]:
    s = make(job, mode)
    assert s.uses_openat2 is mode
    yield s
    s.close()


def refused(fn: Callable[..., Any], *args: Any, **kw: Any) -> str:
    with pytest.raises(SandboxError) as info:
        fn(*args, **kw)
    return str(info.value)


def within(fn: Callable[[], Any], seconds: float = 2.0) -> Any:
    """Run fn in a thread: a hang fails the test instead of freezing the run."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    start = time.monotonic()
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"the call hung for over {seconds} s"
    assert time.monotonic() - start < seconds
    if "error" in box:
        raise box["error"]
    return box.get("value")


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def temps(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".agent-console.tmp")]


# -- the string --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "path, message",
    [
        ("", "the path is empty; give a path relative to the job folder, e.g. 'notes.md'"),
        ("   ", "the path is empty; give a path relative to the job folder, e.g. 'notes.md'"),
        ("/etc/passwd", "'/etc/passwd' is refused: absolute paths are not allowed. Use a path relative to the job "
                        "folder."),
        ("~/secrets", "'~/secrets' is refused: absolute paths are not allowed. Use a path relative to the job folder."),
        ("C:\\x.md", "'C:\\x.md' is refused: absolute paths are not allowed. Use a path relative to the job folder."),
        ("\\server\\x", "'\\server\\x' is refused: absolute paths are not allowed. Use a path relative to the job "
                        "folder."),
        ("../x.md", "'../x.md' is refused: '..' would leave the job folder. Stay inside it."),
        ("sub/../../x.md", "'sub/../../x.md' is refused: '..' would leave the job folder. Stay inside it."),
        ("sub\\..\\x.md", "'sub\\..\\x.md' is refused: '..' would leave the job folder. Stay inside it."),
        (".CONSOLE/x", f"'.CONSOLE/x' is refused: {HARNESS_MSG}"),
        ("./.console", f"'./.console' is refused: {HARNESS_MSG}"),
        ("x" * 300 + ".md", f"'{'x' * 80}...' is refused: a file name may be at most 255 bytes long."),
        ("é" * 128, f"'{'é' * 80}...' is refused: a file name may be at most 255 bytes long."),
        ("a/" * 2100, f"'{'a/' * 40}...' is refused: a path may be at most 4096 bytes long."),
    ],
)
def test_check_refuses_with_the_exact_message(sb: Sandbox, path: str, message: str) -> None:
    assert refused(sb.check, path) == message


def test_check_odd_characters(sb: Sandbox) -> None:
    msg = refused(sb.check, "a\x00b.md")
    assert "contains a NUL character" in msg and "\x00" not in msg
    msg = refused(sb.check, "a\ud800b.md")
    assert "lone surrogate" in msg and "\ud800" not in msg
    msg.encode("utf-8")  # a message is always valid text


def test_check_normalises(sb: Sandbox) -> None:
    assert sb.check("./sub//b.txt/") == "sub/b.txt"
    assert sb.check("sub\\b.txt") == "sub/b.txt"
    assert sb.check(" notes.md ") == "notes.md"
    assert sb.check(".") == sb.check("./") == sb.check(".//./") == "."
    assert sb.check("é" * 127) == "é" * 127  # 254 bytes
    assert sb.check("console/x") == "console/x"  # only the harness folder itself is off limits


# -- reading -----------------------------------------------------------------------------------------
def test_read(sb: Sandbox, job: Path) -> None:
    assert sb.read_bytes("notes.md", max_bytes=100) == b"hello\n"
    assert sb.read_text("./notes.md", max_bytes=6) == "hello\n"
    assert sb.read_head("notes.md", 3) == b"hel"
    assert sb.read_head("notes.md", 100) == b"hello\n"
    assert sb.read_head("notes.md", 0) == b""
    assert refused(sb.read_bytes, "notes.md", max_bytes=5) == (
        "'notes.md' is 6 bytes, over the limit of 5 bytes for one read. Use search_files to find the part you need.")
    assert refused(sb.read_bytes, "missing.md", max_bytes=9) == (
        "'missing.md' does not exist. Use list_files to see what is there.")
    assert "there is no folder 'nope'" in refused(sb.read_bytes, "nope/x.md", max_bytes=9)
    assert refused(sb.read_bytes, "sub", max_bytes=9) == "'sub' is a folder; use list_files to see its content."
    assert refused(sb.read_bytes, ".", max_bytes=9) == "'.' is a folder; use list_files to see its content."
    assert refused(sb.read_bytes, "notes.md/x", max_bytes=9) == (
        "'notes.md/x' is refused: 'notes.md' is a file, not a folder. Check the path.")
    big = job / "big.bin"
    big.write_bytes(b"x" * 200_000)
    assert sb.read_bytes("big.bin", max_bytes=200_000) == b"x" * 200_000
    assert sb.read_head("big.bin", 70_000) == b"x" * 70_000


def test_read_text_never_yields_a_lone_surrogate(sb: Sandbox, job: Path) -> None:
    (job / "bad.txt").write_bytes(b"\xed\xa0\x80 ok \xff\xfe \xf0\x9f\x98\x80")
    text = sb.read_text("bad.txt", max_bytes=100)
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in text)
    assert "ok" in text and "\U0001f600" in text
    text.encode("utf-8")


# -- symlinks ----------------------------------------------------------------------------------------
def test_symlinks_that_stay_inside_work(sb: Sandbox, job: Path) -> None:
    os.symlink("sub", job / "link")
    os.symlink("../notes.md", job / "sub" / "up.md")
    os.symlink(".", job / "me")
    os.symlink("chain2", job / "chain1")
    os.symlink("sub/up.md", job / "chain2")
    assert sb.read_bytes("link/b.txt", max_bytes=9) == b"b"
    assert sb.read_bytes("sub/up.md", max_bytes=9) == b"hello\n"
    assert sb.read_bytes("me/me/sub/b.txt", max_bytes=9) == b"b"
    assert sb.read_bytes("chain1", max_bytes=9) == b"hello\n"
    assert sb.write_bytes("link/new.md", b"new").existed is False
    assert (job / "sub" / "new.md").read_bytes() == b"new"
    assert sb.append_bytes("link/new.md", b"er").new_size == 5
    assert (job / "sub" / "new.md").read_bytes() == b"newer"
    assert sb.write_bytes("link/deeper/x.md", b"x").rel == "link/deeper/x.md"
    assert (job / "sub" / "deeper" / "x.md").read_bytes() == b"x"
    info = sb.info("link")
    assert info is not None and info.kind == "symlink"
    assert refused(sb.write_bytes, "chain1", b"x") == (
        "'chain1' is refused: it is a symbolic link, and the file tools write only regular files. Use another name.")
    assert "symbolic link" in refused(sb.append_bytes, "sub/up.md", b"x")
    assert (job / "notes.md").read_bytes() == b"hello\n"


def test_symlinks_that_leave_are_refused(sb: Sandbox, job: Path, outside: Path) -> None:
    os.symlink(outside, job / "abs")
    os.symlink(outside / "secret.txt", job / "abs_file.txt")
    os.symlink("../outside", job / "rel")
    os.symlink("../../outside/secret.txt", job / "sub" / "deep.txt")
    os.symlink("sub/../../outside", job / "tricky")
    before = tree(outside)
    for p in ("abs/secret.txt", "abs_file.txt", "rel/secret.txt", "sub/deep.txt", "tricky/secret.txt"):
        assert refused(sb.read_bytes, p, max_bytes=100) == f"'{p}' is refused: {OUTSIDE_MSG}"
        assert OUTSIDE_MSG in refused(sb.read_head, p, 10)
    for p in ("abs/new.txt", "rel/new.txt", "tricky/new.txt", "rel/deeper/new.txt"):
        assert refused(sb.write_bytes, p, b"x") == f"'{p}' is refused: {OUTSIDE_MSG}"
        assert OUTSIDE_MSG in refused(sb.append_bytes, p, b"x")
    for p in ("abs_file.txt", "sub/deep.txt"):  # a final symlink is never written through
        assert "symbolic link" in refused(sb.write_bytes, p, b"x")
        assert "symbolic link" in refused(sb.append_bytes, p, b"x")
    assert OUTSIDE_MSG in refused(sb.walk, "rel")
    assert OUTSIDE_MSG in refused(sb.info, "rel/secret.txt")
    assert [f.rel for f in sb.walk()] == ["instructions.md", "job.toml", "notes.md", "sub/b.txt"]
    assert tree(outside) == before


def test_symlinks_into_the_harness_folder_are_refused(sb: Sandbox, job: Path) -> None:
    os.symlink(".console", job / "state")
    os.symlink(".", job / "me")
    os.symlink("../.console/todos.json", job / "sub" / "todos.json")
    for p in ("state/todos.json", "me/.console/todos.json", "me/.CONSOLE/todos.json", "sub/todos.json"):
        assert refused(sb.read_bytes, p, max_bytes=100) == f"'{p}' is refused: {HARNESS_MSG}"
    for p in ("state/todos.json", "state/new.json", "me/.console/x", "me/.console", "me/.Console/tmp/x"):
        assert HARNESS_MSG in refused(sb.write_bytes, p, b"{}")
        assert HARNESS_MSG in refused(sb.append_bytes, p, b"{}")
    assert HARNESS_MSG in refused(sb.walk, "state")
    assert HARNESS_MSG in refused(sb.info, "me/.console")
    assert HARNESS_MSG in refused(sb.read_bytes, ".CONSOLE/todos.json", max_bytes=100)
    assert (job / ".console" / "todos.json").read_text() == '{"harness": "state"}'
    assert sorted(p.name for p in (job / ".console").iterdir()) in (["todos.json"], ["tmp", "todos.json"])
    assert all(".console" not in f.rel and "todos" not in f.rel for f in sb.walk())


def test_symlink_loops_are_refused_quickly(sb: Sandbox, job: Path) -> None:
    os.symlink("b", job / "a")
    os.symlink("a", job / "b")
    os.symlink("self", job / "self")
    os.symlink("d/d", job / "d")
    for p in ("a", "self", "a/x", "d"):
        msg = within(lambda p=p: refused(sb.read_bytes, p, max_bytes=10))
        assert "symlink loop" in msg, msg
    assert "symlink loop" in within(lambda: refused(sb.write_bytes, "a/x.md", b"x"))
    assert "symlink loop" in within(lambda: refused(sb.append_bytes, "self/x.md", b"x"))
    assert within(lambda: [f.rel for f in sb.walk()]) == ["instructions.md", "job.toml", "notes.md", "sub/b.txt"]


FLIP_SRC = """
def flip(job, outside, running):
    import os
    targets = ["inside", outside, "../outside", "inside", "sub/../../outside"]
    secret = os.path.join(outside, "secret.txt")
    tmp, tmpf, link, f = (os.path.join(job, n) for n in (".flip", ".flipf", "link", "f"))
    i = 0
    while running():
        os.symlink(targets[i % len(targets)], tmp)
        os.replace(tmp, link)
        if i % 2:
            os.symlink(secret, tmp)
            os.replace(tmp, f)
        else:
            with open(tmpf, "wb") as fh:
                fh.write(b"inside-f")
            os.replace(tmpf, f)
        i += 1
    return i
"""


@pytest.mark.parametrize("attacker", ["thread", "process"])
def test_symlink_swap_race_never_reaches_outside(sb: Sandbox, job: Path, outside: Path, attacker: str) -> None:
    """job/link flips between a folder inside and folders outside, and job/f between a file and a symlink to a
    secret, as fast as the attacker can, while the sandbox reads, writes and appends through them. A thread
    shares the GIL (it flips between our system calls); a process flips truly in parallel."""
    (job / "inside").mkdir()
    (job / "inside" / "x").write_bytes(b"inside-x")
    for name in ("x", "y", "z"):
        (outside / name).write_bytes(SECRET + name.encode())
    (job / "f").write_bytes(b"inside-f")
    os.symlink("inside", job / "link")
    before = tree(outside)
    scope: dict[str, Any] = {}
    exec(FLIP_SRC, scope)
    stop = threading.Event()
    flips: list[int] = []
    old_interval = sys.getswitchinterval()
    proc: subprocess.Popen[bytes] | None = None
    if attacker == "thread":
        sys.setswitchinterval(1e-5)
        running = lambda: not stop.is_set()  # noqa: E731
        t = threading.Thread(target=lambda: flips.append(scope["flip"](str(job), str(outside), running)), daemon=True)
        t.start()
    else:
        code = FLIP_SRC + "\nimport sys\nflip(sys.argv[1], sys.argv[2], lambda: True)\n"
        proc = subprocess.Popen([sys.executable, "-c", code, str(job), str(outside)])
        deadline = time.monotonic() + 10
        while not (job / ".flipf").exists() and time.monotonic() < deadline:
            time.sleep(0.005)
    ok = bad = 0
    calls: list[Callable[[], Any]] = [
        lambda: sb.read_bytes("link/x", max_bytes=100),
        lambda: sb.write_bytes("link/y", b"agent-y"),
        lambda: sb.append_bytes("link/z", b"z", at=0),
        lambda: sb.read_bytes("f", max_bytes=100),
        lambda: sb.append_bytes("f", b"F", at=0),
        lambda: sb.write_bytes("f", b"agent-f"),
    ]
    # At least 350 rounds, and on until the race was met both ways (some calls refused, some through): on a loaded
    # machine the attacker may get few turns in the first rounds. Only a broken attacker reaches the ceiling.
    ceiling = time.monotonic() + 60
    rounds = 0
    try:
        while rounds < 350 or ((ok == 0 or bad == 0) and time.monotonic() < ceiling):
            rounds += 1
            for call in calls:
                try:
                    out = call()
                except SandboxError:
                    bad += 1
                    continue
                ok += 1
                if isinstance(out, bytes):
                    assert SECRET not in out and b"SECRET" not in out
    finally:
        if proc is not None:
            proc.kill()
            proc.wait(5)
        else:
            stop.set()
            t.join(5)
            sys.setswitchinterval(old_interval)
    assert ok > 0 and bad > 0, (flips, ok, bad)
    assert tree(outside) == before
    assert (job / "inside" / "x").read_bytes() == b"inside-x"


# -- hard links, FIFOs, sockets, devices ------------------------------------------------------------------
def test_hard_links_are_refused(sb: Sandbox, job: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", job / "hl.txt")
    msg = "'hl.txt' has several hard links (it may be a file outside the job folder); it cannot be used."
    assert refused(sb.read_bytes, "hl.txt", max_bytes=100) == msg
    assert refused(sb.read_head, "hl.txt", 4) == msg
    assert refused(sb.append_bytes, "hl.txt", b"x") == msg
    assert refused(sb.append_bytes, "hl.txt", b"x", at=0) == msg
    assert refused(sb.write_bytes, "hl.txt", b"x") == msg
    assert "hl.txt" not in [f.rel for f in sb.walk()]
    info = sb.info("hl.txt")
    assert info is not None and info.nlink == 2
    assert (outside / "secret.txt").read_bytes() == SECRET


def test_a_fifo_never_hangs(sb: Sandbox, job: Path) -> None:
    os.mkfifo(job / "p")
    os.symlink("p", job / "plink")
    for p in ("p", "plink"):
        assert within(lambda p=p: refused(sb.read_bytes, p, max_bytes=10)) == (
            f"'{p}' is a named pipe; only regular files can be read.")
        assert "named pipe" in within(lambda p=p: refused(sb.read_head, p, 10))
        assert "named pipe" in within(lambda p=p: refused(sb.read_text, p, max_bytes=10))
    assert within(lambda: refused(sb.append_bytes, "p", b"x")) == (
        "'p' is a named pipe; only regular files can be written.")
    assert "named pipe" in within(lambda: refused(sb.write_bytes, "p", b"x"))
    assert "symbolic link" in within(lambda: refused(sb.append_bytes, "plink", b"x"))
    info = within(lambda: sb.info("p"))
    assert info.kind == "other"
    assert within(lambda: sb.walk("p")) == []
    assert "p" not in [f.rel for f in within(sb.walk)]
    # With a reader present, the write-open succeeds: the fstat still refuses it.
    reader = os.open(job / "p", os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert "named pipe" in within(lambda: refused(sb.append_bytes, "p", b"x"))
        assert os.read(reader, 10) == b""
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(job / "p").st_mode)


def test_a_socket_is_refused(sb: Sandbox, job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(job)  # AF_UNIX paths are short
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind("sock")
        assert within(lambda: refused(sb.read_bytes, "sock", max_bytes=10)) == (
            "'sock' is a socket; only regular files can be read.")
        assert "socket" in within(lambda: refused(sb.append_bytes, "sock", b"x"))
        assert "socket" in within(lambda: refused(sb.write_bytes, "sock", b"x"))
        assert within(lambda: sb.info("sock")).kind == "other"
        assert "sock" not in [f.rel for f in within(sb.walk)]
    finally:
        s.close()


def test_a_device_is_refused(sb: Sandbox, job: Path) -> None:
    try:
        os.mknod(job / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError as exc:
        pytest.skip(f"cannot create a character device here (mknod: {exc.strerror}); needs root")
    assert within(lambda: refused(sb.read_bytes, "null", max_bytes=10)) == (
        "'null' is a device; only regular files can be read.")
    assert "a device" in within(lambda: refused(sb.append_bytes, "null", b"x"))
    assert "a device" in within(lambda: refused(sb.write_bytes, "null", b"x"))
    assert within(lambda: sb.info("null")).kind == "other"
    assert "null" not in [f.rel for f in within(sb.walk)]
    assert stat.S_ISCHR(os.lstat(job / "null").st_mode)


# -- writing -----------------------------------------------------------------------------------------
def test_write_and_append(sb: Sandbox, job: Path) -> None:
    assert sb.write_bytes("out/new.md", b"hello") == WriteResult("out/new.md", False, 0, 5)
    assert sb.write_bytes("out/new.md", b"hi", durable=True) == WriteResult("out/new.md", True, 5, 2)
    assert (job / "out" / "new.md").read_bytes() == b"hi"
    assert sb.append_bytes("log.md", b"a") == WriteResult("log.md", False, 0, 1)
    assert sb.append_bytes("log.md", b"bc") == WriteResult("log.md", True, 1, 3)
    assert refused(sb.write_bytes, "sub", b"x") == "'sub' is a folder, not a file."
    assert refused(sb.append_bytes, "sub", b"x") == "'sub' is a folder, not a file."
    assert refused(sb.write_bytes, ".", b"x") == "'.' is a folder, not a file."
    assert refused(sb.write_bytes, "notes.md/x.md", b"x") == (
        "'notes.md/x.md' is refused: 'notes.md' is a file, not a folder. Check the path.")
    assert "'notes.md' is a file, not a folder" in refused(sb.append_bytes, "notes.md/x/y.md", b"x")
    assert "there is no folder 'nope'" in refused(sb.write_bytes, "nope/x.md", b"x", mkdirs=False)
    assert "there is no folder 'nope'" in refused(sb.append_bytes, "nope/x.md", b"x", mkdirs=False)
    assert not (job / "nope").exists()


def test_append_at_an_offset_is_idempotent(sb: Sandbox, job: Path) -> None:
    sb.append_bytes("log.md", b"abc")
    assert sb.append_bytes("log.md", b"def", at=3) == WriteResult("log.md", True, 3, 6)
    assert sb.append_bytes("log.md", b"def", at=3) == WriteResult("log.md", True, 6, 6)  # redone after a crash
    assert (job / "log.md").read_bytes() == b"abcdef"
    assert sb.append_bytes("log.md", b"X", at=1) == WriteResult("log.md", True, 6, 2)
    assert (job / "log.md").read_bytes() == b"aX"
    assert refused(sb.append_bytes, "log.md", b"x", at=3) == (
        "'log.md' is refused: the append offset 3 is past the end of the file (2 bytes).")
    assert "negative" in refused(sb.append_bytes, "log.md", b"x", at=-1)
    assert "past the end" in refused(sb.append_bytes, "fresh.md", b"x", at=1)
    assert not (job / "fresh.md").exists()
    assert sb.append_bytes("fresh.md", b"x", at=0) == WriteResult("fresh.md", False, 0, 1)


@pytest.mark.parametrize("name", ["job.toml", "JOB.TOML", "instructions.md", "Instructions.MD", "me/job.toml"])
def test_protected_files_cannot_be_written(sb: Sandbox, job: Path, name: str) -> None:
    os.symlink(".", job / "me")
    before = tree(job)
    assert refused(sb.write_bytes, name, b"endpoint = 'evil'") == f"'{name}' {PROTECTED_MSG}"
    assert refused(sb.append_bytes, name, b"endpoint = 'evil'") == f"'{name}' {PROTECTED_MSG}"
    assert tree(job) == before
    if name == name.lower():
        assert sb.read_bytes(name, max_bytes=100)  # reading them is fine


def test_a_protected_symlink_protects_its_target(job: Path, mode: bool) -> None:
    (job / "job.toml").unlink()
    (job / "cfg").mkdir()
    (job / "cfg" / "real.toml").write_text("real")
    os.symlink("cfg/real.toml", job / "job.toml")
    os.symlink("cfg", job / "cfglink")
    (job / "instructions.md").unlink()
    os.symlink("conf/later.toml", job / "instructions.md")  # its folder does not exist yet
    os.symlink(".", job / "me")
    with make(job, mode) as sb:
        for p in ("cfg/real.toml", "cfglink/real.toml", "me/cfglink/real.toml", "cfg/REAL.toml"):
            assert PROTECTED_MSG in refused(sb.write_bytes, p, b"evil")
            assert PROTECTED_MSG in refused(sb.append_bytes, p, b"evil")
        assert "symbolic link" in refused(sb.write_bytes, "cfglink", b"evil")
        assert sb.write_bytes("cfg/other.toml", b"fine").existed is False
        for p in ("conf/later.toml", "conf/LATER.toml"):
            assert PROTECTED_MSG in refused(sb.write_bytes, p, b"evil")
            assert PROTECTED_MSG in refused(sb.append_bytes, p, b"evil")
        assert sb.write_bytes("conf/other.md", b"fine").existed is False
    assert (job / "cfg" / "real.toml").read_text() == "real"
    assert not (job / "conf" / "later.toml").exists()


def test_an_absent_job_toml_cannot_be_created(job: Path, mode: bool) -> None:
    (job / "job.toml").unlink()
    with make(job, mode) as sb:
        assert refused(sb.write_bytes, "job.toml", b"x") == f"'job.toml' {PROTECTED_MSG}"
        assert refused(sb.append_bytes, "Job.Toml", b"x") == f"'Job.Toml' {PROTECTED_MSG}"
    assert not (job / "job.toml").exists()


# -- limits ------------------------------------------------------------------------------------------
def test_one_write_over_the_limit_is_refused(job: Path, mode: bool) -> None:
    with make(job, mode, max_write_bytes=10) as sb:
        assert refused(sb.write_bytes, "big.md", b"x" * 11) == (
            "'big.md' is refused: 11 bytes is over the limit of 10 bytes for one write (max_write_mb in job.toml). "
            "Write the first part, then append the rest in pieces.")
        assert "11 bytes is over the limit of 10 bytes" in refused(sb.append_bytes, "big.md", b"x" * 11)
        assert sb.write_bytes("big.md", b"x" * 10).new_size == 10
    assert (job / "big.md").read_bytes() == b"x" * 10


def test_the_job_folder_has_a_size_limit(job: Path, mode: bool) -> None:
    existing = sum(p.stat().st_size for p in job.rglob("*") if p.is_file() and ".console" not in p.parts)
    (job / ".git").mkdir()
    (job / ".git" / "pack").write_bytes(b"p" * 50)  # hidden folders count too
    existing += 50
    with make(job, mode, max_job_bytes=existing + 100) as sb:
        assert sb.job_bytes() == existing
        for _ in range(3):
            sb.append_bytes("log.md", b"y" * 30)
        assert sb.job_bytes() == existing + 90
        msg = refused(sb.append_bytes, "log.md", b"y" * 30)
        assert msg == (f"'log.md' is refused: the job folder would grow to {existing + 120} bytes, over its limit of "
                       f"{existing + 100} (max_job_mb in job.toml). Write less, or ask the operator to raise the "
                       "limit.")
        assert "would grow to" in refused(sb.write_bytes, "other.md", b"z" * 11)
        assert not (job / "other.md").exists()
        assert sb.write_bytes("log.md", b"short").new_size == 5  # shrinking is always allowed
        assert sb.job_bytes() == existing + 5
        sb.append_bytes("log.md", b"y" * 95)
        assert sb.job_bytes() == existing + 100
    assert (job / "log.md").stat().st_size == 100


def test_the_first_write_counts_existing_files(job: Path, mode: bool) -> None:
    (job / "data.bin").write_bytes(b"d" * 1000)
    with make(job, mode, max_job_bytes=1000) as sb:
        assert "would grow to" in refused(sb.append_bytes, "notes.md", b"x")
        assert (job / "notes.md").read_bytes() == b"hello\n"


# -- files on disk --------------------------------------------------------------------------------
def test_new_files_get_the_usual_permissions(sb: Sandbox, job: Path) -> None:
    old = os.umask(0o022)
    try:
        sb.write_bytes("w.md", b"x")
        sb.append_bytes("a.md", b"x")
        sb.write_bytes("newdir/w.md", b"x")
        (job / "run.sh").write_text("#!/bin/sh\n")
        (job / "run.sh").chmod(0o755)
        sb.write_bytes("run.sh", b"#!/bin/sh\necho hi\n")
    finally:
        os.umask(old)
    for p in ("w.md", "a.md", "newdir/w.md"):
        assert stat.S_IMODE((job / p).stat().st_mode) == 0o644, p
    assert stat.S_IMODE((job / "run.sh").stat().st_mode) == 0o755  # an overwrite keeps the mode


def test_no_temp_file_is_left_behind(sb: Sandbox, job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(5):
        sb.write_bytes(f"sub/w{i}.md", b"x" * i, durable=bool(i % 2))
    assert temps(job) == []
    assert list((job / ".console" / "tmp").iterdir()) == []

    def broken_rename(*args: Any, **kw: Any) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "rename", broken_rename)
    assert refused(sb.write_bytes, "notes.md", b"new") == "'notes.md' could not be written: an input/output error."
    monkeypatch.undo()
    assert (job / "notes.md").read_bytes() == b"hello\n"
    assert temps(job) == []
    assert list((job / ".console" / "tmp").iterdir()) == []


def test_a_folder_on_another_file_system_gets_a_temp_beside_the_target(
        sb: Sandbox, job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_rename = os.rename
    calls: list[tuple[int | None, int | None]] = []

    def cross_device(src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None) -> None:
        calls.append((src_dir_fd, dst_dir_fd))
        if src_dir_fd != dst_dir_fd:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        assert src.startswith(".w.md.") and src.endswith(".agent-console.tmp")
        real_rename(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    monkeypatch.setattr(os, "rename", cross_device)
    assert sb.write_bytes("sub/w.md", b"content").new_size == 7
    assert len(calls) == 2
    assert (job / "sub" / "w.md").read_bytes() == b"content"
    assert temps(job) == []

    def broken(src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None) -> None:
        raise OSError(errno.EXDEV if src_dir_fd != dst_dir_fd else errno.EIO, "no")

    monkeypatch.setattr(os, "rename", broken)
    assert "input/output error" in refused(sb.write_bytes, "sub/w.md", b"other")
    assert (job / "sub" / "w.md").read_bytes() == b"content"
    assert temps(job) == []


def test_clean_tmp_removes_leftovers(sb: Sandbox, job: Path) -> None:
    sb.write_bytes("x.md", b"x")  # makes the temp folder
    tmp = job / ".console" / "tmp"
    (tmp / "0123456789abcdef.agent-console.tmp").write_bytes(b"half")
    (tmp / "other").write_bytes(b"half")
    (job / "sub" / ".w.md.0123456789abcdef.agent-console.tmp").write_bytes(b"half")
    (job / "sub" / "keep.agent-console.tmp.md").write_bytes(b"keep")
    assert sb.clean_tmp() == 3
    assert list(tmp.iterdir()) == []
    assert temps(job) == []
    assert (job / "sub" / "keep.agent-console.tmp.md").exists()
    assert sb.clean_tmp() == 0
    assert sb.write_bytes("x.md", b"y").existed


def test_a_removed_temp_folder_is_made_again(sb: Sandbox, job: Path) -> None:
    sb.write_bytes("x.md", b"x")
    (job / ".console" / "tmp").rmdir()
    assert sb.write_bytes("x.md", b"y").existed
    assert (job / "x.md").read_bytes() == b"y"


# -- listing -----------------------------------------------------------------------------------------
def test_walk(sb: Sandbox, job: Path, outside: Path) -> None:
    (job / "a").mkdir()
    (job / "a" / "z.md").write_text("z")
    (job / "a" / ".hidden.md").write_text("h")
    (job / ".git").mkdir()
    (job / ".git" / "config").write_text("c")
    (job / "zz.md").write_text("zz")
    os.symlink("sub", job / "dirlink")
    os.symlink("notes.md", job / "filelink.md")
    os.symlink(outside / "secret.txt", job / "outlink.md")
    os.mkfifo(job / "sub" / "pipe")
    files = sb.walk()
    # A folder's own files come before its sub-folders.
    assert [f.rel for f in files] == ["filelink.md", "instructions.md", "job.toml", "notes.md", "zz.md",
                                      "a/.hidden.md", "a/z.md", "sub/b.txt"]
    assert all(isinstance(f, FileInfo) and f.kind == "file" and f.nlink == 1 for f in files)
    assert next(f for f in files if f.rel == "filelink.md").size == 6  # the target's size
    assert [f.rel for f in sb.walk(hidden_files=False)] == ["filelink.md", "instructions.md", "job.toml",
                                                            "notes.md", "zz.md", "a/z.md", "sub/b.txt"]
    assert [f.rel for f in sb.walk(limit=2)] == ["filelink.md", "instructions.md"]
    assert [f.rel for f in sb.walk("sub")] == ["sub/b.txt"]
    assert [f.rel for f in sb.walk("dirlink")] == ["dirlink/b.txt"]
    assert [f.rel for f in sb.walk("notes.md")] == ["notes.md"]
    assert [f.rel for f in sb.walk("")] == [f.rel for f in sb.walk("./")] == [f.rel for f in files]
    assert "does not exist" in refused(sb.walk, "missing")
    assert HARNESS_MSG in refused(sb.walk, ".console")


def test_walk_depth_is_bounded(sb: Sandbox, job: Path) -> None:
    deep = job / Path(*["d"] * 70)
    deep.mkdir(parents=True)
    (deep / "f.md").write_text("x")
    (job / Path(*["d"] * 10) / "g.md").write_text("x")
    assert [f.rel for f in sb.walk() if f.rel.startswith("d/")] == ["/".join(["d"] * 10) + "/g.md"]


def test_info(sb: Sandbox, job: Path) -> None:
    root = sb.info(".")
    assert root is not None and root.rel == "." and root.kind == "dir"
    assert sb.info("") == root
    f = sb.info("notes.md")
    assert f is not None and (f.rel, f.kind, f.size, f.nlink) == ("notes.md", "file", 6, 1)
    d = sb.info("./sub/")
    assert d is not None and (d.rel, d.kind) == ("sub", "dir")
    assert sb.info("missing.md") is None
    assert sb.info("missing/x.md") is None
    assert sb.info("notes.md/x") is None
    os.symlink("nowhere", job / "dangling")
    dl = sb.info("dangling")
    assert dl is not None and dl.kind == "symlink"
    assert "does not exist" in refused(sb.read_bytes, "dangling", max_bytes=10)


# -- the machinery -------------------------------------------------------------------------------------
def test_no_fd_leaks(sb: Sandbox, job: Path, outside: Path) -> None:
    os.symlink(outside, job / "out")
    os.symlink(".console", job / "state")
    os.symlink("loop", job / "loop")
    os.link(job / "sub" / "b.txt", job / "hl.txt")
    os.mkfifo(job / "p")
    sb.write_bytes("w.md", b"x")  # the temp folder fd is opened once, and kept

    def count() -> int:
        return len(os.listdir("/proc/self/fd"))

    calls: list[Callable[[], Any]] = [
        lambda: sb.read_bytes("out/secret.txt", max_bytes=9),
        lambda: sb.read_bytes("state/todos.json", max_bytes=9),
        lambda: sb.read_bytes("loop", max_bytes=9),
        lambda: sb.read_bytes("hl.txt", max_bytes=9),
        lambda: sb.read_bytes("p", max_bytes=9),
        lambda: sb.read_bytes("notes.md", max_bytes=1),
        lambda: sb.read_bytes("missing/x", max_bytes=9),
        lambda: sb.read_bytes("notes.md/x", max_bytes=9),
        lambda: sb.read_head("sub", 3),
        lambda: sb.write_bytes("out/x", b"x"),
        lambda: sb.write_bytes("state/x", b"x"),
        lambda: sb.write_bytes("sub/deep/job.toml", b"x"),
        lambda: sb.write_bytes("job.toml", b"x"),
        lambda: sb.write_bytes("hl.txt", b"x"),
        lambda: sb.write_bytes("sub", b"x"),
        lambda: sb.append_bytes("p", b"x"),
        lambda: sb.append_bytes("hl.txt", b"x"),
        lambda: sb.append_bytes("loop/x", b"x"),
        lambda: sb.append_bytes("w.md", b"x", at=99),
        lambda: sb.walk("out"),
        lambda: sb.walk(),
        lambda: sb.info("out/x"),
        lambda: sb.info("p"),
        lambda: sb.read_bytes("notes.md", max_bytes=99),
        lambda: sb.write_bytes("w.md", b"y"),
        lambda: sb.append_bytes("w.md", b"y", at=0),
    ]
    for call in calls:  # warm up: lazy totals, caches
        with contextlib.suppress(SandboxError):
            call()
    before = count()
    for _ in range(20):
        for call in calls:
            with contextlib.suppress(SandboxError):
                call()
    assert count() == before


def test_close(job: Path, mode: bool) -> None:
    sb = make(job, mode)
    sb.write_bytes("x.md", b"x")
    sb.close()
    sb.close()
    assert "closed" in refused(sb.read_bytes, "x.md", max_bytes=9)
    assert "closed" in refused(sb.write_bytes, "x.md", b"x")


def test_openat2_retries_when_the_kernel_asks(job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sb = make(job, True)
    real = resolve._openat2
    answers = [-errno.EAGAIN, -errno.EAGAIN]

    def flaky(*args: Any) -> int:
        return answers.pop() if answers else real(*args)

    monkeypatch.setattr(resolve, "_openat2", flaky)  # where the resolution looks it up
    assert sb.read_bytes("sub/b.txt", max_bytes=9) == b"b"
    assert answers == []
    sb.close()


def test_openat2_choice(job: Path) -> None:
    with Sandbox(job, openat2=False) as sb:
        assert sb.uses_openat2 is False
    with Sandbox(job) as sb:
        assert sb.uses_openat2 is kernel._probe_openat2(sb.folder.fd)


def test_a_remembered_check_answers_as_a_fresh_one_and_a_refusal_is_never_remembered(job: Path, mode: bool) -> None:
    s = make(job, mode)
    (job / "notes").mkdir()
    (job / "notes" / "a.md").write_text("a")
    first = s.resolver.check("./notes//a.md")
    again = s.resolver.check("./notes//a.md")
    assert first == again == ("notes/a.md", ["notes", "a.md"], "./notes//a.md")
    again[1].append("mutated")  # each caller has its own parts
    assert s.resolver.check("./notes//a.md")[1] == ["notes", "a.md"] and s.info("./notes//a.md") is not None
    for bad in ("../outside", ".console/todos.json", "/etc/passwd", "a\x00b"):
        for _ in range(2):
            with pytest.raises(SandboxError):
                s.resolver.check(bad)
        assert bad not in s.resolver._checked
    s.close()
    with pytest.raises(SandboxError, match="closed"):
        s.resolver.check("./notes//a.md")  # remembered, but the folder is closed: refused
