"""Needs you through whole runs: the jobs table follows a run's need, a crash asks for the operator before the run
ends, the operator's channels are told (a loopback webhook), `jobs` lists such runs first, and `agent-console wait`
answers with an exit code for each way a run can stand (real runs of the scripted model)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from console import cli
from console.cli import main
from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.control import RunLock
from console.engine.job import JobPaths
from console.engine.loop import ShutdownReason
from console.engine.runs import run_id
from console.engine.store import NEEDS_YOU, JobStore
from console.engine.supervisor import Supervisor
from console.notify import Notifier
from console.providers.scripted import ScriptedProvider
from console.settings import load_settings
from tests.conftest import SAMPLES, run_settings
from tests.notify_server import Loopback, loopback
from tests.processes import wait_for
from tests.provenance_support import operator_seal, record


@pytest.fixture
def server() -> Iterator[Loopback]:
    with loopback() as lb:
        yield lb


def supervisor(paths: JobPaths, store: JobStore, **settings: object) -> Supervisor:
    clock = FakeClock(step=0.001)
    return Supervisor(paths, run_settings(**settings), ScriptedProvider(clock=clock), clock=clock, store=store)


def types(paths: JobPaths) -> list[str]:
    return [e.type for e in ev.read_events(paths.events)]


# -- the engine's side -----------------------------------------------------------------------------------------
def test_a_need_asked_again_after_a_kill_keeps_its_since_and_a_failing_channel_is_said_in_jobs(
        make_job, tmp_path: Path) -> None:
    """Found: after a kill -9 and a resume, `jobs` said "since" the resume while the notification kept the first
    ask's time; and a channel failing while the run waited showed in `logs` only, not in `jobs`."""
    from datetime import UTC, datetime

    paths = make_job("requirements-extraction")
    store = JobStore(tmp_path / "jobs.db")
    first = datetime(2026, 1, 15, 13, 0, tzinfo=UTC)  # the dead process asked then (FakeClock starts at 14:00)
    store.started(paths.root, paths.root.name, "scripted", "m", first)
    store.needs(paths.root, "restart_approval", "the context is full", first)
    sup = supervisor(paths, store, context_window=10_000, auto_restart=False)
    seen: list[tuple[str | None, str | None]] = []

    def operator(e: ev.EventBase) -> None:
        if isinstance(e, ev.NeedsOperator):
            row = store.get(paths.root)
            assert row is not None
            seen.append((row.needs_since, row.detail))
            sup.events.emit(ev.ErrorEvent, message="notification to json://127.0.0.1:9 failed", where="notify")
            row = store.get(paths.root)
            assert row is not None
            seen.append((row.needs_since, row.detail))
            sup.deny_restart()

    sup.subscribe(operator)
    sup.run()
    (asked, detail), (told, failed) = seen
    assert asked == told == first.isoformat(timespec="seconds")
    assert detail is not None and detail.startswith("restart_approval: the context is full (")
    assert failed == detail.replace("restart_approval: ", "restart_approval: [not told: notification to "
                                    "json://127.0.0.1:9 failed] ", 1)


