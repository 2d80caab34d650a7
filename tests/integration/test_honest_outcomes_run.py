"""Issue 19's endings through the whole command line: the agent that ticked its own boxes, seed 000's final phase
as written, and the agent that gave up. Each run is `agent-console run --headless --in-place --script`, then what an
operator reads afterwards: the exit code, the last lines, `jobs`, `wait`, `logs` and the fleet's row."""

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
from console.engine.plan import parse_plan
from console.engine.store import JobStore
from console.outcome import EXIT_FAILED, EXIT_GAVE_UP, EXIT_OK
from console.runner import job_done
from console.view.fleet import Fleet

STEPS = [f"Write part {i}" for i in range(1, 6)]
FINAL = ["Verify all deliverables", "Generate summary report", "Call job_complete()"]
PLAN = ("# Execution Plan\n\n## Phase 1: Write\n" + "".join(f"- [ ] {s}\n" for s in STEPS)
        + "\n## Phase 2: Final Review\n" + "".join(f"- [ ] {s}\n" for s in FINAL))
GIVE_UP_NOTES = "The input is a scanned PDF with no text layer; a human must provide the text or an OCR tool."


def turn(*calls: tuple[str, dict[str, Any]], text: str = "") -> dict[str, Any]:
    return {"text": text, "calls": [{"name": n, "arguments": a} for n, a in calls]}


def done(n: int = 1) -> list[tuple[str, dict[str, Any]]]:
    return [("todo_complete", {})] * n


def play(paths: JobPaths, tmp_path: Path, script: list[dict[str, Any]]) -> int:
    file = tmp_path / f"script-{uuid.uuid4().hex[:6]}.json"
    file.write_text(json.dumps(script))
    return main(["run", str(paths.root), "--headless", "--in-place", "--script", str(file)])


def events(paths: JobPaths) -> list[ev.EventBase]:
    return list(ev.read_events(paths.events))


def test_an_agent_that_ticks_its_own_boxes_never_completes(make_job, tmp_path, capsys) -> None:
    """The issue's run: every box of main_plan.md ticked by an edit, a stub deliverable, a todo_write that says every
    task is done, job_complete(confidence=0.99): it ended completed, exit 0, in two turns. No more."""
    paths = make_job()
    ticked = PLAN.replace("- [ ]", "- [x]").replace("## Phase 1: Write", "## Phase 1: Write ✓ COMPLETE")
    script = [
        turn(("write_file", {"path": "main_plan.md", "content": ticked}),
             ("write_file", {"path": "report.md", "content": "stub"}),
             ("todo_write", {"todos": [{"task": t, "done": True} for t in [*STEPS, *FINAL]]})),
        turn(("job_complete", {"summary": "All done", "deliverables": ["report.md"], "confidence": 0.99})),
        turn(text="Done."),
    ]
    code = play(paths, tmp_path, script)
    err = capsys.readouterr().err
    assert code not in (EXIT_OK, EXIT_GAVE_UP), err
    evs = events(paths)
    assert not [e for e in evs if isinstance(e, ev.JobCompleted)]
    kept = next(e for e in evs if isinstance(e, ev.ToolResult) and e.tool == "todo_write")
    # A list that says every task is done never replaces the bootstrap's own tasks (console.engine.phases).
    assert not kept.ok and "the bootstrap's tasks stay on the list" in kept.content
    blocked = [e for e in evs if isinstance(e, ev.CompletionBlocked)]
    assert [b.stop_reason for b in blocked] == ["job_complete", "end_turn"]
    assert all(b.checker == "protocol" and "not done" in b.feedback for b in blocked)
    (end,) = [e for e in evs if isinstance(e, ev.RunEnded)]
    assert end.outcome != "completed"


def test_seed_000s_plan_as_written_completes_with_exit_0(make_job, tmp_path, capsys) -> None:
    paths = make_job()
    script = [
        turn(("generate_workspace_summary", {}), *done()),
        turn(("read_file", {"path": "workspace_summary.md"}), *done(), ("read_file", {"path": "instructions.md"}),
             *done()),
        turn(("write_file", {"path": "main_plan.md", "content": PLAN}), *done(2)),
        turn(("todo_write", {"todos": STEPS})),
        turn(*[c for i in range(1, 6) for c in (("write_file", {"path": f"part{i}.md", "content": f"# Part {i}\n"}),
                                                *done())]),
        turn(("todo_write", {"todos": FINAL})),
        turn(*done(2)),
        turn(("job_complete", {"summary": "Five parts written", "confidence": 0.9,
                               "deliverables": [f"part{i}.md" for i in range(1, 6)]})),
    ]
    code = play(paths, tmp_path, script)
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    assert "done: job complete in 1 session(s)" in out
    evs = events(paths)
    assert not [e for e in evs if isinstance(e, ev.CompletionBlocked)]  # no refusal counted
    assert not [e for e in evs if isinstance(e, ev.TodosChanged) and e.reason == "job_completion"]  # no 2nd list
    (end,) = [e for e in evs if isinstance(e, ev.RunEnded)]
    assert end.outcome == "completed"
    assert parse_plan((paths.root / "main_plan.md").read_text()).all_complete
    rows = {r.path: r for r in JobStore(Path(os.environ["AGENT_CONSOLE_DATA_DIR"]) / "jobs.db").list()}
    assert rows[str(paths.root)].status == "completed"
    assert job_done(paths)  # `resume` and `stop` say it is complete
    assert main(["resume", paths.run_id]) == EXIT_FAILED and "is complete" in capsys.readouterr().err


