"""kill -9 at any moment loses nothing and completes no todo twice; control from another shell."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict

import pytest

from console.engine import events as ev
from console.engine.plan import parse_plan
from console.engine.runs import run_id
from tests.conftest import SAMPLES


def start(job, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "console.cli", "run", str(job), "--headless", "--in-place", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())


def wait_for(path, predicate, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and any(predicate(e) for e in ev.read_events(path)):
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting for an event")


def check_each_todo_completed_once(events_path) -> None:
    """Per todo list (generation): completions only go up (none is done twice), and every list ends complete.

    A kill between a completion's commit and its event can hide one step from the log, never repeat one.
    """
    done_counts: dict[int, list[int]] = defaultdict(list)
    last: dict[int, ev.TodosChanged] = {}
    for e in ev.read_events(events_path):
        if isinstance(e, ev.TodosChanged) and e.items:
            last[e.generation] = e
            if e.reason in ("todo_complete", "job_complete"):
                done_counts[e.generation].append(sum(i.done for i in e.items))
    for gen, counts in done_counts.items():
        assert all(b > a for a, b in itertools.pairwise(counts)), f"list {gen}: a todo was completed twice: {counts}"
    for gen, e in last.items():
        assert all(i.done for i in e.items), f"list {gen} was left unfinished: {e.items}"


@pytest.mark.parametrize("kill_after_events", [40, 140, 260])
def test_kill_9_mid_run_then_resume_completes(tmp_path, kill_after_events) -> None:
    job = tmp_path / "job"
    import shutil

    shutil.copytree(SAMPLES / "quickstart", job)
    events_path = job / ".console" / "events.jsonl"
    proc = start(job, "--speed", "3")
    wait_for(events_path, lambda e: e.seq >= kill_after_events)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    resumed = start(job, "--speed", "0")
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert "session 1 resumed (scripted/scripted-agent): " in out  # and where it picks up
    plan = parse_plan((job / "main_plan.md").read_text())
    assert plan.all_complete
    check_each_todo_completed_once(events_path)
    assert (job / "action_items.md").read_text().count("- [ ]") == 9
    types = [e.type for e in ev.read_events(events_path)]
    assert types.count("job_completed") == 1
    # After the kill and the resume, every event is there once, in order (what the journal committed and the log
    # lacked was appended at the resume).
    seqs = [e.seq for e in ev.read_events(events_path)]
    assert seqs == sorted(set(seqs))


def test_approve_and_deny_from_another_shell(tmp_path) -> None:
    import shutil

    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "requirements-extraction", job)
    events_path = job / ".console" / "events.jsonl"
    proc = start(job, "--speed", "0", "--context-window", "10000", "--no-auto-restart")
    wait_for(events_path, lambda e: e.type == "restart_pending")
    approve = subprocess.run([sys.executable, "-m", "console.cli", "approve", str(job)], capture_output=True,
                             text=True, timeout=60)
    assert approve.returncode == 0 and "approve: applied: restart approved" in approve.stdout
    wait_for(events_path, lambda e: e.type == "restart_pending" and e.next_session == 3)
    deny = subprocess.run([sys.executable, "-m", "console.cli", "deny", str(job)], capture_output=True,
                          text=True, timeout=60)
    assert deny.returncode == 0 and "deny: applied: restart denied" in deny.stdout
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3  # the operator's decision, not an interrupt
    *_, reason, resume = err.strip().splitlines()
    assert "restart denied by the operator" in reason and resume.endswith(f"agent-console resume {run_id(job)}")
    assert "Traceback" not in err
    # a command nobody is running is queued for the next run
    queued = subprocess.run([sys.executable, "-m", "console.cli", "pause", str(job)], capture_output=True, text=True,
                            timeout=60)
    assert queued.returncode == 0 and "queued" in queued.stdout
    # Resumed, the run is where the denial left it: the context is still full, so the restart is asked
    # for again; the queued pause applies first.
    resumed = start(job, "--speed", "0", "--context-window", "10000", "--no-auto-restart")
    wait_for(events_path, lambda e: e.type == "operator_command" and e.command == "pause" and e.status == "applied")
    wait_for(events_path, lambda e: e.type == "restart_pending" and e.seq > max(
        x.seq for x in ev.read_events(events_path) if x.type == "restart_denied"))
    again = subprocess.run([sys.executable, "-m", "console.cli", "approve", str(job)], capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0 and "approve: applied" in again.stdout
    # and a rejected one says why, with a non-zero exit (the new session is paused: nothing is pending)
    bad = subprocess.run([sys.executable, "-m", "console.cli", "approve", str(job)], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 1 and "rejected: no restart is pending" in bad.stdout
    stop = subprocess.run([sys.executable, "-m", "console.cli", "stop", str(job)], capture_output=True, text=True,
                          timeout=60)
    assert stop.returncode == 0 and "stop: applied" in stop.stdout
    resumed.communicate(timeout=60)


def test_a_second_run_of_the_same_job_is_refused(tmp_path) -> None:
    import shutil

    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "requirements-extraction", job)
    proc = start(job, "--speed", "0", "--context-window", "10000", "--no-auto-restart")
    wait_for(job / ".console" / "events.jsonl", lambda e: e.type == "restart_pending")
    second = start(job, "--speed", "0")
    _, err = second.communicate(timeout=60)
    assert second.returncode == 2 and "already being run by process" in err
    subprocess.run([sys.executable, "-m", "console.cli", "stop", str(job)], capture_output=True, timeout=60)
    proc.communicate(timeout=60)
