"""The watcher of a runner: the one process that sees a run's process die when nothing else can.

A runner killed by ``kill -9`` or the out-of-memory killer says nothing: its own notifier dies with it, and the
operator who walked away is never told. So :func:`console.runner.spawn_runner` starts this tiny parent first
(``python -m console.watcher RUN -- RUNNER ARGV``), which starts the runner (a session of its own, as before)
and waits for it. When the runner is gone it looks at how it ended and at the run's log:

- killed by a signal (SIGKILL, SIGSEGV...) or exited without its end recorded after its start: the run died. The
  channels of the run's record (``.console/launch.json``, sealed by this operator's harness for this folder: never
  argv, never the environment, never a record the folder came with) are told once,
  in the style of the other needs (:meth:`console.notify.Notifier.died`), and ``runner.log`` says so too;
- a normal end, an operator stop (the run records its end), a SIGTERM or SIGINT stop (sent to the runner, or
  to this watcher, which hands it on), a runner that never started its run (its starter says why), or a run
  another process holds again by then (a resume): nothing is told.

Then it exits with the runner's exit code (128 + the signal for a killed one). It holds no run lock, never
stops the run (it only hands on a SIGTERM or SIGINT sent to itself), ignores SIGHUP, and stays small while it
waits: the standard library only; the engine, pydantic and Apprise are imported once the runner is gone (the
out-of-memory killer weighs a process by its memory, and picks the run, not this).

A run in the foreground (``run --headless`` in a shell, or with no terminal) is no child of a watcher: the run's
process is the command the operator typed. With channels to tell, it starts one beside it
(:func:`console.runner.watch_foreground`: ``python -m console.watcher RUN --pipe FD PID SIZE SEQ``), in a
session of its own (the terminal's Ctrl+C and hangup never reach it), which holds the read end of a pipe whose
write end only the run's process has. The process says its last word there as it ends (its exit code): an end,
a stop or a traceback is then judged as a runner's exit code is. A pipe that closes without a word is a process
gone without running another line of its own (``kill -9``, the out-of-memory killer, a segfault): once the
process is gone (its pidfd), the run's log decides, as above, and a run that started and recorded no end is told
as "killed".
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from typing import Any

# A stop sent on purpose (a console's Ctrl+C before it has the terminal, `kill`, systemd): the run tells its own
# story, or the one who sent it knows.
STOPS = (signal.SIGTERM, signal.SIGINT)
# The exit codes (console.outcome's) of a runner that told its own story: 0 completed, 3 stopped, 4 gave up, 7
# failed (each after its run_ended), 2 bad input (before any run), 130 interrupted (a SIGTERM stop, perhaps
# hard-exited). 1 is also a traceback's: the log decides.
TOLD = frozenset({0, 2, 3, 4, 7, 130})
SEND_PATIENCE = 60.0  # seconds the channels have to take the message (the process has nothing else to do)
TAIL = 64 * 1024
_MARKERS = (b'"type":"session_started"', b'"type":"run_ended"', b'"type":"needs_operator"')


def _events(root: str) -> str:
    return os.path.join(root, ".console", "events.jsonl")


def log_mark(root: str) -> tuple[int, int]:
    """(size, last seq) of the run's events log now: what the runner about to start did comes after it. Only
    the standard library: this is read while the watcher must stay small."""
    try:
        with open(_events(root), "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - TAIL))
            tail = fh.read()
    except OSError:
        return 0, 0
    for raw in reversed(tail.splitlines()):
        with contextlib.suppress(ValueError, RecursionError, AttributeError):
            seq = json.loads(raw).get("seq")
            if type(seq) is int and seq >= 0:
                return size, seq
    return size, 0


class Seen:
    """What the runner recorded after the mark: whether it started the run, whether it recorded its end, and
    whether it told its channels of a crash itself."""

    def __init__(self) -> None:
        self.started = self.ended = self.crash_told = False


def seen_since(root: str, mark: tuple[int, int]) -> Seen:
    """Read the run's log from about the mark on (each line validated; a torn or foreign one skipped)."""
    from console.engine import events as ev

    size, base = mark
    seen = Seen()
    try:
        fh = open(_events(root), "rb")  # noqa: SIM115 (closed below: the log may be gone)
    except OSError:
        return seen
    with fh:
        # A torn last line the runner repaired moved the end back a little: start before the mark, whole lines.
        start = max(0, size - TAIL)
        fh.seek(start)
        if start:
            fh.readline()
        for raw in fh:
            if not any(m in raw for m in _MARKERS):
                continue
            try:
                e = ev.parse_event(raw.decode("utf-8", "replace"))
            except Exception:  # a torn or foreign line is not the run's
                continue
            if e.seq <= base:
                continue
            if isinstance(e, ev.SessionStarted) and e.reason != "restart":
                seen.started, seen.ended, seen.crash_told = True, False, False
            elif isinstance(e, ev.RunEnded):
                seen.ended = True
            elif isinstance(e, ev.NeedsOperator) and e.reason == "crashed":
                seen.crash_told = True
    return seen


