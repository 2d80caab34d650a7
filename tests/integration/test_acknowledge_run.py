"""Issue 33, point 4: a run whose agent gave up needed its operator for ever (it sorted first, the fleet rang for it,
`stop` refused it and a resume gave up again). `agent-console ack ID` acknowledges it: it asks no more, keeps its
outcome and folder, and a resume goes on with it (a need of the resumed run asks again). Exit codes: 0
acknowledged, 2 no such run or not a run that ended."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from console.cli import main
from console.engine import events as ev
from console.engine.job import JobPaths
from console.engine.run_lock import RunLock
from console.engine.store import JobStore
from console.outcome import EXIT_GAVE_UP, EXIT_OK, EXIT_USAGE
from console.view.fleet import GAVE_UP, NEEDS, Fleet

GIVE_UP = {"text": "", "calls": [{"name": "job_complete", "arguments": {
    "summary": "Cannot read the input", "confidence": 0.0, "notes": "The input is a scanned PDF with no text layer."}}]}


def play(paths: JobPaths, tmp_path: Path, script: list[dict[str, Any]]) -> int:
    file = tmp_path / f"script-{uuid.uuid4().hex[:6]}.json"
    file.write_text(json.dumps(script))
    return main(["run", str(paths.root), "--headless", "--in-place", "--script", str(file)])


def store_path() -> Path:
    return Path(os.environ["AGENT_CONSOLE_DATA_DIR"]) / "jobs.db"


def row_of(paths: JobPaths) -> Any:
    (r,) = [r for r in Fleet(store_path(), now=lambda: datetime.now(UTC)).poll() if r.id == paths.run_id]
    return r


def test_ack_makes_a_run_that_gave_up_ask_no_more_and_a_resume_asks_again(make_job, tmp_path, capsys) -> None:
    paths = make_job()
    assert play(paths, tmp_path, [GIVE_UP]) == EXIT_GAVE_UP
    capsys.readouterr()
    before = row_of(paths)
    assert (before.state, before.needs, before.ackable) == (NEEDS, "gave_up", True)  # it asks, first

    assert main(["ack", paths.run_id]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"run {paths.run_id} (the agent gave up) acknowledged" in out and f"agent-console resume {paths.run_id}" \
        in out
    (acked,) = [e for e in ev.read_events(paths.events) if isinstance(e, ev.RunAcknowledged)]
    assert (acked.reason, acked.by) == ("gave_up", "cli")
    # It asks no more: the fleet lists it as it ended, not first as needing you; its outcome and folder are kept.
    after = row_of(paths)
    assert (after.state, after.kind, after.needs, after.needs_seq) == (GAVE_UP, "stopped", "", 0)
    assert after.resume == "start" and not after.ackable and paths.root.is_dir()
    stored = JobStore(store_path()).get(paths.root)
    assert stored is not None and stored.status == "gave up" and stored.needs_since is None
    assert "the agent gave up" in stored.detail or "Cannot read the input" in (stored.detail or "")
    # `jobs` no longer lists it first as needing you (its word stays: gave up).
    assert main(["jobs"]) == EXIT_OK
    assert "those that need you first" not in capsys.readouterr().out
    # Again: said, nothing written twice.
    assert main(["acknowledge", paths.run_id]) == EXIT_OK
    assert "already acknowledged" in capsys.readouterr().out
    assert len([e for e in ev.read_events(paths.events) if isinstance(e, ev.RunAcknowledged)]) == 1
    # `logs` tells it.
    assert main(["logs", paths.run_id]) == EXIT_OK
    assert "acknowledged by the operator (gave up)" in capsys.readouterr().out

    # The resume clears the acknowledgement, and its new need asks again.
    assert play(paths, tmp_path, [GIVE_UP]) == EXIT_GAVE_UP
    capsys.readouterr()
    again = row_of(paths)
    assert (again.state, again.needs, again.ackable) == (NEEDS, "gave_up", True)
    stored = JobStore(store_path()).get(paths.root)
    assert stored is not None and stored.needs_since is not None


def test_ack_of_no_run_or_a_live_one_exits_2_naming_a_command_that_works(make_job, tmp_path, capsys) -> None:
    assert main(["ack", "zzzzz"]) == EXIT_USAGE
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "agent-console jobs" in said[0]
    assert main(["jobs"]) == EXIT_OK  # the command named works
    capsys.readouterr()
    paths = make_job()
    assert play(paths, tmp_path, [GIVE_UP]) == EXIT_GAVE_UP
    capsys.readouterr()
    lock = RunLock(paths)  # a process runs it again
    assert lock.acquire()
    try:
        assert main(["ack", paths.run_id]) == EXIT_USAGE
        said = capsys.readouterr().err.strip().splitlines()
        assert len(said) == 1 and "is running" in said[0] and f"agent-console attach {paths.run_id}" in said[0]
    finally:
        lock.release()
    assert not [e for e in ev.read_events(paths.events) if isinstance(e, ev.RunAcknowledged)]
