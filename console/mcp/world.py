"""The world an MCP server runs in: the very confinement of the job's commands (console.engine.tools.confine).

A stdio server is a long-lived command: bubblewrap with the options a command gets (the job folder, the read-only
toolchain, an empty HOME of its own in a private /tmp, its own pid namespace, no network unless the operator's
limits gave the job's commands one, nothing of the operator's), passed through a file descriptor (the environment
is not shown in ``ps``), and inside it ``prlimit`` sets the commands' rlimits (CPU time, open files, file size,
processes, memory) before the server's program starts: nothing of the server runs unbounded. When no sandbox can be
built the server is not started (fail closed), unless the operator ran the job ``--unconfined``."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from console.engine.tools.confine import Bwrap, ConfineError, bwrap_options, find_bwrap, protected_binds
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
        return Spawn([*reaper, *argv], env, root, confined_by="UNCONFINED (run --unconfined)", reaped=True)
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
        binds, created = protected_binds(root, (), repos, world.git)
        options = bwrap_options(root, env, binds, world, found.extra)
    except ConfineError as exc:
        raise McpStartError(f"MCP server {config.name} was not started: {exc}") from None
    # Close-on-exec: inherited by this server's bwrap only (pass_fds), never by another child the harness starts
    # meanwhile (the options hold the values of the server's env).
    fd = os.memfd_create("bwrap-args", os.MFD_CLOEXEC)
    data = memoryview(("\0".join(options) + "\0").encode("utf-8", "surrogateescape"))
    while data:
        data = data[os.write(fd, data):]
    os.lseek(fd, 0, os.SEEK_SET)
    # bwrap reads its options from the descriptor; the environment is set inside (--clearenv, --setenv).
    return Spawn([found.path, "--args", str(fd), "--", *argv], {"PATH": SANDBOX_PATH}, root, (fd,), created,
                 found.label, repos)
