"""Full runs in replay mode: exact turns, exact expectations (seed 000's cycle)."""

from __future__ import annotations

import json

from console.engine import events as ev
from console.engine.journal import load_checkpoint
from console.engine.loop import ShutdownReason
from console.engine.phases import BOOTSTRAP_TODOS, COMPLETION_TODOS
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedProvider
from console.providers.scripted import ScriptedTurn as T

PHASE1 = ["Read a.md", "Summarize a.md into notes.md", "Record a note", "Check notes.md", "Record progress"]
PHASE2 = ["Write out.md", "Check out.md", "Record a note", "Review out.md", "Polish out.md"]
PLAN = "# Execution Plan\n\n## Overview\nA test.\n\n## Phase 1: Gather\n" + "".join(
    f"- [ ] {s}\n" for s in PHASE1) + "\n## Phase 2: Write\n" + "".join(f"- [ ] {s}\n" for s in PHASE2)


def done() -> C:
    return C(name="todo_complete")


def full_cycle_script() -> list[T]:
    plan_p1 = PLAN.replace("## Phase 1: Gather", "## Phase 1: Gather ← CURRENT")
    plan_p2 = plan_p1.replace("Gather ← CURRENT", "Gather ✓ COMPLETE").replace("## Phase 2: Write",
                                                                                "## Phase 2: Write ← CURRENT")
    reads = [C(name="read_file", arguments={"path": p}) for p in ("main_plan.md", "instructions.md",
                                                                   "workspace_summary.md")]
    return [
        # bootstrap
        T(text="Generating the summary.", calls=[C(name="generate_workspace_summary")]),
        T(calls=[done()]),
        T(calls=[C(name="read_file", arguments={"path": "workspace_summary.md"}), done()]),
        T(calls=[C(name="read_file", arguments={"path": "instructions.md"}), done()]),
        T(calls=[C(name="write_file", arguments={"path": "main_plan.md", "content": PLAN}), done()]),
        T(calls=[done()]),  # last bootstrap todo -> transition
        T(calls=[*reads, C(name="write_file", arguments={"path": "main_plan.md", "content": plan_p1}),
                 C(name="todo_write", arguments={"todos": PHASE1})]),
        # phase 1 ("Read a.md" is done by reading it: console.engine.evidence)
        T(calls=[C(name="read_file", arguments={"path": "a.md"}), done()]),
        *[T(calls=[done()]) for _ in PHASE1[1:]],
        T(calls=[*reads, C(name="write_file", arguments={"path": "main_plan.md", "content": plan_p2}),
                 C(name="todo_write", arguments={"todos": PHASE2})]),
        # phase 2, with a rewind after two tasks
        T(calls=[C(name="write_file", arguments={"path": "out.md", "content": "# Out\n"}), done()]),
        T(calls=[done()]),
        T(text="This approach fails.", calls=[C(name="todo_rewind", arguments={"issue": "out.md needs a table"})]),
        T(calls=[*reads, C(name="todo_write", arguments={"todos": ["Add the table to out.md", *PHASE2[2:]]})]),
        # "Review out.md" is done by reading it (console.engine.evidence): read in this phase, before its tick
        T(calls=[C(name="read_file", arguments={"path": "out.md"}), done()]),
        *[T(calls=[done()]) for _ in PHASE2[2:]],
        T(calls=[done()]),  # last todo of the last phase -> job completion todos
        # job completion
        T(calls=[done()]),
        T(calls=[done()]),
        T(calls=[C(name="job_complete", arguments={"summary": "All done", "deliverables": ["out.md"],
                                                   "confidence": 0.9, "notes": "n"})]),
    ]


def events_of(paths) -> list[ev.EventBase]:
    return list(ev.read_events(paths.events))


