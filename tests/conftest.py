"""Shared fixtures. Every test runs with its own home, XDG folders, data and config dirs, and no AGENT_CONSOLE_*
variable of the operator's: nothing reads or touches the real ~/ (tests/hermetic.py, checked at the run's end)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
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
from tests import hermetic, sweeps

# The fixtures of the job-declared commands' tests (bubblewrap, a runtime), shared by unit and integration tests.
from tests.commands_support import bwrap, conf, make_rt, rt  # noqa: F401
from tests.sweeps import FULL_ENV, FULL_OPTION, SEED_ENV, Sweep, full_requested, seed

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_jobs"


HERMETIC = pytest.StashKey["Hermetic"]()


class Hermetic:
    """The session's walls as the process that made them holds them (the controller; an xdist worker inherits
    them and holds nothing): the temporary folder, the real home's fingerprint before the run, what went wrong."""

    def __init__(self, top: Path, watched: hermetic.Watched) -> None:
        self.top, self.watched, self.before = top, watched, watched.fingerprint()
        self.problems: list[str] = []


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # Once per process, before collection, any fixture (a module-scoped one runs before the per-test one below) and
    # the xdist workers (they inherit it): the whole session is pointed away from the operator's home.
    sweeps.configure(config, os.environ)  # before the walls remove its variables
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # Started in the background of a non-interactive shell (`pytest &`, a CI runner's), which ignores SIGINT:
        # the commands the tests start would inherit that and never take the Ctrl+C some tests send them. A
        # terminal's Ctrl+C again, for this process and (by exec) its children.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    inside = os.environ.get(hermetic.MARK)
    if inside and Path(inside).is_dir():  # a worker of this session (or a pytest that a test started)
        top = Path(inside)
    else:
        watched = hermetic.watch_real_home(os.environ)  # read before the environment is pointed away
        top = hermetic.enter(os.environ)
        config.stash[HERMETIC] = Hermetic(top, watched)
        compile_once()
        rewrite_once(config)
    hermetic.watch_network(top)


def compile_once() -> None:
    """The package's and the tests' bytecode, written once by the controller before any worker starts.

    Where PYTHONDONTWRITEBYTECODE is set (as on this project's CI machines), no import writes it: every one of the
    suite's hundreds of child processes (a runner, `agent-console jobs`, a test server) compiled each module of
    console/ it imports from its source again: a runner's imports took 0.58 s of CPU against 0.40 s with the
    bytecode there (a fresh checkout has none; an edited module's is stale). compileall writes it whatever the
    variable says, only where it is missing or stale (a few seconds once, nothing when it is all there)."""
    import compileall

    for folder in ("console", "tests"):
        compileall.compile_dir(REPO / folder, quiet=2)


def rewrite_once(config: pytest.Config) -> None:
    """The test modules as pytest's assertion rewriting makes them, written once by the controller before any
    worker starts (a run on xdist's workers), in pytest's own cache of them (``__pycache__/*-pytest-*.pyc``).

    pytest writes that cache only where bytecode may be written: with PYTHONDONTWRITEBYTECODE (CI's machines) each
    xdist worker rewrote every test module again while it collected: the README command's three workers took 57 s
    of CPU to collect the suite before their first test, 30 s with this (its ~7 s here included; 28 s when the
    cache is there already). pytest reads the cache whatever the variable says, and checks each entry
    against its source's size and mtime, as it does its own. Written here with pytest's own functions (a private
    module: where they are not as expected, nothing is written and each worker rewrites as before), only where an
    entry is missing or stale, atomically (a worker never reads half of one)."""
    import fnmatch

    if not getattr(config.option, "numprocesses", None):  # one process (-n 0): it rewrites what it imports, no more
        return
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
    except (ImportError, AttributeError, KeyError):
        return
    if getattr(config.option, "assertmode", "rewrite") != "rewrite":
        return
    patterns = [*config.getini("python_files"), "conftest.py"]
    for fn in sorted((REPO / "tests").rglob("*.py")):
        if not any(fnmatch.fnmatch(fn.name, pattern) for pattern in patterns):
            continue
        try:
            pyc = rewrite.get_cache_dir(fn) / (fn.name[:-3] + rewrite.PYC_TAIL)
            if rewrite._read_pyc(fn, pyc) is not None:
                continue
            if not rewrite.try_makedirs(pyc.parent):
                return
            source_stat, code = rewrite._rewrite_test(fn, config)
            rewrite._write_pyc(state, code, source_stat, pyc)
        except (AttributeError, TypeError):  # pytest's private functions changed: the workers rewrite as before
            return
        except (OSError, SyntaxError):  # pytest meets it itself when it imports the module, and says so there
            continue


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook (a run with -p no:xdist has none)
def pytest_configure_node(node: Any) -> None:
    # A worker reads the sweeps' options from here: the variables that may have set them are gone (tests/sweeps.py).
    node.workerinput[sweeps.WORKER_KEY] = (node.config.option.full_sweeps, node.config.option.sweep_seed)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    walls = session.config.stash.get(HERMETIC, None)
    if walls is None:
        return
    walls.problems = [f"changed under the real home: {line}"
                      for line in hermetic.changes(walls.before, walls.watched.fingerprint())]
    walls.problems += [f"tried to reach an address off this machine: {line}"
                       for line in hermetic.network_attempts(walls.top)]
    if walls.problems and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config: pytest.Config) -> None:
    walls = config.stash.get(HERMETIC, None)
    if walls is not None:
        hermetic.remove_top(walls.top)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(FULL_OPTION, action="store_true", dest="full_sweeps",
                     help=f"run every crash point of the kill-point sweeps, not a fixed-seed sample (or {FULL_ENV}=1)")
    parser.addoption("--sweep-seed", type=int, default=None, dest="sweep_seed",
                     help=f"the seed of the sweeps' samples (or {SEED_ENV}=N; tests/sweeps.py)")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # A sweep's line travels in its test's report (user_properties): with pytest-xdist the test runs in a worker
    # and only the reports reach the process that prints the summary.
    if report.when == "teardown":
        SWEEP_LINES.extend(value for key, value in report.user_properties if key == "sweep")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    walls = config.stash.get(HERMETIC, None)
    if walls is not None and walls.problems:
        terminalreporter.section("the suite was not hermetic (tests/hermetic.py): the run fails", red=True)
        for line in walls.problems:
            terminalreporter.write_line(line)
    if SWEEP_LINES:
        terminalreporter.section("crash-point sweeps")
        for line in sorted(SWEEP_LINES):
            terminalreporter.write_line(line)


