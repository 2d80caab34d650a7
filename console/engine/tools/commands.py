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
import shlex
import signal
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from console.engine import events as ev
from console.engine.job_files import one_line
from console.engine.tools import seccomp
from console.engine.tools.cgroups import find_cgroups

# The config and the check of a command live apart (a start checks them without loading this module); the names
# are this module's too, as callers import them.
from console.engine.tools.command_config import (
    MAX_TOOLS,
    CommandToolConfig,
    CommandTools,
    command_env,
    program_problem,
)
from console.engine.tools.confine import (
    Bwrap,
    ConfineError,
    bwrap_options,
    find_bwrap,
    forget,
    protected_binds,
    remove_stand_ins,
)
from console.engine.tools.docs import literal
from console.engine.tools.limits import MB, CommandWorld, describe_world
from console.engine.tools.process import Bounds, Launch, RunResult, run_bounded
from console.engine.tools.registry import Example, Failure, NoArgs, Tool, ToolOutcome
from console.engine.tools.repos import Repos, Swept, survey, sweep

if TYPE_CHECKING:
    from console.engine.runtime import Runtime

__all__ = [
    "MAX_TOOLS",
    "CommandToolConfig",
    "CommandTools",
    "CommandWorld",
    "build_command_tools",
    "command_env",
    "program_problem",
]

# -- the tool ---------------------------------------------------------------------------------------------

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
