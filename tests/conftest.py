"""Shared fixtures. Every test runs with its own data and config dirs: nothing touches ~/."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from console.engine.clock import FakeClock
from console.engine.job import JobPaths
from console.engine.run_settings import RunSettings
from console.engine.store import JobStore
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedProvider, ScriptedTurn

# The fixtures of the job-declared commands' tests (bubblewrap, a runtime), shared by unit and integration tests.
from tests.commands_support import bwrap, conf, make_rt, rt  # noqa: F401
from tests.sweeps import FULL_ENV, FULL_OPTION, Sweep, full_requested, seed

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_jobs"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(FULL_OPTION, action="store_true", dest="full_sweeps",
                     help=f"run every crash point of the kill-point sweeps, not a fixed-seed sample (or {FULL_ENV}=1)")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # A sweep's line travels in its test's report (user_properties): with pytest-xdist the test runs in a worker
    # and only the reports reach the process that prints the summary.
    if report.when == "teardown":
        SWEEP_LINES.extend(value for key, value in report.user_properties if key == "sweep")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if SWEEP_LINES:
        terminalreporter.section("crash-point sweeps")
        for line in sorted(SWEEP_LINES):
            terminalreporter.write_line(line)


SWEEP_LINES: list[str] = []


@pytest.fixture
def sweep(request: pytest.FixtureRequest) -> Iterator[Sweep]:
    """Every crash point of a sweep with --full-sweeps, else a fixed-seed sample (tests/sweeps.py)."""
    lines: list[str] = []
    yield Sweep(full=full_requested(request.config), seed=seed(), test=request.node.nodeid, reports=lines)
    request.node.user_properties.extend(("sweep", line) for line in lines)


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("AGENT_CONSOLE_DATA_DIR", str(home / "data"))
    # An empty config file of its own: AGENT_CONSOLE_CONFIG naming a missing file is an error.
    (home / "config.toml").write_text("")
    monkeypatch.setenv("AGENT_CONSOLE_CONFIG", str(home / "config.toml"))
    for var in ("AGENT_CONSOLE_PROVIDER", "AGENT_CONSOLE_MODEL", "AGENT_CONSOLE_SPEED", "OPENAI_API_KEY",
                "ANTHROPIC_API_KEY", "AGENT_CONSOLE_STORE", "AGENT_CONSOLE_HOST"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def fast_path(tmp_path: Path) -> Iterator[Path]:
    """A scratch folder on tmpfs (/dev/shm) when there is one, else ``tmp_path``: for tests that sync many small
    writes, which cost milliseconds each on a busy disk and nothing in memory."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="agent-console-tests-", dir=shm))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(step=0.001)


@pytest.fixture
def make_job(tmp_path: Path) -> Callable[..., JobPaths]:
    """A job folder: a copy of a sample, or instructions given inline."""
    return job_factory(tmp_path)


@pytest.fixture
def fixed_make_job(request: pytest.FixtureRequest) -> Iterator[Callable[..., JobPaths]]:
    """``make_job`` under a folder whose path does not change from one test session to the next: what is
    derived from a run's path (its id, shown on the status line) is then the same in every snapshot."""
    import fcntl
    import re
    import time

    # /tmp, not gettempdir(): a TMPDIR set differently on another machine would change the ids and paths shown.
    top = Path("/tmp") / "agent-console-snapshots"
    top.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"\W+", "_", request.node.name)
    base = top / name
    # The folder is the same for every session on the machine (another checkout's, a CI job's): one test of that
    # name at a time, or one session deletes the job another is running (seen: a console test hung on it).
    with open(top / f"{name}.lock", "a") as lock:
        deadline = time.monotonic() + 600
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another test session has held {base} for 600 s")
                time.sleep(0.1)
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        try:
            yield job_factory(base)
        finally:
            shutil.rmtree(base, ignore_errors=True)
            fcntl.flock(lock, fcntl.LOCK_UN)


def job_factory(base: Path) -> Callable[..., JobPaths]:
    def make(sample: str | None = None, instructions: str = "# Test job\n\nDo the thing.\n",
             files: dict[str, str] | None = None) -> JobPaths:
        root = base / (sample or "job")
        if sample:
            shutil.copytree(SAMPLES / sample, root, ignore=shutil.ignore_patterns(".console"))
        else:
            root.mkdir()
            (root / "instructions.md").write_text(instructions, encoding="utf-8")
        for rel, text in (files or {}).items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
        return JobPaths(root)

    return make


class Recording(ScriptedProvider):
    """The scripted model, keeping every request it was sent (what the agent was shown, turn by turn)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.requests: list[Any] = []

    def stream(self, request: Any) -> Any:
        self.requests.append(request)
        return super().stream(request)


def run_settings(**kw: object) -> RunSettings:
    base = dict(provider="scripted", model="scripted-agent", base_url=None, speed=0.0, context_window=128_000,
                soft_threshold=0.7, hard_threshold=0.85, max_turns=400, max_restarts=10, auto_restart=True)
    base.update(kw)
    return RunSettings(**base)  # type: ignore[arg-type]


@pytest.fixture
def run_job(clock: FakeClock, tmp_path: Path) -> Callable[..., tuple[Supervisor, object]]:
    """Run a job to its end with the scripted model (agent mode, or replay if turns are given)."""

    def run(paths: JobPaths, turns: list[ScriptedTurn] | None = None, *, answers: Sequence[str] = (),
            **settings: object):
        provider = ScriptedProvider(clock=clock, script=turns)
        store = JobStore(tmp_path / "jobs.db")
        sup = Supervisor(paths, run_settings(**settings), provider, clock=clock, store=store)
        answer_needs(sup, answers)
        return sup, sup.run()

    return run


def answer_needs(sup: Supervisor, answers: Sequence[str] = ()) -> list[object]:
    """The operator, scripted: each ``needs_operator`` the run emits is answered with the next of ``answers``
    (then "stop"), through the control channel as the console would; a run that asks never hangs a test.
    Returns the needs (events) as they come."""
    from console.engine import events as ev

    left, asked = list(answers), []

    def answer(e: object) -> None:
        if isinstance(e, ev.NeedsOperator):
            asked.append(e)
            sup.command(left.pop(0) if left else "stop")

    sup.subscribe(answer)
    return asked


def sigint_as_in_a_terminal() -> None:
    """For a child that is sent Ctrl+C (Popen's preexec_fn, or a forked child before it execs): SIGINT at its
    default, as a shell's foreground job has it. A suite started with SIGINT ignored (a script's background job,
    nohup, some CI runners) passes that on to every child, and such a child rightly goes on when interrupted
    (console.entry.take_interrupts leaves an ignored SIGINT ignored): the test would hang, then fail."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Hang(BaseException):
    """Something did not finish in time (a BaseException: the engine's `except Exception` must not eat it)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Fail with Hang instead of hanging the suite (the main thread only: it uses SIGALRM)."""

    def on_alarm(signum: int, frame: object) -> None:
        raise Hang(f"did not finish within {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
