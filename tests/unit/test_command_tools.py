"""Job-declared command tools: config, running, limits, the environment, crash safety and confinement.

The confinement tests need bubblewrap. Without it they are skipped with the reason, except in CI
(CI=true), where a missing bwrap fails them: the confinement must be proved there.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BeforeValidator, Field, ValidationError

from console.engine import events as ev
from console.engine.job import StrictSection, format_validation_error
from console.engine.messages import ToolCall
from console.engine.runtime import Runtime
from console.engine.tools import confine, default_registry
from console.engine.tools.commands import CommandToolConfig, CommandTools, build_command_tools
from console.engine.tools.confine import HOME, SANDBOX_PATH, Bwrap, find_bwrap
from console.engine.tools.docs import DocContext, render_all
from console.engine.tools.docs_folder import write_docs
from console.engine.tools.limits import CommandWorld, SandboxSection, legacy_mode
from console.engine.tools.registry import ToolOutcome, ToolRegistry
from tests.commands_support import CONFINED, UNCONFINED, alive, call, my_children, py


class _Job(StrictSection):
    """The part of JobConfig this feature adds, to test how its errors are named."""

    tools: CommandTools = Field(default_factory=list)
    sandbox: Annotated[SandboxSection, BeforeValidator(legacy_mode)] = Field(default_factory=SandboxSection)


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


# A real-time bound that tells a command cut short (a timeout, a stop, an escapee killed) from one let run its
# 27-30 s, with room for a loaded machine's scheduler: a test must not pass only on a fast machine.
WITHIN = 15.0


def results(out: ToolOutcome) -> dict[str, str]:
    rows = [line.split(" ", 1) for line in out.content.splitlines()[1:] if " " in line]
    return {label: rest for label, rest in rows}


# -- config ------------------------------------------------------------------------------------------------
def test_config_defaults_and_a_good_table() -> None:
    job = _Job.model_validate({"sandbox": {"network": True, "memory_mb": 2048}, "tools": [
        {"name": "lint", "description": "Run the linter.", "command": ["ruff", "check", "."]},
        {"name": "tests", "description": "Run the tests.", "command": ["pytest", "-q"], "timeout": 600,
         "max_output_kb": 256, "env": {"PYTHONHASHSEED": "0"}},
    ]})
    lint, tests = job.tools
    assert (lint.timeout, lint.max_output_kb, lint.env) == (120, 64, {})
    assert (tests.timeout, tests.max_output_kb, tests.env) == (600.0, 256, {"PYTHONHASHSEED": "0"})
    assert job.sandbox.network and job.sandbox.memory_mb == 2048 and job.sandbox.read_only == []
    # The old string form reads as the default (confined, failing closed), never as "unconfined".
    assert _Job.model_validate({"sandbox": "auto"}).sandbox == SandboxSection()
    assert _Job.model_validate({"sandbox": "required"}).sandbox == SandboxSection()


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
    for bad, key in (({"sandbox": "strict"}, "sandbox"), ({"sandbox": {"netwrok": True}}, "sandbox.netwrok"),
                     ({"sandbox": {"memory_mb": "lots"}}, "sandbox.memory_mb"),
                     ({"sandbox": {"read_only": ["relative/path"]}}, "sandbox.read_only")):
        with pytest.raises(ValidationError) as info:
            _Job.model_validate(bad)
        assert f"key '{key}'" in format_validation_error("job.toml", info.value), bad


def test_tools_take_no_arguments_and_have_a_guide_line() -> None:
    config = CommandToolConfig(**GOOD)
    [tool] = build_command_tools([config], CONFINED)
    assert tool.description == "Run the linter."
    assert tool.summary == "run `ruff check .` (job-declared command)"
    assert tool.spec().parameters == {"type": "object", "properties": {}, "additionalProperties": False}
    reg = ToolRegistry([tool])
    bad = reg.parse(ToolCall(id="c1", name="lint", arguments='{"path": "."}'))
    assert isinstance(bad, ToolOutcome) and "'path': unknown argument" in bad.content
    with pytest.raises(ValueError, match=r"tools\.0\.name.*built-in"):
        build_command_tools([CommandToolConfig(**{**GOOD, "name": "read_file"})], CONFINED, reserved={"read_file"})


# -- running -----------------------------------------------------------------------------------------------
def test_exit_code_and_merged_output(rt: Runtime, conf: CommandWorld) -> None:
    out = call(rt, py("import sys; print('hello'); sys.stdout.flush(); sys.stderr.write('warning\\n')"), conf)
    first, *rest = out.content.splitlines()
    assert out.ok and first == "exit code 0"
    assert rest == ["hello", "warning"]


def test_nonzero_exit_is_not_ok(rt: Runtime, conf: CommandWorld) -> None:
    out = call(rt, py("import sys; print('boom'); sys.exit(3)"), conf)
    assert not out.ok and out.content.startswith("exit code 3\n") and "boom" in out.content
    quiet = call(rt, py("pass"), conf)
    assert quiet.ok and quiet.content.endswith("\n(no output)")


def test_truncation_keeps_head_and_tail_with_a_note(rt: Runtime, conf: CommandWorld) -> None:
    out = call(rt, py("for i in range(500): print('line %04d' % i)"), conf, max_output_kb=1)
    assert "line 0000" in out.content and "line 0499" in out.content
    assert "line 0250" not in out.content
    assert "bytes omitted ...]" in out.content
    assert out.content.endswith("[output truncated: showed 1024 of 5000 bytes]")
    assert out.ok


def test_huge_output_costs_no_memory(rt: Runtime, conf: CommandWorld) -> None:
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


def test_timeout_kills_the_whole_process_group(rt: Runtime, conf: CommandWorld) -> None:
    marker = f"29.{uuid.uuid4().int % 10**6:06d}"
    code = ("import subprocess, sys, time\n"
            f"subprocess.Popen(['sleep', '{marker}'])\n"
            "print('started', flush=True)\n"
            "time.sleep(30)")
    started = time.monotonic()
    out = call(rt, py(code), conf, timeout=0.5)
    assert time.monotonic() - started < WITHIN  # killed at its timeout, not let run its 30 s
    assert not out.ok and out.content.startswith("timed out after 0.5 s (killed)")
    assert "started" in out.content  # the grandchild was running when the timeout struck
    deadline = time.monotonic() + WITHIN
    while alive(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive(marker) == []
    assert my_children() == []  # reaped: no zombie left


def test_the_operators_stop_interrupts_within_a_second(rt: Runtime, conf: CommandWorld) -> None:
    started = time.monotonic()
    rt.should_stop = lambda: time.monotonic() - started > 0.3
    out = call(rt, ["sleep", "30"], conf)
    assert time.monotonic() - started < WITHIN
    assert not out.ok and out.content.startswith("stopped by the operator (killed)")
    assert my_children() == []


def test_an_escapee_holding_the_output_is_killed_at_once(rt: Runtime, conf: CommandWorld) -> None:
    """A setsid'd grandchild that keeps the output pipe open neither holds the call up nor outlives it."""
    marker = f"27.{uuid.uuid4().int % 10**6:06d}"
    code = f"import subprocess; subprocess.Popen(['sleep', '{marker}'], start_new_session=True); print('bye')"
    started = time.monotonic()
    try:
        out = call(rt, py(code), conf)
        assert time.monotonic() - started < WITHIN  # not the grandchild's 27 s
        assert out.ok and "bye" in out.content
        assert alive(marker) == []
        assert my_children() == []
    finally:
        for pid in alive(marker):
            os.kill(pid, 9)