SWEEP_LINES: list[str] = []


@pytest.fixture
def sweep(request: pytest.FixtureRequest) -> Iterator[Sweep]:
    """Every crash point of a sweep with --full-sweeps, else a fixed-seed sample (tests/sweeps.py)."""
    lines: list[str] = []
    yield Sweep(full=full_requested(request.config), seed=seed(request.config), test=request.node.nodeid, reports=lines)
    request.node.user_properties.extend(("sweep", line) for line in lines)


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Each test's own home, XDG folders, data dir (``data``) and empty config file (``config.toml``) in the folder
    given, and no variable of the operator's (what one test set is gone for the next).

    A MonkeyPatch of its own, not the test's ``monkeypatch``: a test's ``monkeypatch.undo()`` (to run on as
    unpatched) must not undo these too (at 2f229d8 three runs after such an undo notified the operator's channel
    and registered in their jobs.db)."""
    top = hermetic.lay_out(tmp_path_factory.mktemp("home"))
    with pytest.MonkeyPatch.context() as mp:
        for name in [n for n in os.environ if hermetic.removed(n)]:
            mp.delenv(name)
        for name, value in hermetic.pointed(top).items():
            mp.setenv(name, value)
        zone = os.environ.get("TZ")
        yield top
    if os.environ.get("TZ") != zone:  # a config's [budgets] timezone became the process's (console.settings)
        if zone is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = zone
        time.tzset()


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
    (console.interrupts.take_interrupts leaves an ignored SIGINT ignored): the test would hang, then fail."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Hang(BaseException):
    """Something did not finish in time (a BaseException: the engine's `except Exception` must not eat it)."""


@contextlib.contextmanager
def _timer_limit(signum: int, timer: int, seconds: float, said: str) -> Iterator[None]:
    """Raise Hang(``said``) in the main thread when ``timer`` (an itimer) has run ``seconds``."""

    def on_limit(signum: int, frame: object) -> None:
        raise Hang(said)

    previous = signal.signal(signum, on_limit)
    signal.setitimer(timer, seconds)
    try:
        yield
    finally:
        signal.setitimer(timer, 0)
        signal.signal(signum, previous)


def time_limit(seconds: float) -> contextlib.AbstractContextManager[None]:
    """Fail with Hang instead of hanging the suite (the main thread only: it uses SIGALRM)."""
    return _timer_limit(signal.SIGALRM, signal.ITIMER_REAL, seconds, f"did not finish within {seconds} s")


def cpu_limit(seconds: float) -> contextlib.AbstractContextManager[None]:
    """Fail with Hang if the code inside uses more than ``seconds`` of this process's CPU time (user and system,
    every thread: ITIMER_PROF), for a bound on work (a parser that must stay linear), never on the wall clock:
    other work on the machine's cores does not count against it. The main thread only (SIGPROF)."""
    return _timer_limit(signal.SIGPROF, signal.ITIMER_PROF, seconds, f"used more than {seconds} s of CPU")