def test_a_restart_waiting_for_approval_needs_you_everywhere(make_job, tmp_path: Path, server: Loopback) -> None:
    paths = make_job("requirements-extraction")
    store = JobStore(tmp_path / "jobs.db")
    sup = supervisor(paths, store, context_window=10_000, auto_restart=False)
    errors: list[str] = []
    notifier = Notifier([server.url("json", "hook")], paths.run_id, paths.root.name, on_error=errors.append)
    sup.subscribe(notifier)
    seen: list[tuple[str, str | None, str | None]] = []

    def operator(e: ev.EventBase) -> None:
        if isinstance(e, ev.NeedsOperator):
            row = store.get(paths.root)
            assert row is not None
            seen.append((row.status, row.detail, row.needs_since))
            sup.deny_restart()

    sup.subscribe(operator)
    result = sup.run()
    assert result.reason is ShutdownReason.USER_SHUTDOWN
    # While it waited, the jobs table said so, with why and since when; the end cleared it.
    [(status, detail, since)] = seen
    assert status == NEEDS_YOU and detail.startswith("restart_approval: the context is full") and since
    row = store.get(paths.root)
    assert row is not None and (row.status, row.needs_since) == ("stopped", None)
    # The events: asked after restart_pending, answered before the denial is recorded.
    order = [t for t in types(paths) if t in ("restart_pending", "needs_operator", "needs_operator_cleared",
                                              "restart_denied", "run_ended")]
    assert order == ["restart_pending", "needs_operator", "needs_operator_cleared", "restart_denied", "run_ended"]
    # The operator's channel was told: the need, then the end.
    need, end = server.wait_for(2)
    assert notifier.close() and errors == []
    assert need.body["title"] == f"agent-console: run {paths.run_id} needs you (restart approval)"
    assert f"agent-console approve {paths.run_id}" in need.body["message"]
    assert end.body["title"] == f"agent-console: run {paths.run_id} ended (stopped)"


def test_the_jobs_table_says_paused_while_the_operator_holds_the_run(make_job, tmp_path: Path) -> None:
    """`jobs` reads no log: the store says "paused" from the pause's application to the resume's, and the table
    (the lock held: a live run) shows it so, not "running"."""
    from console.view.jobs import as_now

    paths = make_job("quickstart")
    store = JobStore(tmp_path / "jobs.db")
    sup = supervisor(paths, store)
    seen: list[tuple[str, str, str]] = []

    def operator(e: ev.EventBase) -> None:
        if isinstance(e, ev.TurnStarted) and e.turn == 3 and not seen:  # once: the paused turn is asked again
            sup.pause()
        elif isinstance(e, ev.OperatorCommand) and e.status == "applied":
            row = store.get(paths.root)
            assert row is not None
            seen.append((e.command, row.status, as_now(row).status))
            if e.command == "pause":
                sup.resume()

    sup.subscribe(operator)
    assert sup.run().reason is ShutdownReason.JOB_COMPLETE
    assert seen == [("pause", "paused", "paused"), ("resume", "running", "running")]
    row = store.get(paths.root)
    assert row is not None and row.status == "completed"
    # A paused run whose process died (no one holds its lock) is interrupted, like a running one.
    dead = tmp_path / "dead-run"
    (dead / ".console").mkdir(parents=True)
    store.started(dead, dead.name, "scripted", "m", FakeClock().now())
    store.paused(dead, FakeClock().now())
    assert as_now(store.get(dead), holder=lambda _: None).status == "interrupted"


def test_a_pause_while_a_restart_waits_still_says_paused_once_it_is_approved(make_job, tmp_path: Path) -> None:
    """The operator pauses a run that waits for a restart's approval, then approves it: the new session holds,
    and `jobs` says paused (it said running), until they resume it."""
    from console.view.jobs import as_now

    paths = make_job("requirements-extraction")
    store = JobStore(tmp_path / "jobs.db")
    sup = supervisor(paths, store, context_window=10_000, auto_restart=False, max_restarts=2)
    seen: list[tuple[str, str]] = []

    def operator(e: ev.EventBase) -> None:
        if isinstance(e, ev.NeedsOperator) and e.reason == "restart_approval":
            if not seen:
                sup.pause()
            else:
                sup.deny_restart()
        elif isinstance(e, ev.OperatorCommand) and e.status == "applied" and e.command == "pause":
            sup.approve_restart()
        elif isinstance(e, ev.SessionStarted) and e.reason == "restart" and not seen:
            row = store.get(paths.root)
            assert row is not None
            seen.append((row.status, as_now(row).status))
            sup.resume()

    sup.subscribe(operator)
    sup.run()
    assert seen == [("paused", "paused")]
    applied = [e for e in ev.read_events(paths.events) if isinstance(e, ev.OperatorCommand) and e.status == "applied"]
    assert [e.command for e in applied][:3] == ["pause", "approve_restart", "resume"]
    # No turn is in flight while a restart waits: the pause says when it holds, not "after the current turn".
    assert applied[0].detail == "paused: it holds once what it waits for is answered, until resumed"


