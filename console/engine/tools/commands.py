"""Job-declared command tools: ``[[tools]]`` in job.toml.

The operator declares a tool by name, description and an argv ``command`` (never a shell), with a
timeout and an output limit; the agent calls it with no arguments, so it can run exactly what the
operator wrote and nothing else (only the operator edits job.toml: the sandbox refuses the agent's
writes to it, and a command sees it read-only).

A call runs the argv in the job folder with stdin from /dev/null, with an environment built from a
whitelist (PATH, locale, HOME, TMPDIR, TERM and the job's ``env``), never the harness's own (its API
keys, its AGENT_CONSOLE_* settings), in the world :mod:`.confine` makes for it (the job folder, a read-only
toolchain, private /tmp and HOME, no network, nothing of the operator's) and within the bounds
:mod:`.process` enforces (time, processes, memory, CPU, open files, file size, the job folder's size).

Fail closed: when that world cannot be built for a call (no bubblewrap, a probe or the call's own setup
failing), the call is refused with a result that says why, an ``error`` event tells the operator, and
the next call tries again. Commands run unconfined only when the operator said so for the run
(``run --unconfined``), and every view says so.

The output (stdout and stderr merged) is read as it comes and at most ``max_output_kb`` is kept: the
first half and the last half (a test runner prints its summary last, a compiler its first error first),
the rest is only counted, so a command printing gigabytes costs no memory.

Crash safety: the intent to run is recorded (:meth:`Runtime.intent`) before the process starts. A call a
kill -9 interrupted is not run again on resume: whether it ran partly or fully is unknown, so the agent
is told to check its effects and call it again if needed. Nothing is done twice.
"""

from __future__ import annotations

import codecs
import os
import re
import shlex
import signal
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, Field, field_validator

from console.engine import events as ev
from console.engine.job import StrictSection, one_line
from console.engine.tools import seccomp
from console.engine.tools.cgroups import find_cgroups
from console.engine.tools.confine import (
    HOME,
    SANDBOX_PATH,
    TOOLCHAIN,
    Bwrap,
    ConfineError,
    bwrap_options,
    find_bwrap,
    forget,
    protected_binds,
    remove_stand_ins,
    within,
)
from console.engine.tools.docs import literal
from console.engine.tools.limits import MB, CommandWorld, describe_world
from console.engine.tools.process import Bounds, Launch, RunResult, run_bounded
from console.engine.tools.registry import Example, Failure, NoArgs, Tool, ToolOutcome
from console.engine.tools.repos import Repos, Swept, survey, sweep

if TYPE_CHECKING:
    from console.engine.runtime import Runtime

__all__ = [
    "CommandToolConfig",
    "CommandTools",
    "CommandWorld",
    "build_command_tools",
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


# -- the tool ---------------------------------------------------------------------------------------------
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


def _decode(data: bytes, *, cut_end: bool = False, cut_start: bool = False) -> str:
    if cut_start:  # the tail starts wherever the stream was cut: skip a partial UTF-8 character
        i = 0
        while i < min(3, len(data)) and 0x80 <= data[i] < 0xC0:
            i += 1
        data = data[i:]
    if cut_end:  # the head ends wherever the stream was cut: drop a partial character
        return codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=False)
    return data.decode("utf-8", "replace")


def _mb(n: float) -> str:
    return f"{n:,.0f} MB" if n >= 10 else f"{n:.1f} MB"


