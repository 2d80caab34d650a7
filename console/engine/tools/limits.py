"""What a job-declared command may see and use: job.toml's ``[sandbox]``, bounded by the operator's caps.

The job (job.toml, which the agent cannot write) may ask for more than the defaults: extra read-only
paths, the network (for a package install), more memory or processes. The operator's config file caps what
any job may ask (``[sandbox_limits]``): a job asking for more is refused at start with one line naming the
key. The outcome, :class:`CommandWorld`, is what every call of the run uses; the views describe it
(:func:`describe_world`), so the operator reads exactly what a command can see and use.

The defaults are chosen so that a normal build or test command never meets them; each one bounds a way a
hostile command was seen to hurt the host (a fork bomb, a /tmp or /dev/shm filled in RAM, a process that
eats the memory, a runaway CPU loop, a file as large as the disk).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, field_validator

from console.engine.job import _Strict, one_line

MB = 2**20
MAX_READ_ONLY = 64
GitMode = Literal["read-only", "commit", "config"]


def physical_mb() -> int:
    """The machine's memory in MB (8 GiB where the platform does not say)."""
    try:
        return max(256, os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // MB)
    except (ValueError, OSError, AttributeError):
        return 8192


OPEN_FILES = 4096


def file_max() -> int | None:
    """The host's open-file table (fs.file-max), None where it cannot be read."""
    try:
        with open("/proc/sys/fs/file-max", "rb") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def default_processes(open_files: int = OPEN_FILES) -> int:
    """2048, or fewer on a host whose open-file table (fs.file-max) could not hold that many processes each
    with ``open_files`` open, so that one command cannot fill the table by itself (and the run stops a command
    while the table is nearly full: see :mod:`.process`). Never below 256."""
    most = file_max()
    return 2048 if most is None else max(256, min(2048, most // open_files))


# name: (default, the operator's default cap, smallest value a job may set, unit shown)
_NUMBERS: dict[str, tuple[int, int, int, str]] = {
    # Threads count too (a pids cgroup counts tasks): a JVM or a parallel build uses hundreds.
    "processes": (default_processes(), 65536, 16, "processes"),
    "memory_mb": (8192, 1 << 20, 64, "MB"),
    # Per process (RLIMIT_CPU): an hour of CPU is far more than a build step or a test suite takes.
    "cpu_seconds": (3600, 7 * 86400, 1, "s of CPU"),
    # Per process; what most systems give a process by default is 1024 (a program may raise it up to this).
    "open_files": (OPEN_FILES, 1 << 20, 64, "open files"),
    # The largest file a command may write (RLIMIT_FSIZE); its default is the job folder's own limit (max_job_mb),
    # so the 0 here is never used.
    "file_size_mb": (0, 1 << 20, 1, "MB per file"),
    "tmp_mb": (1024, 1 << 20, 1, "MB"),
    "shm_mb": (256, 1 << 20, 1, "MB"),
}
NUMBER_KEYS = tuple(_NUMBERS)


class SandboxSection(_Strict):
    """job.toml ``[sandbox]``: what the job's commands need beyond the defaults (every key optional)."""

    # Extra paths a command may read (absolute, or ~/ for the operator's home); they must exist at start.
    read_only: list[str] = Field(default_factory=list, max_length=MAX_READ_ONLY)
    # The host's network (for a package install); off by default: no network at all, not even loopback.
    network: bool = False
    # What commands may change in the job's repositories (console.engine.tools.repos): "read-only" (default: every
    # git directory is read-only to them), "commit" (commits, branches, tags; not the config, hooks/, info/),
    # "config" (and the config's plain keys). Never what runs a program on the operator's machine.
    git: GitMode = "read-only"
    processes: int | None = Field(default=None, gt=0, le=1 << 22)
    memory_mb: int | None = Field(default=None, gt=0, le=1 << 30)
    cpu_seconds: int | None = Field(default=None, gt=0, le=365 * 86400)
    open_files: int | None = Field(default=None, gt=0, le=1 << 30)
    file_size_mb: int | None = Field(default=None, gt=0, le=1 << 30)
    tmp_mb: int | None = Field(default=None, gt=0, le=1 << 30)
    shm_mb: int | None = Field(default=None, gt=0, le=1 << 30)

    @field_validator("read_only")
    @classmethod
    def _paths(cls, paths: list[str]) -> list[str]:
        for i, p in enumerate(paths):
            if not p or "\x00" in p or len(p) > 4096:
                raise ValueError(f"entry {i} is not a path")
            if not (p.startswith("/") or p == "~" or p.startswith("~/")):
                raise ValueError(f"entry {i} ('{one_line(p, 80)}') is not absolute; write /path or ~/path")
        return paths


class SandboxCaps(_Strict):
    """The config file's ``[sandbox_limits]``: the most any job's ``[sandbox]`` may ask for."""

    processes: int = Field(default=_NUMBERS["processes"][1], gt=0, le=1 << 22)
    memory_mb: int = Field(default_factory=physical_mb, gt=0, le=1 << 30)
    cpu_seconds: int = Field(default=_NUMBERS["cpu_seconds"][1], gt=0, le=365 * 86400)
    open_files: int = Field(default=_NUMBERS["open_files"][1], gt=0, le=1 << 30)
    file_size_mb: int = Field(default=_NUMBERS["file_size_mb"][1], gt=0, le=1 << 30)
    tmp_mb: int = Field(default_factory=lambda: max(64, physical_mb() // 2), gt=0, le=1 << 30)
    shm_mb: int = Field(default_factory=lambda: max(64, physical_mb() // 2), gt=0, le=1 << 30)
    # Whether a job may ask for the network, and for read-only paths beyond the defaults.
    network: bool = True
    read_only: bool = True


@dataclass(frozen=True)
class CommandLimits:
    """The bounds of every command of a run (resolved numbers)."""

    processes: int = _NUMBERS["processes"][0]
    memory_mb: int = _NUMBERS["memory_mb"][0]
    cpu_seconds: int = _NUMBERS["cpu_seconds"][0]
    open_files: int = _NUMBERS["open_files"][0]
    file_size_mb: int = 1024
    tmp_mb: int = _NUMBERS["tmp_mb"][0]
    shm_mb: int = _NUMBERS["shm_mb"][0]


@dataclass(frozen=True)
class CommandWorld:
    """Everything that decides what a command of this run sees and may use."""

    limits: CommandLimits = field(default_factory=CommandLimits)
    # Extra read-only paths (real paths, checked at start).
    read_only: tuple[str, ...] = ()
    network: bool = False
    # Folders never shown to a command even inside an extra path: the data dir (every run, jobs.db), the
    # operator's config folder (the keys).
    hide: tuple[str, ...] = ()
    # The operator's explicit choice for this run (run --unconfined): commands run without a sandbox, still
    # bounded in time, processes, memory and the job folder's size.
    unconfined: bool = False
    # The most the job folder may hold (max_job_mb), which a command may not grow it past.
    max_job_mb: float = 1024.0
    # What commands may change in the job's repositories (job.toml's [sandbox] git).
    git: GitMode = "read-only"


class WorldError(ValueError):
    """A ``[sandbox]`` request the run cannot honour; the message names the key."""


def _expand(path: str, home: str) -> str:
    return home + path[1:] if path == "~" or path.startswith("~/") else path


def resolve_world(section: SandboxSection, caps: SandboxCaps, *, max_job_mb: float, hide: tuple[str, ...] = (),
                  unconfined: bool = False, home: str | None = None) -> CommandWorld:
    """The world of a run's commands: the job's requests within the operator's caps. A :class:`WorldError`
    naming the key (``sandbox.memory_mb``) for a request over its cap, a path that does not exist, or the
    network or extra paths where the operator allows neither."""
    numbers: dict[str, int] = {}
    for key, (default, _cap, smallest, unit) in _NUMBERS.items():
        asked = getattr(section, key)
        cap = getattr(caps, key)
        if asked is not None:
            if asked > cap:
                # The cap may be a default (the memory's is the machine's): said so, where no config file sets it.
                raise WorldError(f"key 'sandbox.{key}': {asked} is over the operator's limit of {cap} {unit} "
                                 f"({key} under [sandbox_limits] in the config file sets it; without it, the "
                                 "default)")
            if asked < smallest:
                raise WorldError(f"key 'sandbox.{key}': {asked} is below the least a command can run with "
                                 f"({smallest} {unit})")
            numbers[key] = asked
        elif key == "file_size_mb":
            numbers[key] = max(1, min(cap, int(max_job_mb)))
        else:
            numbers[key] = min(default, cap)
    if section.network and not caps.network:
        raise WorldError("key 'sandbox.network': the operator's config does not allow jobs the network "
                         "(sandbox_limits.network = false)")
    if section.read_only and not caps.read_only:
        raise WorldError("key 'sandbox.read_only': the operator's config does not allow jobs extra paths "
                         "(sandbox_limits.read_only = false)")
    home = home if home is not None else os.path.expanduser("~")
    extra: list[str] = []
    for i, raw in enumerate(section.read_only):
        path = _expand(raw, home)
        try:
            real = os.path.realpath(path, strict=True)
        except (OSError, ValueError):
            raise WorldError(f"key 'sandbox.read_only.{i}': '{one_line(raw, 120)}' does not exist") from None
        for h in hide:
            hidden = os.path.realpath(h)
            if real == hidden or real.startswith(hidden.rstrip("/") + "/"):
                raise WorldError(f"key 'sandbox.read_only.{i}': '{one_line(raw, 120)}' is inside {one_line(hidden)}, "
                                 "which commands never see (agent-console's data or config folder)")
        if real not in extra:
            extra.append(real)
    return CommandWorld(limits=CommandLimits(**numbers), read_only=tuple(extra), network=section.network,
                        hide=tuple(os.path.realpath(h) for h in hide), unconfined=unconfined,
                        max_job_mb=max_job_mb,
                        git=section.git)


def legacy_mode(value: Any) -> Any:
    """``sandbox = "auto"`` / ``"required"`` (job.toml before [sandbox] was a table): both now mean the
    default, confined and failing closed; "auto" never again runs a command unconfined."""
    if value in ("auto", "required"):
        return {}
    return value


# -- what the operator reads ---------------------------------------------------------------------------------
def _mb(n: float) -> str:
    return f"{n / 1024:g} GB" if n >= 1024 and n % 1024 == 0 else f"{n:g} MB"


def limit_items(world: CommandWorld, memory_by: Literal["cgroup", "rlimit", ""] = "") -> list[str]:
    lim = world.limits
    by = f" ({memory_by})" if memory_by else ""
    return [f"{lim.processes} processes", f"{_mb(lim.memory_mb)} memory{by}", f"{lim.cpu_seconds} s CPU a process",
            f"{lim.open_files} open files", f"{_mb(lim.file_size_mb)} a file",
            f"job folder at most {_mb(world.max_job_mb)}"]


# What a command may change in the job's repositories, by job.toml's [sandbox] git (the header says it).
GIT_SEES: dict[GitMode, str] = {
    "read-only": "every repository's .git folder read-only (git status, diff and log work; commits do not: "
                 "job.toml's [sandbox] git = \"commit\" allows them)",
    "commit": "its repositories writable for commits (job.toml's [sandbox] git = \"commit\"), but for their config, "
              "hooks/ and info/, read-only",
    "config": "its repositories writable for commits and config (job.toml's [sandbox] git = \"config\"), but for "
              "their hooks/ and info/, read-only",
}
# The look after every call, confined or not (console.engine.tools.repos.sweep).
GIT_SWEEP = "after each call, what a repository would run on your machine (a config key, a hook) is made harmless"


def describe_world(world: CommandWorld, *, tool: str = "", memory_by: Literal["cgroup", "rlimit", ""] = "",
                   filtered: bool = True) -> str:
    """One paragraph: what a command of this run sees and its bounds (the run's header in every view).
    ``filtered``: whether the seccomp filter applies (it exists for x86-64 and aarch64)."""
    lim = world.limits
    if world.unconfined:
        return ("commands run UNCONFINED (run --unconfined): they see and may change everything this user can, "
                f"and reach the network; {GIT_SWEEP}; bounded only by: " + ", ".join(limit_items(world, memory_by)))
    sees = ["the job folder (read-write; job.toml, instructions.md and the tool docs read-only, .console hidden)",
            GIT_SEES[world.git],
            "/usr and the /bin, /lib links (read-only)",
            # Every kind of what confine.ETC binds, so the header is true (it is shown in every view).
            "from /etc only what programs need to run: the loader's cache, TLS certificates, alternatives, users "
            "and groups, name-service order, time zone, hosts, services, protocols, MIME types, the system's "
            "Python settings (no resolv.conf, nothing with credentials)",
            f"an empty HOME, a private /tmp ({_mb(lim.tmp_mb)}) and /dev/shm ({_mb(lim.shm_mb)}), /dev, "
            "its own /proc (read-only)"]
    if world.read_only:
        shown = ", ".join(one_line(p, 80) for p in world.read_only[:6])
        more = f" and {len(world.read_only) - 6} more" if len(world.read_only) > 6 else ""
        sees.append(f"read-only as job.toml asks: {shown}{more}")
    net = "the host's network (job.toml asks for it)" if world.network else "no network (not even loopback)"
    head = f"commands are confined{f' by {tool}' if tool else ''}"
    calls = ("no keyrings, no setuid files (seccomp)" if filtered
             else "no seccomp filter on this architecture (keyrings and setuid bits are not refused)")
    return (f"{head}: they see {'; '.join(sees)}; {net}; {calls}; nothing else of the host; {GIT_SWEEP}. Bounds: "
            + ", ".join(limit_items(world, memory_by)))

