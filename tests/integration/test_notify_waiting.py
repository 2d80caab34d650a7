"""A run that waits for its operator and a notification channel that fails: the failure reaches the run's log
(so `logs`, `jobs`, the console) while the run still waits, once, and nothing of a step is written twice."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.job import JobPaths
from console.engine.loop import ShutdownReason
from console.engine.store import JobStore
from console.engine.supervisor import Supervisor
from console.notify import Notifier
from console.providers.scripted import ScriptedCall, ScriptedProvider, ScriptedTurn
from tests.conftest import run_settings
from tests.notify_server import closed_port

WAIT = 10.0  # the most the test waits for the run's thread (a bound on a failure, not a pace a pass needs)


def _events(paths: JobPaths) -> list[ev.EventBase]:
    return list(ev.read_events(paths.events)) if paths.events.exists() else []


@pytest.mark.parametrize("waits_on", ["a need (paused)", "a restart's approval"])
def test_a_failing_channel_is_in_the_log_while_the_run_waits(make_job, tmp_path: Path, waits_on: str) -> None:
    clock = FakeClock(step=0.001)
    if waits_on == "a need (paused)":  # the same call over and over: stuck (or the token budget), paused
        paths = make_job(files={"job.toml": "[guardrails]\nbudget_tokens = 3000\n"})
        looking = [ScriptedTurn(text="Looking around.", calls=[ScriptedCall(name="list_files", arguments={})])] * 200
        provider = ScriptedProvider(clock=clock, script=looking)
        settings = run_settings()
    else:
        paths = make_job("requirements-extraction")
        provider = ScriptedProvider(clock=clock)
        settings = run_settings(context_window=10_000, auto_restart=False)
    sup = Supervisor(paths, settings, provider, clock=clock, store=JobStore(tmp_path / "jobs.db"))
    port = closed_port()

    def failed(line: str) -> None:  # as the runner's (console.cli.lifecycle._notifier)
        sup.events.emit(ev.ErrorEvent, message=line, where="notify")

    notifier = Notifier([f"json://127.0.0.1:{port}/down"], paths.run_id, paths.root.name, clock=clock,
                        on_error=failed, remind=())
    sup.subscribe(notifier)
    result: list[ShutdownReason] = []
    runner = threading.Thread(target=lambda: result.append(sup.run().reason), daemon=True)
    runner.start()
    deadline = time.monotonic() + WAIT
    logged: list[ev.EventBase] = []
    while time.monotonic() < deadline and not logged:
        logged = [e for e in _events(paths) if isinstance(e, ev.ErrorEvent) and e.where == "notify"]
        time.sleep(0.05)
    waiting = runner.is_alive() and sup.operator.needs is not None  # stuck (repeated list_files) or budget
    sup.stop()
    runner.join(WAIT)
    assert notifier.close()
    assert not runner.is_alive() and len(result) == 1 and result[0] is not ShutdownReason.ERROR
    assert logged, "the channel's failure did not reach events.jsonl while the run waited"
    assert waiting, "the run no longer waited when its log had the failure"
    (error,) = logged
    assert f"json://127.0.0.1:{port}" in error.message and "/down" not in error.message
    # Once, and the log is whole: every seq once, in order (nothing held was written twice by the wait's look).
    evs = _events(paths)
    assert [e for e in evs if isinstance(e, ev.ErrorEvent) and e.where == "notify"] == [error]
    seqs = [e.seq for e in evs]
    assert seqs == sorted(set(seqs))
    assert [e.type for e in evs if e.type in ("needs_operator", "needs_operator_cleared", "run_ended")] == [
        "needs_operator", "needs_operator_cleared", "run_ended"]


def test_a_gave_up_run_tells_its_channel_once_with_commands_that_work(make_job, tmp_path: Path, capsys) -> None:
    """Through the command line: an agent gives up; the operator's channel gets one message (not "needs you" then
    "ended" in the same second), and each command it suggests is one the run takes as it is (no process)."""
    import json
    import re

    from console.cli import main
    from tests.notify_server import loopback

    paths = make_job()
    script = tmp_path / "give-up.json"
    script.write_text(json.dumps([{"text": "", "calls": [{"name": "job_complete", "arguments": {
        "summary": "Cannot read the input", "confidence": 0.0,
        "notes": "The input is a scanned PDF with no text layer; a human must provide the text."}}]}]))
    with loopback() as server:
        code = main(["run", str(paths.root), "--headless", "--in-place", "--script", str(script),
                     "--notify", server.url("json", "hook")])
        told = list(server.requests)  # the runner flushed its channels before it returned (Notifier.close)
    capsys.readouterr()
    assert code == 4  # gave up
    assert [r.body["title"] for r in told] == [f"agent-console: run {paths.run_id} ended (gave up) and needs you"]
    body = told[0].body["message"]
    suggested = re.findall(r"agent-console (\w+) " + re.escape(paths.run_id), body)
    assert suggested == ["resume", "logs"]
    assert main(["logs", paths.run_id]) == 0 and "NEEDS YOU (gave up)" in capsys.readouterr().out
    # What it no longer suggests is refused on such a run.
    assert main(["stop", paths.run_id]) == 1 and "no process is running" in capsys.readouterr().err


def test_the_config_files_reminder_gaps_reach_the_runs_notifier(make_job, tmp_path: Path, monkeypatch,
                                                               capsys) -> None:
    import json
    import os

    import console.notify
    from console.cli import main
    from console.engine.job import JobError
    from console.settings import load_settings
    from tests.notify_server import loopback

    config = Path(os.environ["AGENT_CONSOLE_CONFIG"])
    config.write_text("[notify]\nremind_minutes = [45, 90]\n")
    assert load_settings().notify.remind_minutes == [45.0, 90.0]
    made: list[Notifier] = []

    class Spy(Notifier):
        def __init__(self, *args: object, **kw: object) -> None:
            super().__init__(*args, **kw)  # type: ignore[arg-type]
            made.append(self)

    monkeypatch.setattr(console.notify, "Notifier", Spy)
    paths = make_job()
    script = tmp_path / "one.json"
    script.write_text(json.dumps([{"text": "Done.", "calls": []}]))
    with loopback() as server:
        main(["run", str(paths.root), "--headless", "--in-place", "--script", str(script),
              "--notify", server.url("json", "hook")])
    capsys.readouterr()
    assert [n.remind for n in made] == [(45.0, 90.0)]
    # A bad gap is refused with the key named (0 would remind in a loop).
    config.write_text("[notify]\nremind_minutes = [0]\n")
    with pytest.raises(JobError, match="remind_minutes"):
        load_settings()
    config.write_text("[notify]\nremind_minutes = []\n")
    assert load_settings().notify.remind_minutes == []
