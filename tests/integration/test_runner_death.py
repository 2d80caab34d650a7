"""A runner that dies without a word (kill -9, the out-of-memory killer) is told to its operator's channels once,
by its watcher (console.watcher); a normal end, a SIGTERM stop and a resumed run are not "died".

Real processes, real signals, a loopback webhook (tests/notify_server.py): `run --detach --notify json://...`,
then the runner is killed as an operator or the kernel would. Deadlines are generous bounds on a failure, never a
pace a pass needs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from console import watcher
from console.engine import events as ev
from console.engine.control import RunLock
from console.engine.job import JobPaths
from console.engine.launch import Launch, write_launch
from console.runner import parent_of
from tests.conftest import SAMPLES
from tests.notify_server import Loopback, Request, loopback
from tests.processes import alive as _alive
from tests.processes import cli as _cli
from tests.processes import wait_for as _wait_for
from tests.provenance_support import operator_seal

WITHIN = 30.0  # the most a test waits for a process or a message (a loaded machine's bound, not a pace)
# The pace of a run that must still be running when the test acts on it (a kill, a `stop`): a quarter of the
# demo's, about 40 s of work. At the demo's own pace (1: about ten seconds of work) a loaded machine took longer to
# start the `stop` command than the run took to complete ("run ... is complete: there is nothing to stop").
SLOW = "0.25"
SECRET = "tok3n-s3cr3t-path"


@pytest.fixture
def server() -> Iterator[Loopback]:
    with loopback() as lb:
        yield lb





def _processes_of(root: Path) -> list[int]:
    """The live processes whose command line names the run folder (its watcher, its runner)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                args = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                if str(root).encode() in args and _alive(int(entry)):
                    out.append(int(entry))
    return out


def _died(lb: Loopback) -> list[Request]:
    return [r for r in list(lb.requests) if " died " in str(r.body.get("title", ""))]


def _start(lb: Loopback, speed: str, may_end: bool = False) -> tuple[JobPaths, int, int]:
    """`run --detach` with the loopback as its channel: the run, its runner's pid and its watcher's. ``may_end``: a
    run quick enough to end before it is first looked at (its runner's pid is then 0: found in CI on Python 3.11.2
    beside busy processes, a speed-0 quickstart took and let go of its lock between two looks)."""
    done = subprocess.run(_cli("run", str(SAMPLES / "quickstart"), "--detach", "--notify",
                               lb.url("json", SECRET), "--speed", speed),
                          capture_output=True, text=True, timeout=WITHIN * 2)
    assert done.returncode == 0, done.stderr
    paths = JobPaths(Path(done.stdout.split(": ", 1)[1].splitlines()[0]))
    # The start returns once the run is handed over (the process it names starts the runner, and watches it).
    watcher = int(done.stdout.split("(process ", 1)[1].split(" ", 1)[0])
    # Twice the patience: the start returned before the runner loaded (run --detach hands the run over), so this
    # wait now holds the whole of a runner's start, which the suite's full run beside it once took past WITHIN.
    runner = _wait_for(lambda: RunLock(paths).holder() or (may_end and paths.outcome.exists() and -1),
                       WITHIN * 2, "the runner to take the run")
    if runner == -1:
        return paths, 0, watcher
    assert parent_of(runner) == watcher
    return paths, runner, watcher


