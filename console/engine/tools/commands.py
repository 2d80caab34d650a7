"""Job-declared command tools: ``[[tools]]`` in job.toml.

The operator declares a tool by name, description and an argv ``command`` (never a shell), with a
timeout and an output limit; the agent calls it with no arguments, so it can run exactly what the
operator wrote and nothing else (only the operator edits job.toml: the sandbox refuses the agent's
writes to it, and a confined command sees it read-only).

A call runs the argv in the job folder with stdin from /dev/null, in a session and process group of its
own, with an environment built from a whitelist (PATH, locale, HOME = the job folder, TMPDIR, TERM, and
the operator's ``env``), never the harness's own (its API keys, its AGENT_CONSOLE_* settings). Confined
by bubblewrap where it works (:mod:`console.engine.tools.confine`): no network, writes only in the job
folder. Where it does not, ``sandbox = "auto"`` (the default) runs the command unconfined and the run
says so once (:func:`confinement_notice`); ``sandbox = "required"`` refuses every call.

The output (stdout and stderr merged) is read as it comes and at most ``max_output_kb`` is kept: the
first half and the last half (a test runner prints its summary last, a compiler its first error first),
the rest is only counted, so a command printing gigabytes costs no memory. The timeout, and the
operator's stop (``rt.should_stop``, polled every 50 ms), kill the whole process group.

Crash safety: the intent to run is recorded (:meth:`Runtime.intent`) before the process starts. A call a
kill -9 interrupted is not run again on resume: whether it ran partly or fully is unknown, so the agent
is told to check its effects and call it again if needed. Nothing is done twice.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator

from console.engine.job import _Strict, one_line
from console.engine.tools.confine import (
    DEFAULT_PATH,
    ConfineError,
    Confinement,
    bwrap_options,
    detect_confinement,
    protected_binds,
    remove_stand_ins,
)
from console.engine.tools.registry import NoArgs, Tool, ToolOutcome

if TYPE_CHECKING:
    from console.engine.runtime import Runtime

__all__ = [
    "CommandToolConfig",
    "CommandTools",
    "Confinement",
    "SandboxMode",
    "build_command_tools",
    "confinement_notice",
    "detect_confinement",
    "run_command",
]

SandboxMode = Literal["auto", "required"]

MAX_TOOLS = 64
MAX_ARGV = 256
MAX_ARG_CHARS = 32_768
MAX_ENV = 100
MAX_TIMEOUT = 86_400.0
MAX_OUTPUT_KB = 10_240
# How often the run checks the clock and the operator's stop while a command runs.
POLL_SECONDS = 0.05
# After the command ends, how long the output pipe may stay open (a background process holding it).
DRAIN_SECONDS = 1.0
CHUNK = 1 << 16

_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


class CommandToolConfig(_Strict):
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


# -- running one command --------------------------------------------------------------------------------
@dataclass
class RunResult:
    status: Literal["exited", "timeout", "stopped"]
    returncode: int | None
    seconds: float
    head: bytes
    tail: bytes
    total: int
    # A background process kept the output pipe open after the command ended (unconfined only).
    pipe_left_open: bool = False

    @property
    def shown(self) -> int:
        return len(self.head) + len(self.tail)


class _Capture:
    """The first and last ``keep // 2`` bytes of a stream, and its length; nothing else is stored."""

    def __init__(self, keep: int) -> None:
        self.head_max = keep // 2
        self.tail_max = keep - self.head_max
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_max - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            excess = len(self.tail) - self.tail_max
            if excess > 0:
                del self.tail[:excess]


