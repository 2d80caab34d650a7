"""Whether a job's ``[[tools]]`` commands can be started, checked before a run starts.

Apart from console.engine.tool_setup (which sets the tools up inside a run: its runtime, its sandbox, their docs),
so that the command that checks a job and hands the run to a runner (``run --detach``) does not load those."""

from __future__ import annotations

from collections.abc import Sequence

from console.engine.job_files import JobError, JobPaths, one_line
from console.engine.tools.command_config import CommandToolConfig, program_problem
from console.engine.tools.limits import CommandWorld


def check_commands(paths: JobPaths, tools: Sequence[CommandToolConfig], world: CommandWorld) -> None:
    """Every ``[[tools]]`` command's program can be started, before the run starts: resolved as a call will
    resolve it (the sandbox's PATH and what it shows, or the operator's PATH with ``--unconfined``), so a
    ``python4`` is a :class:`JobError` naming its key now, not a failed call and a stuck agent an hour later.
    ``paths``: the job folder the run is made from (a copy keeps what a command finds in it)."""
    for i, tool in enumerate(tools):
        problem = program_problem(tool, str(paths.root), world, at_start=True)
        if problem:
            raise JobError(f"{one_line(str(paths.job_toml), 0)}: key 'tools.{i}.command': tool '{tool.name}' "
                           f"cannot run: {problem}")