def _kill(*pids: int) -> None:
    """Our own processes, by their ids, if they are still there (0: none; never a process group)."""
    for pid in pids:
        if pid > 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _started(paths: JobPaths) -> bool:
    return any(isinstance(e, ev.SessionStarted) for e in ev.read_events(paths.events))


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def test_a_runner_killed_by_sigkill_is_told_once(server: Loopback) -> None:
    paths, runner, watch = _start(server, SLOW)
    try:
        assert watch and watch != runner and RunLock(paths).holder() == runner  # the watcher holds no lock
        # Nothing secret in either command line (ps shows them to every user).
        for pid in (watch, runner):
            assert SECRET.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        assert b"console.watcher" in Path(f"/proc/{watch}/cmdline").read_bytes()
        _wait_for(lambda: _started(paths), WITHIN, "the run's first session")
        # Small while it waits: the out-of-memory killer weighs processes by their memory and must pick the run.
        watch_kb, runner_kb = _rss_kb(watch), _rss_kb(runner)
        assert watch_kb < 32 * 1024 and watch_kb * 3 < runner_kb, (watch_kb, runner_kb)
        assert not any(isinstance(e, ev.RunEnded) for e in ev.read_events(paths.events))  # killed mid-run
        os.kill(runner, signal.SIGKILL)
        _wait_for(lambda: not _alive(watch), WITHIN * 2, "the watcher to end once it told the channels")
    finally:
        _kill(runner, watch)
    # The watcher ends after its channels answered: what it sent has arrived, and it sent it once.
    died = _died(server)
    assert len(died) == 1, [r.body for r in server.requests]
    body = died[0].body
    assert body["title"] == f"agent-console: run {paths.run_id} died (killed by SIGKILL)"
    assert body["type"] == "failure"
    message = body["message"]
    assert f"agent-console resume {paths.run_id}" in message and "kill -9" in message
    assert f"Its log: {paths.state / 'runner.log'}" in message and "last step is kept" in message
    log = (paths.state / "runner.log").read_text()
    assert f"run {paths.run_id} died at " in log and SECRET not in log
    # Every view says it: no process runs it.
    jobs = subprocess.run(_cli("jobs", "--json"), capture_output=True, text=True, timeout=WITHIN)
    row = next(r for r in map(json.loads, jobs.stdout.splitlines()) if r["id"] == paths.run_id)
    assert row["status"] == "interrupted"
    # Resumed, the run completes: its end is told as an end, and nothing more is "died".
    done = subprocess.run(_cli("resume", paths.run_id, "--speed", "0"), capture_output=True, text=True,
                          timeout=WITHIN * 2)
    assert done.returncode == 0, done.stderr
    _wait_for(lambda: not _processes_of(paths.root), WITHIN * 2, "the resumed run's processes to end")
    assert paths.outcome.exists()
    assert any("completed" in str(r.body.get("title")) for r in server.requests)
    assert len(_died(server)) == 1


@pytest.mark.parametrize("how", ["completed", "stop", "SIGTERM to the runner", "SIGTERM to its watcher"])
def test_an_end_or_a_stop_is_not_died(server: Loopback, how: str) -> None:
    """A normal end, an operator's `stop`, a SIGTERM stop (`kill`, systemd: the runner records its end, or
    hard-exits within 2 s), and a SIGTERM to the watcher (a console's Ctrl+C before it has the terminal: handed
    on to the runner) tell their own story: no "died" message."""
    paths, runner, watch = _start(server, "0" if how == "completed" else SLOW, may_end=how == "completed")
    try:
        if how != "completed":
            _wait_for(lambda: _started(paths), WITHIN, "the run's first session")
            assert watch > 0
            if how == "stop":
                stop = subprocess.run(_cli("stop", paths.run_id), capture_output=True, text=True, timeout=WITHIN)
                assert stop.returncode == 0, stop.stderr
            else:
                os.kill(runner if how == "SIGTERM to the runner" else watch, signal.SIGTERM)
        _wait_for(lambda: not _processes_of(paths.root), WITHIN * 2, "the run's processes to end")
    finally:
        _kill(runner, watch)
    # The channel works (the run told its own end through it), and no "died" came.
    _wait_for(lambda: any(" ended " in str(r.body.get("title")) or "completed" in str(r.body.get("title"))
                          for r in server.requests), WITHIN, "the run's own end message")
    assert _died(server) == [], [r.body["title"] for r in server.requests]
    assert RunLock(paths).holder() is None
    assert paths.outcome.exists() == (how == "completed")
    assert "died" not in (paths.state / "runner.log").read_text()


# -- the watcher on its own: a fake runner, exact ends ---------------------------------------------------------

def _run_folder(tmp_path: Path, lb: Loopback) -> JobPaths:
    paths = JobPaths(tmp_path / "job-20261126-101500")
    paths.state.mkdir(parents=True)
    (paths.root / "instructions.md").write_text("# a job\n")
    write_launch(paths, Launch(provider="scripted", model="scripted-agent", notify=(lb.url("json", SECRET),)),
                 operator_seal())
    return paths


def _line(cls: type[ev.EventBase], seq: int, **fields: object) -> str:
    return cls(ts=datetime.now(UTC), seq=seq, session=1, **fields).model_dump_json()


def _watch(paths: JobPaths, script: str) -> subprocess.CompletedProcess[str]:
    """The watcher (as spawn_runner starts it) of a fake runner: ``script`` (Python), given the run's log."""
    argv = [sys.executable, "-c", script, str(paths.events)]
    return subprocess.run([sys.executable, "-m", "console.watcher", str(paths.root), "--", *argv],
                          capture_output=True, text=True, timeout=WITHIN * 2)


APPEND = "import os, sys, signal\nopen(sys.argv[1], 'a').write({lines!r})\n"