def test_bootstrap_phase1_transition_phase2_rewind_job_complete(make_job, run_job) -> None:
    paths = make_job(files={"a.md": "# A\nAlpha.\n"})
    sup, result = run_job(paths, full_cycle_script())
    assert result.ok, result.detail
    assert result.outcome.summary == "All done"
    archives = sorted(p.name for p in paths.archive.glob("*.json"))
    assert archives == ["phase-00-bootstrap.json", "phase-01-gather.json", "phase-02-write-rewind.json",
                        "phase-02-write.json"]
    rewind = json.loads((paths.archive / "phase-02-write-rewind.json").read_text())
    assert rewind["note"] == "FAILED - rewind: out.md needs a table"
    assert [i["done"] for i in rewind["items"]] == [True, True, False, False, False]
    evs = events_of(paths)
    transitions = [(e.kind, e.stage, e.to_phase) for e in evs if isinstance(e, ev.PhaseTransition)]
    assert transitions == [
        ("bootstrap", "started", None), ("bootstrap", "completed", 1),
        ("phase", "started", None), ("phase", "completed", 2),
        ("rewind", "started", None), ("rewind", "completed", 2),
        ("phase", "started", None), ("completion", "completed", None),
    ]
    # compaction follows each installed list, never precedes it
    types = [e.type for e in evs]
    for i, t in enumerate(types):
        if t == "context_compacted":
            assert "todos_changed" in types[max(0, i - 8):i]
    assert types.count("context_compacted") == 4
    final = [e for e in evs if isinstance(e, ev.TodosChanged)][-1]
    assert final.kind == "completion" and [i.text for i in final.items] == COMPLETION_TODOS
    assert all(i.done for i in final.items)  # job_complete ticks its own todo
    plan = paths.main_plan.read_text()
    assert "## Phase 1: Gather ✓ COMPLETE" in plan and "## Phase 2: Write ✓ COMPLETE" in plan
    ends = [t for t in types if t != "guardrails_status"]  # the status follows changes, whenever they happen
    assert ends[-5:] == ["job_completed", "tool_result", "token_usage", "session_ended", "run_ended"]
    assert load_checkpoint(paths).job_done
    row = sup.store.get(paths.root)
    assert (row.status, row.confidence, row.summary) == ("completed", 0.9, "All done")


def test_every_prompt_carries_layers_1_to_3(make_job, clock) -> None:
    """The todo display, the plan and the tools are in every single request, compaction or not."""
    from console.engine.supervisor import Supervisor
    from tests.conftest import run_settings

    paths = make_job(files={"a.md": "# A\n"})
    requests = []

    class Recording(ScriptedProvider):
        def stream(self, request):
            requests.append(request)
            return super().stream(request)

    sup = Supervisor(paths, run_settings(), Recording(clock=clock, script=full_cycle_script()), clock=clock)
    assert sup.run().ok
    assert len(requests) == len(full_cycle_script())
    for r in requests:
        assert "ACTIVE TODO LIST" in r.protected and "MAIN PLAN (main_plan.md)" in r.protected
        assert "YOUR ONLY JOB: Complete the tasks in your todo list" in r.system
        assert {t.name for t in r.tools} >= {"todo_complete", "todo_write", "job_complete"}
        assert "todo_complete()" in r.system  # the short tool guide
    # once written, the plan's text is in the protected layer
    assert any("## Phase 2: Write" in r.protected for r in requests)


def test_bootstrap_todos_on_a_new_job(make_job, run_job) -> None:
    paths = make_job()
    run_job(paths, [T(calls=[C(name="todo_complete")]), T(error="offline")])
    first = next(e for e in events_of(paths) if isinstance(e, ev.TodosChanged))
    assert [i.text for i in first.items] == BOOTSTRAP_TODOS and first.reason == "bootstrap"