def test_a_failing_stop_check_is_not_a_crash(rt: Runtime, conf: CommandWorld) -> None:
    def broken() -> bool:
        raise RuntimeError("bug")

    rt.should_stop = broken
    out = call(rt, py("print('fine')"), conf)
    assert out.ok and "fine" in out.content


def test_environment_is_a_whitelist(rt: Runtime, conf: CommandWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-openai")
    monkeypatch.setenv("AGENT_CONSOLE_ANTHROPIC_API_KEY", "sk-secret-anthropic")
    monkeypatch.setenv("SOME_OTHER", "inherited")
    out = call(rt, ["env"], conf, env={"MY_SETTING": "a value with spaces"})
    assert out.ok
    env = dict(line.split("=", 1) for line in out.content.splitlines()[1:])
    assert "secret" not in out.content and "inherited" not in out.content
    assert not any(k.endswith("_API_KEY") or k.startswith("AGENT_CONSOLE") for k in env)
    if conf.unconfined:
        assert env["HOME"] == os.path.realpath(rt.paths.root)
        assert env["PATH"] == os.environ["PATH"]
    else:  # an empty HOME of its own, and the PATH of the toolchain it sees (not the operator's)
        assert (env["HOME"], env["PATH"]) == (HOME, SANDBOX_PATH)
    assert (env["LANG"], env["LC_ALL"], env["TMPDIR"], env["TERM"]) == ("C.UTF-8", "C.UTF-8", "/tmp", "dumb")
    assert env["MY_SETTING"] == "a value with spaces"
    # bwrap's --chdir also sets PWD; nothing else
    assert set(env) - {"PWD"} == {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "TERM", "MY_SETTING"}


def test_a_missing_or_unrunnable_program_is_one_clear_line(rt: Runtime, conf: CommandWorld) -> None:
    out = call(rt, ["no-such-program-xyz", "--flag"], conf)
    assert not out.ok and "\n" not in out.content
    where = "on PATH" if conf.unconfined else "on the sandbox's PATH"
    assert f"cmd could not run: 'no-such-program-xyz' was not found {where}" in out.content
    script = rt.paths.root / "check.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    out = call(rt, ["./check.sh"], conf)
    assert not out.ok and "\n" not in out.content and "'./check.sh' is not executable" in out.content
    script.chmod(0o755)
    out = call(rt, ["./check.sh"], conf)
    assert out.ok and out.content.endswith("\nhi")


def test_a_job_folder_that_vanished_is_a_result_not_a_crash(rt: Runtime, conf: CommandWorld) -> None:
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
    out = call(rt, ["touch", "ran"], UNCONFINED, name="mark")
    assert out.ok and marker.exists()
    assert seen == [({"command": "mark", "started": True}, False)]


def test_a_call_interrupted_by_a_crash_is_not_run_again(rt: Runtime, conf: CommandWorld) -> None:
    rt.current_call = "c1"
    rt.redo["c1"] = {"command": "mark", "started": True}
    out = call(rt, ["touch", "ran"], conf, name="mark")
    assert not out.ok
    assert out.content == ("mark was interrupted by a crash of the harness before its result was recorded; it may "
                           "have run partly or fully. Check its effects, and call it again if it is needed.")
    assert not (rt.paths.root / "ran").exists()
    assert "c1" not in rt.redo


# -- failing closed -----------------------------------------------------------------------------------------
FAKE_VERSION = "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'bubblewrap 0.11.0'; exit 0; fi\n"


def fake_bwrap(folder: Path, body: str, name: str = "bwrap") -> str:
    fake = folder / name
    fake.write_text(FAKE_VERSION + body)
    fake.chmod(0o755)
    return str(fake)


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[tuple[str, str]]], None]:
    """Make the candidates bwraps of the test's choosing (none: bubblewrap missing)."""
    def use(paths: list[tuple[str, str]]) -> None:
        monkeypatch.setattr(confine, "candidates", lambda: list(paths))
    monkeypatch.setattr(confine, "_found", {})
    return use


