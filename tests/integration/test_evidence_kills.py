"""Crash consistency of the evidence rule (console.engine.evidence): a kill -9 anywhere between the call a todo
names and its todo_complete loses neither the call's evidence nor does anything twice; the resumed run ticks
the todo as the uninterrupted one did."""

from __future__ import annotations

from pathlib import Path

from console.engine import events as ev
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedTurn as T
from tests.integration.test_kill_points import count_points, scenario

PLAN = "# Execution Plan\n\n## Phase 1: Work\n" + "".join(f"- [ ] {s}\n" for s in
                                                         ["Read notes.md", "s2", "s3", "s4", "s5"])
DONE = C(name="todo_complete")


def script() -> list[T]:
    """The bootstrap and one phase, each evidence call in its own turn before the tick that needs it."""
    return [
        T(calls=[C(name="generate_workspace_summary")]),
        T(calls=[DONE]),
        T(calls=[C(name="read_file", arguments={"path": "workspace_summary.md"})]),
        T(calls=[DONE]),
        T(calls=[C(name="read_file", arguments={"path": "instructions.md"})]),
        T(calls=[DONE]),
        T(calls=[C(name="write_file", arguments={"path": "main_plan.md", "content": PLAN}), DONE]),
        T(calls=[DONE]),
        T(calls=[C(name="todo_write", arguments={"todos": ["Read notes.md", "s2", "s3", "s4", "s5"]})]),
        T(calls=[C(name="read_file", arguments={"path": "notes.md"})]),
        T(calls=[DONE, DONE, DONE, DONE, DONE]),
        T(calls=[DONE, DONE]),
        T(calls=[C(name="job_complete", arguments={"summary": "read the notes", "deliverables": [],
                                                   "confidence": 0.9})]),
    ]


def make_base(work: Path) -> Path:
    base = work / "evidence-job"
    base.mkdir()
    (base / "instructions.md").write_text("# Notes\n\nRead notes.md.\n")
    (base / "notes.md").write_text("# Notes\n\n- one\n")
    return base


def test_a_kill_between_the_evidence_and_its_tick_keeps_the_evidence(tmp_path: Path) -> None:
    """Every point of the bootstrap's three call-then-tick pairs, killed clean (and the journal's commits torn):
    the resumed run ends as the uninterrupted one, with no tick refused."""
    import json
    import os

    from tests.integration.test_kill_points import KILLED, in_child

    base = make_base(tmp_path)
    names, expected = count_points(base, script(), tmp_path)
    assert expected["outcome"]["summary"] == "read the notes"
    baseline = list(ev.read_events(tmp_path / "baseline" / ".console" / "events.jsonl"))
    assert not [e for e in baseline if isinstance(e, ev.TodoRefused)]
    window = next(n for n, (name, _) in enumerate(names, 1) if name == "agent write main_plan.md")
    cases = [(n, False) for n in range(1, window)] + [(n, True) for n in range(1, window)
                                                      if names[n - 1] == ("journal commit", True)]
    failures: list[str] = []
    running: dict[int, tuple[int, bool, Path]] = {}
    while cases or running:
        while cases and len(running) < 2:
            n, tear = cases.pop(0)
            out = tmp_path / f"result-{n}-{tear}.json"
            pid = in_child(lambda n=n, tear=tear: scenario(base, script(), tmp_path, n, tear), out)
            running[pid] = (n, tear, out)
        pid, _ = os.wait()
        n, tear, out = running.pop(pid)
        result = json.loads(out.read_text()) if out.exists() else {"crash": "no result"}
        if "crash" in result or result["code"] != KILLED:
            failures.append(f"kill {n} {tear}: {result.get('crash') or result['code']}")
            continue
        diff = [k for k in expected if result["fp"][k] != expected[k]]
        refused = [e for e in result["fp"]["events"] if '"type": "todo_refused"' in e]
        if diff or refused:
            failures.append(f"kill {n}{' torn' if tear else ''} at {result['where']}: differs in {diff}; "
                            f"refused after resume: {refused[:1]}")
    assert not failures, "\n".join(failures)


def test_an_older_run_s_unproven_ticks_are_owed_at_its_resume_and_given_before_it_completes(make_job, clock) -> None:
    """A run from before the rule (its state has no evidence record: no ``owed``, no ``proof``; its journal lost, so
    the state files are what is left): its ticks are judged at the resume, the tasks whose work the record
    cannot show are owed, job_complete is refused until the calls they name are made, and the run then completes."""
    import json

    from console.engine.supervisor import Supervisor
    from console.providers.scripted import ScriptedProvider
    from tests.conftest import run_settings

    paths = make_job("quickstart")
    first = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock)

    def stop_before_job_complete(e: ev.EventBase) -> None:
        if isinstance(e, ev.TodosChanged) and e.kind == "completion" and sum(i.done for i in e.items) == 2:
            first.stop()

    first.subscribe(stop_before_job_complete)
    assert not first.run().ok
    state = paths.state / "todos.json"
    todos = json.loads(state.read_text())
    assert [i["text"] for i in todos["items"] if not i["done"]] == ["Call job_complete()"]
    todos.pop("owed")
    for item in todos["items"]:
        item.pop("proof", None)
    todos["evidence"] = []
    state.write_text(json.dumps(todos))
    (paths.state / "checkpoint.jsonl").unlink()

    result = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock).run()
    assert result.ok and result.ended == "completed", result.detail
    evs = list(ev.read_events(paths.events))
    judged = [e.message for e in evs if isinstance(e, ev.ErrorEvent) and e.where == "evidence"]
    assert any("Generate workspace summary" in m for m in judged)
    assert any("Read notes/2026-03-02-kickoff.md" in m for m in judged)
    blocked = [e for e in evs if isinstance(e, ev.CompletionBlocked) and "without the evidence" in e.feedback]
    assert blocked, "job_complete was refused while ticks were owed"
    reads = [e for e in evs if isinstance(e, ev.ToolCalled) and e.seq > blocked[0].seq and e.tool == "read_file"]
    assert "notes/2026-03-02-kickoff.md" in {json.loads(e.arguments)["path"] for e in reads}
    assert json.loads(state.read_text())["owed"] == []
