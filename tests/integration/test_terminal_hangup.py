"""A run outlives its terminal: real pseudo-terminals, real hangups, real signals, real processes.

``agent-console run JOB`` under a pty starts a runner (its own session) and a console on it. Closing the
pty's master is what an SSH drop does to the session: the console gets SIGHUP, and must be gone within 2 s
while the run goes on; SIGTERM ends any agent-console process within 2 s and leaves the run resumable;
`resume ID` goes on with the settings the run was started with; nothing is left once a run has ended.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path

import pytest

from console.engine import events as ev
from console.engine.control import RunLock
from console.engine.job import JobPaths
from console.engine.launch import read_launch
from console.runner import parent_of
from tests.conftest import SAMPLES
from tests.processes import alive as _alive
from tests.processes import cli as _cli
from tests.processes import wait_for as _wait_for
from tests.provenance_support import operator_seal

# The promise is 2 s (a hard exit fires 2 s after the signal: console.runner.HardExit), a pace these tests do not
# time (a loaded machine's scheduler would decide it). What they tell apart is a process that ends from one that
# hangs (a console left on a dead terminal never ends: this ceiling catches it) or that waits for its run (the
# quickstart at speed 0.3 has half a minute of work ahead: a runner that waited for it has completed the run,
# which the tests check it has not).
GONE_WITHIN = 60.0


class Pty:
    """A process on a pseudo-terminal of 80x24 whose output is drained (a full pty would block the console)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        pid, fd = os.forkpty()
        if pid == 0:  # the child: a session of its own with the pty as its terminal, like a login shell's job
            try:
                os.chdir(cwd)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.out = bytearray()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        self.status: int | None = None

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.out += chunk

    def hang_up(self) -> None:
        """What an SSH drop does: the terminal's master side goes away."""
        os.close(self.fd)

    def wait(self, timeout: float) -> int | None:
        """The exit status (as os.waitstatus_to_exitcode), or None if still running after ``timeout``."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                return self.status
            time.sleep(0.02)
        return None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.update(TERM="xterm-256color", COLUMNS="80", LINES="24", PYTHONUNBUFFERED="1")
    return env




def _run_folder(data: Path) -> JobPaths:
    runs = sorted((data / "runs").iterdir())
    assert len(runs) == 1, runs
    return JobPaths(runs[-1])



def _types(paths: JobPaths) -> list[str]:
    return [e.type for e in ev.read_events(paths.events)]


def _start_console(tmp_path: Path, *extra: str) -> tuple[Pty, JobPaths, int]:
    data = Path(os.environ["AGENT_CONSOLE_DATA_DIR"])
    pty = Pty(_cli("run", str(SAMPLES / "quickstart"), "--speed", "0.3", *extra), _env(tmp_path), tmp_path)
    try:
        _wait_for(lambda: (data / "runs").is_dir() and any((data / "runs").iterdir()), 30, "the run folder")
        paths = _run_folder(data)
        runner = _wait_for(lambda: RunLock(paths).holder(), 30, "a runner holding the run")
        # The console is up once it has drawn its panes (the status line names the run's id).
        _wait_for(lambda: paths.run_id.encode() in pty.out and b"Todo" in pty.out, 30, "the console's screen")
    except BaseException:
        pty.kill()
        raise
    assert runner != pty.pid  # the run is a process of its own, not the console's
    return pty, paths, runner


@pytest.mark.parametrize("attempt", range(3))
def test_a_hangup_closes_the_console_and_the_run_goes_on(tmp_path: Path, attempt: int) -> None:
    pty, paths, runner = _start_console(tmp_path)
    try:
        time.sleep(0.2 * attempt)  # hang up at different moments of the run
        pty.hang_up()
        assert pty.wait(GONE_WITHIN) is not None, f"console still there {GONE_WITHIN:.0f} s after the hangup"
        assert _alive(runner) and RunLock(paths).holder() == runner, "the hangup reached the run"
        # Its watcher (its parent, which tells the channels if it dies) outlives the hangup too.
        watch = parent_of(runner)
        assert watch is not None and watch != pty.pid and _alive(watch)
        assert b"console.watcher" in Path(f"/proc/{watch}/cmdline").read_bytes()
        types_before = len(_types(paths))
        _wait_for(lambda: len(_types(paths)) > types_before, 30, "the run to go on working after the hangup")
        # The console that lost its terminal wrote nothing of the terminal's (its screen's and mouse modes'
        # sequences, which Textual writes as it closes) into the run's log: the runner's story only.
        log = (paths.state / "runner.log").read_bytes()
        esc = log.find(b"\x1b")
        assert esc < 0, f"escape sequences in runner.log: {log[esc:esc + 80]!r}"
        assert f"run {paths.run_id}".encode() in log  # the runner's own story is there
    finally:
        pty.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(runner, signal.SIGTERM)
    # SIGTERM ends the runner (within 2 s, not at its run's end), and leaves the run resumable: nothing holds it,
    # nothing completed.
    _wait_for(lambda: not _alive(runner), GONE_WITHIN, "the runner to end after SIGTERM")
    assert RunLock(paths).holder() is None
    assert not paths.outcome.exists()


def test_sigterm_ends_a_console_and_the_run_goes_on(tmp_path: Path) -> None:
    pty, paths, runner = _start_console(tmp_path)
    try:
        os.kill(pty.pid, signal.SIGTERM)
        assert pty.wait(GONE_WITHIN) is not None
        assert _alive(runner) and not paths.outcome.exists()
    finally:
        pty.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(runner, signal.SIGKILL)


def test_a_run_keeps_its_settings_through_sigterm_and_resume(tmp_path: Path) -> None:
    """Started with flags, killed by SIGTERM mid-run, resumed with `resume ID`: the same settings, told in the
    run's launch_settings events; a flag at resume overrides and says so; nothing is left at the end."""
    pty, paths, runner = _start_console(tmp_path, "--context-window", "40000", "--no-auto-restart",
                                        "--max-restarts", "7")
    try:
        pty.hang_up()
        assert pty.wait(GONE_WITHIN) is not None
        os.kill(runner, signal.SIGTERM)
        _wait_for(lambda: not _alive(runner), GONE_WITHIN, "the runner to end")
        assert not paths.outcome.exists()  # ended by the signal, not after completing its run
    finally:
        pty.kill()
    record = read_launch(paths, operator_seal())
    assert record is not None
    assert (record.context_window, record.auto_restart, record.max_restarts) == (40000, False, 7)
    # An environment that says otherwise (another provider, another model) does not change the run.
    env = _env(tmp_path) | {"AGENT_CONSOLE_MODEL": "something-else"}
    done = subprocess.run(_cli("resume", paths.run_id, "--speed", "0"), env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "running in the background" in done.stdout
    end = _wait_for(lambda: paths.outcome.exists() and RunLock(paths).holder() is None, 60, "the resumed run to end")
    assert end
    launches = [e for e in ev.read_events(paths.events) if isinstance(e, ev.LaunchSettings)]
    assert [x.source for x in launches] == ["start", "resume"]
    assert all(x.context_window == 40000 and not x.auto_restart and x.max_restarts == 7 for x in launches)
    assert all(x.model == "scripted-agent" for x in launches)
    assert launches[1].changes == ["speed: 0.3 -> 0.0"] and launches[1].by == "detach"
    # Nothing is left: once its run has ended, the runner is gone too (within a moment of releasing the run).
    def no_process() -> bool:
        out = subprocess.run(["ps", "-eo", "stat=,args="], capture_output=True, text=True).stdout
        return not any(str(paths.root) in line and not line.startswith("Z") for line in out.splitlines())

    _wait_for(no_process, GONE_WITHIN, "no process of the run to be left")


def test_resume_refuses_another_model_without_switch_model(tmp_path: Path) -> None:
    data = Path(os.environ["AGENT_CONSOLE_DATA_DIR"])
    first = subprocess.run(_cli("run", "--headless", str(SAMPLES / "quickstart"), "--speed", "0", "--max-turns", "2"),
                           capture_output=True, text=True, timeout=60)
    assert first.returncode != 0  # max_turns ended it
    paths = _run_folder(data)
    refused = subprocess.run(_cli("resume", paths.run_id, "--model", "gpt-4.1", "--provider", "openai"),
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "--switch-model" in lines[0] and "scripted" in lines[0]
    record = read_launch(paths, operator_seal())
    assert record is not None and record.provider == "scripted"  # the record is unchanged


def test_resume_of_a_complete_run_is_one_line_and_non_zero(tmp_path: Path) -> None:
    data = Path(os.environ["AGENT_CONSOLE_DATA_DIR"])
    done = subprocess.run(_cli("run", "--headless", str(SAMPLES / "quickstart"), "--speed", "0"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    paths = _run_folder(data)
    again = subprocess.run(_cli("resume", paths.run_id), capture_output=True, text=True, timeout=60)
    assert again.returncode == 1
    assert again.stderr.strip().splitlines() == [
        f"agent-console: resume: run {paths.run_id} ({paths.root}) is complete: there is nothing to resume"]


def test_a_headless_run_in_a_terminal_goes_on_after_a_hangup(tmp_path: Path) -> None:
    """`run --headless` in a plain SSH shell: the hangup takes the screen, not the run; the rest of its story
    goes to .console/runner.log and the run completes."""
    data = Path(os.environ["AGENT_CONSOLE_DATA_DIR"])
    # At the demo's own pace (a run of several seconds): hung up at its first session, it has most of its work
    # ahead. runner.log is only written from the hangup on, so "done" in it shows the run went on after it.
    pty = Pty(_cli("run", "--headless", str(SAMPLES / "quickstart"), "--speed", "1"), _env(tmp_path), tmp_path)
    try:
        _wait_for(lambda: b"session 1 started" in pty.out, 30, "the headless log")
        paths = _run_folder(data)
        pty.hang_up()
        status = pty.wait(90)
        assert status == 0, f"the run did not complete after the hangup (exit {status})"
    finally:
        pty.kill()
    assert paths.outcome.exists()
    log = (paths.state / "runner.log").read_text()
    assert "done: job complete" in log
    # Coloured on its terminal, plain in the log once the terminal is gone (as a runner's story is).
    assert b"\x1b[" in bytes(pty.out)
    assert "\x1b" not in log, "colour codes in runner.log"
    assert not any(isinstance(e, ev.OperatorCommand) for e in ev.read_events(paths.events))


def test_a_terminal_gone_without_a_hangup_closes_the_console(tmp_path: Path) -> None:
    """A console started outside its terminal's session (setsid, a supervisor's pty) gets no SIGHUP when the
    terminal goes: it read nothing in a loop for ever, a core spinning unseen. It closes as after a hangup, and
    the run goes on."""
    data = Path(os.environ["AGENT_CONSOLE_DATA_DIR"])
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    # A session of its own and the pty passed as descriptors: the pty is nobody's controlling terminal, so
    # closing its master sends no signal to anyone.
    console = subprocess.Popen(_cli("run", str(SAMPLES / "quickstart"), "--speed", "0.3"), stdin=slave,
                               stdout=slave, stderr=slave, env=_env(tmp_path), cwd=tmp_path, start_new_session=True)
    os.close(slave)
    out = bytearray()

    def drain() -> None:
        with contextlib.suppress(OSError):
            while chunk := os.read(master, 65536):
                out.extend(chunk)

    threading.Thread(target=drain, daemon=True).start()
    runner = None
    try:
        _wait_for(lambda: (data / "runs").is_dir() and any((data / "runs").iterdir()), 30, "the run folder")
        paths = _run_folder(data)
        runner = _wait_for(lambda: RunLock(paths).holder(), 30, "a runner holding the run")
        _wait_for(lambda: paths.run_id.encode() in out and b"Todo" in out, 30, "the console's screen")
        os.close(master)  # the terminal goes, and says nothing
        with contextlib.suppress(subprocess.TimeoutExpired):
            console.wait(GONE_WITHIN)
        assert console.returncode is not None, f"console still there {GONE_WITHIN:.0f} s after its terminal went"
        assert _alive(runner) and RunLock(paths).holder() == runner, "the run went with its console"
        log = (paths.state / "runner.log").read_bytes()
        assert b"\x1b" not in log  # nothing of the dead terminal's written into the run's log
    finally:
        console.kill()
        console.wait()
        if runner is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(runner, signal.SIGTERM)