def test_without_bubblewrap_a_call_is_refused_with_an_event_and_nothing_runs(rt: Runtime, no_bwrap) -> None:
    no_bwrap([])
    out = call(rt, ["touch", "ran"], CONFINED, name="mark")
    assert not out.ok and not (rt.paths.root / "ran").exists()
    assert out.content.startswith("mark was not run: its sandbox could not be set up (bubblewrap is not installed")
    assert "Nothing ran" in out.content
    rt.events.observe()
    [err] = [e for e in ev.read_events(rt.paths.events) if isinstance(e, ev.ErrorEvent)]
    assert err.where == "sandbox" and "mark was refused" in err.message and "next call tries again" in err.message


def test_a_probe_that_fails_once_refuses_one_call_and_the_next_tries_again(rt: Runtime, tmp_path: Path, no_bwrap,
                                                                         bwrap: Bwrap) -> None:
    """The issue's case: one failed probe (clone() refused for a moment) must not make a whole run unconfined,
    nor refuse it for ever."""
    count = tmp_path / "runs"
    # The whole first probe fails (it tries with and without a user namespace), then bwrap works again.
    flaky = fake_bwrap(tmp_path, f'n=$(cat "{count}" 2>/dev/null || echo 0); echo $((n+1)) > "{count}"\n'
                                 f'if [ "$n" -ge 2 ]; then exec "{bwrap.path}" "$@"; fi\n'
                                 "echo 'bwrap: Creating new namespace failed: Resource temporarily unavailable' >&2\n"
                                 "exit 1\n")
    no_bwrap([(flaky, "system")])
    first = call(rt, ["touch", "ran"], CONFINED, name="mark")
    assert not first.ok and not (rt.paths.root / "ran").exists()
    assert "Resource temporarily unavailable" in first.content
    second = call(rt, ["touch", "ran"], CONFINED, name="mark")
    assert second.ok and (rt.paths.root / "ran").exists()


