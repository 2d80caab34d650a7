"""A [[tools]] command whose program cannot be started is a job.toml error at the run's start (exit 2, one line
naming the key), never a failed call and a stuck agent an hour later.

The check is the resolution a call makes (console.engine.tools.commands.program_problem), done before the run;
it needs no bubblewrap, so these tests mean the same with and without it. The one test that runs commands in the
sandbox (what the check lets through does start there) uses the shared bwrap fixture: skipped without it,
except in CI where a missing one fails.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from console.cli import main
from console.engine.command_check import check_commands
from console.engine.job import JobError, JobPaths
from console.engine.job_config import load_job_config
from console.engine.tools.commands import CommandToolConfig
from console.engine.tools.confine import SANDBOX_PATH
from console.engine.tools.limits import CommandWorld
from tests.commands_support import CONFINED, UNCONFINED, call

BAD_16 = """\
[[tools]]
name = "lint"
description = "Run the linter"
command = ["sh", "-c", "true"]

[[tools]]
name = "check"
description = "Check report.md"
command = ["python4", "check_report.py"]
timeout = 30
"""


def _job(tmp_path: Path, toml: str, files: dict[str, str] | None = None, name: str = "job") -> JobPaths:
    root = tmp_path / name
    root.mkdir()
    (root / "instructions.md").write_text("# Task\n\nDo it.\n", encoding="utf-8")
    (root / "job.toml").write_text(toml, encoding="utf-8")
    for rel, text in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return JobPaths(root)


def _tool(*command: str, **kw: object) -> CommandToolConfig:
    return CommandToolConfig(name=str(kw.pop("name", "check")), description="a check", command=list(command), **kw)


def _problem(paths: JobPaths, world: CommandWorld, *command: str, **kw: object) -> str | None:
    try:
        check_commands(paths, [_tool(*command, **kw)], world)
    except JobError as exc:
        return str(exc)
    return None


def _no_runs() -> bool:
    runs = Path(os.environ["AGENT_CONSOLE_DATA_DIR"]) / "runs"
    return not runs.exists() or not any(runs.iterdir())


# -- the start of a run -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("unconfined", [False, True])
def test_a_program_not_on_path_exits_2_with_one_line_naming_the_key(tmp_path, capsys, unconfined: bool) -> None:
    paths = _job(tmp_path, BAD_16, {"check_report.py": "print('ok')\n"})
    code = main(["run", str(paths.root), "--headless", "--speed", "0", *(["--unconfined"] if unconfined else [])])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    [line] = err.splitlines()
    where = "on PATH" if unconfined else "on the sandbox's PATH"
    assert line.startswith(f"agent-console: {paths.job_toml}: key 'tools.1.command': tool 'check' cannot run: "
                           f"'python4' was not found {where} ("), line
    if not unconfined:
        assert f"({SANDBOX_PATH})" in line  # what was looked through
    assert "Traceback" not in out + err and out == ""
    assert _no_runs()  # checked before the copy: no run folder left behind
    assert not (paths.root / ".console").exists()


def test_the_same_job_with_a_program_that_exists_starts(tmp_path, capsys) -> None:
    paths = _job(tmp_path, BAD_16.replace("python4", "sh"), {"check_report.py": "print('ok')\n"})
    code = main(["run", str(paths.root), "--headless", "--speed", "0", "--max-turns", "2"])
    out, err = capsys.readouterr()
    assert code != 2 and "tools." not in err, (code, err)
    assert out.startswith("run ") and not _no_runs()


def test_a_resume_in_place_checks_again(tmp_path, capsys) -> None:
    # A program removed (or job.toml edited) between a stop and a resume: the resume says so at once.
    paths = _job(tmp_path, BAD_16.replace("python4", "sh"))
    assert main(["run", str(paths.root), "--in-place", "--headless", "--speed", "0", "--max-turns", "1"]) != 2
    (paths.root / "job.toml").write_text(BAD_16, encoding="utf-8")
    capsys.readouterr()
    assert main(["run", str(paths.root), "--in-place", "--headless", "--speed", "0"]) == 2
    assert "key 'tools.1.command'" in capsys.readouterr().err


# -- what the check lets through and what it refuses -------------------------------------------------------------
def test_arguments_are_not_checked_only_the_program(tmp_path) -> None:
    paths = _job(tmp_path, "")
    assert _problem(paths, CONFINED, "sh", "check_missing_for_now.sh") is None  # sh resolves; its script is data
    assert "'python4' was not found on the sandbox's PATH" in (_problem(paths, CONFINED, "python4", "x.py") or "")


def test_the_job_env_path_is_the_path_searched(tmp_path) -> None:
    # A tool's env may set PATH; the check searches what the call would (here a folder inside the job).
    paths = _job(tmp_path, "")
    tools = paths.root / "bin"
    tools.mkdir()
    prog = tools / "mycheck"
    prog.write_text("#!/bin/sh\ntrue\n")
    prog.chmod(0o755)
    assert "not found" in (_problem(paths, CONFINED, "mycheck") or "")
    assert _problem(paths, CONFINED, "mycheck", env={"PATH": f"{tools}:/usr/bin"}) is None
    assert _problem(paths, CONFINED, "mycheck", env={"PATH": "bin"}) is None  # relative to the job folder


def test_a_script_inside_the_job_folder(tmp_path) -> None:
    paths = _job(tmp_path, "", {"check.sh": "#!/bin/sh\nexit 0\n", "data/x": ""})
    script = paths.root / "check.sh"
    # Not executable: the call would fail the same way, so the start says it (chmod +x fixes it).
    assert "'./check.sh' is not executable" in (_problem(paths, CONFINED, "./check.sh") or "")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    assert _problem(paths, CONFINED, "./check.sh") is None
    assert _problem(paths, CONFINED, str(script)) is None  # absolute, inside the job folder
    assert "is a folder" in (_problem(paths, CONFINED, "./data") or "")
    # Not there yet, inside the job folder: another command may build it (cargo build, then ./target/...).
    assert _problem(paths, CONFINED, "./target/release/app") is None
    # Not there, outside the job folder: nothing of the run can make it.
    assert "does not exist" in (_problem(paths, CONFINED, "../elsewhere/app") or "")
    assert "does not exist" in (_problem(paths, UNCONFINED, str(tmp_path / "nowhere" / "app")) or "")


def test_a_link_out_of_the_job_folder_does_not_pass_as_inside(tmp_path) -> None:
    paths = _job(tmp_path, "")
    (tmp_path / "outside").mkdir()
    (paths.root / "out").symlink_to(tmp_path / "outside", target_is_directory=True)
    assert "does not exist" in (_problem(paths, CONFINED, "./out/app") or "")


def test_a_program_the_sandbox_hides_passes_only_unconfined(tmp_path) -> None:
    # Outside the job folder and the toolchain (a venv in the operator's home, say): a confined command cannot
    # see it, an unconfined one can.
    paths = _job(tmp_path, "")
    elsewhere = tmp_path / "venv" / "bin"
    elsewhere.mkdir(parents=True)
    prog = elsewhere / "pytest"
    prog.write_text("#!/bin/sh\ntrue\n")
    prog.chmod(0o755)
    confined = _problem(paths, CONFINED, str(prog)) or ""
    assert "key 'tools.0.command'" in confined and "which commands cannot see" in confined
    assert _problem(paths, UNCONFINED, str(prog)) is None
    # ...or once the operator adds its folder to [sandbox] read_only.
    assert _problem(paths, CommandWorld(read_only=(str(tmp_path / "venv"),)), str(prog)) is None


def test_hostile_program_names_stay_one_line(tmp_path) -> None:
    paths = _job(tmp_path, "")
    text = _problem(paths, CONFINED, "evil\n\x1b]0;pwned\x07name") or ""
    assert "\n" not in text and "\x1b" not in text and "\x07" not in text and "not found" in text


def test_the_start_and_a_call_say_the_same(rt, tmp_path) -> None:
    # The call's own check (made before any sandbox is asked for, so with or without bubblewrap) and the start's
    # are one resolution: the same words.
    paths = JobPaths(rt.paths.root)
    for world in (CONFINED, UNCONFINED):
        at_start = _problem(paths, world, "python4", "x.py") or ""
        out = call(rt, ["python4", "x.py"], world, name="check")
        assert not out.ok
        problem = at_start.split("cannot run: ", 1)[1]
        assert out.content == f"check could not run: {problem}.", (out.content, at_start)


def test_what_the_check_lets_through_runs_in_the_sandbox(rt, bwrap) -> None:
    # With bubblewrap (CI): a program the start accepts from the sandbox's PATH is one the sandbox starts.
    paths = JobPaths(rt.paths.root)
    script = paths.root / "check.sh"
    script.write_text("#!/bin/sh\necho checked\n")
    script.chmod(0o755)
    for command in (["sh", "-c", "echo checked"], ["./check.sh"], ["env", "sh", "check.sh"]):
        assert _problem(paths, CONFINED, *command) is None
        out = call(rt, command, CONFINED)
        assert out.ok and "checked" in out.content, (command, out.content)


def test_load_job_config_alone_does_not_resolve_programs(tmp_path) -> None:
    # job.toml's shape is checked where it is read (no world yet); the program where the world is known.
    paths = _job(tmp_path, BAD_16)
    assert load_job_config(paths).tools[1].command[0] == "python4"