@pytest.mark.parametrize(("ending", "code", "told"), [
    ("os.kill(os.getpid(), signal.SIGSEGV)", 128 + signal.SIGSEGV, "killed by SIGSEGV"),
    ("os.kill(os.getpid(), signal.SIGKILL)", 128 + signal.SIGKILL, "killed by SIGKILL"),
    ("sys.exit(1)", 1, "exited with code 1 without recording its end"),
    ("os.kill(os.getpid(), signal.SIGTERM)", 128 + signal.SIGTERM, None),  # a stop: whoever sent it knows
    ("os.kill(os.getpid(), signal.SIGINT)", 128 + signal.SIGINT, None),
    ("os._exit(130)", 130, None),  # a SIGTERM stop that hard-exited
    ("sys.exit(3)", 3, None),  # stopped by its operator: the run's own end message says so
])
def test_the_watcher_tells_what_a_fake_runner_did(tmp_path: Path, server: Loopback, ending: str, code: int,
                                                  told: str | None) -> None:
    paths = _run_folder(tmp_path, server)
    # An earlier process's whole run (started, ended) comes before the mark: it is not this runner's.
    paths.events.write_text(_line(ev.SessionStarted, 1) + "\n" + _line(ev.RunEnded, 2, reason="user_shutdown")
                            + "\n")
    lines = _line(ev.SessionStarted, 3, reason="resume") + "\n" + _line(ev.TurnStarted, 4, turn=1) + "\n"
    done = _watch(paths, APPEND.format(lines=lines) + ending)
    assert done.returncode == code, done.stderr  # the runner's, as its starter would have seen it
    died = _died(server)
    if told is None:
        assert died == [] and "died" not in done.stderr
        return
    assert [r.body["title"] for r in died] == [f"agent-console: run {paths.run_id} died ({told})"]
    assert f"run {paths.run_id} died at " in done.stderr and SECRET not in done.stderr


@pytest.mark.parametrize("after", ["its end", "a crash it told itself", "nothing (it never started)"])
def test_an_exit_with_its_story_told_is_not_died(tmp_path: Path, server: Loopback, after: str) -> None:
    paths = _run_folder(tmp_path, server)
    lines = {"its end": [_line(ev.SessionStarted, 1), _line(ev.RunEnded, 2, reason="max_turns")],
             "a crash it told itself": [_line(ev.SessionStarted, 1),
                                        _line(ev.NeedsOperator, 2, reason="crashed", message="boom")],
             "nothing (it never started)": []}[after]
    done = _watch(paths, APPEND.format(lines="".join(x + "\n" for x in lines)) + "sys.exit(1)")
    assert done.returncode == 1
    assert _died(server) == [] and "died" not in done.stderr


def test_a_run_another_process_holds_again_is_not_died(tmp_path: Path, server: Loopback) -> None:
    """Killed, and a resume took the run before the watcher looked: the run is not dead, nothing is told."""
    paths = _run_folder(tmp_path, server)
    lock = RunLock(paths)
    assert lock.acquire()
    try:
        assert watcher.report(str(paths.root), "killed by SIGKILL") is False
    finally:
        lock.release()
    # The time it says is the clock's (the operator's local time, as the other messages say it).
    from io import StringIO

    from console.engine.clock import FakeClock

    clock = FakeClock(datetime(2026, 11, 26, 3, 7, tzinfo=UTC))
    out = StringIO()
    assert watcher.report(str(paths.root), "killed by SIGKILL", out=out, clock=clock) is True
    (req,) = _died(server)
    local = clock.now().astimezone()
    assert f"died at {local:%H:%M} (killed by SIGKILL)" in req.body["message"]
    assert f"died at {local:%H:%M:%S}" in out.getvalue() and SECRET not in out.getvalue()


def test_what_is_died() -> None:
    seen = watcher.Seen()
    seen.started = True
    assert watcher.died(-signal.SIGKILL, False, seen) == "killed by SIGKILL"
    assert watcher.died(-signal.SIGKILL, True, seen) is None  # a stop was handed on: the stopper knows
    assert watcher.died(-signal.SIGTERM, False, seen) is None
    assert watcher.died(1, False, seen) == "exited with code 1 without recording its end"  # a traceback's
    assert watcher.died(120, False, seen) == "exited with code 120 without recording its end"
    for told in (0, 2, 3, 4, 7, 130):  # the codes of ends the run tells itself (console.outcome's)
        assert watcher.died(told, False, seen) is None
    seen.ended = True
    assert watcher.died(-signal.SIGKILL, False, seen) is None  # killed after its end was recorded