def _first_line(config: CommandToolConfig, res: RunResult, world: CommandWorld, cut: str) -> str:
    lim = world.limits
    if res.status == "timeout":
        return f"timed out after {config.timeout:g} s (killed)"
    if res.status == "deadline":
        return f"cut at {cut} after {res.seconds:.0f} s (killed); the run is winding down"
    if res.status == "stopped":
        return "stopped by the operator (killed)"
    if res.status == "host_files" and res.host_files is not None:
        used, most = res.host_files
        return (f"stopped: the host's table of open files was nearly full ({used:,} of {most:,}); a command may not "
                "leave the machine unable to open a file")
    if res.status == "folder" and res.unmeasurable:
        return (f"stopped: the job folder could not be measured ({res.unmeasurable}), so it counts as past its "
                f"limit of {_mb(world.max_job_mb)} (max_job_mb)")
    if res.status == "folder":
        size = (res.folder_bytes or 0) / MB
        return (f"stopped: the job folder grew to {_mb(size)}, past its limit of {_mb(world.max_job_mb)} "
                "(max_job_mb); delete what is not needed")
    code = res.returncode
    if res.oom:
        return f"killed: it went over its memory limit of {_mb(lim.memory_mb)}"
    if code is not None and code < 0:
        sig = -code
        if sig == signal.SIGXCPU:
            return f"killed: a process went over its CPU time limit of {lim.cpu_seconds} s"
        if sig == signal.SIGXFSZ:
            return f"killed: it wrote a file larger than its limit of {_mb(lim.file_size_mb)}"
        try:
            return f"killed by signal {signal.Signals(sig).name}"
        except ValueError:
            return f"killed by signal {sig}"
    # No duration here (the tool_result event has it): the same run must give the same result, or the
    # stuck detector never sees a repeated failure and identical turns never look identical.
    return f"exit code {code}"


def _render(config: CommandToolConfig, res: RunResult, world: CommandWorld, cut: str = "the job's deadline") -> str:
    first = _first_line(config, res, world, cut)
    if res.total == 0:
        body = "(no output)"
    elif res.shown >= res.total:
        body = _decode(res.head + res.tail).rstrip("\n")
    else:
        omitted = res.total - res.shown
        body = (_decode(res.head, cut_end=True) + f"\n[... {omitted} bytes omitted ...]\n"
                + _decode(res.tail, cut_start=True).rstrip("\n")
                + f"\n[output truncated: showed {res.shown} of {res.total} bytes]")
    if res.pipe_left_open:
        body += "\n[a background process kept the output open; its further output was not read]"
    if res.setid_removed:
        shown = ", ".join(one_line(p, 80) for p in res.setid_removed[:5])
        more = f" and {len(res.setid_removed) - 5} more" if len(res.setid_removed) > 5 else ""
        body += f"\n[the setuid/setgid bit was removed from {shown}{more}: files here are never setuid]"
    if res.unmeasurable and res.status != "folder":
        body += f"\n[the job folder could not be measured ({res.unmeasurable}): it counts as over max_job_mb]"
    limit = world.max_job_mb * MB
    if res.status != "folder" and res.folder_bytes is not None and res.folder_bytes > limit:
        body += (f"\n[the job folder now holds {_mb(res.folder_bytes / MB)}, past its limit of "
                 f"{_mb(world.max_job_mb)} (max_job_mb): the call failed, and writes are refused until it "
                 "shrinks]")
    return f"{first}\n{body}"


def _swept_note(swept: Swept) -> str:
    """What the look after the call made harmless in the job's repositories, as the call's result says it."""
    out = ""
    if swept.done:
        shown = "; ".join(one_line(d, 300) for d in swept.done[:5])
        more = f"; and {len(swept.done) - 5} more" if len(swept.done) > 5 else ""
        out += f"\n[made harmless, as git would run it on the operator's machine: {shown}{more}]"
    if swept.failed:
        out += (f"\n[could not be made harmless: {one_line(', '.join(swept.failed), 300)}; the call failed and the "
                "operator was told]")
    if swept.problem:
        why = one_line(swept.problem, 200)
        out += f"\n[the job folder's repositories could not all be looked at after the call ({why}): the call failed]"
    return out


def _interrupted(name: str) -> str:
    return (f"{name} was interrupted by a crash of the harness before its result was recorded; it may have run "
            "partly or fully. Check its effects, and call it again if it is needed.")


def _keep_bytes(config: CommandToolConfig, rt: Runtime) -> int:
    # Also within the context budget of one observation (the loop cuts longer results at their start, which
    # would lose the tail kept here); a little room is left for the status line and the notes.
    budget = max(1024, int(getattr(rt, "observation_chars", 60_000)) - 400)
    return max(1, min(config.max_output_kb * 1024, budget))