def _stop_requested(should_stop: Callable[[], bool]) -> bool:
    try:
        return bool(should_stop())
    except Exception:
        return False


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _exited(pid: int) -> bool:
    """True once ``pid`` has ended, without reaping it: its process group id stays ours to kill."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None and info.si_pid == pid


def _drain(fd: int, cap: _Capture) -> bool:
    """Read what is there (at most 4 MiB between two checks of the clock and the stop); True at the end."""
    for _ in range(64):
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return False
        if not data:
            return True
        cap.feed(data)
    return False


def run_command(argv: Sequence[str], *, cwd: str, env: dict[str, str], timeout: float, keep: int,
                should_stop: Callable[[], bool] = lambda: False, pass_fds: Sequence[int] = ()) -> RunResult:
    """Run ``argv`` (stdout and stderr merged) until it exits, times out or is stopped.

    The command gets a session and process group of its own; when it ends (or is killed) the whole group
    is killed, so nothing it started in the background lingers, and the process is always reaped.
    OSError if it cannot be started."""
    start = time.monotonic()
    proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                            pass_fds=tuple(pass_fds))
    assert proc.stdout is not None
    cap = _Capture(keep)
    status: Literal["exited", "timeout", "stopped"] = "exited"
    ended_at: float | None = None
    eof = False
    fd = proc.stdout.fileno()
    pidfd = -1
    try:
        os.set_blocking(fd, False)
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            with contextlib.suppress(AttributeError, OSError):
                # Readable when the process ends: an exit after its output is seen at once, not at the next poll.
                pidfd = os.pidfd_open(proc.pid)
            if pidfd >= 0:
                sel.register(pidfd, selectors.EVENT_READ)
            while True:
                for key, _ in sel.select(POLL_SECONDS):
                    if key.fd == fd:
                        eof = _drain(fd, cap)
                        if eof:
                            sel.unregister(fd)
                now = time.monotonic()
                if ended_at is None:
                    if _exited(proc.pid):
                        ended_at = now
                    elif now - start >= timeout:
                        status, ended_at = "timeout", now
                    elif _stop_requested(should_stop):
                        status, ended_at = "stopped", now
                    if ended_at is not None:
                        # Whatever the command left running in its group goes too (it is not reaped yet, so
                        # its process group id cannot have been reused).
                        _kill_group(proc.pid)
                        if pidfd >= 0:
                            sel.unregister(pidfd)
                if ended_at is not None and (eof or now - ended_at >= DRAIN_SECONDS):
                    break
    finally:
        if proc.returncode is None:
            _kill_group(proc.pid)
            proc.wait()
        proc.stdout.close()
        if pidfd >= 0:
            os.close(pidfd)
    return RunResult(status, proc.returncode, time.monotonic() - start, bytes(cap.head), bytes(cap.tail),
                     cap.total, pipe_left_open=not eof)


# -- the tool ---------------------------------------------------------------------------------------------
def command_env(config: CommandToolConfig, root: str) -> dict[str, str]:
    """The whole environment of a command: a whitelist, never the harness's own (API keys stay out)."""
    env = {
        "PATH": os.environ.get("PATH") or DEFAULT_PATH,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": root,
        "TMPDIR": "/tmp",
        "TERM": "dumb",
    }
    env.update(config.env)
    return env


def _program_problem(program: str, root: str, path: str) -> str | None:
    """Why ``program`` cannot be started, or None if it looks runnable."""
    shown = one_line(program, 120)
    if "/" in program:
        full = program if os.path.isabs(program) else os.path.join(root, program)
        if not os.path.exists(full):
            return f"'{shown}' does not exist"
        if os.path.isdir(full):
            return f"'{shown}' is a folder, not a program"
        if not os.access(full, os.X_OK):
            return f"'{shown}' is not executable (permission denied)"
        return None
    if shutil.which(program, path=path):
        return None
    for folder in path.split(os.pathsep):
        if folder and os.path.isfile(os.path.join(folder, program)):
            return f"'{shown}' is on PATH but not executable (permission denied)"
    return f"'{shown}' was not found on PATH ({one_line(path, 200)})"


def _decode(data: bytes, *, cut_end: bool = False, cut_start: bool = False) -> str:
    if cut_start:  # the tail starts wherever the stream was cut: skip a partial UTF-8 character
        i = 0
        while i < min(3, len(data)) and 0x80 <= data[i] < 0xC0:
            i += 1
        data = data[i:]
    if cut_end:  # the head ends wherever the stream was cut: drop a partial character
        return codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=False)
    return data.decode("utf-8", "replace")


def _render(config: CommandToolConfig, res: RunResult) -> str:
    if res.status == "timeout":
        first = f"timed out after {config.timeout:g} s (killed)"
    elif res.status == "stopped":
        first = "stopped by the operator (killed)"
    elif res.returncode is not None and res.returncode < 0:
        try:
            sig = signal.Signals(-res.returncode).name
        except ValueError:
            sig = str(-res.returncode)
        first = f"killed by signal {sig}"
    else:
        # No duration here (the tool_result event has it): the same run must give the same result, or
        # the stuck detector never sees a repeated failure and identical turns never look identical.
        first = f"exit code {res.returncode}"
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
    return f"{first}\n{body}"


def _interrupted(name: str) -> str:
    return (f"{name} was interrupted by a crash of the harness before its result was recorded; it may have run "
            "partly or fully. Check its effects, and call it again if it is needed.")


def _refusal(mode: SandboxMode, confinement: Confinement) -> str:
    return (f"refused: this job requires a sandbox (sandbox = \"{mode}\") and none is available here: "
            f"{one_line(confinement.detail)}")


def _keep_bytes(config: CommandToolConfig, rt: Runtime) -> int:
    # Also within the context budget of one observation (the loop cuts longer results at their start, which
    # would lose the tail kept here); a little room is left for the status line and the notes.
    budget = max(1024, int(getattr(rt, "observation_chars", 60_000)) - 400)
    return max(1, min(config.max_output_kb * 1024, budget))


