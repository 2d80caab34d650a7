"""Job-declared command tools: config, running, limits, the environment, crash safety and confinement.

The confinement tests need bubblewrap. Without it they are skipped with the reason, except in CI
(CI=true), where a missing bwrap fails them: the confinement must be proved there.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field, ValidationError

from console.engine import events as ev
from console.engine.job import JobPaths, _Strict, format_validation_error
from console.engine.messages import ToolCall
from console.engine.runtime import Runtime
from console.engine.tools.commands import (
    CommandToolConfig,
    CommandTools,
    Confinement,
    SandboxMode,
    build_command_tools,
    confinement_notice,
    detect_confinement,
)
from console.engine.tools.registry import ToolOutcome, ToolRegistry


def _python_outside_tmp() -> str:
    """A Python the sandbox can see: it mounts a private, empty /tmp, so a venv under /tmp (a CI checkout
    there) is invisible inside; the system's python3 is not (the commands use nothing but the stdlib)."""
    if not sys.executable.startswith("/tmp/"):
        return sys.executable
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", shutil.which("python3") or ""):
        if candidate and not candidate.startswith("/tmp/") and os.access(candidate, os.X_OK):
            return candidate
    return sys.executable


PY = _python_outside_tmp()
NONE = Confinement("none", "forced by the test")


class _Job(_Strict):
    """The part of JobConfig this feature adds, to test how its errors are named."""

    tools: CommandTools = Field(default_factory=list)
    sandbox: SandboxMode = "auto"


@pytest.fixture(scope="module")
def bwrap() -> Confinement:
    found = detect_confinement()
    if found.kind != "bubblewrap":
        why = f"bubblewrap confinement is not available here: {found.detail} (Debian/Ubuntu: apt install bubblewrap)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return found


@pytest.fixture(params=["bubblewrap", "none"])
def conf(request: pytest.FixtureRequest) -> Confinement:
    if request.param == "none":
        return NONE
    return request.getfixturevalue("bwrap")


@pytest.fixture
def make_rt(tmp_path: Path, clock) -> Callable[..., Runtime]:
    def make(root: Path | None = None, files: dict[str, str] | None = None, link: Path | None = None) -> Runtime:
        root = root or tmp_path / "job"
        root.mkdir(parents=True, exist_ok=True)
        files = {"instructions.md": "# Task\n", **(files or {})}
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
        if link is not None:
            link.symlink_to(root, target_is_directory=True)
        paths = JobPaths(link or root)
        return Runtime(paths, clock, ev.EventStream(paths.events, clock))

    return make


@pytest.fixture
def rt(make_rt) -> Runtime:
    return make_rt()


def call(rt: Runtime, command: list[str], confinement: Confinement, mode: SandboxMode = "auto",
         **cfg: Any) -> ToolOutcome:
    """One call through the registry, as the loop dispatches it."""
    config = CommandToolConfig(name=cfg.pop("name", "cmd"), description="a test command", command=command, **cfg)
    reg = ToolRegistry(build_command_tools([config], mode, confinement))
    parsed = reg.parse(ToolCall(id="c1", name=config.name, arguments="{}"))
    assert not isinstance(parsed, ToolOutcome), parsed
    return reg.run(rt, *parsed)


def py(code: str, *args: str) -> list[str]:
    return [PY, "-c", code, *args]


