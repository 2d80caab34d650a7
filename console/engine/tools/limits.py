"""What a job-declared command may see and use: job.toml's ``[sandbox]``, bounded by the operator's caps.

The job (job.toml, which the agent cannot write, but which may come from anyone: a colleague's folder, a
repository) may ask for more than the defaults: extra read-only paths, the network (for a package install), more
memory or processes. The operator's config file caps what any job may ask (``[sandbox_limits]``), and its
defaults grant nothing of the operator's: no network, no extra path under the home or the host's private folders
(:data:`PRIVATE`). A job asking for more is refused at start with one line naming its key and the config key that
would allow it. The outcome, :class:`CommandWorld`, is what every call of the run uses; the views describe it
(:func:`describe_world`), so the operator reads exactly what a command can see and use.

The defaults are chosen so that a normal build or test command never meets them; each one bounds a way a
hostile command was seen to hurt the host (a fork bomb, a /tmp or /dev/shm filled in RAM, a process that
eats the memory, a runaway CPU loop, a file as large as the disk).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, field_validator

from console.engine.job import StrictSection, one_line

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


class SandboxSection(StrictSection):
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
        return _check_paths(paths)


def _check_paths(paths: list[str]) -> list[str]:
    for i, p in enumerate(paths):
        if not p or "\x00" in p or len(p) > 4096:
            raise ValueError(f"entry {i} is not a path")
        if not (p.startswith("/") or p == "~" or p.startswith("~/")):
            raise ValueError(f"entry {i} ('{one_line(p, 80)}') is not absolute; write /path or ~/path")
    return paths


class SandboxCaps(StrictSection):
    """The config file's ``[sandbox_limits]``: the most any job's ``[sandbox]`` may ask for."""

    processes: int = Field(default=_NUMBERS["processes"][1], gt=0, le=1 << 22)
    memory_mb: int = Field(default_factory=physical_mb, gt=0, le=1 << 30)
    cpu_seconds: int = Field(default=_NUMBERS["cpu_seconds"][1], gt=0, le=365 * 86400)
    open_files: int = Field(default=_NUMBERS["open_files"][1], gt=0, le=1 << 30)
    file_size_mb: int = Field(default=_NUMBERS["file_size_mb"][1], gt=0, le=1 << 30)
    tmp_mb: int = Field(default_factory=lambda: max(64, physical_mb() // 2), gt=0, le=1 << 30)
    shm_mb: int = Field(default_factory=lambda: max(64, physical_mb() // 2), gt=0, le=1 << 30)
    # Whether a job may ask for the network: not unless the operator says so (a downloaded job is not trusted).
    network: bool = False
    # Which extra read-only paths a job may ask for. Unset: any outside the operator's home and the host's private
    # folders (:data:`PRIVATE`); false: none; true: any; a list: those inside its folders (absolute or ~/). Never
    # the kernel's interfaces (:data:`NEVER`), the data dir or the config folder.
    read_only: bool | list[str] | None = None

    @field_validator("read_only")
    @classmethod
    def _folders(cls, value: bool | list[str] | None) -> bool | list[str] | None:
        if isinstance(value, list):
            if len(value) > MAX_READ_ONLY:
                raise ValueError(f"at most {MAX_READ_ONLY} folders")
            _check_paths(value)
        return value


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
    # What is never shown to a command even inside an extra path (real paths; each call covers those that exist
    # then): the data dir (every run, jobs.db), the operator's config folder (the keys), and the credential
    # folders and files (:data:`CREDENTIALS`) of every home folder inside an extra path.
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


# Never an extra path, whatever the config says: the kernel's interfaces. A bind of the host's /proc would show every
# process of the host, the harness's environment (its API keys) among them; /sys and /dev its hardware.
NEVER = ("/proc", "/sys", "/dev")
# Where the default caps (no read_only under [sandbox_limits]) grant no extra path, besides the operator's home:
# /etc (shadow, TLS private keys, services' secrets), the other homes (/home, /root), the host's state (/var:
# databases, logs, /var/backups/shadow.bak; /run and /tmp: other programs' sockets and runtime folders, Kerberos
# ticket caches, a pod's service-account token), /boot. A toolchain elsewhere (/opt, /nix/store, /srv) stays allowed:
# that is where SDKs live, and nothing there is the operator's unless the operator put it there.
PRIVATE = ("/etc", "/root", "/home", "/var", "/run", "/tmp", "/boot")
# Hidden inside any extra path, in every home folder (the operator's, and each one the system's user table names,
# since an operator who allows /home or / allows them all): where tools keep keys, tokens and passwords, and the
# shells' histories (commands typed with a secret in them).
CREDENTIALS = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config", ".pgpass", ".netrc",
               ".git-credentials", ".npmrc", ".pypirc", ".password-store", ".vault-token", ".terraform.d",
               ".cargo/credentials", ".cargo/credentials.toml", ".gem/credentials", ".local/share/keyrings",
               ".mozilla", ".bash_history", ".zsh_history", ".python_history", ".psql_history", ".mysql_history")
# And the host's own, hidden inside any extra path the operator allows (true, or a list that holds them): password
# hashes, sudo rules, SSH host keys, TLS private keys, Kerberos keys, saved Wi-Fi and VPN keys, backups of them.
HOST_CREDENTIALS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d",
                    "/etc/ssh", "/etc/ssl/private", "/etc/pki/tls/private", "/etc/krb5.keytab",
                    "/etc/security/opasswd", "/etc/NetworkManager/system-connections", "/etc/wireguard",
                    "/var/backups")
_CAP_KEY = "read_only under [sandbox_limits] in the config file"


def _expand(path: str, home: str) -> str:
    return home + path[1:] if path == "~" or path.startswith("~/") else path


# The PATH inside the sandbox (the job's env may set another): the toolchain's folders, which it sees.
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOME = "/tmp/home"
# The top-level names of the toolchain: bound read-only, or recreated as the links they are.
TOOLCHAIN = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")

def within(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or below it (both real paths)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def user_homes() -> tuple[str, ...]:
    """Every home folder the system's user table names (real paths; "/" and the missing ones left out)."""
    import pwd

    try:
        entries = pwd.getpwall()
    except OSError:  # pragma: no cover (a broken name service)
        return ()
    out: list[str] = []
    for entry in entries:
        if entry.pw_dir.startswith("/"):
            real = os.path.realpath(entry.pw_dir)
            if real != "/" and real not in out and os.path.isdir(real):
                out.append(real)
    return tuple(out)


