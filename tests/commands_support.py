"""Shared by the tests of job-declared commands: a runtime, one call through the registry, the Python they run,
the worlds (confined, unconfined), and the bubblewrap fixture (skipped without bubblewrap, except in CI where a
missing one fails: the confinement must be proved there)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from console.engine import events as ev
from console.engine.job import JobPaths
from console.engine.messages import ToolCall
from console.engine.runtime import Runtime
from console.engine.tools.commands import CommandToolConfig, build_command_tools
from console.engine.tools.confine import Bwrap, find_bwrap
from console.engine.tools.limits import CommandWorld
from console.engine.tools.registry import ToolOutcome, ToolRegistry

# The Python the tests' commands run: the venv's base interpreter, which a confined command sees once its
# installation folder is one of the job's read-only paths (a venv under /tmp, or anywhere, stays invisible).
PY = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
PY_HOME = os.path.realpath(sys.base_prefix)
CONFINED = CommandWorld(read_only=(PY_HOME,))
UNCONFINED = CommandWorld(unconfined=True)


@pytest.fixture(scope="module")
def bwrap() -> Bwrap:
    found = find_bwrap()
    if not isinstance(found, Bwrap):
        why = f"bubblewrap confinement is not available here: {found}"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return found


@pytest.fixture(params=["confined", "unconfined"])
def conf(request: pytest.FixtureRequest) -> CommandWorld:
    if request.param == "unconfined":
        return UNCONFINED
    request.getfixturevalue("bwrap")
    return CONFINED


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


def call(rt: Runtime, command: list[str], world: CommandWorld, **cfg: Any) -> ToolOutcome:
    """One call through the registry, as the loop dispatches it."""
    config = CommandToolConfig(name=cfg.pop("name", "cmd"), description="a test command", command=command, **cfg)
    reg = ToolRegistry(build_command_tools([config], world))
    parsed = reg.parse(ToolCall(id="c1", name=config.name, arguments="{}"))
    assert not isinstance(parsed, ToolOutcome), parsed
    return reg.run(rt, *parsed)


def py(code: str, *args: str) -> list[str]:
    return [PY, "-c", code, *args]


def alive(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line (its arguments joined by spaces) contains ``marker``."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" "):
                    found.append(int(pid))
            except OSError:
                continue
    return found


def my_children() -> list[str]:
    """This process's children, but for the PostgreSQL servers it runs for the shared store's tests (a worker of
    the suite may hold one for the whole session)."""
    from tests.pg_server import RUNNING

    out: list[str] = []
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            out += Path(f"/proc/{os.getpid()}/task/{task}/children").read_text().split()
        except OSError:
            continue
    return [pid for pid in out if int(pid) not in RUNNING]


