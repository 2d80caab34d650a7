"""The ``[[tools]]`` table of job.toml, checked: each command's config and whether its program can be started.

Apart from :mod:`.commands` (the tool that runs them: its sandbox, bounds, events and docs), so that the check a
start makes before handing a run over (``run --detach``: console.engine.command_check, job_config) loads only
this: pydantic, the job's helpers and the sandbox's bounds (:mod:`.limits`)."""

from __future__ import annotations

import os
import re
from typing import Annotated

from pydantic import AfterValidator, Field, field_validator

from console.engine.job import StrictSection, one_line
from console.engine.tools.limits import HOME, SANDBOX_PATH, TOOLCHAIN, CommandWorld, within

__all__ = [
    "MAX_TOOLS",
    "CommandToolConfig",
    "CommandTools",
    "command_env",
    "program_problem",
]

MAX_TOOLS = 64
MAX_ARGV = 256
MAX_ARG_CHARS = 32_768
MAX_ENV = 100
MAX_TIMEOUT = 86_400.0
MAX_OUTPUT_KB = 10_240

_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


class CommandToolConfig(StrictSection):
    """One ``[[tools]]`` table of job.toml."""

    name: str
    description: str = Field(min_length=1, max_length=2000)
    command: list[str] = Field(min_length=1, max_length=MAX_ARGV)
    timeout: float = Field(default=120.0, gt=0, le=MAX_TIMEOUT)
    max_output_kb: int = Field(default=64, ge=1, le=MAX_OUTPUT_KB)
    env: dict[str, str] = Field(default_factory=dict, max_length=MAX_ENV)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError("a tool name is 1 to 64 letters, digits, '_' or '-' (e.g. run_tests)")
        return value

    @field_validator("description")
    @classmethod
    def _description(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the description is blank; say what the command does, for the agent")
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str]) -> list[str]:
        for i, arg in enumerate(value):
            if not arg:
                raise ValueError(f"argument {i} is empty; the command is an argv list, e.g. [\"ruff\", \"check\", "
                                 "\".\"]")
            if "\x00" in arg:
                raise ValueError(f"argument {i} contains a NUL character")
            if len(arg) > MAX_ARG_CHARS:
                raise ValueError(f"argument {i} is longer than {MAX_ARG_CHARS} characters")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for key, val in value.items():
            if not _ENV_NAME.fullmatch(key) or len(key) > 256:
                raise ValueError(f"'{one_line(key, 60)}' is not a variable name (capital letters, digits and '_', "
                                 "not starting with a digit)")
            if "\x00" in val:
                raise ValueError(f"the value of {key} contains a NUL character")
            if len(val) > MAX_ARG_CHARS:
                raise ValueError(f"the value of {key} is longer than {MAX_ARG_CHARS} characters")
        return value


def _unique_names(tools: list[CommandToolConfig]) -> list[CommandToolConfig]:
    seen: set[str] = set()
    for t in tools:
        if t.name in seen:
            raise ValueError(f"two tools are named '{t.name}'; each needs a name of its own")
        seen.add(t.name)
    return tools


# The type of job.toml's ``tools`` key: at most MAX_TOOLS, names unique (an error at key 'tools').
CommandTools = Annotated[list[CommandToolConfig], Field(max_length=MAX_TOOLS), AfterValidator(_unique_names)]


def command_env(config: CommandToolConfig, root: str, world: CommandWorld) -> dict[str, str]:
    """The whole environment of a command: a whitelist, never the harness's own (API keys stay out)."""
    env = {
        # Confined, the toolchain's PATH (the operator's may name folders the command cannot see).
        "PATH": (os.environ.get("PATH") or SANDBOX_PATH) if world.unconfined else SANDBOX_PATH,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": root if world.unconfined else HOME,
        "TMPDIR": "/tmp",
        "TERM": "dumb",
    }
    env.update(config.env)
    return env


def _visible(path: str, root: str, world: CommandWorld) -> bool:
    """Whether a confined command sees ``path`` (a real path)."""
    if any(within(path, h) for h in world.hide) and not within(path, root):
        return False
    seen = [root, *world.read_only, *(os.path.realpath("/" + t) for t in TOOLCHAIN)]
    return any(within(path, f) for f in seen)


def _program_problem(program: str, root: str, path: str, world: CommandWorld) -> str | None:
    """Why ``program`` cannot be started (in the sandbox, unless unconfined), or None if it looks runnable."""
    shown = one_line(program, 120)
    if "/" in program:
        candidates = [program if os.path.isabs(program) else os.path.join(root, program)]
    else:
        candidates = [os.path.join(d if os.path.isabs(d) else os.path.join(root, d), program)
                      for d in path.split(os.pathsep) if d]
    hidden: str | None = None
    for full in candidates:
        if not os.path.exists(full):
            continue
        if os.path.isdir(full):
            if "/" in program:
                return f"'{shown}' is a folder, not a program"
            continue
        real = os.path.realpath(full)
        if not world.unconfined and not _visible(real, root, world):
            hidden = hidden or real
            continue
        if not os.access(full, os.X_OK):
            return f"'{shown}' is not executable (permission denied)"
        return None
    if hidden is not None:
        return (f"'{shown}' is {one_line(hidden, 120)}, which commands cannot see (they see the job folder, the "
                "toolchain under /usr and job.toml's [sandbox] read_only paths): install it in the job folder, or "
                "have the operator add its folder to read_only")
    if "/" in program:
        return f"'{shown}' does not exist"
    where = "on PATH" if world.unconfined else "on the sandbox's PATH"
    return f"'{shown}' was not found {where} ({one_line(path, 200)})"


def program_problem(config: CommandToolConfig, root: str, world: CommandWorld, *, at_start: bool = False) -> str | None:
    """Why ``config``'s argv[0] cannot be started, resolved exactly as a call resolves it (the same PATH, the
    same folders the sandbox shows), or None. ``at_start`` (the run's start, before any call): a program
    named by a path inside the job folder that does not exist yet passes, since another command may build it
    (``["./target/release/app"]`` after ``cargo build``)."""
    program = config.command[0]
    root = os.path.realpath(root)
    if at_start and "/" in program:
        full = program if os.path.isabs(program) else os.path.join(root, program)
        if not os.path.lexists(full) and within(os.path.realpath(full), root):
            return None
    return _program_problem(program, root, command_env(config, root, world)["PATH"], world)