def test_premature_stop_is_blocked_then_asks_the_operator_whose_stop_ends_it(make_job, run_job) -> None:
    paths = make_job()
    sup, result = run_job(paths, [T(text="I think I'm done.") for _ in range(6)])
    assert result.reason is ShutdownReason.COMPLETION_BLOCKED
    assert "tried to stop 6 times" in result.detail and "max_completion_blocks = 5" in result.detail
    evs = events_of(paths)
    blocked = [e for e in evs if isinstance(e, ev.CompletionBlocked)]
    # Nothing declared: seed 000's protocol refuses, under its own name.
    assert [b.blocks for b in blocked] == [1, 2, 3, 4, 5, 6] and {b.checker for b in blocked} == {"protocol"}
    assert {b.stop_reason for b in blocked} == {"end_turn"}
    (asked,) = [e for e in evs if isinstance(e, ev.NeedsOperator)]
    assert asked.reason == "completion_refused" and asked.paused
    assert any(line.startswith("protocol: ") for line in asked.evidence)
    assert sup.store.get(paths.root).status == "incomplete"


def test_nudged_agent_that_resumes_work_continues(make_job, run_job) -> None:
    paths = make_job()
    script = [T(text="Done?"), T(calls=[C(name="generate_workspace_summary")]), T(error="no more")]
    _, result = run_job(paths, script)
    assert result.reason is ShutdownReason.ERROR and "no more" in result.detail
    assert paths.workspace_summary.exists()


def test_invalid_arguments_from_the_model_are_recoverable(make_job, run_job) -> None:
    paths = make_job()
    script = [
        T(calls=[C(name="read_file", arguments="{broken")]),
        T(calls=[C(name="read_file", arguments={"paht": "instructions.md"})]),
        T(calls=[C(name="read_file", arguments={"path": "instructions.md"})]),
        T(error="end of script"),
    ]
    run_job(paths, script)
    results = [e for e in events_of(paths) if isinstance(e, ev.ToolResult)]
    assert [r.ok for r in results] == [False, False, True]
    assert "not valid JSON" in results[0].content
    assert "'paht': unknown argument" in results[1].content and "'path': Field required" in results[1].content


def test_max_turns_ends_the_session(make_job, run_job) -> None:
    paths = make_job()
    _, result = run_job(paths, [T(calls=[C(name="list_files")]) for _ in range(5)], max_turns=3)
    assert result.reason is ShutdownReason.MAX_TURNS and "max_turns (3)" in result.detail


def test_stuck_detection_nudges_towards_rewind(make_job, run_job) -> None:
    """The stuck detector is a feedback provider (seed 002): the same call with the same result 4 times."""
    paths = make_job()
    script = [T(calls=[C(name="list_files")]) for _ in range(6)]
    _sup, _ = run_job(paths, script, max_turns=6)
    evs = events_of(paths)
    stuck = [e for e in evs if isinstance(e, ev.StuckDetected)]
    assert stuck and stuck[0].pattern == "repeat"
    feedback = [e for e in evs if isinstance(e, ev.Feedback) and e.source == "Stuck"]
    assert feedback and feedback[0].severity == "warning" and "todo_rewind" in feedback[0].block
    # It fired after the 4th identical call, and the agent's next request carried the block after the result.
    turn_of_first = feedback[0].turn
    assert turn_of_first == 4


def test_lone_surrogates_from_the_model_do_not_crash_the_run(make_job, run_job) -> None:
    paths = make_job()
    script = [
        T(text="half an emoji \ud83d here", calls=[C(name="search_files", arguments={"pattern": "\ud83d"})]),
        T(calls=[C(name="write_file", arguments={"path": "ok\udcff.md", "content": "x\ud800"})]),
        T(error="end"),
    ]
    _, result = run_job(paths, script)
    assert result.detail == "scripted: end"
    evs = events_of(paths)
    msg = next(e for e in evs if isinstance(e, ev.AssistantMessage))
    assert msg.text == "half an emoji ? here"
    assert [e.tool for e in evs if isinstance(e, ev.ToolResult)] == ["search_files", "write_file"]