def died(code: int, stopped: bool, seen: Seen) -> str | None:
    """How the run died (``killed by SIGKILL``...), or None when there is nothing to tell: ``code`` is the
    runner's (negative: the signal that killed it), ``stopped`` whether a stop was handed on to it."""
    if stopped or seen.ended:
        return None
    if code < 0:
        if -code in STOPS:
            return None
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        return f"killed by {name}"
    if code in TOLD or not seen.started or seen.crash_told:
        # An end told by the run, a runner that never started its run (its starter says why), or a crash the run
        # told its channels of itself.
        return None
    return f"exited with code {code} without recording its end"


def report(root: str, how: str, out: Any = None, clock: Any = None) -> bool:
    """Tell the run's channels (and its runner.log, through ``out``) that it died; False when another process
    runs it again by then (a resume: it is not dead) and nothing was told. ``clock``: console.engine.clock's
    (the system's by default)."""
    from pathlib import Path

    from console.engine.clock import SystemClock
    from console.engine.job_files import JobError, JobPaths
    from console.engine.launch import LaunchError, read_launch
    from console.engine.run_lock import RunLock
    from console.engine.runs import job_name
    from console.engine.seal import Seal
    from console.engine.text import safe_text
    from console.settings import load_settings

    out = out or sys.stderr
    clock = clock or SystemClock()
    when = clock.now().astimezone()
    paths = JobPaths(Path(root))
    if RunLock(paths).holder() is not None:
        return False
    log = paths.state / "runner.log"
    print(f"agent-console: run {paths.run_id} died at {when:%H:%M:%S} ({how}); its last step is kept; resume it "
          f"with: agent-console resume {paths.run_id}", file=out, flush=True)
    try:
        # Only a record this operator's harness sealed for this folder chooses where the news goes (a folder's
        # own .console/ from elsewhere names its author's channels: console.engine.provenance).
        settings = load_settings()
        record = read_launch(paths, Seal.of(settings.data_dir))
    except (LaunchError, JobError, OSError, ValueError) as exc:
        print(f"agent-console: its channels cannot be told: {safe_text(str(exc), one_line=True, join=True)}",
              file=out, flush=True)
        return True
    urls = record.notify if record is not None else ()
    if not urls:
        return True
    from console.notify import Notifier, link_settings

    def failed(line: str) -> None:
        print(f"agent-console: {line}", file=out, flush=True)

    notifier = Notifier(list(urls), paths.run_id, job_name(paths.root), clock=clock, on_error=failed, remind=(),
                        look=False, folder=paths.root, links=link_settings(settings))
    # The out-of-memory killer sends SIGKILL too: the message names both.
    notifier.died(how, when, log, "A kill -9, or the system out of memory."
                  if how.endswith("SIGKILL") or how == "killed" else "")
    if not notifier.close(SEND_PATIENCE):
        print(f"agent-console: a channel did not answer within {SEND_PATIENCE:g} s", file=out, flush=True)
    return True


WORD_MAX = 16  # bytes of a last word (an exit code): more is not one
GONE_PATIENCE = 5.0  # seconds a process whose pipe closed has to be gone (its files closed, its lock released)


def _gone(pidfd: int | None, pid: int, patience: float = GONE_PATIENCE) -> None:
    """Wait (at most ``patience``) until process ``pid`` has ended: its pidfd readable, or (no pidfd) its /proc
    entry gone or a zombie. Once it has, its files are closed: the run's lock is free unless another holds it."""
    import select
    import time

    if pidfd is not None:
        with contextlib.suppress(OSError):
            select.select([pidfd], [], [], patience)
        return
    end = time.monotonic() + patience
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    return
        except (OSError, IndexError):
            return
        time.sleep(0.05)


