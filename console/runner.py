"""A run is its own process: the runner, and the consoles that come and go.

``agent-console run JOB`` (with a terminal) starts the run as a runner: a headless ``run --in-place`` of the
run folder in a session of its own (no controlling terminal, so no hangup reaches it), its log in
``.console/runner.log``, its settings in ``.console/launch.json``. The console then attaches to it like any
other console (``attach``): a hangup, a closed terminal or "detach" ends the console, never the run; the
fleet or ``attach ID`` brings a console back with the run's whole state, rebuilt from its events.

``resume ID`` and the fleet start a runner the same way. A runner ends when its run ends. It is started under
its watcher (console.watcher), a tiny parent that tells the run's channels if the runner dies without recording
its end (a kill -9, the out-of-memory killer), and ends with it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from console.engine.job_files import JobPaths
from console.engine.run_lock import RunLock
from console.engine.starting import RUNNER_LOG, START_PATIENCE, TELL_AFTER, awaited_by
from console.outcome import EXIT_INTERRUPTED, exit_code_for

if TYPE_CHECKING:
    from console.engine import events as ev

TAIL_BYTES = 64 * 1024
# SIGTERM ends a process within 2 s: the run is stopped at once (its state is committed step by step, so
# it stays resumable); if the stop has not finished by then the process exits anyway, as a kill -9 would
# (which the run survives by design).
HARD_EXIT_AFTER = 1.7


def runner_log(paths: JobPaths) -> Path:
    return paths.state / RUNNER_LOG


def runner_argv(paths: JobPaths, flags: Sequence[str] = ()) -> list[str]:
    """The command line of a runner for ``paths`` (the flags a resume was given ride along)."""
    return [sys.executable, "-m", "console.cli", "run", "--in-place", str(paths.root), "--headless", "--runner",
            *flags]


def watcher_argv(paths: JobPaths, flags: Sequence[str] = ()) -> list[str]:
    """The command line of a runner's watcher (console.watcher): it starts the runner and tells the run's
    channels if the runner dies without recording its end (a kill -9, the out-of-memory killer)."""
    return [sys.executable, "-m", "console.watcher", str(paths.root), "--", *runner_argv(paths, flags)]


def spawn_runner(paths: JobPaths, flags: Sequence[str] = (),
                 env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start a runner for the run in ``paths`` under its watcher (the process returned; the runner is its child,
    in a session of its own): a new session, stdin from /dev/null, output to the run's log."""
    paths.state.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(runner_log(paths), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        environ = dict(os.environ if env is None else env)
        environ.pop("TERM_PROGRAM", None)
        environ["NO_COLOR"] = "1"  # the log is a file: no colour codes in it
        environ["AGENT_CONSOLE_RUNNER"] = "1"
        return subprocess.Popen(watcher_argv(paths, flags), stdin=subprocess.DEVNULL, stdout=fd, stderr=fd,
                                start_new_session=True, close_fds=True, env=environ, cwd="/")
    finally:
        os.close(fd)


# What the foreground run's watcher is given of the environment: what it needs to reach the channels (the
# interpreter's and the locale's, the folders, a proxy and its certificates), never a provider's key.
WATCHER_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV",
               "AGENT_CONSOLE_DATA_DIR", "AGENT_CONSOLE_CONFIG", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
               "XDG_CACHE_HOME", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
               "no_proxy", "all_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


class LastWord:
    """The write end of the pipe a foreground run's watcher reads (console.watcher.watch_pipe): :meth:`say` tells
    it the process's exit code as it ends. A process gone without saying it (kill -9) closes the pipe without a
    word, which is what the watcher reports."""

    def __init__(self, fd: int, proc: subprocess.Popen[bytes]) -> None:
        self._fd: int | None = fd
        self._proc = proc
        self._lock = threading.Lock()

    def say(self, code: int) -> None:
        """Once (the hard exit's thread and the main one may both end the process): the code, then the pipe
        closed."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.write(fd, str(int(code)).encode("ascii"))
        with contextlib.suppress(OSError):
            os.close(fd)
        self._proc.poll()  # reaped if it has ended already (it ends as soon as it has read the word)


def watch_foreground(paths: JobPaths, mark: tuple[int, int]) -> LastWord | None:
    """Start the watcher of this process, a run in the foreground with channels to tell (see console.watcher):
    beside it, in a session of its own; None when it cannot be started (the run goes on unwatched: the caller says
    so). ``mark``: the run's log as it is before the run records its start (console.watcher.log_mark): what the
    run does comes after it."""
    size, seq = mark
    read, write = os.pipe()  # both ends close on exec: only the watcher is given the read end
    env = {k: v for k in WATCHER_ENV if (v := os.environ.get(k)) is not None}
    env.update({k: v for k, v in os.environ.items() if k.startswith("LC_")})
    try:
        # Its output: nothing unless it reports, and then into the run's log, which it opens itself (a run that
        # ends well is left no empty runner.log).
        proc = subprocess.Popen([sys.executable, "-m", "console.watcher", str(paths.root), "--pipe", str(read),
                                 str(os.getpid()), str(size), str(seq)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                pass_fds=(read,), start_new_session=True, close_fds=True, env=env, cwd="/")
    except (OSError, ValueError, subprocess.SubprocessError):
        os.close(write)
        return None
    finally:
        os.close(read)
    return LastWord(write, proc)


def log_tail(paths: JobPaths, lines: int = 6) -> list[str]:
    """The runner log's last lines (what a runner that could not start said)."""
    try:
        with runner_log(paths).open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


def parent_of(pid: int) -> int | None:
    """The parent process of ``pid`` (None: gone, or not to be told)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def started_by(paths: JobPaths, proc: subprocess.Popen[bytes]) -> int | None:
    """The pid of the runner ``proc`` started (the process holding the run's lock, a child of ``proc``, its
    watcher; or ``proc`` itself), None while no such process holds it."""
    holder = RunLock(paths).holder()
    if holder is not None and holder > 0 and (holder == proc.pid or parent_of(holder) == proc.pid):
        return holder
    return None


def wait_started(paths: JobPaths, proc: subprocess.Popen[bytes], patience: float = START_PATIENCE,
                 sleep: Callable[[float], None] = time.sleep, *, tell: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> int | None:
    """Wait until the runner holds the run's lock (None) or has exited (its exit code). ``tell``: given one line
    saying what is awaited once the wait passes :data:`TELL_AFTER` (a busy machine: Python's start alone may take
    seconds)."""
    start = clock()
    told = tell is None
    while True:
        code = proc.poll()
        if code is not None:
            return code
        if started_by(paths, proc) is not None:
            return None
        now = clock()
        if now - start > patience:
            return None  # alive but slow: the console attaches and shows it starting
        if not told and now - start >= TELL_AFTER:
            told = True
            assert tell is not None
            tell(f"waiting for the run to start: {awaited(paths, proc)}; its log: {runner_log(paths)}")
        sleep(0.02)


def awaited(paths: JobPaths, proc: subprocess.Popen[bytes]) -> str:
    """What a start waits for now: the watcher to start the runner, or the runner to take the run's lock."""
    return awaited_by(paths, proc.pid)


def last_end(paths: JobPaths) -> tuple[ev.RunEnded | None, bool]:
    """The run's own end after its last start (its last run_ended; None while none is recorded after the last
    start), and whether a job_completed came with it. Reads the log's tail only."""
    # Imported here: the command that starts a runner (``run --detach``) does not load the events to start one.
    from console.engine import events as ev

    try:
        with paths.events.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            lines = fh.read().splitlines()
    except OSError:
        return None, False
    completed = False
    for raw in reversed(lines):
        try:
            e = ev.parse_event(raw.decode("utf-8", "replace"))
        except Exception:  # a torn or foreign line
            continue
        if isinstance(e, ev.JobCompleted):
            completed = True
        if isinstance(e, ev.RunEnded):
            return e, completed
        if isinstance(e, ev.SessionStarted) and e.reason != "restart":
            return None, False  # a start with no end after it: running, or died without saying so
    return None, False


def ended_code(paths: JobPaths) -> int | None:
    """The exit code the run's own end gives (its last run_ended or job_completed), None while no end is
    recorded after the last start."""
    end, completed = last_end(paths)
    return None if end is None else exit_code_for(end.reason, completed, outcome=end.outcome)


def job_done(paths: JobPaths) -> bool:
    """The job is done: its outcome is recorded and its last run ended completed (an agent that gave up, or a
    free stop's job_complete with work left, has an outcome too: such a run can be resumed)."""
    if not paths.outcome.exists():
        return False
    end, _ = last_end(paths)
    return end is None or end.outcome in (None, "completed")


class HardExit:
    """Ends the process ``after`` seconds from :meth:`arm` unless it ended first (SIGTERM's 2 s promise)."""

    def __init__(self, after: float = HARD_EXIT_AFTER, code: int = EXIT_INTERRUPTED,
                 before: Callable[[], None] | None = None) -> None:
        self.after = after
        self.code = code
        self.before = before
        self._armed = False

    def arm(self) -> None:
        if self._armed:
            return
        self._armed = True
        threading.Thread(target=self._fire, name="hard-exit", daemon=True).start()

    def _fire(self) -> None:
        time.sleep(self.after)
        if self.before is not None:
            with contextlib.suppress(Exception):
                self.before()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(self.code)


def detach_output(paths: JobPaths) -> None:
    """The terminal is gone (a hangup): what the process still prints goes to the runner log instead of a
    dead terminal (a write there fails, or blocks), and stdin reads nothing."""
    with contextlib.suppress(OSError):
        fd = os.open(runner_log(paths), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)


def drop_output() -> None:
    """A viewer's terminal is gone (a hangup): what it still writes (its screen's restore sequences, a closing
    line) goes nowhere, and stdin reads nothing. Never to the run's log: a viewer's output is the terminal's (the
    alternate screen, mouse modes...), not the run's story."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)


def ignore_hangup() -> None:
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