def _refused(rt: Runtime, name: str, why: str) -> ToolOutcome:
    """Fail closed: the call is not run; the agent gets the reason, the operator an event (one line)."""
    text = one_line(why, 400)
    rt.events.emit(ev.ErrorEvent, message=f"{name} was refused: the sandbox could not be set up ({text}); the "
                                          "next call tries again", where="sandbox", recoverable=True)
    return ToolOutcome(False, f"{name} was not run: its sandbox could not be set up ({text}). Nothing ran; the "
                              "operator has been told. You may call it again later.")


def _seconds_to_cut(rt: Runtime) -> float | None:
    guards = getattr(rt, "guards", None)
    left = guards.seconds_to_cut() if guards is not None else None
    return left


def _run_tool(config: CommandToolConfig, world: CommandWorld, rt: Runtime) -> ToolOutcome:
    name = config.name
    root = os.path.realpath(rt.paths.root)
    if not os.path.isdir(root):
        return ToolOutcome(False, f"{name} could not run: the job folder {one_line(root)} no longer exists.")
    cut = _seconds_to_cut(rt)
    if cut is not None and cut <= 0:
        return ToolOutcome(False, f"{name} was not run: the job's time is up (its deadline passed); the run is "
                                  "winding down.")
    env = command_env(config, root, world)
    problem = program_problem(config, root, world)
    if problem:
        return ToolOutcome(False, f"{name} could not run: {problem}.")
    bwrap: Bwrap | None = None
    created: list[str] = []
    launch = Launch()
    # The job's repositories as they are before the call: bound read-only (as [sandbox] git says), and compared
    # after it, so what the call leaves that git would run on the operator's machine is made harmless.
    state_dir = rt.paths.state.name
    before = survey(root, state_dir)
    if not world.unconfined:
        if root == "/":
            return ToolOutcome(False, f"{name} was not run: the job folder is '/', which cannot be confined.")
        found = find_bwrap(writable=(root,), overlay=bool(world.read_only))
        if isinstance(found, str):
            return _refused(rt, name, found)
        bwrap = found
        try:
            kept = rt.sandbox.kept_folder if rt.sandbox is not None else None
            binds, created = protected_binds(root, (kept,) if kept else (), before, world.git)
        except ConfineError as exc:
            return ToolOutcome(False, f"{name} was not run: {exc} (the operator must fix the job folder).")
        try:
            options = bwrap_options(root, env, binds, world, bwrap.extra)
        except ConfineError as exc:
            remove_stand_ins(created)
            return _refused(rt, name, str(exc))
        launch = Launch(bwrap.path, options, seccomp.program())
    # The repositories' control files go into the call's record (when there are any), for the redo's sweep.
    facts, redo = rt.intent(lambda: {"command": name, "started": True} | ({"repos": r} if (r := before.record())
                                                                            else {}))
    if redo:
        remove_stand_ins(created)
        # It may have left what git would run: compared with what its record says was there before it.
        swept = sweep(root, Repos.from_record(facts.get("repos")), state_dir)
        return ToolOutcome(False, _interrupted(name) + _swept_note(swept))
    bounds = Bounds(timeout=config.timeout, limits=world.limits, cut_after=cut, folder=root,
                    folder_limit=int(world.max_job_mb * MB))
    try:
        res = run_bounded(config.command, cwd=root, env=env, keep=_keep_bytes(config, rt), bounds=bounds,
                          launch=launch, cgroups=find_cgroups(), should_stop=rt.should_stop)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        program = "bwrap" if bwrap is not None else one_line(config.command[0], 120)
        return ToolOutcome(False, f"{name} could not run '{program}': {why}.")
    finally:
        remove_stand_ins(created)
        swept = sweep(root, before, state_dir)
    if rt.sandbox is not None and res.folder_bytes is not None:
        rt.sandbox.set_job_bytes(res.folder_bytes)  # the file tools' running total, now that a command changed it
    if res.status == "setup_failed":
        if bwrap is not None and res.setup_error.startswith("bwrap: execvp"):
            # The sandbox was built; the program was not there to run in it.
            why = res.setup_error.removeprefix("bwrap: ")
            return ToolOutcome(False, f"{name} could not run in the sandbox: {one_line(why)}.")
        if bwrap is not None:
            forget(bwrap)
        return _refused(rt, name, res.setup_error or "unknown failure")
    # Fail closed: a command that left the job folder past max_job_mb failed, whatever its exit code (it wrote
    # faster than the watch looks: its result says so, and the folder's writes are refused until it shrinks).
    over = res.folder_bytes is not None and res.folder_bytes > world.max_job_mb * MB
    if swept.failed:
        rt.events.emit(ev.ErrorEvent, message=f"{name} left files a repository would run, which could not all be made "
                                              f"harmless: {one_line(', '.join(swept.failed), 300)}", where="sandbox",
                       recoverable=True)
    return ToolOutcome(res.status == "exited" and res.returncode == 0 and not over and not res.unmeasurable
                       and not swept.failed and not swept.problem, _render(config, res, world) + _swept_note(swept))