def test_the_watcher_survives_a_hangup_and_hands_a_stop_on(tmp_path: Path, server: Loopback) -> None:
    """SIGHUP (the SSH session that started it dropped) is nothing to the watcher; its runner goes on. A SIGTERM
    is handed on to the runner (which ends), and nothing is told."""
    paths = _run_folder(tmp_path, server)
    ready = tmp_path / "ready"
    script = (f"import signal, sys, time, pathlib\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(130))\n"
              f"pathlib.Path({str(ready)!r}).write_text('x')\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-m", "console.watcher", str(paths.root), "--", sys.executable, "-c",
                             script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        _wait_for(ready.exists, WITHIN, "the fake runner")
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=WITHIN)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    assert proc.returncode == 130 and _died(server) == [] and "died" not in err


def test_a_died_message_makes_hostile_text_safe(server: Loopback) -> None:
    """The job's name and the log's path come from folders anyone may name: no escape sequence or line break of
    theirs reaches the phone, and nothing of the URL either."""
    from console.notify import Notifier

    n = Notifier([server.url("json", SECRET)], "k3f9q", "evil\x1b]0;pwned\x07job", remind=(), look=False)
    n.died("killed by SIGKILL", datetime.now(UTC), "/runs/a\nb\x1b[2J/.console/runner.log", "A kill -9.")
    assert n.close(WITHIN)
    (req,) = server.wait_for(1, WITHIN)
    text = req.body["title"] + req.body["message"]
    assert "\x1b" not in text and "\x07" not in text and SECRET not in text
    log_line = next(x for x in req.body["message"].splitlines() if x.startswith("Its log: "))
    assert "runner.log" in log_line  # one line, whatever the path held


# -- a run in the foreground: `run --headless` in a shell, watched beside it ---------------------------------------