def last_word(fd: int) -> int | None:
    """What the process at the pipe's other end said as it ended (its exit code), read until the pipe closes;
    None when it closed without a word (or with one that is not an exit code)."""
    word = b""
    while True:
        try:
            chunk = os.read(fd, WORD_MAX)
        except OSError:
            break
        if not chunk:
            break
        word += chunk
        if len(word) > WORD_MAX:
            return None
    try:
        return int(word.decode("ascii")) if word else None
    except ValueError:
        return None


def watch_pipe(root: str, fd: int, pid: int, mark: tuple[int, int]) -> int:
    """``RUN --pipe FD PID SIZE SEQ``: watch the run's process ``pid`` (a run in the foreground), which holds the
    write end of the pipe ``fd``; report as for a runner once it has ended. 0, whatever the run did: no one waits
    for this process's code."""
    signal.signal(signal.SIGHUP, lambda _s, _f: None)  # in a session of its own already; a stray one is no stop
    pidfd: int | None = None
    with contextlib.suppress(OSError, AttributeError):
        pidfd = os.pidfd_open(pid)  # now, while the process is alive: its id cannot be another's yet
    code = last_word(fd)
    if code is None:
        _gone(pidfd, pid)
    seen = seen_since(root, mark)
    how = (None if seen.ended or not seen.started or seen.crash_told else "killed") if code is None \
        else died(code, False, seen)
    if how is None:
        return 0
    # What it says goes to the run's log (as a runner's watcher's does), opened only now: the run's end is told.
    try:
        os.makedirs(os.path.dirname(_events(root)), mode=0o700, exist_ok=True)
        log: Any = open(os.path.join(os.path.dirname(_events(root)), "runner.log"), "a",  # noqa: SIM115
                        encoding="utf-8", opener=lambda p, f: os.open(p, f | os.O_CLOEXEC, 0o600))
    except OSError:
        log = sys.stderr
    with log:
        try:
            report(root, how, out=log)
        except Exception as exc:  # said in runner.log, never a traceback: its text may hold a URL
            print(f"agent-console: the run's death could not be told ({type(exc).__name__})", file=log, flush=True)
    return 0


def main(args: list[str]) -> int:
    """``RUN -- ARGV``: start ARGV (the runner of the run folder RUN), wait for it, report, exit with its code.
    ``RUN --pipe FD PID SIZE SEQ``: watch a run in the foreground (:func:`watch_pipe`)."""
    if len(args) == 6 and args[1] == "--pipe":
        try:
            fd, pid, size, seq = (int(a) for a in args[2:])
        except ValueError:
            fd = -1
        if fd >= 0:
            return watch_pipe(args[0], fd, pid, (size, seq))
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m console.watcher RUN -- RUNNER ARGV  |  RUN --pipe FD PID SIZE SEQ", file=sys.stderr)
        return 2
    root, argv = args[0], args[2:]
    mark = log_mark(root)
    child: list[int] = []
    stop: list[int] = []

    def hand_on(signum: int, _frame: object) -> None:
        stop.append(signum)
        if child and len(stop) == 1:  # once: the runner's second SIGTERM is its own business
            with contextlib.suppress(ProcessLookupError):
                os.kill(child[0], signum)

    signal.signal(signal.SIGTERM, hand_on)
    signal.signal(signal.SIGINT, hand_on)
    # A handler, not SIG_IGN: the runner (exec'd) starts with the default, as it would without this parent.
    signal.signal(signal.SIGHUP, lambda _s, _f: None)
    try:
        # The runner is a session leader of its own, as before there was a watcher; SIGPIPE as Python found it.
        pid = os.posix_spawn(argv[0], argv, os.environ, setsid=True,
                             setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGINT))
    except OSError as exc:
        print(f"agent-console: the runner could not be started: {exc.strerror or exc}", file=sys.stderr)
        return 127
    child.append(pid)
    if stop:  # a stop that came while it was being started
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, stop[0])
    _, status = os.waitpid(pid, 0)  # retried across signals (PEP 475)
    code = os.waitstatus_to_exitcode(status)
    # An end the run told itself, a stop (the stopper's): nothing to read, and the watcher is gone at once, as
    # its runner is.
    quiet = code in TOLD or bool(stop) or (code < 0 and -code in STOPS)
    how = None if quiet else died(code, False, seen_since(root, mark))
    if how is not None:
        try:
            report(root, how)
        except Exception as exc:  # said in runner.log, never a traceback: its text may hold a URL
            print(f"agent-console: the run's death could not be told ({type(exc).__name__})", file=sys.stderr)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
