"""Running one command within its bounds, confined or not, and making sure nothing of it is left.

The command starts blocked: bubblewrap's child waits on ``--block-fd`` after building the sandbox and before
running anything of the command's (unconfined, a tiny ``sh`` waits on its stdin). While it waits, the
harness puts it in its cgroup and sets its rlimits (``prlimit``), so no process of the command ever runs
unbounded and there is no race with a fork. Then:

- **wall time**: the tool's timeout, the operator's stop, and the run's deadline end the whole process tree:
  the cgroup is killed whole; confined, the sandbox's pid 1 is killed (the kernel then kills everything in
  its pid namespace, ``setsid`` and double forks included); unconfined, the harness is the "child subreaper"
  of what the command leaves behind while it runs, and kills and reaps every orphan it inherits;
- **processes**: ``pids.max`` of the cgroup, and ``RLIMIT_NPROC`` (counted per user namespace: inside the
  sandbox it bounds the command's own processes, even when the operator is root);
- **memory**: the cgroup's memory limit (the whole tree, tmpfs pages included), else ``RLIMIT_DATA`` per
  process; **CPU time**, **open files**, **file size**: ``RLIMIT_CPU``, ``RLIMIT_NOFILE``, ``RLIMIT_FSIZE``;
- **the job folder's size**: watched while the command runs (a scan in a thread, at most a fifth of a core)
  and measured when it ends; a command that grows the folder past ``max_job_mb`` is stopped.

Confined, bubblewrap reports on ``--json-status-fd`` whether the command was started (its exit code) or the
sandbox could not be built (no exit code; its message is the output): the harness never mistakes a
command's own "bwrap: ..." for a sandbox failure. Stdlib only.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from console.engine.tools.bounding import SUBREAPER, apply_rlimits, my_children, reap_orphans, rlimits, user_tasks
from console.engine.tools.cgroups import Cgroups, Slot
from console.engine.tools.folder_size import FolderWatch, measure_folder
from console.engine.tools.limits import MB, CommandLimits

# How often the loop checks the clock, the operator's stop and the deadline while a command runs.
POLL_SECONDS = 0.05
# After the command ends, how long the output pipe may stay open (a background process holding it).
DRAIN_SECONDS = 1.0
# The most bwrap may take to build the sandbox before the command is refused as not confinable.
SETUP_SECONDS = 10.0
CHUNK = 1 << 16
# The folder watch starts after this long (a short command is measured once, at its end).
WATCH_AFTER = 0.2


# The unconfined start: wait for the harness's go (a line on stdin), then run the command with stdin from
# /dev/null. No go (the harness died or gave up): exit 125 without running anything.
SHIM = 'read _ || exit 125; exec "$@" </dev/null'

Status = Literal["exited", "timeout", "stopped", "deadline", "folder", "host_files", "setup_failed"]


@dataclass
class Bounds:
    """What ends a command early besides its own exit."""

    timeout: float
    limits: CommandLimits = field(default_factory=CommandLimits)
    # The run's own cut (its deadline): seconds from the start, and its name for the result.
    cut_after: float | None = None
    cut_name: str = "the job's deadline"
    # The job folder and the most it may hold (None: not watched); its harness folder is not counted.
    folder: str | None = None
    folder_limit: int | None = None
    state_dir: str = ".console"


@dataclass
class RunResult:
    status: Status
    returncode: int | None
    seconds: float
    head: bytes
    tail: bytes
    total: int
    # A background process kept the output pipe open after the command ended.
    pipe_left_open: bool = False
    # The kernel killed a process of the command for going over its memory (cgroup only).
    oom: bool = False
    # The job folder's size when the command ended (None: not measured).
    folder_bytes: int | None = None
    # bwrap's own message when the sandbox could not be built (status "setup_failed").
    setup_error: str = ""
    # Files of the job folder whose setuid/setgid bit was removed after the command.
    setid_removed: list[str] = field(default_factory=list)
    # Why the job folder could not be measured whole (it then counts as over its limit), or "".
    unmeasurable: str = ""
    # (open, most) of the host's open-file table when it was nearly full and the command was stopped for it.
    host_files: tuple[int, int] | None = None

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


def _nproc_base(launch: Launch) -> int | None:
    """What RLIMIT_NPROC counts before the command starts: inside bwrap's user namespace, only the command's
    own tasks (0); elsewhere every task of the user, whose current number is added to the limit (None for
    root, which RLIMIT_NPROC does not bind: there the pids cgroup or the pid namespace bounds a command)."""
    if launch.bwrap is not None and "--unshare-user" in launch.options:
        return 0
    if os.geteuid() == 0:
        return None
    return user_tasks(os.getuid())


# -- one command ----------------------------------------------------------------------------------------------
# A command is stopped while the host's open-file table is this full (whoever filled it: the host needs room).
HOST_FILES_SHARE = 0.9


def host_files_nearly_full() -> tuple[int, int] | None:
    """(open files, fs.file-max) when the host's open-file table is over :data:`HOST_FILES_SHARE` full, else None
    (a read of /proc/sys/fs/file-nr: microseconds)."""
    try:
        with open("/proc/sys/fs/file-nr", "rb") as fh:
            used, _free, most = (int(x) for x in fh.read().split()[:3])
    except (OSError, ValueError):
        return None
    return (used, most) if most > 0 and used > HOST_FILES_SHARE * most else None


def _stop_requested(should_stop: Callable[[], bool]) -> bool:
    try:
        return bool(should_stop())
    except Exception:
        return False


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


class _Status:
    """bwrap's JSON status lines: the sandbox's pid 1 once it exists, the command's exit code once it ran."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = b""
        self.child_pid: int | None = None
        self.exit_code: int | None = None
        self.closed = False

    def read(self) -> None:
        try:
            data = os.read(self.fd, 4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.closed = True
            return
        self.buf += data
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            try:
                info = json.loads(line)
            except ValueError:
                continue
            if isinstance(info, dict):
                if isinstance(info.get("child-pid"), int):
                    self.child_pid = info["child-pid"]
                if isinstance(info.get("exit-code"), int):
                    self.exit_code = info["exit-code"]


@dataclass
class Launch:
    """How to start the command: under bwrap (``bwrap``, its options, the seccomp filter) or unconfined (None)."""

    bwrap: str | None = None
    options: Sequence[str] = ()
    seccomp: bytes | None = None


class _Setup(Exception):
    """The sandbox (or the bounds) could not be put in place; the message says why."""


def run_bounded(argv: Sequence[str], *, cwd: str, env: dict[str, str], keep: int, bounds: Bounds,
                launch: Launch, cgroups: Cgroups | None = None,
                should_stop: Callable[[], bool] = lambda: False) -> RunResult:
    """Run ``argv`` (stdout and stderr merged) within ``bounds`` until it exits or something ends it.

    Nothing the command started is left when this returns, and every process is reaped. OSError if the
    program (bwrap, or sh) cannot be started at all."""
    start = time.monotonic()
    lim = bounds.limits
    slot: Slot | None = None
    if cgroups is not None:
        with contextlib.suppress(OSError):
            slot = Slot(cgroups, memory_bytes=lim.memory_mb * MB, pids=lim.processes)
    confined = launch.bwrap is not None
    # Unconfined, whatever the command leaves behind (a setsid'd grandchild, a double fork) is handed to this
    # process, which kills and reaps it: nothing outlives the call. (Confined, the sandbox's pid namespace ends
    # with its pid 1: nothing of it can outlive it.)
    before = my_children() if not confined and SUBREAPER.enter() else None
    block_r, block_w = os.pipe2(os.O_CLOEXEC)
    status: _Status | None = None
    opts_fd = -1
    filter_fd = -1
    child_pidfd = -1
    pidfd = -1
    try:
        if confined:
            assert launch.bwrap is not None
            status_r, status_w = os.pipe2(os.O_CLOEXEC)
            status = _Status(status_r)
            # The options travel through a file descriptor, not the command line: `ps` shows no env value.
            extra = ["--json-status-fd", str(status_w), "--block-fd", str(block_r)]
            if launch.seccomp is not None:
                filter_fd = _memfd("seccomp", launch.seccomp)
                extra += ["--seccomp", str(filter_fd)]
            opts_fd = _options_fd([*launch.options, *extra])
            fds = (opts_fd, status_w, block_r) + ((filter_fd,) if filter_fd >= 0 else ())
            try:
                proc = subprocess.Popen([launch.bwrap, "--args", str(fds[0]), "--", *argv], cwd=cwd, env=env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        start_new_session=True, close_fds=True, pass_fds=fds)
            finally:
                os.close(status_w)
                os.close(block_r)
                block_r = -1
        else:
            proc = subprocess.Popen(["/bin/sh", "-c", SHIM, "sh", *argv], cwd=cwd, env=env, stdin=block_r,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                    close_fds=True)
            os.close(block_r)
            block_r = -1
    except BaseException:
        for fd in (block_r, block_w):
            if fd >= 0:
                os.close(fd)
        if status is not None:
            os.close(status.fd)
        for f in (opts_fd, filter_fd):
            if f >= 0:
                os.close(f)
        if slot is not None:
            slot.close()
        if before is not None:
            SUBREAPER.leave()
        raise
    assert proc.stdout is not None
    cap = _Capture(keep)
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    if status is not None:
        os.set_blocking(status.fd, False)
    result_status: Status = "exited"
    host_files: tuple[int, int] | None = None
    setup_error = ""
    ended_at: float | None = None
    eof = False
    watch: FolderWatch | None = None
    sel = selectors.DefaultSelector()
    try:
        sel.register(fd, selectors.EVENT_READ)
        with contextlib.suppress(AttributeError, OSError):
            # Readable when the process ends: an exit after its output is seen at once, not at the next poll.
            pidfd = os.pidfd_open(proc.pid)
            sel.register(pidfd, selectors.EVENT_READ)
        if status is not None:
            sel.register(status.fd, selectors.EVENT_READ)
        try:
            target = _wait_for_sandbox(proc, sel, status, fd, cap, start) if confined else proc.pid
            if target is not None:
                with contextlib.suppress(AttributeError, OSError):
                    child_pidfd = os.pidfd_open(target)
                try:
                    if slot is not None:
                        slot.add(target)  # the command's first process (bwrap's own monitor runs none of its code)
                    apply_rlimits(target, rlimits(lim, nproc_base=_nproc_base(launch), memory=slot is None))
                except (OSError, ValueError) as exc:
                    raise _Setup(f"its bounds could not be set ({getattr(exc, 'strerror', None) or exc})") from None
                os.write(block_w, b"go\n")
        except _Setup as exc:
            result_status, setup_error, ended_at = "setup_failed", str(exc), time.monotonic()
            _kill(proc, child_pidfd, slot)
        finally:
            os.close(block_w)
            block_w = -1
        if bounds.folder is not None and bounds.folder_limit is not None:
            watch = FolderWatch(bounds.folder, bounds.folder_limit, bounds.state_dir)
        while True:
            for key, _ in sel.select(POLL_SECONDS):
                if key.fd == fd:
                    eof = _drain(fd, cap)
                    if eof:
                        sel.unregister(fd)
                elif status is not None and key.fd == status.fd:
                    status.read()
                    if status.closed:
                        sel.unregister(status.fd)
            now = time.monotonic()
            if ended_at is None:
                elapsed = now - start
                if watch is not None and not watch.started and elapsed >= WATCH_AFTER:
                    watch.start()
                if _exited(proc.pid):
                    ended_at = now
                elif elapsed >= bounds.timeout:
                    result_status, ended_at = "timeout", now
                elif bounds.cut_after is not None and elapsed >= bounds.cut_after:
                    result_status, ended_at = "deadline", now
                elif watch is not None and watch.over is not None:
                    result_status, ended_at = "folder", now
                elif (files := host_files_nearly_full()) is not None:
                    result_status, ended_at, host_files = "host_files", now, files
                elif _stop_requested(should_stop):
                    result_status, ended_at = "stopped", now
                if ended_at is not None:
                    # Whatever the command left running goes too (the process is not reaped yet, so neither its
                    # group id nor its sandbox's pid can have been reused), and with it the output pipe it holds.
                    _kill(proc, child_pidfd, slot)
                    if before is not None:
                        proc.wait()
                        reap_orphans(before)
                    if pidfd >= 0:
                        sel.unregister(pidfd)
                        os.close(pidfd)
                        pidfd = -1
            if ended_at is not None and (eof or now - ended_at >= DRAIN_SECONDS):
                break
        if status is not None and not status.closed:
            status.read()  # the exit code is written before bwrap exits
    finally:
        sel.close()
        if watch is not None:
            watch.close()
        if proc.returncode is None:
            _kill(proc, child_pidfd, slot)
            proc.wait()
        proc.stdout.close()
        for f in (pidfd, child_pidfd, block_w, status.fd if status is not None else -1):
            if f >= 0:
                with contextlib.suppress(OSError):
                    os.close(f)
        for f in (opts_fd, filter_fd):
            if f >= 0:
                os.close(f)
        if before is not None:
            reap_orphans(before, keep=proc.pid)
            SUBREAPER.leave()
        oom = False
        if slot is not None:
            oom = slot.oom_killed()
            slot.close()
    returncode = proc.returncode
    if status is not None and result_status == "exited":
        if status.exit_code is None:
            # bwrap ended without starting the command: the sandbox could not be built, or the program was not
            # there to run; its message is the output.
            result_status = "setup_failed"
            setup_error = _decode_line(bytes(cap.head + cap.tail)) or f"bwrap exited with {returncode}"
        else:
            returncode = status.exit_code
            if returncode > 128 and returncode - 128 in (signal.SIGKILL, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGSEGV,
                                                         signal.SIGABRT, signal.SIGTERM, signal.SIGBUS):
                returncode = -(returncode - 128)  # bwrap reports a signal as 128 + its number, as a shell does
    measured: int | None = None
    unset: list[str] = []
    unmeasurable = ""
    if bounds.folder is not None:
        m = measure_folder(bounds.folder, bounds.state_dir, strip_setid=True)
        measured, unset, unmeasurable = m.bytes, m.unset, m.unmeasurable
        if watch is not None and watch.over is not None:
            measured = max(measured, watch.over)
        if unmeasurable and bounds.folder_limit is not None:
            measured = max(measured, bounds.folder_limit + 1)
    return RunResult(result_status, returncode, time.monotonic() - start, bytes(cap.head), bytes(cap.tail),
                     cap.total, pipe_left_open=not eof and result_status != "setup_failed", oom=oom,
                     folder_bytes=measured, setup_error=setup_error, setid_removed=unset,
                     unmeasurable=unmeasurable, host_files=host_files)


def _options_fd(options: Sequence[str]) -> int:
    """bwrap's options, NUL-separated, in an anonymous in-memory file (no temp file anywhere)."""
    return _memfd("bwrap-args", ("\0".join(options) + "\0").encode("utf-8", "surrogateescape"))


def _memfd(name: str, data: bytes) -> int:
    """``data`` in an anonymous in-memory file, read from its start."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)  # Linux >= 3.17, as bwrap itself needs
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _wait_for_sandbox(proc: subprocess.Popen[bytes], sel: selectors.BaseSelector, status: _Status | None, fd: int,
                      cap: _Capture, start: float) -> int:
    """The pid of the sandbox's first process, once bwrap has made it (and it waits on the block fd)."""
    assert status is not None
    while status.child_pid is None:
        if time.monotonic() - start > SETUP_SECONDS:
            raise _Setup(f"bwrap did not build the sandbox within {SETUP_SECONDS:g} s")
        for key, _ in sel.select(POLL_SECONDS):
            if key.fd == status.fd:
                status.read()
            elif key.fd == fd:
                _drain(fd, cap)
        if status.child_pid is None and (status.closed or _exited(proc.pid)):
            _drain(fd, cap)
            raise _Setup(_decode_line(bytes(cap.head + cap.tail)) or "bwrap ended before building the sandbox")
    return status.child_pid


def _decode_line(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text.splitlines()[-1][:500] if text else ""


def _kill(proc: subprocess.Popen[bytes], child_pidfd: int, slot: Slot | None) -> None:
    if slot is not None:
        slot.signal_all()
    if child_pidfd >= 0:
        # The sandbox's pid 1: the kernel kills every process of its pid namespace with it.
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(child_pidfd, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