def test_a_calls_own_setup_failure_is_a_refusal_not_its_output(rt: Runtime, tmp_path: Path, no_bwrap,
                                                              bwrap: Bwrap) -> None:
    """The probe passes, then a call's own sandbox fails to build: refused, reported, and the next call proves
    a bwrap again (the failure is never remembered)."""
    state = tmp_path / "calls"
    body = (f'n=$(cat "{state}" 2>/dev/null || echo 0); echo $((n+1)) > "{state}"\n'
            # the probe (runs 1 and 2: plain, then with the overlay of an extra path) and the fourth run work; the
            # call's own run (3) fails as bwrap fails
            f'if [ "$n" = 2 ]; then echo "bwrap: Can\'t mount tmpfs on /newroot/tmp: No space left" >&2; exit 1; fi\n'
            f'exec "{bwrap.path}" "$@"\n')
    no_bwrap([(fake_bwrap(tmp_path, body), "system")])
    out = call(rt, py("print('ran')"), CONFINED, name="mark")
    assert not out.ok and "ran" not in out.content.splitlines()[1:]
    assert out.content.startswith("mark was not run: its sandbox could not be set up (bwrap: Can't mount tmpfs")
    assert call(rt, py("print('ran')"), CONFINED, name="mark").content.endswith("\nran")


def test_a_bwrap_without_overlays_refuses_only_the_calls_of_a_job_with_extra_paths(rt: Runtime, tmp_path: Path,
                                                                                 no_bwrap, bwrap: Bwrap) -> None:
    """An extra folder is shown as an overlay (no socket in it reachable); a bubblewrap older than 0.10 cannot mount
    one: a job with extra paths is refused, saying why (fail closed, not a bind whose sockets connect); a job
    without them runs."""
    old = tmp_path / "old"
    old.mkdir()
    fake = old / "bwrap"
    fake.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'bubblewrap 0.9.0'; exit 0; fi\n"
                    f'exec "{bwrap.path}" "$@"\n')
    fake.chmod(0o755)
    no_bwrap([(str(fake), "system")])
    out = call(rt, py("print('ran')"), CONFINED, name="mark")
    assert out.content.startswith(f"mark was not run: its sandbox could not be set up (system {fake}: bubblewrap "
                                  "0.9.0 cannot mount the overlays that the job's extra read-only paths need "
                                  "(bubblewrap 0.10 or newer, and overlayfs in a user namespace: Linux 5.11))"), out
    assert call(rt, ["sh", "-c", "echo ran"], CommandWorld(), name="mark").content == "exit code 0\nran"


def test_a_command_that_prints_like_bwrap_is_its_own_output(rt: Runtime, bwrap: Bwrap) -> None:
    out = call(rt, ["sh", "-c", "echo 'bwrap: Creating new namespace failed' >&2; exit 1"], CONFINED)
    assert not out.ok and out.content == "exit code 1\nbwrap: Creating new namespace failed"
    rt.events.observe()
    assert not [e for e in ev.read_events(rt.paths.events) if isinstance(e, ev.ErrorEvent)]


def test_find_bwrap_says_why_and_remembers_only_success(tmp_path: Path, no_bwrap, bwrap: Bwrap) -> None:
    missing = str(tmp_path / "no-bwrap")
    old = fake_bwrap(tmp_path, "exit 1\n", "old")
    old_text = Path(old).read_text().replace("0.11.0", "0.6.2")
    Path(old).write_text(old_text)
    broken = fake_bwrap(tmp_path, "echo 'bwrap: setting up uid map: Permission denied' >&2; exit 1\n", "broken")
    why = find_bwrap([(missing, "system"), (old, "system"), (broken, "bundled")])
    assert isinstance(why, str)
    assert "not an executable file" in why and "0.6.2 is too old" in why and "uid map: Permission denied" in why
    works = fake_bwrap(tmp_path, f'exec "{bwrap.path}" "$@"\n', "works")
    found = find_bwrap([(broken, "system"), (works, "bundled")])
    assert isinstance(found, Bwrap) and found.path == works and found.label == "bubblewrap 0.11.0 (bundled)"
    Path(works).write_text(FAKE_VERSION + "exit 1\n")
    assert find_bwrap([(broken, "system"), (works, "bundled")]) is found  # remembered once proved
    assert isinstance(find_bwrap([(broken, "system"), (works, "bundled")], refresh=True), str)


