"""The world an MCP server runs in: the very confinement of the job's commands (console.engine.tools.confine).

A stdio server is a long-lived command: bubblewrap with the options a command gets (the job folder, the read-only
toolchain, an empty HOME of its own in a private /tmp, its own pid namespace, no network unless the operator's
limits gave the job's commands one, nothing of the operator's), passed through a file descriptor (the environment
is not shown in ``ps``), with the commands' seccomp filter (:mod:`console.engine.tools.seccomp`: the kernel
keyrings, setuid bits, file watches, ``fallocate`` past a file's end...), and inside it ``prlimit`` sets the commands'
rlimits (CPU time, open files, file size, processes, memory) before the server's program starts. Where the machine
lets the harness make a cgroup (:mod:`console.engine.tools.cgroups`), a confined server joins one of its own before
bwrap runs, bounded as a command's (the memory of its whole tree, its number of tasks: RLIMIT_NPROC does not bind the
operator's uid 0, so without it a server of a root operator forks without bound); the cgroup goes once nothing of
the server is left in it. The job folder is watched while the server lives (as while a command runs,
at most a fifth of a core): past ``max_job_mb`` the server's cgroup is killed (the client then restarts it once,
and a folder still over its limit ends the restart too). Nothing of the server runs unbounded. When no sandbox can
be built the server is not started (fail closed), unless the operator ran the job ``--unconfined``."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from threading import Event, Thread
from time import monotonic
from weakref import finalize

from console.engine.tools import seccomp
from console.engine.tools.cgroups import Slot, find_cgroups
from console.engine.tools.confine import STATE_DIR, Bwrap, ConfineError, bwrap_options, find_bwrap, protected_binds
from console.engine.tools.docs_folder import choose, ownership, write_docs
from console.engine.tools.folder_size import folder_bytes
from console.engine.tools.limits import HOME, MB, SANDBOX_PATH, CommandWorld
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.repos import Repos, survey


class McpStartError(Exception):
    """A server could not be started; the message is one line naming it."""


@dataclass
class Spawn:
    """How to start one server: its argv, environment, working folder, the descriptors it inherits (bwrap's options)
    and the empty mount points to remove once it ends."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    pass_fds: tuple[int, ...] = ()
    created: list[str] = field(default_factory=list)
    confined_by: str = ""
    # The server's cgroup (None where the machine gives none): closed (what is left killed, the folder removed) once
    # nothing of the server is left in it, when this start is dropped, or at the harness's exit.
    slot: Slot | None = None
    # Why the harness killed it, when it did (its folder watch): said where its exit is said, never "it exited".
    killed: list[str] = field(default_factory=list)
    # The job's repositories when the server started: their git directories are bound as [sandbox] git says
    # (read-only by default), and what the server leaves that git would run is swept after each call (the client).
    repos: Repos | None = None
    # Started under console.mcp.reaper (unconfined): ended by SIGTERM to it first, so it ends the server's tree.
    reaped: bool = False


def server_env(config: McpServerConfig, world: CommandWorld, root: str, environ: Mapping[str, str]) -> dict[str, str]:
    """A whitelist (as a command's), and the variables ``env`` names, their values from the operator's environment."""
    env = {"PATH": SANDBOX_PATH if not world.unconfined else (environ.get("PATH") or SANDBOX_PATH),
           "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": root if world.unconfined else HOME, "TMPDIR": "/tmp",
           "TERM": "dumb"}
    missing = [name for name in config.env if name not in environ]
    if missing:
        raise McpStartError(f"MCP server {config.name}: the operator's environment has no {', '.join(missing)} "
                            "(named by env in job.toml); set it and start the run again")
    env.update({name: environ[name] for name in config.env})
    return env


def _prlimit(world: CommandWorld) -> list[str]:
    lim = world.limits
    prlimit = shutil.which("prlimit", path=SANDBOX_PATH)
    if prlimit is None:
        raise McpStartError("prlimit (util-linux) is not installed, which bounds an MCP server")
    return [prlimit, f"--cpu={lim.cpu_seconds}", f"--nofile={lim.open_files}", f"--fsize={lim.file_size_mb * MB}",
            "--core=0", f"--nproc={lim.processes}", f"--data={lim.memory_mb * MB}", "--"]


def _docs(root: str) -> tuple[str, ...]:
    """The harness's folder of tool docs, read-only to the server as to a command. At a run's very first start the
    harness writes its docs after the servers start (their tools are in them): the folder is made now, its marker
    alone (the harness's, console.engine.tools.docs_folder), so it is bound from the server's start."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return ()
    try:
        folder, _theirs = choose(fd)
        absent = folder is not None and ownership(fd, folder) == "absent"
    finally:
        os.close(fd)
    if absent and write_docs(Path(root), lambda _folder: {}).folder != folder:  # (never over docs already there)
        return ()
    return (folder,) if folder is not None else ()


def _memfd(name: str, data: bytes) -> int:
    """``data`` in an anonymous in-memory file, read from its start; close-on-exec: inherited by this server's bwrap
    only (pass_fds), never by another child the harness starts meanwhile (the options hold the server's env)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


# Run on the host before bwrap: the process joins the cgroup ($2.. up to --) and becomes bwrap, so every process of
# the server is born inside it (a server cannot fork before it is bounded). A join that fails starts nothing.
JOIN = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; exec "$@"'


def _joined(argv: list[str], world: CommandWorld, how: Spawn) -> None:
    """Put ``argv`` (the whole start) in a cgroup of the server's own, bounded as a command's, where there is one."""
    cgroups = find_cgroups()
    sh = shutil.which("sh", path=SANDBOX_PATH)
    if cgroups is None or sh is None:
        return
    try:
        slot = Slot(cgroups, memory_bytes=world.limits.memory_mb * MB, pids=world.limits.processes)
    except OSError:
        return  # as for a command: bounded by its rlimits and its pid namespace
    procs = [str(folder / "cgroup.procs") for folder in slot.folders]
    how.argv = [sh, "-c", JOIN, "sh", str(len(procs)), *procs, *argv]
    how.slot = slot
    stop = Event()
    Thread(target=_watch, args=(how.cwd, int(world.max_job_mb * MB), slot, stop, how.killed),
                     name="mcp-folder-watch", daemon=True).start()
    finalize(how, _close_slot, slot, stop)


def _watch(root: str, limit: int, slot: Slot, stop: Event, killed: list[str]) -> None:
    """Kill the server's cgroup whenever the job folder is over ``limit`` (a scan, then a rest four times as long:
    at most a fifth of a core, as a command's watch). Once the server has been in it and none of it is left, the
    cgroup is removed and the watch ends (the server is over: a restart is a start of its own)."""
    seen = False
    while not stop.is_set():
        began = monotonic()
        if slot.pids():
            seen = True
        elif seen:
            _close_slot(slot, stop)
            return
        if folder_bytes(root, STATE_DIR, stop_above=limit) > limit:
            if slot.pids():
                killed[:] = [f"the job folder grew past max_job_mb ({limit // MB} MB): the harness killed it"]
            slot.signal_all()
        stop.wait(max(0.25, 4 * (monotonic() - began)))


def _close_slot(slot: Slot, stop: Event) -> None:
    stop.set()
    slot.close()  # (it suppresses what a cgroup gone or busy a moment longer raises)


def spawn(config: McpServerConfig, root: str, world: CommandWorld, environ: Mapping[str, str]) -> Spawn:
    """How to start ``config``'s server confined in ``root`` (a real path); :class:`McpStartError` if it cannot be."""
    assert config.command is not None  # an HTTP server (url) is not spawned: console.mcp.http reaches it
    if config.network:  # the operator's [[mcp.servers]] network = true (job.toml cannot set it)
        world = replace(world, network=True)
    env = server_env(config, world, root, environ)
    argv = [*_prlimit(world), *config.command]
    if world.unconfined:
        # No pid namespace ends its tree: console.mcp.reaper stands between it and us, its subreaper, so what it
        # moves to a session of its own ends with it. -I: the job folder (its working folder) is not on the reaper's
        # sys.path, nor PYTHON* variables read (a job could plant a console/ package there).
        reaper = [sys.executable, "-I", "-m", "console.mcp.reaper", "--"]
        unconfined = Spawn([*reaper, *argv], env, root, confined_by="UNCONFINED (run --unconfined)", reaped=True)
        _joined(unconfined.argv, world, unconfined)  # bounded and its folder watched as an unconfined command is
        return unconfined
    if root == "/":
        raise McpStartError(f"MCP server {config.name}: the job folder is '/', which cannot be confined")
    found = find_bwrap(writable=(root,), overlay=bool(world.read_only))
    if not isinstance(found, Bwrap):
        raise McpStartError(f"MCP server {config.name} was not started: no sandbox works here ({found}); install "
                            "bubblewrap, or run --unconfined")
    try:
        # As a command's: the repositories' control files read-only (a server cannot plant a hook or a config
        # that the operator's git would run).
        repos = survey(root)
        binds, created = protected_binds(root, _docs(root), repos, world.git)
        options = bwrap_options(root, env, binds, world, found.extra)
    except ConfineError as exc:
        raise McpStartError(f"MCP server {config.name} was not started: {exc}") from None
    # The commands' seccomp filter (none on an architecture it does not know, as for a command).
    fds: tuple[int, ...] = ()
    program = seccomp.program()
    if program is not None:
        fds = (_memfd("seccomp", program),)
        options += ["--seccomp", str(fds[0])]
    # bwrap reads its options from the descriptor; the environment is set inside (--clearenv, --setenv).
    fd = _memfd("bwrap-args", ("\0".join(options) + "\0").encode("utf-8", "surrogateescape"))
    how = Spawn([found.path, "--args", str(fd), "--", *argv], {"PATH": SANDBOX_PATH}, root, (fd, *fds), created,
                found.label, repos=repos)
    _joined(how.argv, world, how)
    return how