def test_an_agent_that_gives_up_asks_its_operator_everywhere_and_a_resume_goes_on(make_job, tmp_path,
                                                                                   capsys) -> None:
    paths = make_job()
    code = play(paths, tmp_path, [
        turn(("job_complete", {"summary": "Cannot read the input", "confidence": 0.0, "notes": GIVE_UP_NOTES}))])
    out, err = capsys.readouterr()
    assert code == EXIT_GAVE_UP
    assert "the agent gave up (confidence 0): Cannot read the input" in err and "no text layer" in err
    assert f"resume run {paths.run_id}" in err
    evs = events(paths)
    (gave,) = [e for e in evs if isinstance(e, ev.JobGaveUp)]
    assert gave.unmet and not [e for e in evs if isinstance(e, ev.JobCompleted)]
    (need,) = [e for e in evs if isinstance(e, ev.NeedsOperator)]
    assert need.reason == "gave_up" and "Cannot read the input" in need.message and not need.paused
    assert any("no text layer" in line for line in need.evidence)
    assert [e.outcome for e in evs if isinstance(e, ev.RunEnded)] == ["gave_up"]
    assert out.splitlines()[-1].startswith(f"run {paths.run_id} ended: the agent gave up after 1 session")
    # Every view says it first: jobs, wait, logs, the fleet.
    assert main(["jobs", "--json"]) == 0
    row = next(json.loads(x) for x in capsys.readouterr().out.splitlines() if json.loads(x)["id"] == paths.run_id)
    assert row["status"] == "gave up" and "no text layer" in row["detail"]
    # Its confidence, and since when it needs its operator (the need's moment, kept), as for any need.
    assert row["confidence"] == 0.0 and row["needs_since"]
    assert main(["wait", paths.run_id, "--timeout", "30"]) == 4
    said = capsys.readouterr().out
    assert said.startswith(f"run {paths.run_id} needs you (the agent gave up): Cannot read the input")
    assert main(["logs", paths.run_id]) == 0
    story = capsys.readouterr().out
    assert "⚐ the agent gave up (confidence 0.00): Cannot read the input" in story
    assert "⚑ NEEDS YOU (gave up)" in story
    fleet = Fleet(Path(os.environ["AGENT_CONSOLE_DATA_DIR"]) / "jobs.db", now=lambda: datetime.now(UTC))
    (r,) = [r for r in fleet.poll() if r.id == paths.run_id]
    assert (r.state, r.kind, r.needs, r.resume) == ("needs you", "needs", "gave_up", "start")
    assert not job_done(paths)  # its outcome is on disk, but it is not a completed job: `resume` takes it
    assert main(["stop", paths.run_id]) == 1 and "no process is running" in capsys.readouterr().err
    # The operator fixed the cause and resumes: the job goes on where it was, told why.
    code = play(paths, tmp_path, [turn(text="Reading again.")])
    evs = events(paths)
    resumed = [e for e in evs if isinstance(e, ev.AssistantMessage)][-1]
    assert resumed.text == "Reading again."
    assert code != EXIT_GAVE_UP  # it no longer ends as given up: the script ran out instead
    ends = [e.outcome for e in evs if isinstance(e, ev.RunEnded)]
    assert ends[0] == "gave_up" and ends[-1] != "gave_up"
    # The agent was told, in the conversation the run recorded.
    assert "resumed the job after you gave up" in (paths.state / "checkpoint.jsonl").read_text()


def test_a_free_stops_job_complete_with_work_left_is_incomplete_and_a_resume_goes_on(make_job, tmp_path,
                                                                                      capsys) -> None:
    paths = make_job(files={"job.toml": '[guardrails.completion]\ntype = "none"\n'})
    code = play(paths, tmp_path, [turn(("job_complete", {"summary": "Done, I think", "confidence": 0.9}))])
    err = capsys.readouterr().err
    assert code == EXIT_FAILED and "with work left: the record does not show the plan done" in err
    (done,) = [e for e in events(paths) if isinstance(e, ev.JobCompleted)]
    assert done.unmet and "bootstrap" in done.unmet[0]
    assert [e.outcome for e in events(paths) if isinstance(e, ev.RunEnded)] == ["incomplete"]
    assert not job_done(paths)
    assert main(["jobs", "--json"]) == 0
    row = next(json.loads(x) for x in capsys.readouterr().out.splitlines() if json.loads(x)["id"] == paths.run_id)
    assert row["status"] == "incomplete" and row["detail"].startswith("Done, I think")
    play(paths, tmp_path, [turn(text="Back to work.")])
    assert "after your job_complete, with work left" in (paths.state / "checkpoint.jsonl").read_text()