def credential_paths(homes: tuple[str, ...], extra: tuple[str, ...]) -> list[str]:
    """The credential folders and files (real paths, whether they exist now or not) that an extra path holds or
    lies in: :data:`CREDENTIALS` in each of the ``homes``, and :data:`HOST_CREDENTIALS`."""
    out: list[str] = []
    for home in homes:
        if any(within(home, p) or within(p, home) for p in extra):
            for name in CREDENTIALS:
                real = os.path.realpath(os.path.join(home, name))
                if real not in out:
                    out.append(real)
    for path in HOST_CREDENTIALS:
        real = os.path.realpath(path)
        if real not in out and any(within(real, p) or within(p, real) for p in extra):
            out.append(real)
    return out


def mounts_below(folder: str, mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    """The mount points strictly inside ``folder`` (a real path), as this process's mount table lists them."""
    try:
        with open(mountinfo, encoding="utf-8", errors="surrogateescape") as fh:
            table = fh.read()
    except OSError:
        return []
    out: list[str] = []
    for line in table.splitlines():
        fields = line.split(" ")
        if len(fields) > 4:
            # The mount point, its space, tab, newline and backslash written as octal escapes (\040).
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            if point != folder and within(point, folder) and point not in out:
                out.append(point)
    return out


def _relation(real: str, folder: str) -> str:
    """How ``real`` meets ``folder``: "is" it, "is inside" it, "holds" it, or ""."""
    if real == folder:
        return "is"
    if within(real, folder):
        return "is inside"
    return "holds" if within(folder, real) else ""


def _allowed(i: int, raw: str, real: str, caps: SandboxCaps, home: str) -> None:
    """Raise a :class:`WorldError` if the operator's caps do not grant the extra path ``real`` (asked as ``raw``)."""
    key, shown = f"key 'sandbox.read_only.{i}'", one_line(raw, 120)
    for folder in NEVER:
        how = _relation(real, os.path.realpath(folder))
        if how:
            raise WorldError(f"{key}: '{shown}' {how} the kernel's {folder}, which commands never see")
    if caps.read_only is True:
        return
    if caps.read_only is False:
        raise WorldError(f"{key}: the operator's config does not allow jobs extra paths (sandbox_limits.read_only "
                         "= false); to allow them, set read_only to true or to a list of folders under "
                         "[sandbox_limits] in the config file")
    if isinstance(caps.read_only, list):
        allowed = [os.path.realpath(_expand(p, home)) for p in caps.read_only]
        if not any(within(real, p) for p in allowed):
            raise WorldError(f"{key}: '{shown}' is outside the folders the operator's config allows jobs to read "
                             f"({one_line(', '.join(caps.read_only), 160)}); to allow it, add it to {_CAP_KEY}")
        return
    folders = [(os.path.realpath(home), "your home folder")] if home.startswith("/") else []
    folders += [(os.path.realpath(p), f"the host's {p}") for p in PRIVATE]
    for folder, name in folders:
        if folder == "/":
            continue  # a HOME of "/" would refuse every path: the host's private folders still are
        how = _relation(real, folder)
        if how:
            raise WorldError(f"{key}: '{shown}' {how} {name}, which jobs may not read by default; to allow it, list it "
                             f"in {_CAP_KEY} (read_only = [\"{one_line(raw, 80)}\"], or true for any path)")


def resolve_world(section: SandboxSection, caps: SandboxCaps, *, max_job_mb: float, hide: tuple[str, ...] = (),
                  unconfined: bool = False, home: str | None = None,
                  homes: tuple[str, ...] | None = None, config: str = "") -> CommandWorld:
    """The world of a run's commands: the job's requests within the operator's caps. A :class:`WorldError`
    naming the key (``sandbox.memory_mb``) and the config key that would allow it, for a request over its cap, a
    path that does not exist or that the caps do not grant, or the network where the operator does not allow it.

    ``hide``: folders never shown (the data dir, the config folder); ``home``: the operator's home (``~``);
    ``homes``: every home folder whose credentials are hidden inside an extra path (default: ``home`` and the
    system's user table's); ``config``: the operator's config file, as the refusals name it. Every problem of the
    job's [sandbox] is said at once (one line, "; " between them): a job is not fixed one refusal at a time."""
    problems: list[str] = []
    numbers: dict[str, int] = {}
    for key, (default, _cap, smallest, unit) in _NUMBERS.items():
        asked = getattr(section, key)
        cap = getattr(caps, key)
        if asked is not None:
            if asked > cap:
                # The cap may be a default (the memory's is the machine's): said so, where no config file sets it.
                problems.append(f"key 'sandbox.{key}': {asked} is over the operator's limit of {cap} {unit} "
                                f"({key} under [sandbox_limits] in the config file sets it; without it, the "
                                "default)")
            elif asked < smallest:
                problems.append(f"key 'sandbox.{key}': {asked} is below the least a command can run with "
                                f"({smallest} {unit})")
            numbers[key] = asked
        elif key == "file_size_mb":
            numbers[key] = max(1, min(cap, int(max_job_mb)))
        else:
            numbers[key] = min(default, cap)
    if section.network and not caps.network:
        problems.append("key 'sandbox.network': the operator's config does not give jobs the network; to allow it, "
                        "set network = true under [sandbox_limits] in the config file")
    home = home if home is not None else os.path.expanduser("~")
    hidden = [os.path.realpath(h) for h in hide]
    extra: list[str] = []
    granted: list[tuple[int, str, str]] = []  # (index, as written, where it leads): the paths granted so far
    for i, raw in enumerate(section.read_only):
        path = _expand(raw, home)
        try:
            real = os.path.realpath(path, strict=True)
            st = os.stat(real)
        except (OSError, ValueError):
            problems.append(f"key 'sandbox.read_only.{i}': '{one_line(raw, 120)}' does not exist")
            continue
        try:
            _allowed(i, raw, real, caps, home)
        except WorldError as exc:
            problems.append(str(exc))
            continue
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            # A socket bound as a file would be connectable; a device, a pipe: nothing a build reads.
            problems.append(f"key 'sandbox.read_only.{i}': '{one_line(raw, 120)}' is neither a folder nor a regular "
                            "file")
            continue
        inner = mounts_below(real) if stat.S_ISDIR(st.st_mode) else []
        if inner:
            # A folder is shown as an overlay of itself (no socket in it reachable), which overlayfs refuses, in a user
            # namespace, over a folder that has another file system mounted inside it.
            problems.append(f"key 'sandbox.read_only.{i}': '{one_line(raw, 120)}' has a file system mounted inside "
                            f"it ({one_line(inner[0], 120)}{f' and {len(inner) - 1} more' if len(inner) > 1 else ''}),"
                            " which its read-only overlay cannot show; name folders without one (a mounted folder "
                            "itself may be one)")
            continue
        granted.append((i, raw, real))
        if real not in extra:
            extra.append(real)
    if homes is None:
        homes = tuple(dict.fromkeys((os.path.realpath(home), *user_homes()))) if home.startswith("/") else user_homes()
    credentials = credential_paths(homes, tuple(extra))
    for i, raw, real in granted:  # where each led when it was checked (never resolved again)
        for h in (*hidden, *credentials):
            if within(real, h):
                problems.append(f"key 'sandbox.read_only.{i}': '{one_line(raw, 120)}' is inside {one_line(h)}, "
                                "which commands never see (agent-console's data or config folder, or a folder or "
                                "file of credentials)")
                break
    if problems:
        where = f"the config file ({one_line(config, 160)})" if config else "the config file"
        raise WorldError("; ".join(p.replace("the config file", where) for p in problems))
    # Only what an extra path shows needs covering (a call covers those that exist then).
    hidden += [c for c in credentials if c not in hidden and any(within(c, p) for p in extra)]
    return CommandWorld(limits=CommandLimits(**numbers), read_only=tuple(extra), network=section.network,
                        hide=tuple(hidden), unconfined=unconfined, max_job_mb=max_job_mb, git=section.git)


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


# The header's first line: what it says of the job's repositories, by [sandbox] git.
GIT_SHORT: dict[GitMode, str] = {"read-only": "its .git read-only", "commit": "git commits allowed",
                                 "config": "git commits and config allowed"}


def summarize_world(world: CommandWorld, *, tool: str = "") -> str:
    """The header's first line (about 200 characters): the whole paragraph (:func:`describe_world`) is what a
    view with room shows under it. What an operator checks first: confined or not, by what, the folder, the
    network, any extra path, and the bounds."""
    lim = world.limits
    bounds = (f"{lim.processes} processes, {_mb(lim.memory_mb)} memory, {lim.cpu_seconds} s CPU, "
              f"{_mb(lim.file_size_mb)} a file, job folder {_mb(world.max_job_mb)}")
    if world.unconfined:
        return f"commands run UNCONFINED (run --unconfined): everything this user can, and the network; {bounds}"
    n = len(world.read_only)
    extra = f", {n} more path{'s' * (n != 1)} read-only" if n else ""
    net = "the network" if world.network else "no network"
    return (f"commands are confined{f' by {tool}' if tool else ''}: the job folder ({GIT_SHORT[world.git]}){extra}, "
            f"{net}, nothing else of yours; {bounds}")


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
        sees.append(f"read-only as job.toml asks: {shown}{more} (an overlay: no unix socket in them can be reached; "
                    "hidden in them: agent-console's data and config folders, the credentials of every home folder ("
                    f"{', '.join(CREDENTIALS)}) and the host's ({', '.join(HOST_CREDENTIALS)}))")
    net = "the host's network (job.toml asks for it)" if world.network else "no network (not even loopback)"
    head = f"commands are confined{f' by {tool}' if tool else ''}"
    calls = ("no keyrings, no setuid files, no openat2, none of the calls Docker's default profile refuses (seccomp)"
             if filtered else "no seccomp filter on this architecture (keyrings and setuid bits are not refused)")
    return (f"{head}: they see {'; '.join(sees)}; {net}; {calls}; nothing else of the host; {GIT_SWEEP}. Bounds: "
            + ", ".join(limit_items(world, memory_by)))