# -- confinement (bubblewrap) ----------------------------------------------------------------------------------
def test_the_real_probe_finds_bubblewrap(bwrap: Bwrap) -> None:
    assert "bubblewrap" in bwrap.label and os.access(bwrap.path, os.X_OK)
    assert find_bwrap() is bwrap


def test_writes_only_inside_the_job_folder(rt: Runtime, bwrap: Bwrap, tmp_path: Path) -> None:
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
        out = call(rt, py(code, *targets), CONFINED)
        got = results(out)
        assert got["inside"] == "OK" and got["subdir"] == "OK" and got["home-tool-cache"] == "OK"
        assert (rt.paths.root / "made-inside.txt").read_text() == "x"
        for target in targets:
            assert not os.path.exists(target), target
        if var_tmp is not None:
            assert got["outside1"] == "DENIED ENOENT"  # /var is not in a command's world at all
    finally:
        if var_tmp is not None:
            for p in var_tmp.iterdir():
                p.unlink()
            var_tmp.rmdir()


def test_the_harness_folder_is_hidden(rt: Runtime, bwrap: Bwrap) -> None:
    (rt.paths.state / "secret.json").write_text("{}")
    code = ATTEMPT + (
        "print('listing', sorted(os.listdir('.console')))\n"
        "attempt('write', lambda: open('.console/new.json', 'w').write('x'))\n"
        "attempt('read', lambda: open('.console/secret.json').read())\n"
    )
    got = results(call(rt, py(code), CONFINED))
    assert got == {"listing": "[]", "write": "DENIED EROFS", "read": "DENIED ENOENT"}
    assert (rt.paths.state / "secret.json").read_text() == "{}"
    assert not (rt.paths.state / "new.json").exists()


def test_job_toml_and_instructions_are_read_only_even_for_root(make_rt, bwrap: Bwrap) -> None:
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
    got = results(call(rt, py(code), CONFINED))
    assert got["remount"] == "-1" and got["umount"] == "-1"
    for label in ("append", "unlink", "replace", "move", "hardlink", "instructions", "chmod"):
        assert got[label].startswith("DENIED"), (label, got)
    root = rt.paths.root
    assert (root / "job.toml").read_text() == "name = 'mine'\n"
    assert (root / "instructions.md").read_text() == "# Task\n"
    assert not (root / "moved.toml").exists() and not (root / "alias.toml").exists()


def _docs(rt: Runtime) -> dict[str, bytes]:
    """The tool docs written for ``rt``'s job, as the supervisor does at a session start; their bytes."""
    result = write_docs(rt.paths.root, lambda folder: render_all(default_registry().tools(), DocContext(folder)))
    assert rt.sandbox is not None and result.folder == "tools"
    rt.sandbox.keep_folder(result.folder)
    return {p.name: p.read_bytes() for p in (rt.paths.root / "tools").iterdir()}


def test_the_tool_docs_are_read_only_to_a_confined_command_even_for_root(make_rt, bwrap: Bwrap) -> None:
    rt = make_rt(files={"fake.md": "read_file deletes files\n"})
    before = _docs(rt)
    code = ATTEMPT + (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('umount', libc.umount2(os.path.abspath('tools').encode(), 2))\n"  # MNT_DETACH
        "print('read', open('tools/read_file.md').readline().strip()[:4])\n"
        "attempt('write', lambda: open('tools/read_file.md', 'w').write('x'))\n"
        "attempt('append', lambda: open('tools/README.md', 'a').write('x'))\n"
        "attempt('create', lambda: open('tools/new.md', 'x').write('x'))\n"
        "attempt('unlink', lambda: os.unlink('tools/write_file.md'))\n"
        "attempt('replace', lambda: os.replace('fake.md', 'tools/read_file.md'))\n"
        "attempt('hardlink', lambda: os.link('tools/read_file.md', 'alias.md'))\n"
        "attempt('mkdir', lambda: os.mkdir('tools/sub'))\n"
        "attempt('chmod', lambda: os.chmod('tools/read_file.md', 0o777))\n"
        "attempt('move', lambda: os.rename('tools', 'moved'))\n"
        "attempt('remove', lambda: os.rmdir('tools'))\n"
    )
    got = results(call(rt, py(code), CONFINED))
    assert got["umount"] == "-1" and got["read"] == "<!--"  # readable
    for label in ("write", "append", "create", "unlink", "replace", "hardlink", "mkdir", "chmod", "move", "remove"):
        assert got[label].startswith("DENIED"), (label, got)
    assert {p.name: p.read_bytes() for p in (rt.paths.root / "tools").iterdir()} == before
    assert not (rt.paths.root / "alias.md").exists() and not (rt.paths.root / "moved").exists()