def test_a_crash_asks_for_the_operator_before_the_run_ends(make_job, tmp_path: Path, monkeypatch) -> None:
    import console.engine.supervisor as supervisor_module

    def boom(*args: object, **kw: object) -> None:
        raise RuntimeError("boom in the loop")

    monkeypatch.setattr(supervisor_module, "run_agent_session", boom)
    paths = make_job("quickstart")
    store = JobStore(tmp_path / "jobs.db")
    result = supervisor(paths, store).run()
    assert result.reason is ShutdownReason.ERROR
    events = list(ev.read_events(paths.events))
    assert [e.type for e in events[-2:]] == ["needs_operator", "run_ended"]
    need = events[-2]
    assert isinstance(need, ev.NeedsOperator) and need.reason == "crashed" and not need.paused
    assert any("RuntimeError: boom in the loop" in line for line in need.evidence)
    assert store.get(paths.root).status == "failed"  # type: ignore[union-attr]


def test_a_crash_outside_the_session_still_asks(make_job, tmp_path: Path, monkeypatch, capsys) -> None:
    def boom(self: Supervisor, rt: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(Supervisor, "_start_guardrails", boom)
    paths = make_job("quickstart")
    store = JobStore(load_settings().store_path)
    with pytest.raises(OSError):
        supervisor(paths, store).run()
    need = [e for e in ev.read_events(paths.events) if isinstance(e, ev.NeedsOperator)]
    assert [n.reason for n in need] == ["crashed"] and "OSError: disk on fire" in need[0].evidence[0]
    row = store.get(paths.root)
    assert row is not None and row.status == NEEDS_YOU and row.detail.startswith("crashed:")
    # No process runs it, yet it is not merely "interrupted": it crashed and needs its operator.
    assert main(["jobs"]) == 0
    assert f"{paths.run_id}  needs you" in capsys.readouterr().out
    assert main(["wait", str(paths.root)]) == cli.WAIT_NEEDS
    assert "needs you (crashed)" in capsys.readouterr().out


# -- `jobs` ----------------------------------------------------------------------------------------------------
def test_jobs_lists_the_runs_that_need_you_first(tmp_path: Path, capsys, monkeypatch) -> None:
    from datetime import UTC, datetime

    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    store = JobStore(load_settings().store_path)
    now = datetime(2026, 11, 22, 13, 0, tzinfo=UTC)
    folders = {}
    for n, name in enumerate(("stuck", "dead", "newest")):
        folder = tmp_path / name
        (folder / ".console").mkdir(parents=True)
        store.started(folder, name, "scripted", "scripted-agent", now + timedelta(minutes=n))
        folders[name] = folder
    store.needs(folders["stuck"], "stuck", "no todo completed in 40 turns", now + timedelta(minutes=7))
    store.needs(folders["dead"], "budget", "spend limit reached", now)
    store.completed(folders["newest"], now, 0.9, "done")
    lock = RunLock(JobPaths(folders["stuck"]))
    assert lock.acquire()  # a live run: this process holds its lock
    try:
        assert main(["jobs"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[1].startswith(f"{run_id(folders['stuck'])}  needs you")  # first, though not the newest
        assert lines[1].rstrip().endswith("since 13:07, stuck: no todo completed in 40 turns")
        # At 80 columns the cell is cut at its end: how long it has waited stays (a long reason too).
        store.needs(folders["stuck"], "restart_approval", "the context is full: approve the restart into session 2",
                    now + timedelta(minutes=7))
        monkeypatch.setenv("COLUMNS", "80")
        assert main(["jobs"]) == 0
        narrow = capsys.readouterr().out.splitlines()[1]
        assert len(narrow) <= 80 and "since 13:07, restart approval" in narrow, narrow
        monkeypatch.setenv("COLUMNS", "160")
        store.needs(folders["stuck"], "stuck", "no todo completed in 40 turns", now + timedelta(minutes=7))
        dead = next(line for line in lines if line.startswith(run_id(folders["dead"])))
        assert "interrupted" in dead and "it needed you (budget: spend limit reached)" in dead
        # The footer says the order: those that need you first (the stuck run is older than the newest).
        assert any("3 run(s), those that need you first, then newest first" in line for line in lines)
        assert main(["jobs", "--json"]) == 0
        import json

        records = {r["id"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
        assert records[run_id(folders["stuck"])]["needs_since"] == (now + timedelta(minutes=7)).isoformat()
    finally:
        lock.release()
        monkeypatch.undo()
        time.tzset()


# -- `wait` ----------------------------------------------------------------------------------------------------
def start(job: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "console.cli", "run", str(job), "--headless", "--in-place",
                             "--speed", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=os.environ.copy())


def first_event(job: Path) -> None:
    """Until the run that ``start`` launched has logged its first event. `wait` gives a folder whose log stays
    empty for 5 s up as never run (console.cli.wait.WAIT_START_GRACE), and beside a CPU hog a run took longer
    than that to start ("this folder has never run (no events)", exit 2)."""
    events = JobPaths(job).events
    wait_for(lambda: events.exists() and events.stat().st_size > 0, 120, "the run's first event")


def copy(sample: str, tmp_path: Path) -> Path:
    job = tmp_path / sample
    shutil.copytree(SAMPLES / sample, job)
    return job


def test_wait_on_a_run_that_completes(tmp_path: Path, capsys) -> None:
    job = copy("quickstart", tmp_path)
    proc = start(job)
    # Waiting from the moment it starts (its log may not exist yet) to its end.
    assert main(["wait", str(job), "--timeout", "120"]) == cli.WAIT_COMPLETED
    assert capsys.readouterr().out.startswith(f"run {run_id(job)} completed: ")
    assert proc.wait(60) == 0
    assert main(["wait", run_id(job)]) == cli.WAIT_COMPLETED  # by its id, after the fact: at once


def test_wait_on_a_run_that_needs_you_then_is_stopped(tmp_path: Path, capsys) -> None:
    job = copy("requirements-extraction", tmp_path)
    proc = start(job, "--context-window", "10000", "--no-auto-restart")
    first_event(job)
    try:
        assert main(["wait", str(job), "--timeout", "120"]) == cli.WAIT_NEEDS
        line = capsys.readouterr().out.strip()
        assert line.startswith(f"run {run_id(job)} needs you (restart approval) since ")
        assert "the context is full" in line and "\n" not in line
        assert main(["wait", str(job)]) == cli.WAIT_NEEDS  # still: it waits for its operator
        capsys.readouterr()
        assert main(["deny", str(job)]) == 0
        assert main(["wait", str(job), "--timeout", "60"]) == cli.WAIT_STOPPED
        assert capsys.readouterr().out.strip().endswith("stopped: restart denied by the operator")
        assert proc.wait(60) == 3
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_wait_on_a_run_whose_process_was_killed(tmp_path: Path, capsys) -> None:
    job = copy("requirements-extraction", tmp_path)
    proc = start(job, "--context-window", "10000", "--no-auto-restart")
    first_event(job)
    try:
        assert main(["wait", str(job), "--timeout", "120"]) == cli.WAIT_NEEDS
        capsys.readouterr()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    # The log still ends with the need, but no process holds the run: interrupted, resumable.
    assert main(["wait", str(job), "--timeout", "30"]) == cli.WAIT_INTERRUPTED
    out = capsys.readouterr().out
    assert "interrupted: no process runs it" in out and f"agent-console resume {JobPaths(job).run_id}" in out


def test_wait_on_a_run_that_ends_without_completing(tmp_path: Path, capsys) -> None:
    job = copy("quickstart", tmp_path)
    proc = start(job, "--max-turns", "2")
    assert proc.wait(120) == 1
    assert main(["wait", str(job)]) == cli.WAIT_ENDED
    assert "ended without completing (max_turns)" in capsys.readouterr().out


def test_wait_times_out_on_a_live_run_and_says_a_need_by_hand(make_job, capsys) -> None:
    paths = make_job("quickstart")
    record(paths)  # the operator's run (wait shows no other)
    t = FakeClock().now()
    stream = [ev.SessionStarted(ts=t, seq=1, session=1, reason="new"), ev.TurnStarted(ts=t, seq=2, session=1, turn=1)]
    paths.events.write_text("".join(e.model_dump_json() + "\n" for e in stream))
    lock = RunLock(paths)
    assert lock.acquire()
    try:
        assert main(["wait", str(paths.root), "--timeout", "0.3"]) == cli.WAIT_TIMEOUT
        assert "still running after 0.3s (timeout)" in capsys.readouterr().out
        with paths.events.open("a") as fh:  # the operator paused it: the timeout's line says so, then resumed it
            fh.write(ev.OperatorCommand(ts=t, seq=3, session=1, command="pause", source="cli", status="applied",
                                        detail="paused").model_dump_json() + "\n")
        assert main(["wait", str(paths.root), "--timeout", "0.3"]) == cli.WAIT_TIMEOUT
        assert (f"run {paths.run_id}: paused (agent-console resume {paths.run_id} unpauses it) after 0.3s (timeout)"
                in capsys.readouterr().out)
        with paths.events.open("a") as fh:
            fh.write(ev.NeedsOperator(ts=t, seq=3, session=1, reason="stuck", message="no todo completed in 40 "
                                      "turns", evidence=["idle 40 turns"]).model_dump_json() + "\n")
        assert main(["wait", str(paths.root), "--timeout", "5"]) == cli.WAIT_NEEDS
        assert "needs you (stuck) since " in capsys.readouterr().out
        with paths.events.open("a") as fh:  # answered: it runs on (until the timeout)
            fh.write(ev.NeedsOperatorCleared(ts=t, seq=4, session=1, reason="stuck",
                                             by="operator's resume").model_dump_json() + "\n")
        assert main(["wait", str(paths.root), "--timeout", "0.3"]) == cli.WAIT_TIMEOUT
        # A restart to approve, approved: the command's "applied" reaches the log before the need's clearing
        # does; `approve ID; wait ID` must not answer with the need just answered.
        with paths.events.open("a") as fh:
            for e in (ev.NeedsOperator(ts=t, seq=5, session=1, reason="restart_approval", message="approve",
                                       paused=False),
                      ev.OperatorCommand(ts=t, seq=6, session=1, command="resume", source="cli", status="applied")):
                fh.write(e.model_dump_json() + "\n")
        assert main(["wait", str(paths.root), "--timeout", "5"]) == cli.WAIT_NEEDS  # a resume does not answer it
        with paths.events.open("a") as fh:
            fh.write(ev.OperatorCommand(ts=t, seq=7, session=1, command="approve_restart", source="cli",
                                        status="applied").model_dump_json() + "\n")
        assert main(["wait", str(paths.root), "--timeout", "0.3"]) == cli.WAIT_TIMEOUT
    finally:
        lock.release()


def test_wait_refuses_bad_input(make_job, tmp_path: Path, capsys, monkeypatch) -> None:
    assert main(["wait", str(tmp_path / "nowhere")]) == 2
    assert main(["wait", "zzzzz"]) == 2
    never = make_job("quickstart")
    assert main(["wait", str(never.root), "--timeout", "-1"]) == 2
    assert main(["wait", str(never.root), "--timeout", "nan"]) == 2
    monkeypatch.setattr("console.cli.wait.WAIT_START_GRACE", 0.3)
    assert main(["wait", str(never.root)]) == 2  # a folder that never ran (and nothing starts it)
    err = capsys.readouterr().err
    assert "never run" in err and all(line.startswith("agent-console: ") for line in err.splitlines())
    assert "no run here yet; waiting up to 0.3 s for one to start" in err  # said at once, not after the grace


def test_a_detached_run_calls_its_operator_through_the_cli_and_keeps_the_channel_on_resume(
        tmp_path: Path, server: Loopback, capsys) -> None:
    """`run --detach --notify URL`: the runner tells the channel when the restart waits (within seconds), the
    URL is in the run's record (never its token in an event), and a resume tells the same channel."""
    from console.engine.launch import read_launch

    job = copy("requirements-extraction", tmp_path)
    url = server.url("json", "hook/SECRET-TOKEN")
    assert main(["run", "--in-place", str(job), "--detach", "--speed", "0", "--context-window", "10000",
                 "--no-auto-restart", "--notify", url]) == 0
    capsys.readouterr()
    paths = JobPaths(job)
    try:
        assert main(["wait", str(job), "--timeout", "120"]) == cli.WAIT_NEEDS
        need = server.wait_for(1, timeout=10)[0]
        assert need.body["title"] == f"agent-console: run {paths.run_id} needs you (restart approval)"
        assert main(["stop", str(job), "--wait", "10"]) == 0
        assert main(["wait", str(job), "--timeout", "60"]) == cli.WAIT_STOPPED
    finally:
        with contextlib.suppress(Exception):
            main(["stop", str(job), "--wait", "0"])
    record = read_launch(paths, operator_seal())
    assert record is not None and record.notify == (url,)
    log = paths.events.read_text()
    assert "SECRET-TOKEN" not in log and '"notify":["json://127.0.0.1:' in log
    # The resume tells the same channel (no --notify given again). The first run's end is told too, and may
    # arrive after the resume started: count the "needs you" messages, not the requests.
    def needs() -> int:
        return sum(1 for r in list(server.requests) if r.body["title"].endswith("needs you (restart approval)"))

    assert needs() == 1
    try:
        assert main(["resume", str(job)]) == 0
        assert main(["wait", str(job), "--timeout", "120"]) == cli.WAIT_NEEDS
        with server.arrived:
            assert server.arrived.wait_for(lambda: needs() == 2, 10), [r.body["title"] for r in server.requests]
        assert main(["stop", str(job), "--wait", "10"]) == 0
        assert main(["wait", str(job), "--timeout", "60"]) == cli.WAIT_STOPPED
    finally:  # never leave the runner waiting for an operator after a failure
        with contextlib.suppress(Exception):
            main(["stop", str(job), "--wait", "0"])


def test_a_notification_url_apprise_cannot_use_is_refused_before_the_run(tmp_path: Path, capsys) -> None:
    job = copy("quickstart", tmp_path)
    assert main(["run", "--in-place", str(job), "--headless", "--notify", "nonsense://x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("agent-console: --notify / [notify] urls:")
    assert not JobPaths(job).events.exists()


def test_the_config_files_notify_table_is_used_and_on_end_false_keeps_the_end_quiet(
        tmp_path: Path, server: Loopback) -> None:
    config = Path(os.environ["AGENT_CONSOLE_CONFIG"])
    config.write_text(f'[notify]\nurls = ["{server.url("json", "from-config")}"]\non_end = false\n')
    job = copy("requirements-extraction", tmp_path)
    proc = start(job, "--context-window", "10000", "--no-auto-restart")
    first_event(job)
    try:
        assert main(["wait", str(job), "--timeout", "120"]) == cli.WAIT_NEEDS
        [need] = server.wait_for(1)
        assert need.path == "/from-config" and need.body["title"].endswith("needs you (restart approval)")
        assert main(["stop", str(job)]) == 0
        assert proc.wait(60) == 3
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # The process flushed its sends before it exited: on_end = false, so the end was not told.
    assert [r.path for r in server.requests] == ["/from-config"]


def test_wait_right_after_a_resume_does_not_answer_with_the_need_the_dead_process_left(make_job, capsys) -> None:
    # The dead process's need ends the log; the process the resume started holds the run but has not logged yet:
    # its lock says the log's last seq when it took the run, and the need before it is not the run's now.
    paths = make_job("quickstart")
    record(paths)
    t = FakeClock().now()
    stream = [ev.SessionStarted(ts=t, seq=1, session=1, reason="new"),
              ev.NeedsOperator(ts=t, seq=2, session=1, reason="fleet_budget", message="the fleet's budget")]
    paths.events.write_text("".join(e.model_dump_json() + "\n" for e in stream))
    lock = RunLock(paths)
    assert lock.acquire()  # the new process (the resume's)
    try:
        assert main(["wait", str(paths.root), "--timeout", "0.3"]) == cli.WAIT_TIMEOUT
        assert "still running after 0.3s (timeout)" in capsys.readouterr().out
        with paths.events.open("a") as fh:  # held again by the new process: its own need, said
            for e in (ev.SessionStarted(ts=t, seq=3, session=1, reason="resume"),
                      ev.NeedsOperator(ts=t, seq=4, session=1, reason="fleet_budget", message="the fleet's budget")):
                fh.write(e.model_dump_json() + "\n")
        assert main(["wait", str(paths.root), "--timeout", "5"]) == cli.WAIT_NEEDS
        assert "needs you (fleet budget reached)" in capsys.readouterr().out
    finally:
        lock.release()


def test_the_jobs_table_has_the_cost_of_a_run_that_runs_or_pauses(make_job, tmp_path: Path) -> None:
    """Found by a new operator's trial: `jobs` showed no cost for a paused, held or killed run (its row took the
    job's cost at a session's end only) while its console said $0.06. The row has the job's cost from the first
    turn, at most COST_EVERY seconds of the run's clock behind, and exactly when it pauses."""
    from console.engine.cost import Prices
    from console.engine.supervisor import COST_EVERY

    paths = make_job("quickstart")
    store = JobStore(tmp_path / "jobs.db")
    sup = supervisor(paths, store, prices=Prices(input=3.0, output=15.0))
    seen: list[tuple[str, float | None, float | None]] = []

    def operator(e: ev.EventBase) -> None:
        if isinstance(e, ev.TokenUsage) and e.turn == 2:
            row = store.get(paths.root)
            seen.append(("turn 2", row.cost_usd if row else None, e.job_cost_usd))
        elif isinstance(e, ev.TurnStarted) and e.turn == 4 and len(seen) == 1:
            sup.pause()
        elif isinstance(e, ev.OperatorCommand) and e.status == "applied" and e.command == "pause":
            row = store.get(paths.root)
            seen.append(("paused", row.cost_usd if row else None, sup.job_cost()))
            sup.resume()

    sup.subscribe(operator)
    assert sup.run().reason is ShutdownReason.JOB_COMPLETE
    (_, at_turn_2, turn_2_cost), (_, at_pause, pause_cost) = seen
    usages = [e for e in ev.read_events(paths.events) if isinstance(e, ev.TokenUsage)]
    first = usages[0]
    within = [u.job_cost_usd for u in usages if u.turn <= 2 and (u.ts - first.ts).total_seconds() < COST_EVERY]
    assert at_turn_2 is not None and at_turn_2 in within and 0 < at_turn_2 <= (turn_2_cost or 0)
    assert at_pause is not None and at_pause == pause_cost and pause_cost > 0
