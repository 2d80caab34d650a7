"""Confinement of job-declared commands with bubblewrap, the way Codex confines its commands on Linux.

A confined command sees the whole system read-only and cannot reach the network; it may write only
inside the job folder (and a private, throw-away ``/tmp``). What the agent must never change even
through a command stays out of reach: the harness folder ``.console/`` is hidden behind an empty
read-only tmpfs, and the operator's ``job.toml`` and ``instructions.md`` are read-only bind mounts (a
mount point can be neither written, nor deleted, nor renamed over, nor hard-linked from another mount).

The argv (see :func:`bwrap_options`): ``--ro-bind / /``, a new ``/dev`` and ``/proc``, a private tmpfs on
``/tmp`` and ``/run`` (``/run`` holds host daemons' sockets: docker, dbus; a unix socket stays usable on a
read-only mount), ``--bind ROOT ROOT``, ``.console`` hidden, the operator's files read-only, every
namespace unshared (net: no network at all, not even the host's loopback; pid: nothing outlives the
sandbox), ``--cap-drop ALL`` (essential when the harness runs as root: with its capabilities a command
could remount ``/`` read-write or unmount the read-only binds), ``--die-with-parent``, ``--new-session``,
``--chdir ROOT``, ``--clearenv`` and the whitelisted environment. Where bwrap accepts them, a user
namespace with ``--disable-userns`` too (no nested namespaces inside the sandbox).

Why not Landlock: Python's stdlib has no binding for it (only ctypes on raw syscall numbers), it limits
the network only from ABI 4 (Linux 6.7) and then only TCP, and it gives no pid namespace (a background
process would outlive the command). Bubblewrap (Flatpak's sandbox) does all of it in one small binary,
so Landlock is not used; where bwrap is missing or cannot create namespaces here,
:func:`detect_confinement` says so, and the job decides (``sandbox = "auto"`` runs unconfined with one
notice; ``"required"`` refuses).

Stdlib only.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import Literal

STATE_DIR = ".console"
# The operator's files a command must not change (the engine's Sandbox protects the same two).
PROTECTED = ("job.toml", "instructions.md")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
# Options that need a user namespace: tried first, dropped for a bwrap too old for them (< 0.8) or a host
# where the harness cannot create one (a setuid bwrap).
USERNS_OPTIONS = ("--unshare-user", "--disable-userns")
PROBE_SECONDS = 10.0


@dataclass(frozen=True)
class Confinement:
    """How job-declared commands are confined on this host, and why (for the operator)."""

    kind: Literal["bubblewrap", "none"]
    detail: str
    # The bwrap that passed the probe and the optional options it accepted (set by detect_confinement).
    bwrap: str | None = None
    extra: tuple[str, ...] = ()


class ConfineError(Exception):
    """The job folder cannot be confined safely as it is; the message says what the operator must fix."""


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def protected_binds(root: str) -> tuple[list[str], list[str]]:
    """The options that hide ``.console`` and make the operator's files read-only, and the files bwrap
    will create as empty mount points (they did not exist: removed again after the run).

    A protected name that is a symlink, a folder, a pipe or a hard-linked file is a :class:`ConfineError`:
    a mount on a symlink covers its target, not the link, so the command could replace the link with a
    job.toml of its own; a second hard link would be a writable name for the same file."""
    opts: list[str] = []
    created: list[str] = []
    state = os.path.join(root, STATE_DIR)
    try:
        st = os.lstat(state)
    except FileNotFoundError:
        os.mkdir(state, mode=0o700)  # the harness folder (the Runtime makes it); never the job folder itself
        st = os.lstat(state)
    if not stat.S_ISDIR(st.st_mode):
        raise ConfineError(f"the job's {STATE_DIR} is not a folder (a symlink or a file), so it cannot be hidden "
                           "from commands")
    opts += ["--tmpfs", state, "--remount-ro", state]
    for name in PROTECTED:
        path = os.path.join(root, name)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            # Absent, it would be creatable: an empty read-only stand-in covers the name during the run.
            opts += ["--ro-bind", "/dev/null", path]
            created.append(path)
            continue
        if stat.S_ISLNK(st.st_mode):
            raise ConfineError(f"{name} is a symlink, which a command could replace; make it a regular file")
        if not stat.S_ISREG(st.st_mode):
            raise ConfineError(f"{name} is not a regular file")
        if st.st_nlink > 1:
            raise ConfineError(f"{name} has {st.st_nlink} hard links, and the other names would stay writable; "
                               "make it a file of its own")
        opts += ["--ro-bind", path, path]
    return opts, created


def remove_stand_ins(created: list[str]) -> None:
    """Remove the empty mount points bwrap created for absent protected files (still empty regular files)."""
    for path in created:
        try:
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_size == 0:
                os.unlink(path)
        except OSError:
            pass


def bwrap_options(root: str, env: dict[str, str], binds: list[str], extra: tuple[str, ...] = ()) -> list[str]:
    """The bwrap options (without the program and without the command) for a command run in ``root``.

    ``root`` must be a real path (no symlink in it); ``binds`` comes from :func:`protected_binds`."""
    opts = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    if os.path.isdir("/run") and not os.path.islink("/run"):
        opts += ["--tmpfs", "/run"]
    # After the tmpfs mounts: a job folder below /tmp (or /run) is bound on top of them.
    opts += ["--bind", root, root, *binds]
    opts += ["--unshare-all", *extra, "--cap-drop", "ALL", "--die-with-parent", "--new-session",
             "--chdir", root, "--clearenv"]
    for key, value in env.items():
        opts += ["--setenv", key, value]
    return opts


_cache: dict[str, Confinement] = {}
_lock = threading.Lock()


def detect_confinement(*, bwrap: str | None = None, refresh: bool = False) -> Confinement:
    """Whether bubblewrap works here, proved once per process by running a trivial command under the very
    options a real command gets. ``bwrap`` names the binary (default: ``bwrap`` on PATH); ``refresh``
    probes again instead of answering from the cache."""
    path = bwrap if bwrap is not None else shutil.which("bwrap")
    if path is None:
        return Confinement("none", "bwrap (bubblewrap) is not installed")
    with _lock:
        if not refresh and path in _cache:
            return _cache[path]
        found = _probe(path)
        _cache[path] = found
        return found


def _probe(bwrap: str) -> Confinement:
    if not os.path.isfile(bwrap) or not os.access(bwrap, os.X_OK):
        return Confinement("none", f"bwrap not found at {bwrap}")
    true = shutil.which("true", path=DEFAULT_PATH)
    command = [true] if true else [sys.executable, "-c", ""]
    env = {"PATH": DEFAULT_PATH}
    why = "no output"
    try:
        with tempfile.TemporaryDirectory(prefix="console-bwrap-probe-") as tmp:
            root = os.path.realpath(tmp)
            with open(os.path.join(root, "instructions.md"), "w", encoding="utf-8") as fh:
                fh.write("probe\n")
            for extra in (USERNS_OPTIONS, ()):
                binds, created = protected_binds(root)
                argv = [bwrap, *bwrap_options(root, env, binds, extra), "--", *command]
                try:
                    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=env,
                                          timeout=PROBE_SECONDS, start_new_session=True, check=False)
                finally:
                    remove_stand_ins(created)
                if done.returncode == 0:
                    return Confinement("bubblewrap", f"{_version(bwrap)} ({bwrap})", bwrap, extra)
                why = _first_line(done.stderr.decode("utf-8", "replace")) or f"exit code {done.returncode}"
    except subprocess.TimeoutExpired:
        return Confinement("none", f"bwrap failed: no answer within {PROBE_SECONDS:g} s")
    except (OSError, ConfineError) as exc:
        return Confinement("none", f"bwrap failed: {getattr(exc, 'strerror', None) or exc}")
    return Confinement("none", f"bwrap failed: {why}")


def _version(bwrap: str) -> str:
    try:
        done = subprocess.run([bwrap, "--version"], stdin=subprocess.DEVNULL, capture_output=True, timeout=5,
                              env={"PATH": DEFAULT_PATH}, check=False)
        return _first_line(done.stdout.decode("utf-8", "replace")) or "bubblewrap"
    except (OSError, subprocess.TimeoutExpired):
        return "bubblewrap"
