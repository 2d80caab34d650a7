"""Ctrl+C while a command starts: exit code 130, one line at most, never a traceback; a run stays resumable.

Two kinds of tests. Real processes get SIGINT (or, under a pseudo-terminal, a typed Ctrl+C) at several delays,
all at once to keep the time short; where the signal lands depends on the machine, so the assertions accept every
landing point and check what was printed for it. The interpreter's own first milliseconds (before any of
agent-console's code runs: its start, `site`, the command's first import) are no program's to handle: a sample
that lands there is recognised by its traceback and asked again later. Then, in-process, each place that says
something about an interrupt is reached deterministically.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import threading
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from console import cli
from console.engine.control import RunLock
from console.engine.job import JobPaths
from console.engine.runs import run_id
from console.interrupts import interrupt_once
from tests.conftest import REPO, SAMPLES, sigint_as_in_a_terminal

# What the installed `agent-console` script runs (its entry point is checked below). Not `python -m`: runpy
# ends a process whose command handled a Ctrl+C by the signal all the same (CPython's -m path, seen here).
COMMAND = [sys.executable, "-c", "import sys; from console.entry import main; sys.exit(main())"]
# A start interrupted before its run was one leaves nothing (the folder it made is removed); after, a run that
# `jobs` lists and `resume ID` finds.
BEFORE = re.compile(r"agent-console: interrupted before run (\w{5}) started: nothing was made; start it again with: "
                    r"agent-console run (\S+)$")
AFTER = re.compile(r"agent-console: interrupted; resume run (\w{5}) with: agent-console resume (\w{5})$")
ANSI = re.compile(rb"\x1b\[[0-9;?<>=$]*[a-zA-Z~]|\x1b[()][AB0]|\x1b[=>]|\x1b\][^\x07]*\x07")


@dataclass
class Sample:
    args: list[str]
    delay: float
    tty: bool = False
    proc: Any = None
    pid: int = 0
    fd: int = -1
    slave: int = -1
    out: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    code: int | None = None
    started: float = 0.0
    # The command had exited before its Ctrl+C was sent (a quick `jobs`): nothing was interrupted.
    ended_first: bool = False
    # Its exit code and last words when nothing interrupts it. A Ctrl+C that comes once the command has done its
    # work, while Python tears down, is ignored (console.entry.main): the command ends as uninterrupted. Seen on
    # a loaded machine: `logs nosuchrun` said its error, then took the Ctrl+C at 0.25 s in its teardown (exit 2).
    # (code, what it prints) when it ran to its end: any one of the texts, when several are right
    finished: tuple[int, str | tuple[str, ...]] | None = None

    def start(self, env: dict[str, str]) -> None:
        self.started = time.monotonic()
        if not self.tty:
            self.proc = subprocess.Popen([*COMMAND, *self.args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         env=env, cwd=REPO, preexec_fn=sigint_as_in_a_terminal)
            self.pid = self.proc.pid
            return
        # Not pty.fork(): this side keeps the terminal's own end open too. Linux hands what the child wrote to
        # the reader asynchronously, and once the last holder of that end is gone a read may fail (EIO) before
        # the child's last words arrived: seen in CI, `jobs` exited 0 and only the echoed "^C" was read.
        self.fd, self.slave = pty.openpty()
        self.pid = os.fork()
        if self.pid == 0:  # the child: its terminal is the pseudo-terminal, as under a shell
            try:
                os.setsid()
                fcntl.ioctl(self.slave, termios.TIOCSCTTY, 0)
                for n in (0, 1, 2):
                    os.dup2(self.slave, n)
                os.close(self.slave)
                os.close(self.fd)
                sigint_as_in_a_terminal()
                os.execve(COMMAND[0], [*COMMAND, *self.args], env)
            finally:
                os._exit(127)

    def interrupt(self) -> None:
        with contextlib.suppress(ChildProcessError):  # WNOWAIT: looked at, not reaped (run_all waits for it)
            self.ended_first = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        if self.tty:
            os.write(self.fd, b"\x03")  # typed: the terminal makes it SIGINT, or a key once the console has it
        else:
            self.proc.send_signal(signal.SIGINT)

    def text(self) -> str:
        return ANSI.sub(b"", bytes(self.out + self.err)).decode("utf-8", "replace")


def drain(sample: Sample) -> None:
    """Read everything the process writes (a console writes a lot: an unread terminal would block it)."""
    if not sample.tty:
        out, err = sample.proc.communicate(timeout=60)
        sample.out.extend(out)
        sample.err.extend(err)
        return
    while True:
        try:
            ready, _, _ = select.select([sample.fd], [], [], 0.2)
            if ready:
                data = os.read(sample.fd, 65536)
                if not data:
                    return
                sample.out.extend(data)
            elif sample.code is not None:  # the child is gone and nothing more came for a while: all was read
                return
        except OSError:  # EIO: the terminal was closed
            return


def run_all(samples: list[Sample], env: dict[str, str], console_grace: float = 4.0) -> None:
    """Start every sample, interrupt each at its delay, and wait for all. A console that has the terminal reads
    Ctrl+C as a key (quit asks first): it is closed with SIGTERM after ``console_grace`` seconds."""
    for s in samples:
        s.start(env)
    readers = [threading.Thread(target=drain, args=(s,), daemon=True) for s in samples]
    for r in readers:
        r.start()
    for s in sorted(samples, key=lambda s: s.delay):
        time.sleep(max(0.0, s.started + s.delay - time.monotonic()))
        s.interrupt()
    deadline = time.monotonic() + console_grace
    for s in samples:
        if not s.tty:
            continue
        while s.code is None:
            pid, status = os.waitpid(s.pid, os.WNOHANG)
            if pid:
                s.code = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                assert b"\x1b[?1049h" in s.out, f"not the console, and still running: {s.text()[-500:]}"
                os.kill(s.pid, signal.SIGTERM)  # our own child, by its id
                s.code = os.waitstatus_to_exitcode(os.waitpid(s.pid, 0)[1])
            else:
                time.sleep(0.05)
    for r in readers:
        r.join(30)
    for s in samples:
        if not s.tty:
            s.code = s.proc.returncode
        if s.tty:
            os.close(s.fd)
            os.close(s.slave)


def before_our_code(sample: Sample) -> bool:
    """The signal came before agent-console's first line ran: Python's own start (killed by the signal before
    Python handles it; or its KeyboardInterrupt in `site` or in the command's first import)."""
    text = sample.text()
    if sample.code == -signal.SIGINT and not text.replace("^C", "").strip():  # a terminal echoes the Ctrl+C typed
        return True  # the default action: Python had not set up its handling yet (ours keeps it past its end)
    if "init_import_site" in text:
        return True
    frames = re.findall(r'File "([^"]+)", line \d+, in (\S+)', text)
    starting = ("/entry.py", "/interrupts.py", "/outcome.py", "/__init__.py")  # their imports, before the handler
    ours = [f for f in frames if "/console/" in f[0] and not (f[0].endswith(starting) and f[1] == "<module>")]
    return "Traceback" in text and not ours


def stop_runners(data: Path) -> None:
    """A console's run goes on after its console closed: stop each runner still holding a run (by its id)."""
    for folder in (data / "runs").glob("*"):
        holder = RunLock(JobPaths(folder)).holder()
        if holder is not None:
            os.kill(holder, signal.SIGTERM)
            for _ in range(100):
                if RunLock(JobPaths(folder)).holder() is None:
                    break
                time.sleep(0.05)


@pytest.fixture
def env() -> dict[str, str]:
    out = dict(os.environ, AGENT_CONSOLE_SPEED="1", TERM="xterm-256color", COLUMNS="80", LINES="24")
    out.pop("NO_COLOR", None)
    return out


def check(sample: Sample) -> None:
    """What an interrupted start may print, wherever the signal landed."""
    text = sample.text()
    assert "Traceback" not in text, text
    if sample.ended_first:  # done before the Ctrl+C: it must have ended as it ends uninterrupted
        assert sample.code == 0, (sample.code, text)
        return
    words = sample.finished[1] if sample.finished is not None else ()
    if sample.finished is not None and sample.code == sample.finished[0] and any(
            w in text for w in ((words,) if isinstance(words, str) else words)):
        return  # done when the Ctrl+C came (its work and its words whole): it ended as it ends uninterrupted
    assert sample.code == 130 or (sample.tty and b"\x1b[?1049h" in sample.out), (sample.code, text)
    lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    # Ours start with the command's name (under a terminal, after the ^C the terminal echoes).
    said = [line[line.index("agent-console:"):] for line in lines if "agent-console:" in line]
    if "stopping: at once" in text:  # the run's own handling: the documented stop, then how to go on
        assert "resume run" in said[-1], said
        return
    assert len(said) <= 1, said
    for line in said:
        assert BEFORE.match(line) or AFTER.match(line), line
    if not sample.tty:  # nothing else on stderr
        assert [line for line in sample.err.decode().splitlines() if line.strip()] == said, sample.err


def sweep(samples: list[Sample], env: dict[str, str], rounds: int = 6) -> list[Sample]:
    """Run the samples; one that landed in Python's own start is asked again later (a loaded machine starts
    Python slowly: the delay doubles, a few times)."""
    done: list[Sample] = []
    for _ in range(rounds):
        run_all(samples, env)
        done += [s for s in samples if not before_our_code(s)]
        samples = [Sample(s.args, s.delay * 2 + 0.05, s.tty, finished=s.finished) for s in samples
                   if before_our_code(s)]
        if not samples:
            return done
    pytest.fail(f"Python itself never got past its start within the delays: {[s.args for s in samples]}")


def test_the_installed_command_is_the_entry_module() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["agent-console"] == "console.entry:main"


def test_ctrl_c_at_any_moment_of_a_headless_start(env: dict[str, str]) -> None:
    job = str(SAMPLES / "quickstart")
    samples = [Sample(["run", job, "--headless"], d, finished=(0, "\ndone: job complete"))
               for d in (0.05, 0.15, 0.3, 0.5, 0.8, 1.5)]
    # `jobs` runs beside the runs: on a loaded machine one of them may already be listed when it looks.
    samples += [Sample(["jobs"], 0.05, finished=(0, ("no runs yet", "newest first"))),
                Sample(["logs", "nosuchrun"], 0.1, finished=(2, "no run folder, id or run name matches 'nosuchrun'"))]
    done = sweep(samples, env)
    for s in done:
        check(s)
    runs = Path(env["AGENT_CONSOLE_DATA_DIR"]) / "runs"
    listed = subprocess.run([*COMMAND, "jobs", "--json"], capture_output=True, text=True, env=env, cwd=REPO).stdout
    for s in done:
        text = s.text()
        if m := BEFORE.search(text):  # nothing left of it
            # The name of the folder it removed is free again: a start beside it in the same second may take it
            # (console.engine.job.prepare_run), and a run's id is its folder's. Seen in CI: such a folder was left
            # with the id this one said was never a run. Then it is that other start's, which said so first.
            others = [o.text() for o in done if o is not s]
            taken = any(re.search(rf"^run {m.group(1)}: ", o, re.M) for o in others)
            assert taken or not [f for f in runs.glob("*") if run_id(f) == m.group(1)], text
        elif m := AFTER.search(text):  # a run `jobs` lists, whole
            assert m.group(1) in listed, (text, listed)
            [folder] = [f for f in runs.glob("*") if run_id(f) == m.group(1)]
            assert (folder / "instructions.md").exists()


def test_ctrl_c_at_any_moment_of_a_console_start(env: dict[str, str], tmp_path: Path) -> None:
    data = Path(env["AGENT_CONSOLE_DATA_DIR"])
    job = str(SAMPLES / "quickstart")
    try:
        samples = [Sample(["run", job], d, tty=True) for d in (0.05, 0.4, 0.8, 1.3)]
        samples += [Sample(["jobs"], 0.1, tty=True, finished=(0, ("no runs yet", "newest first")))]
        for s in sweep(samples, env):
            check(s)
    finally:
        stop_runners(data)


# -- each place that speaks of an interrupt, reached without timing ------------------------------------------


def interrupting(at: str, monkeypatch: pytest.MonkeyPatch, module: Any, when: Callable[..., bool] | None = None
                 ) -> None:
    original = getattr(module, at)

    def raising(*args: Any, **kw: Any) -> Any:
        if when is None or when(*args, **kw):
            raise KeyboardInterrupt
        return original(*args, **kw)

    monkeypatch.setattr(module, at, raising)


def left_as_it_should(capsys: pytest.CaptureFixture[str], err: str) -> str | None:
    """What a start interrupted anywhere leaves: nothing (its folder removed, and said so), or a run that `jobs`
    lists and that its id finds and runs to its end. The id of that run (None: nothing was left)."""
    runs = Path(os.environ["AGENT_CONSOLE_DATA_DIR"]) / "runs"
    folders = list(runs.glob("*")) if runs.exists() else []
    line = err.strip()
    assert "\n" not in line and "Traceback" not in err, err
    if (m := BEFORE.match(line)) is not None or not line:
        assert folders == [], err  # nothing was made, or it was removed
        if m is not None:  # the command it names starts the job again
            assert m.group(2) == str(SAMPLES / "quickstart")
        return None
    m = AFTER.match(line)
    assert m is not None, err
    [folder] = folders
    rid = m.group(1)
    assert run_id(folder) == rid == m.group(2)
    assert cli.main(["jobs", "--json"]) == 0 and f'"id": "{rid}"' in capsys.readouterr().out
    # Found by its id, and resumable: run by its id (as `resume ID` runs it, here in the foreground) to its end.
    assert cli.main(["run", "--in-place", rid, "--headless", "--speed", "0"]) == 0
    assert "done: job complete" in capsys.readouterr().out
    return rid


@pytest.mark.parametrize("where", ["settings", "provider", "run folder", "supervisor", "notifier", "launch record",
                                   "store link", "store row"])
def test_a_headless_start_interrupted_anywhere(where: str, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl+C at each step of a start, in order: reading the settings, making the provider, copying the run folder,
    setting up the run, its notifier, its launch record, its link to the store, its row in the jobs table.
    (A Ctrl+C about 4 s into a start left a run folder that `jobs` did not list and `resume ID` did not find.)"""
    import console.cli.lifecycle as lifecycle_module
    import console.engine.job as job_module
    import console.engine.supervisor as supervisor_module
    import console.providers as providers_module
    import console.settings as settings_module

    target = {"settings": (settings_module, "load_settings"), "provider": (providers_module, "make_provider"),
              "run folder": (job_module, "prepare_run"), "supervisor": (supervisor_module, "Supervisor"),
              "notifier": (lifecycle_module, "_notifier"), "launch record": (supervisor_module, "write_launch"),
              "store link": (supervisor_module, "link_run"),
              "store row": (supervisor_module.Supervisor, "_store_started")}[where]
    interrupting(target[1], monkeypatch, target[0])
    code = cli.main(["run", str(SAMPLES / "quickstart"), "--headless", "--speed", "0"])
    _out, err = capsys.readouterr()
    assert code == 130
    monkeypatch.undo()
    left = left_as_it_should(capsys, err)
    if where in ("settings", "provider", "run folder"):
        assert err == ""  # nothing was made: nothing to say
    else:
        assert left is None and BEFORE.match(err.strip()), err  # before its row: nothing is left of it


@pytest.mark.parametrize("point", range(1, 27))  # the start up to its first turn's commit
def test_a_headless_start_interrupted_at_each_durable_write(point: int, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl+C at each of the start's first durable writes (console.engine.failpoints: its launch record, its
    log's lines, its state files...): nothing is left, or a run that `jobs` lists and its id resumes."""
    from console.engine import failpoints

    seen: list[str] = []

    def hook(name: str, _tear: object) -> None:
        seen.append(name)
        if len(seen) == point:
            raise KeyboardInterrupt

    failpoints.install(hook)
    try:
        code = cli.main(["run", str(SAMPLES / "quickstart"), "--headless", "--speed", "0"])
    finally:
        failpoints.install(None)
    _out, err = capsys.readouterr()
    assert code == 130, (seen, err)
    left_as_it_should(capsys, err)


@pytest.mark.parametrize("when", ["at once", "once it runs"])
def test_a_console_start_interrupted_stops_its_runner(when: str, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl+C after the runner is started and before the console has the terminal: the runner this command
    started is stopped (SIGTERM: at once, resumable) and gone, and the command says how to go on. At once (the
    runner still starting: what a Ctrl+C about 4 s into a start met), nothing is left (the run folder was left, and
    neither `jobs` nor `resume ID` found it); once the runner has its run, a run `jobs` lists and its id resumes."""
    import console.runner as runner_module

    started: list[subprocess.Popen[bytes]] = []
    spawn = runner_module.spawn_runner
    wait_started = runner_module.wait_started

    def spawned(*args: Any, **kw: Any) -> subprocess.Popen[bytes]:
        started.append(spawn(*args, **kw))
        return started[-1]

    def interrupted(paths: Any, proc: Any, *a: Any, **k: Any) -> None:
        if when == "once it runs":
            assert wait_started(paths, proc, 60) is None
            wait_for_session(paths)
        raise KeyboardInterrupt

    monkeypatch.setattr(runner_module, "spawn_runner", spawned)
    monkeypatch.setattr(runner_module, "wait_started", interrupted)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    code = cli.main(["run", str(SAMPLES / "quickstart"), "--speed", "0.3"])
    err = capsys.readouterr().err
    assert code == 130
    assert len(started) == 1 and started[0].poll() is not None  # gone, not left running
    monkeypatch.undo()
    left = left_as_it_should(capsys, err)
    assert (left is None) == (when == "at once"), err


def wait_for_session(paths: Any) -> None:
    deadline = time.monotonic() + 60
    while b'"type":"session_started"' not in (paths.events.read_bytes() if paths.events.exists() else b""):
        assert time.monotonic() < deadline, "the runner's session never started"
        time.sleep(0.05)


def test_the_first_interrupt_is_the_only_one() -> None:
    """Once the command is unwinding a Ctrl+C, another one is ignored: it would cut the unwinding short."""
    previous = signal.signal(signal.SIGINT, interrupt_once)
    try:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGINT)  # ignored
        time.sleep(0.01)
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("way", ["entry", "cli"])
def test_a_ctrl_c_while_the_handler_is_put_in_place_ends_the_command_as_interrupted(
        way: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A Ctrl+C that lands in take_interrupts itself, before interrupt_once is in place, is Python's own
    KeyboardInterrupt, raised there. Seen in the headless sweep beside two busy loops: `run` printed a traceback
    ending in take_interrupts (main called it before its try). Both ways in end it as interrupted, silently."""
    from console import entry, interrupts

    original = signal.signal

    def landing(signum: int, handler: Any) -> Any:
        if handler is interrupts.interrupt_once:
            raise KeyboardInterrupt  # Python's default handler, still in place
        return original(signum, handler)

    before = original(signal.SIGINT, signal.default_int_handler), sys.unraisablehook
    monkeypatch.setattr(signal, "signal", landing)
    try:
        code = entry.main() if way == "entry" else cli.main(["jobs"])
    except KeyboardInterrupt:
        pytest.fail("the Ctrl+C left the command: Python printed its traceback")
    finally:
        monkeypatch.undo()
        signal.signal(signal.SIGINT, before[0])
        sys.unraisablehook = before[1]
    assert code == 130
    assert capsys.readouterr() == ("", "")


def test_main_in_process_gives_the_callers_handler_back() -> None:
    before = signal.getsignal(signal.SIGINT)
    assert cli.main(["jobs"]) == 0
    assert signal.getsignal(signal.SIGINT) is before


def test_a_ctrl_c_python_swallowed_in_a_callback_prints_nothing_and_still_ends_the_command(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyboardInterrupt raised in a callback Python runs itself (an import lock's weakref callback: seen once,
    the command then printed "Exception ignored in ... Traceback" and went on to exit 0) is dropped silently and
    the command still ends as interrupted; any other unraisable exception is reported as Python would."""
    import types

    from console import entry, interrupts

    seen: list[object] = []
    hook = interrupts._quiet_unraisable(seen.append)
    ki = types.SimpleNamespace(exc_value=KeyboardInterrupt())
    other = types.SimpleNamespace(exc_value=ValueError("x"))
    monkeypatch.setattr(interrupts, "_interrupted", False)
    hook(ki)  # not ours: reported
    monkeypatch.setattr(interrupts, "_interrupted", True)
    hook(ki)  # ours: silent
    hook(other)
    assert seen == [ki, other]
    def went_on() -> int:  # a Ctrl+C swallowed while the command ran, which went on and ended well
        monkeypatch.setattr(interrupts, "_interrupted", True)
        return 0

    monkeypatch.setattr("console.cli.main", went_on)
    before = signal.getsignal(signal.SIGINT), sys.unraisablehook
    try:
        assert entry.main() == 130
    finally:  # main() leaves SIGINT ignored and its hook in place, as a command's end does: not this process's
        signal.signal(signal.SIGINT, before[0])
        sys.unraisablehook = before[1]


@pytest.mark.parametrize("where", ["settings", "supervisor"])
def test_a_ctrl_c_a_library_made_its_own_error_still_ends_as_an_interrupt(
        where: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A KeyboardInterrupt raised in Python code a compiled library called may come back as that library's error:
    seen in CI, pydantic-core turned one into "SchemaError: ... KeyboardInterrupt:" while console.settings was
    imported, and the command printed a traceback. After a Ctrl+C, what fails is the interrupt; before one, an
    error is still an error."""
    import console.engine.supervisor as supervisor_module
    import console.settings as settings_module
    from console import entry, interrupts

    module, name = {"settings": (settings_module, "load_settings"),
                    "supervisor": (supervisor_module, "Supervisor")}[where]
    ctrl_c = [True]

    def wrapped(*args: Any, **kw: Any) -> Any:
        monkeypatch.setattr(interrupts, "_interrupted", ctrl_c[0])  # as interrupt_once sets it
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error building `literal` serializer:\n  KeyboardInterrupt:") from exc

    monkeypatch.setattr(module, name, wrapped)
    assert cli.main(["run", str(SAMPLES / "quickstart"), "--headless", "--speed", "0"]) == 130
    err = capsys.readouterr().err
    if where == "supervisor":  # the run folder was made: how to go on, on one line
        assert BEFORE.match(err.strip()) and "\n" not in err.strip(), err
    else:
        assert err == ""
    ctrl_c[0] = False
    with pytest.raises(RuntimeError, match="serializer"):
        cli.main(["run", str(SAMPLES / "quickstart"), "--headless", "--speed", "0"])
    monkeypatch.setattr("console.cli.main", lambda: wrapped())  # and through the installed command's entry
    ctrl_c[0] = True
    before = signal.getsignal(signal.SIGINT), sys.unraisablehook
    try:
        assert entry.main() == 130
    finally:
        signal.signal(signal.SIGINT, before[0])
        sys.unraisablehook = before[1]