def _handler(config: CommandToolConfig, world: CommandWorld) -> Callable[[Runtime, NoArgs], ToolOutcome]:
    def handler(rt: Runtime, _args: NoArgs) -> ToolOutcome:
        try:
            return _run_tool(config, world, rt)
        except Exception as exc:  # nothing a command does may surface as a traceback
            return ToolOutcome(False, f"{config.name} could not run: {one_line(f'{type(exc).__name__}: {exc}')}")

    return handler


def shown_command(config: CommandToolConfig, limit: int = 80) -> str:
    return one_line(shlex.join(config.command), limit)


def build_command_tools(configs: Sequence[CommandToolConfig], world: CommandWorld, *,
                        reserved: Collection[str] = ()) -> list[Tool[Any]]:
    """One tool per ``[[tools]]`` table (no arguments). ``reserved``: the names of the built-in tools; a
    job tool named like one is a ValueError (one line naming the key), never a silent replacement."""
    tools: list[Tool[Any]] = []
    for i, config in enumerate(configs):
        if config.name in reserved:
            raise ValueError(f"key 'tools.{i}.name': '{config.name}' is the name of a built-in tool; "
                             "choose another")
        summary = f"run `{shown_command(config)}` (job-declared command)"
        tools.append(Tool(config.name, config.description, NoArgs, _handler(config, world), summary,
                          examples=(Example({}, "Run it (it takes no arguments)"),), errors=_ERRORS,
                          rules=_rules(config, world), details=_details(config)))
    return tools


# -- its doc (console.engine.tools.docs), from its job.toml entry ----------------------------------------------
_ERRORS = (
    Failure("the first line of the result is 'exit code N' with N not 0", "the output says why; fix the cause and "
            "call it again"),
    Failure("it timed out, or was killed for going over its memory, CPU time or file size limit",
            "make the work it has to do smaller; the limits are the operator's (job.toml), not yours to change"),
    Failure("the job folder grew past its limit (max_job_mb)", "delete what is not needed"),
    Failure("it was not run: its sandbox could not be set up", "nothing ran and the operator was told; do other "
            "work and call it again later"),
    Failure("the program could not be found or started", "the operator must fix the command in job.toml; tell them "
            "with add_note, and do not call it again"),
    Failure("a crash of the harness interrupted it", "it may have run partly: check its effects, call it again if "
            "needed"),
)


def _details(config: CommandToolConfig) -> str:
    return (f"Declared by the operator in job.toml. It runs exactly `{literal(shown_command(config, 400))}` (an argv, "
            "no shell) in the job folder, with no input, and returns its exit status and output; it takes no "
            "arguments.")


def _rules(config: CommandToolConfig, world: CommandWorld) -> tuple[str, ...]:
    keep = config.max_output_kb
    env = ", ".join(sorted(config.env)) if config.env else ""  # names only ([A-Z0-9_]: no brace to escape)
    sees = ("It runs unconfined (the operator's choice for this run): be careful, it can change anything."
            if world.unconfined else "The tool docs in {folder}/, job.toml and instructions.md are read-only to it; "
                                     ".console is hidden.")
    return (
        f"It is killed after {config.timeout:g} s.",
        f"At most {keep} KB of its output (stdout and stderr together) is kept: the first half and the last half.",
        "Its environment is PATH, HOME, TMPDIR, LANG, LC_ALL and TERM" + (f", and job.toml's {env}" if env else "")
        + "; nothing else of the harness's.",
        sees,
        f"What it sees and its bounds: {literal(describe_world(world))}",
    )