def alive(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains ``marker``."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(int(pid))
            except OSError:
                continue
    return found


def my_children() -> list[str]:
    out: list[str] = []
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            out += Path(f"/proc/{os.getpid()}/task/{task}/children").read_text().split()
        except OSError:
            continue
    return out


# Tries each action and prints one line per action: "label OK" or "label DENIED <errno name>".
ATTEMPT = """
import errno, os, sys
def attempt(label, fn):
    try:
        fn()
        print(label, "OK")
    except OSError as e:
        print(label, "DENIED", errno.errorcode.get(e.errno, e.errno))
"""


def results(out: ToolOutcome) -> dict[str, str]:
    rows = [line.split(" ", 1) for line in out.content.splitlines()[1:] if " " in line]
    return {label: rest for label, rest in rows}


# -- config ------------------------------------------------------------------------------------------------
def test_config_defaults_and_a_good_table() -> None:
    job = _Job.model_validate({"sandbox": "required", "tools": [
        {"name": "lint", "description": "Run the linter.", "command": ["ruff", "check", "."]},
        {"name": "tests", "description": "Run the tests.", "command": ["pytest", "-q"], "timeout": 600,
         "max_output_kb": 256, "env": {"PYTHONHASHSEED": "0"}},
    ]})
    lint, tests = job.tools
    assert (lint.timeout, lint.max_output_kb, lint.env) == (120, 64, {})
    assert (tests.timeout, tests.max_output_kb, tests.env) == (600.0, 256, {"PYTHONHASHSEED": "0"})
    assert job.sandbox == "required"


GOOD = {"name": "lint", "description": "Run the linter.", "command": ["ruff", "check", "."]}


@pytest.mark.parametrize("change, key, fragment", [
    ({"name": "bad name!"}, "tools.0.name", "letters, digits"),
    ({"name": "x" * 65}, "tools.0.name", "1 to 64"),
    ({"command": []}, "tools.0.command", "at least 1 item"),
    ({"command": "ruff check ."}, "tools.0.command", "valid list"),
    ({"command": ["ruff", ""]}, "tools.0.command", "argument 1 is empty"),
    ({"command": ["ruff", "a\x00b"]}, "tools.0.command", "NUL"),
    ({"timeout": -1}, "tools.0.timeout", "greater than 0"),
    ({"timeout": 0}, "tools.0.timeout", "greater than 0"),
    ({"timeout": "10"}, "tools.0.timeout", "valid number"),
    ({"max_output_kb": 0}, "tools.0.max_output_kb", "greater than or equal to 1"),
    ({"description": "  "}, "tools.0.description", "blank"),
    ({"env": {"lower": "x"}}, "tools.0.env", "not a variable name"),
    ({"shell": True}, "tools.0.shell", "unknown key"),
])
def test_config_errors_name_the_key(change: dict[str, Any], key: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        _Job.model_validate({"tools": [{**GOOD, **change}]})
    text = format_validation_error("job.toml", info.value)
    assert f"key '{key}'" in text and fragment in text, text


def test_config_duplicate_names_and_sandbox_mode() -> None:
    with pytest.raises(ValidationError) as info:
        _Job.model_validate({"tools": [GOOD, GOOD]})
    assert "key 'tools': " in (text := format_validation_error("job.toml", info.value)) and "two tools" in text
    with pytest.raises(ValidationError) as info:
        _Job.model_validate({"sandbox": "strict"})
    assert "key 'sandbox'" in format_validation_error("job.toml", info.value)


def test_tools_take_no_arguments_and_have_a_guide_line() -> None:
    config = CommandToolConfig(**GOOD)
    [tool] = build_command_tools([config], "auto", NONE)
    assert tool.description == "Run the linter."
    assert tool.summary == "run `ruff check .` (job-declared command)"
    assert tool.spec().parameters == {"type": "object", "properties": {}, "additionalProperties": False}
    reg = ToolRegistry([tool])
    bad = reg.parse(ToolCall(id="c1", name="lint", arguments='{"path": "."}'))
    assert isinstance(bad, ToolOutcome) and "'path': unknown argument" in bad.content
    with pytest.raises(ValueError, match=r"tools\.0\.name.*built-in"):
        build_command_tools([CommandToolConfig(**{**GOOD, "name": "read_file"})], "auto", NONE,
                            reserved={"read_file"})


# -- running -----------------------------------------------------------------------------------------------
def test_exit_code_and_merged_output(rt: Runtime, conf: Confinement) -> None:
    out = call(rt, py("import sys; print('hello'); sys.stdout.flush(); sys.stderr.write('warning\\n')"), conf)
    first, *rest = out.content.splitlines()
    assert out.ok and first == "exit code 0"
    assert rest == ["hello", "warning"]


def test_nonzero_exit_is_not_ok(rt: Runtime, conf: Confinement) -> None:
    out = call(rt, py("import sys; print('boom'); sys.exit(3)"), conf)
    assert not out.ok and out.content.startswith("exit code 3\n") and "boom" in out.content
    quiet = call(rt, py("pass"), conf)
    assert quiet.ok and quiet.content.endswith("\n(no output)")


def test_truncation_keeps_head_and_tail_with_a_note(rt: Runtime, conf: Confinement) -> None:
    out = call(rt, py("for i in range(500): print('line %04d' % i)"), conf, max_output_kb=1)
    assert "line 0000" in out.content and "line 0499" in out.content
    assert "line 0250" not in out.content
    assert "bytes omitted ...]" in out.content
    assert out.content.endswith("[output truncated: showed 1024 of 5000 bytes]")
    assert out.ok


def test_huge_output_costs_no_memory(rt: Runtime, conf: Confinement) -> None:
    code = "import sys\nb = b'y' * 1000000\nfor _ in range(50): sys.stdout.buffer.write(b)"
    tracemalloc.start()
    try:
        started = time.monotonic()
        out = call(rt, py(code), conf)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.ok and "of 50000000 bytes]" in out.content
    assert peak < 4 * 2**20, f"peak {peak} bytes"
    assert len(out.content) < 70_000
    assert time.monotonic() - started < 20


def test_timeout_kills_the_whole_process_group(rt: Runtime, conf: Confinement) -> None:
    marker = f"29.{uuid.uuid4().int % 10**6:06d}"
    code = ("import subprocess, sys, time\n"
            f"subprocess.Popen(['sleep', '{marker}'])\n"
            "print('started', flush=True)\n"
            "time.sleep(30)")
    started = time.monotonic()
    out = call(rt, py(code), conf, timeout=0.5)
    assert time.monotonic() - started < 2
    assert not out.ok and out.content.startswith("timed out after 0.5 s (killed)")
    assert "started" in out.content  # the grandchild was running when the timeout struck
    deadline = time.monotonic() + 2
    while alive(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive(marker) == []
    assert my_children() == []  # reaped: no zombie left


def test_the_operators_stop_interrupts_within_a_second(rt: Runtime, conf: Confinement) -> None:
    started = time.monotonic()
    rt.should_stop = lambda: time.monotonic() - started > 0.3
    out = call(rt, ["sleep", "30"], conf)
    assert time.monotonic() - started < 2
    assert not out.ok and out.content.startswith("stopped by the operator (killed)")
    assert my_children() == []


def test_an_unconfined_escapee_holding_the_output_is_not_waited_for(rt: Runtime) -> None:
    marker = f"27.{uuid.uuid4().int % 10**6:06d}"
    code = f"import subprocess; subprocess.Popen(['sleep', '{marker}'], start_new_session=True); print('bye')"
    started = time.monotonic()
    try:
        out = call(rt, py(code), NONE)
        assert time.monotonic() - started < 3
        assert out.ok and "bye" in out.content and "kept the output open" in out.content
    finally:
        for pid in alive(marker):
            os.kill(pid, 9)


def test_a_failing_stop_check_is_not_a_crash(rt: Runtime) -> None:
    def broken() -> bool:
        raise RuntimeError("bug")

    rt.should_stop = broken
    out = call(rt, py("print('fine')"), NONE)
    assert out.ok and "fine" in out.content


def test_environment_is_a_whitelist(rt: Runtime, conf: Confinement, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-openai")
    monkeypatch.setenv("AGENT_CONSOLE_ANTHROPIC_API_KEY", "sk-secret-anthropic")
    monkeypatch.setenv("SOME_OTHER", "inherited")
    out = call(rt, ["env"], conf, env={"MY_SETTING": "a value with spaces"})
    assert out.ok
    env = dict(line.split("=", 1) for line in out.content.splitlines()[1:])
    assert "secret" not in out.content and "inherited" not in out.content
    assert not any(k.endswith("_API_KEY") or k.startswith("AGENT_CONSOLE") for k in env)
    assert env["HOME"] == os.path.realpath(rt.paths.root)
    assert env["PATH"] == os.environ["PATH"]
    assert (env["LANG"], env["LC_ALL"], env["TMPDIR"], env["TERM"]) == ("C.UTF-8", "C.UTF-8", "/tmp", "dumb")
    assert env["MY_SETTING"] == "a value with spaces"
    # bwrap's --chdir also sets PWD; nothing else
    assert set(env) - {"PWD"} == {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "TERM", "MY_SETTING"}


def test_a_missing_or_unrunnable_program_is_one_clear_line(rt: Runtime, conf: Confinement) -> None:
    out = call(rt, ["no-such-program-xyz", "--flag"], conf)
    assert not out.ok and "\n" not in out.content
    assert "cmd could not run: 'no-such-program-xyz' was not found on PATH" in out.content
    script = rt.paths.root / "check.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    out = call(rt, ["./check.sh"], conf)
    assert not out.ok and "\n" not in out.content and "'./check.sh' is not executable" in out.content
    script.chmod(0o755)
    out = call(rt, ["./check.sh"], conf)
    assert out.ok and out.content.endswith("\nhi")


def test_a_job_folder_that_vanished_is_a_result_not_a_crash(rt: Runtime, conf: Confinement) -> None:
    moved = rt.paths.root.with_name("moved")
    rt.paths.root.rename(moved)
    out = call(rt, py("print(1)"), conf)
    assert not out.ok and "\n" not in out.content and "cmd" in out.content


# -- crash safety --------------------------------------------------------------------------------------------
def test_intent_is_recorded_before_the_command_starts(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = rt.paths.root / "ran"
    seen: list[tuple[dict[str, Any], bool]] = []
    real = rt.intent

    def spy(compute):
        facts, redo = real(compute)
        seen.append((facts, marker.exists()))
        return facts, redo

    monkeypatch.setattr(rt, "intent", spy)
    rt.current_call = "c1"
    out = call(rt, ["touch", "ran"], NONE, name="mark")
    assert out.ok and marker.exists()
    assert seen == [({"command": "mark", "started": True}, False)]


def test_a_call_interrupted_by_a_crash_is_not_run_again(rt: Runtime, conf: Confinement) -> None:
    rt.current_call = "c1"
    rt.redo["c1"] = {"command": "mark", "started": True}
    out = call(rt, ["touch", "ran"], conf, name="mark")
    assert not out.ok
    assert out.content == ("mark was interrupted by a crash of the harness before its result was recorded; it may "
                           "have run partly or fully. Check its effects, and call it again if it is needed.")
    assert not (rt.paths.root / "ran").exists()
    assert "c1" not in rt.redo


# -- sandbox modes --------------------------------------------------------------------------------------------
def test_required_without_a_sandbox_refuses_without_running(rt: Runtime) -> None:
    missing = Confinement("none", "bwrap (bubblewrap) is not installed")
    out = call(rt, ["touch", "ran"], missing, mode="required", name="mark")
    assert not out.ok and not (rt.paths.root / "ran").exists()
    assert out.content == ('mark refused: this job requires a sandbox (sandbox = "required") and none is available '
                           "here: bwrap (bubblewrap) is not installed")


def test_the_notice_is_given_only_when_commands_would_run_unconfined() -> None:
    configs = [CommandToolConfig(**GOOD)]
    assert confinement_notice("auto", NONE, []) is None
    assert confinement_notice("auto", Confinement("bubblewrap", "bubblewrap 0.8.0"), configs) is None
    auto = confinement_notice("auto", NONE, configs)
    assert auto is not None and "\n" not in auto and "UNCONFINED" in auto and "forced by the test" in auto
    assert "lint" in auto
    required = confinement_notice("required", NONE, configs)
    assert required is not None and "refused" in required and 'sandbox = "required"' in required


def test_detect_confinement_says_why_it_is_not_available(tmp_path: Path) -> None:
    missing = detect_confinement(bwrap=str(tmp_path / "no-bwrap"))
    assert missing.kind == "none" and "not found" in missing.detail
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    broken = detect_confinement(bwrap=str(fake))
    assert broken == Confinement("none", "bwrap failed: bwrap: setting up uid map: Permission denied")
    fake.write_text("#!/bin/sh\nexit 0\n")
    assert detect_confinement(bwrap=str(fake)) is broken  # cached per process
    assert detect_confinement(bwrap=str(fake), refresh=True).kind == "bubblewrap"


# -- confinement (bubblewrap) ----------------------------------------------------------------------------------
def test_the_real_probe_finds_bubblewrap(bwrap: Confinement) -> None:
    assert bwrap.kind == "bubblewrap" and "bubblewrap" in bwrap.detail and bwrap.bwrap
    assert detect_confinement() is bwrap


def test_writes_only_inside_the_job_folder(rt: Runtime, bwrap: Confinement, tmp_path: Path) -> None:
    outside_dirs = [tmp_path]  # the job's parent: below /tmp, which the sandbox replaces by its own tmpfs
    var_tmp = None
    if os.path.isdir("/var/tmp") and os.access("/var/tmp", os.W_OK):
        var_tmp = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="console-test-"))
        outside_dirs.append(var_tmp)
    try:
        targets = [str(d / "escaped.txt") for d in outside_dirs]
        code = ATTEMPT + (
            "attempt('inside', lambda: open('made-inside.txt', 'w').write('x'))\n"
            "attempt('subdir', lambda: os.makedirs('sub/dir', exist_ok=True))\n"
            "for i, p in enumerate(sys.argv[1:]): attempt(f'outside{i}', lambda: open(p, 'w').write('x'))\n"
            "attempt('home-tool-cache', lambda: open(os.path.expanduser('~/.cache-probe'), 'w').write('x'))\n"
        )
        out = call(rt, py(code, *targets), bwrap)
        got = results(out)
        assert got["inside"] == "OK" and got["subdir"] == "OK" and got["home-tool-cache"] == "OK"
        assert (rt.paths.root / "made-inside.txt").read_text() == "x"
        for target in targets:
            assert not os.path.exists(target), target
        if var_tmp is not None:
            assert got["outside1"] == "DENIED EROFS"
    finally:
        if var_tmp is not None:
            for p in var_tmp.iterdir():
                p.unlink()
            var_tmp.rmdir()


def test_the_harness_folder_is_hidden(rt: Runtime, bwrap: Confinement) -> None:
    (rt.paths.state / "secret.json").write_text("{}")
    code = ATTEMPT + (
        "print('listing', sorted(os.listdir('.console')))\n"
        "attempt('write', lambda: open('.console/new.json', 'w').write('x'))\n"
        "attempt('read', lambda: open('.console/secret.json').read())\n"
    )
    got = results(call(rt, py(code), bwrap))
    assert got == {"listing": "[]", "write": "DENIED EROFS", "read": "DENIED ENOENT"}
    assert (rt.paths.state / "secret.json").read_text() == "{}"
    assert not (rt.paths.state / "new.json").exists()


def test_job_toml_and_instructions_are_read_only_even_for_root(make_rt, bwrap: Confinement) -> None:
    rt = make_rt(files={"job.toml": "name = 'mine'\n", "other.toml": "name = 'evil'\n"})
    code = ATTEMPT + (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('remount', libc.mount(b'none', b'/', None, 32 | 4096, None))\n"  # MS_REMOUNT | MS_BIND
        "print('umount', libc.umount2(os.path.abspath('job.toml').encode(), 2))\n"  # MNT_DETACH
        "attempt('append', lambda: open('job.toml', 'a').write('x'))\n"
        "attempt('unlink', lambda: os.unlink('job.toml'))\n"
        "attempt('replace', lambda: os.replace('other.toml', 'job.toml'))\n"
        "attempt('move', lambda: os.rename('job.toml', 'moved.toml'))\n"
        "attempt('hardlink', lambda: os.link('job.toml', 'alias.toml'))\n"
        "attempt('instructions', lambda: open('instructions.md', 'w').write('new task'))\n"
        "attempt('chmod', lambda: os.chmod('job.toml', 0o777))\n"
    )
    got = results(call(rt, py(code), bwrap))
    assert got["remount"] == "-1" and got["umount"] == "-1"
    for label in ("append", "unlink", "replace", "move", "hardlink", "instructions", "chmod"):
        assert got[label].startswith("DENIED"), (label, got)
    root = rt.paths.root
    assert (root / "job.toml").read_text() == "name = 'mine'\n"
    assert (root / "instructions.md").read_text() == "# Task\n"
    assert not (root / "moved.toml").exists() and not (root / "alias.toml").exists()


def test_an_absent_job_toml_cannot_be_created(rt: Runtime, bwrap: Confinement) -> None:
    code = ATTEMPT + "attempt('create', lambda: open('job.toml', 'w').write('[model]\\nbase_url = \"http://evil\"'))\n"
    got = results(call(rt, py(code), bwrap))
    assert got["create"].startswith("DENIED")
    assert not os.path.lexists(rt.paths.root / "job.toml")  # the stand-in mount point is removed again


def test_a_symlinked_job_toml_is_refused_not_bypassed(make_rt, bwrap: Confinement) -> None:
    rt = make_rt(files={"conf/job.toml": "name = 'x'\n"})
    (rt.paths.root / "job.toml").symlink_to("conf/job.toml")
    out = call(rt, ["touch", "ran"], bwrap)
    assert not out.ok and "\n" not in out.content and "job.toml is a symlink" in out.content
    assert not (rt.paths.root / "ran").exists()


def test_no_network_not_even_the_hosts_loopback(rt: Runtime, bwrap: Confinement) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        server.setblocking(False)
        port = str(server.getsockname()[1])
        code = ("import socket, sys\n"
                "socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3)\n"
                "print('connected')")
        confined = call(rt, py(code, port), bwrap)
        assert not confined.ok and "connected" not in confined.content
        assert "Connection refused" in confined.content or "unreachable" in confined.content
        with pytest.raises(BlockingIOError):
            server.accept()
        free = call(rt, py(code, port), NONE)  # the same command unconfined reaches the server: the test can fail
        assert free.ok and free.content.endswith("\nconnected")
        server.accept()[0].close()


def test_a_symlinked_job_root_with_spaces(make_rt, bwrap: Confinement, tmp_path: Path) -> None:
    real = tmp_path / "my job folder"
    rt = make_rt(root=real, link=tmp_path / "link to job")
    out = call(rt, py("import os; print(os.getcwd()); open('made here.txt', 'w').write('x')"), bwrap)
    assert out.ok and out.content.splitlines()[1] == str(real.resolve())
    assert (real / "made here.txt").read_text() == "x"


def test_nothing_outlives_a_confined_command(rt: Runtime, bwrap: Confinement) -> None:
    marker = f"28.{uuid.uuid4().int % 10**6:06d}"
    code = ("import subprocess, os\n"
            f"subprocess.Popen(['sleep', '{marker}'], start_new_session=True)\n"
            "print('left behind')")
    out = call(rt, py(code), bwrap)
    assert out.ok and "left behind" in out.content
    deadline = time.monotonic() + 2
    while alive(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive(marker) == []