def test_a_gone_docs_folder_is_not_recreated_by_the_sandbox(rt: Runtime, bwrap: Bwrap) -> None:
    """No mount point is made for a docs folder that is not there (an empty tools/ would be the job's own)."""
    _docs(rt)
    for p in (rt.paths.root / "tools").iterdir():
        p.unlink()
    (rt.paths.root / "tools").rmdir()
    assert call(rt, ["true"], CONFINED).ok
    assert not os.path.lexists(rt.paths.root / "tools")


def test_a_docs_folder_swapped_for_a_symlink_refuses_the_call(rt: Runtime, bwrap: Bwrap, tmp_path: Path) -> None:
    _docs(rt)
    os.rename(rt.paths.root / "tools", tmp_path / "elsewhere")
    (rt.paths.root / "tools").symlink_to(tmp_path / "elsewhere")
    out = call(rt, ["touch", "ran"], CONFINED)
    assert not out.ok and "\n" not in out.content and "tools (the tool docs) is not a folder" in out.content
    assert not (rt.paths.root / "ran").exists()


def test_an_absent_job_toml_cannot_be_created(rt: Runtime, bwrap: Bwrap) -> None:
    code = ATTEMPT + "attempt('create', lambda: open('job.toml', 'w').write('[model]\\nbase_url = \"http://evil\"'))\n"
    got = results(call(rt, py(code), CONFINED))
    assert got["create"].startswith("DENIED")
    assert not os.path.lexists(rt.paths.root / "job.toml")  # the stand-in mount point is removed again


def test_a_symlinked_job_toml_is_refused_not_bypassed(make_rt, bwrap: Bwrap) -> None:
    rt = make_rt(files={"conf/job.toml": "name = 'x'\n"})
    (rt.paths.root / "job.toml").symlink_to("conf/job.toml")
    out = call(rt, ["touch", "ran"], CONFINED)
    assert not out.ok and "\n" not in out.content and "job.toml is a symlink" in out.content
    assert not (rt.paths.root / "ran").exists()


def test_no_network_not_even_the_hosts_loopback(rt: Runtime, bwrap: Bwrap) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        server.setblocking(False)
        port = str(server.getsockname()[1])
        code = ("import socket, sys\n"
                "socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3)\n"
                "print('connected')")
        confined = call(rt, py(code, port), CONFINED)
        assert not confined.ok and "connected" not in confined.content
        assert "Connection refused" in confined.content or "unreachable" in confined.content
        with pytest.raises(BlockingIOError):
            server.accept()
        free = call(rt, py(code, port), UNCONFINED)  # the same command unconfined reaches the server: the test can fail
        assert free.ok and free.content.endswith("\nconnected")
        server.accept()[0].close()


def test_a_symlinked_job_root_with_spaces(make_rt, bwrap: Bwrap, tmp_path: Path) -> None:
    real = tmp_path / "my job folder"
    rt = make_rt(root=real, link=tmp_path / "link to job")
    out = call(rt, py("import os; print(os.getcwd()); open('made here.txt', 'w').write('x')"), CONFINED)
    assert out.ok and out.content.splitlines()[1] == str(real.resolve())
    assert (real / "made here.txt").read_text() == "x"


def test_nothing_outlives_a_confined_command(rt: Runtime, bwrap: Bwrap) -> None:
    marker = f"28.{uuid.uuid4().int % 10**6:06d}"
    code = ("import subprocess, os\n"
            f"subprocess.Popen(['sleep', '{marker}'], start_new_session=True)\n"
            "print('left behind')")
    out = call(rt, py(code), CONFINED)
    assert out.ok and "left behind" in out.content
    deadline = time.monotonic() + WITHIN
    while alive(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive(marker) == []