def _foreground(lb: Loopback, speed: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], JobPaths]:
    """`run --headless --notify json://...` as typed in a shell: the process, and its run once it said its folder."""
    proc = subprocess.Popen(_cli("run", str(SAMPLES / "quickstart"), "--headless", "--notify", lb.url("json", SECRET),
                                 "--speed", speed), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # `run ID: FOLDER`, before the run's first step
    assert first.startswith("run "), first
    return proc, JobPaths(Path(first.split(": ", 1)[1].strip()))


def _fds(pid: int) -> dict[str, str]:
    """What each open file descriptor of ``pid`` is (``pipe:[123]``, a path...)."""
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            out[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
    return out


def _foreground_watcher(paths: JobPaths) -> int:
    """The pid of the run's foreground watcher (its command line names the run folder and --pipe)."""
    for pid in _processes_of(paths.root):
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"console.watcher" in args and b"--pipe" in args:
            return pid
    return 0


def test_a_foreground_run_killed_by_sigkill_is_told_once(server: Loopback) -> None:
    """Nothing of the run is left to tell its channels after a kill -9: the watcher beside it does, once."""
    env = {**os.environ, "OPENAI_API_KEY": "sk-" + SECRET}
    proc, paths = _foreground(server, "1", env)
    watch = 0
    try:
        watch = _wait_for(lambda: _foreground_watcher(paths), WITHIN, "the foreground run's watcher")
        _wait_for(lambda: _started(paths), WITHIN, "the run's first session")
        # Its own session (the terminal's Ctrl+C and hangup are the run's), small, and no provider key in it.
        assert os.getsid(watch) == watch != os.getsid(proc.pid)
        assert _rss_kb(watch) < 32 * 1024
        assert SECRET.encode() not in Path(f"/proc/{watch}/environ").read_bytes()
        assert SECRET.encode() not in Path(f"/proc/{watch}/cmdline").read_bytes()
        # The pipe's write end is the run's alone: no command the agent runs gets it (it closes on exec), or one
        # left running would hold the pipe open past the run's death, and the death would go untold.
        pipes = {t for t in _fds(watch).values() if t.startswith("pipe:")}
        ends = [fd for fd, target in _fds(proc.pid).items() if target in pipes]
        assert len(ends) == 1, ends
        info = Path(f"/proc/{proc.pid}/fdinfo/{ends[0]}").read_text().splitlines()
        flags = next(int(line.split()[1], 8) for line in info if line.startswith("flags:"))
        assert flags & 0o2000000, oct(flags)  # O_CLOEXEC
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(WITHIN)
        _wait_for(lambda: not _alive(watch), WITHIN * 2, "the watcher to end once it told the channels")
    finally:
        _kill(proc.pid, watch)
        proc.wait(WITHIN)
    died = _died(server)
    assert [r.body["title"] for r in died] == [f"agent-console: run {paths.run_id} died (killed)"]
    message = died[0].body["message"]
    assert f"agent-console resume {paths.run_id}" in message and "kill -9" in message
    log = (paths.state / "runner.log").read_text()
    assert f"run {paths.run_id} died at " in log and SECRET not in log


@pytest.mark.parametrize("how", ["completed", "Ctrl+C", "SIGTERM"])
def test_a_foreground_run_that_ends_or_is_stopped_is_not_died(server: Loopback, how: str) -> None:
    """Its end, a Ctrl+C (SIGINT, as the terminal sends it) and a SIGTERM: the process says its last word, the
    watcher ends with it, and nothing is "died"."""
    proc, paths = _foreground(server, "0" if how == "completed" else "1")
    watch = 0
    try:
        watch = _wait_for(lambda: _foreground_watcher(paths), WITHIN, "the foreground run's watcher")
        if how != "completed":
            _wait_for(lambda: _started(paths), WITHIN, "the run's first session")
            os.kill(proc.pid, signal.SIGINT if how == "Ctrl+C" else signal.SIGTERM)
        proc.communicate(timeout=WITHIN * 2)
        _wait_for(lambda: not _alive(watch), WITHIN, "the watcher to end with the run")
    finally:
        _kill(proc.pid, watch)
    assert proc.returncode == (0 if how == "completed" else 130)
    assert not (paths.state / "runner.log").exists()  # the watcher had nothing to say, and made no log
    _wait_for(lambda: any(" ended " in str(r.body.get("title")) or "completed" in str(r.body.get("title"))
                          for r in server.requests), WITHIN, "the run's own end message")
    assert _died(server) == [], [r.body["title"] for r in server.requests]


def test_a_foreground_run_without_channels_starts_no_watcher(tmp_path: Path) -> None:
    """Nobody to tell, nothing beside the run."""
    proc = subprocess.Popen(_cli("run", str(SAMPLES / "quickstart"), "--headless", "--speed", "1"),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        paths = JobPaths(Path(proc.stdout.readline().split(": ", 1)[1].strip()))
        _wait_for(lambda: _started(paths), WITHIN, "the run's first session")
        assert _foreground_watcher(paths) == 0
    finally:
        proc.kill()
        proc.communicate(timeout=WITHIN)


@pytest.mark.parametrize(("word", "lines", "told"), [
    (None, "started", "killed"),  # the pipe closed without a word: gone without another line of its own
    (None, "ended", None),  # killed after its end was recorded
    (None, "nothing", None),  # never started its run (its starter said why)
    (1, "started", "exited with code 1 without recording its end"),  # a traceback
    (130, "started", None),  # an interrupt it told
    (0, "ended", None),
])
def test_the_pipe_watcher_judges_the_last_word_and_the_log(tmp_path: Path, server: Loopback, word: int | None,
                                                           lines: str, told: str | None) -> None:
    paths = _run_folder(tmp_path, server)
    paths.events.write_text(_line(ev.SessionStarted, 1) + "\n" + _line(ev.RunEnded, 2, reason="user_shutdown")
                            + "\n")  # an earlier process's whole run: before the mark
    mark = watcher.log_mark(str(paths.root))
    after = {"started": [_line(ev.SessionStarted, 3, reason="resume")],
             "ended": [_line(ev.SessionStarted, 3, reason="resume"), _line(ev.RunEnded, 4, reason="max_turns")],
             "nothing": []}[lines]
    with paths.events.open("a") as fh:
        fh.write("".join(x + "\n" for x in after))
    # The watched process: a sleeper, killed once the word (if any) is said and the pipe closed.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    read, write = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "console.watcher", str(paths.root), "--pipe", str(read),
                             str(sleeper.pid), str(mark[0]), str(mark[1])], pass_fds=(read,),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(read)
    try:
        if word is not None:
            os.write(write, str(word).encode())
        os.close(write)
        sleeper.kill()
        sleeper.wait(WITHIN)
        _, err = proc.communicate(timeout=WITHIN * 2)
    finally:
        _kill(sleeper.pid, proc.pid)
    assert proc.returncode == 0 and err == "", err  # what it says goes to the run's log
    died = _died(server)
    log = paths.state / "runner.log"
    if told is None:
        assert died == [] and not log.exists()  # nothing to say: no log made for it
        return
    assert [r.body["title"] for r in died] == [f"agent-console: run {paths.run_id} died ({told})"]
    text = log.read_text()
    assert f"run {paths.run_id} died at " in text and SECRET not in text
    assert log.stat().st_mode & 0o777 == 0o600