def _run_tool(config: CommandToolConfig, mode: SandboxMode, confinement: Confinement, rt: Runtime) -> ToolOutcome:
    name = config.name
    if confinement.kind == "none" and mode == "required":
        return ToolOutcome(False, f"{name} {_refusal(mode, confinement)}")
    root = os.path.realpath(rt.paths.root)
    if not os.path.isdir(root):
        return ToolOutcome(False, f"{name} could not run: the job folder {one_line(root)} no longer exists.")
    env = command_env(config, root)
    problem = _program_problem(config.command[0], root, env["PATH"])
    if problem:
        return ToolOutcome(False, f"{name} could not run: {problem}.")
    confined = confinement.kind == "bubblewrap"
    bwrap = (confinement.bwrap or shutil.which("bwrap")) if confined else None
    binds: list[str] = []
    created: list[str] = []
    if confined:
        if bwrap is None:
            return ToolOutcome(False, f"{name} was not run: the sandbox (bwrap) is no longer available.")
        if root == "/":
            return ToolOutcome(False, f"{name} was not run: the job folder is '/', which cannot be confined.")
        try:
            binds, created = protected_binds(root)
        except ConfineError as exc:
            return ToolOutcome(False, f"{name} was not run: {exc} (the operator must fix the job folder).")
    _, redo = rt.intent(lambda: {"command": name, "started": True})
    if redo:
        return ToolOutcome(False, _interrupted(name))
    keep = _keep_bytes(config, rt)
    try:
        if confined:
            assert bwrap is not None
            # The options (and the environment's values) go through a file descriptor, not the command
            # line, so other users of the host do not see the operator's env values in `ps`.
            with tempfile.TemporaryFile() as opts:
                text = "\0".join(bwrap_options(root, env, binds, confinement.extra)) + "\0"
                opts.write(text.encode("utf-8", "surrogateescape"))
                opts.flush()
                opts.seek(0)
                fd = opts.fileno()
                res = run_command([bwrap, "--args", str(fd), "--", *config.command], cwd=root, env=env,
                                  timeout=config.timeout, keep=keep, should_stop=rt.should_stop, pass_fds=(fd,))
        else:
            res = run_command(config.command, cwd=root, env=env, timeout=config.timeout, keep=keep,
                              should_stop=rt.should_stop)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        return ToolOutcome(False, f"{name} could not run '{one_line(config.command[0], 120)}': {why}.")
    finally:
        remove_stand_ins(created)
    if confined and res.status == "exited" and res.returncode == 1 and res.total < 2000:
        out = _decode(res.head + res.tail).strip()
        if out.startswith("bwrap: ") and "\n" not in out:
            # bwrap itself failed (e.g. execvp of a program hidden in the sandbox): one line, not an output.
            return ToolOutcome(False, f"{name} could not run in the sandbox: {one_line(out[7:])}.")
    return ToolOutcome(res.status == "exited" and res.returncode == 0, _render(config, res))


def _handler(config: CommandToolConfig, mode: SandboxMode,
             confinement: Confinement) -> Callable[[Runtime, NoArgs], ToolOutcome]:
    def handler(rt: Runtime, _args: NoArgs) -> ToolOutcome:
        try:
            return _run_tool(config, mode, confinement, rt)
        except Exception as exc:  # nothing a command does may surface as a traceback
            return ToolOutcome(False, f"{config.name} could not run: {one_line(f'{type(exc).__name__}: {exc}')}")

    return handler


def shown_command(config: CommandToolConfig, limit: int = 80) -> str:
    return one_line(shlex.join(config.command), limit)


def build_command_tools(configs: Sequence[CommandToolConfig], mode: SandboxMode, confinement: Confinement, *,
                        reserved: Collection[str] = ()) -> list[Tool[Any]]:
    """One tool per ``[[tools]]`` table (no arguments). ``reserved``: the names of the built-in tools; a
    job tool named like one is a ValueError (one line naming the key), never a silent replacement."""
    tools: list[Tool[Any]] = []
    for i, config in enumerate(configs):
        if config.name in reserved:
            raise ValueError(f"key 'tools.{i}.name': '{config.name}' is the name of a built-in tool; "
                             "choose another")
        summary = f"run `{shown_command(config)}` (job-declared command)"
        tools.append(Tool(config.name, config.description, NoArgs, _handler(config, mode, confinement), summary))
    return tools


def confinement_notice(mode: SandboxMode, confinement: Confinement,
                       configs: Sequence[CommandToolConfig]) -> str | None:
    """The one line a run prints at its start when its commands would not be confined (None otherwise)."""
    if not configs or confinement.kind != "none":
        return None
    names = ", ".join(c.name for c in configs[:5]) + (f" and {len(configs) - 5} more" if len(configs) > 5 else "")
    detail = one_line(confinement.detail)
    if mode == "required":
        return (f"job-declared commands ({names}) are refused: this job requires a sandbox (sandbox = "
                f"\"required\") and none is available here: {detail}")
    return (f"job-declared commands ({names}) run UNCONFINED (no sandbox: {detail}): they can write anywhere "
            "this user can and reach the network. Install bubblewrap, or set sandbox = \"required\" in job.toml "
            "to refuse them.")
