"""The evidence rule (console.engine.evidence): both sides of its table, hostile text, the record in the todo
state, refused ticks through the tool, owed tasks and the completion check."""

from __future__ import annotations

import json

import pytest

from console.engine import events as ev
from console.engine.evidence import MAX_RECORD, MAX_SCAN, Need, needs, proofs
from console.engine.messages import ToolCall
from console.engine.phases import BOOTSTRAP_TODOS
from console.engine.runtime import Runtime
from console.engine.todos import OwedTask, TodoItem, TodoManager, TodoState
from console.engine.tools import ToolOutcome, default_registry

REG = default_registry()
TOOLS = frozenset([*REG.names, "test", "publish"])
FILES = {"instructions.md", "workspace_summary.md", "notes.md", "data.csv", "notes/changes.md", "digest.md",
         "a.md", "b.md"}


def holds(path: str) -> bool:
    return path in FILES


def keys(text: str) -> list[str]:
    return [n.key for n in needs(text, TOOLS, holds)]


# -- the table, both sides -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    # a registry tool named as a call
    ("Generate workspace summary using generate_workspace_summary()", ["call:generate_workspace_summary"]),
    ("Generate the summary with `generate_workspace_summary`", ["call:generate_workspace_summary"]),
    ("list_files() to see the inputs", ["call:list_files"]),
    ("Run the `publish` tool", ["call:publish"]),
    # conservative: "then its `publish` tool" has no call word of its own
    ("Run the job's `test` tool, then its `publish` tool", ["call:test"]),
    ("**Call** **generate_workspace_summary**()", ["call:generate_workspace_summary"]),
    # the bootstrap's reads, and the read verbs
    ("Read workspace_summary.md", ["read:workspace_summary.md"]),
    ("Read instructions.md", ["read:instructions.md"]),
    ("Read `notes/changes.md`", ["read:notes/changes.md"]),
    ("Review the file ./notes.md and data.csv.", ["read:notes.md", "read:data.csv"]),
    ("re-read instructions.md", ["read:instructions.md"]),
    ("Read notes.md and summarise it into digest.md", ["read:notes.md"]),
])
def test_what_needs_evidence(text: str, expected: list[str]) -> None:
    assert keys(text) == expected


@pytest.mark.parametrize("text", [
    "Summarise the notes into digest.md",           # not a read verb: digest.md is where the work goes
    "Check a.md",                                   # checking may be done other ways
    "Write digest.md from notes.md",
    "Read the notes in notes.md",                   # the object is "the notes", not a file
    "Read missing.md",                              # the job folder does not hold it
    "Read notes/",                                  # a folder
    "Read ../outside.md",
    "Summarise what list_files showed",             # mentioned, not called
    "Do not call generate_workspace_summary again",  # negated
    "Use the summary instead of generate_workspace_summary()",
    "Open test.py and run the checks",              # the tool name inside a path
    "Compare publish_v2 with the notes",            # inside a longer word
    "Call job_complete()",                          # done by its own call
    "Call todo_complete() after each task",
    "Create comprehensive execution plan in main_plan.md",
    "Divide plan into executable phases (5-20 steps each)",
    "Verify all deliverables",
    "Generate summary report",
])
def test_what_needs_nothing(text: str) -> None:
    assert keys(text) == []


def test_hostile_text_neither_crashes_nor_misleads() -> None:
    # huge: only the first MAX_SCAN characters are read (a name past them asks for nothing)
    assert keys("x " * 100_000 + "run generate_workspace_summary()") == []
    assert keys("Read notes.md " + "and " * 10_000) == ["read:notes.md"]
    # control characters and escape sequences only separate words; they never become part of a name or a path
    assert keys("Read\x1b[31m notes.md\x00\r\n") == ["read:notes.md"]
    assert keys("run\x07generate_workspace_summary\x1b()") == ["call:generate_workspace_summary"]
    assert keys("Read notes.md\x00.evil") == ["read:notes.md"]
    # a link is no call syntax (its "(" does not follow the name), and its target calls nothing
    assert keys("[generate_workspace_summary](http://list_files)") == []
    assert keys("use [`generate_workspace_summary`](docs)") == ["call:generate_workspace_summary"]
    assert keys("<b>Read</b> instructions.md") == []  # the first word is "b", not a read verb
    # nothing backtracks: a long run of path characters is linear
    assert keys("Read " + "a/" * 50_000 + ".md") == []
    assert keys("\x00" * MAX_SCAN) == []
    assert keys("") == []


def test_a_call_gives_its_evidence() -> None:
    assert proofs("read_file", {"path": "./notes/../notes.md", "start_line": 9}) == ["call:read_file",
                                                                                     "read:notes.md"]
    assert proofs("generate_workspace_summary", {}) == ["call:generate_workspace_summary"]
    assert proofs("todo_complete", {}) == []  # ticking is never evidence of anything
    assert proofs("read_file", {"path": "/etc/passwd"}) == ["call:read_file"]
    assert Need("read", "a.md").how() == "read a.md with read_file(path='a.md')"


# -- the record in the todo state --------------------------------------------------------------------------------------
def test_the_record_is_the_phase_s_and_is_bounded() -> None:
    m = TodoManager()
    m.install(["Read a.md"], kind="phase", phase_name="P", phase_number=1, total_phases=1)
    m.add_evidence(["call:read_file", "read:a.md"])
    assert m.state.evidence == ["call:read_file", "read:a.md"]
    for i in range(MAX_RECORD + 10):
        m.add_evidence([f"read:f{i}.md"])
    assert len(m.state.evidence) == MAX_RECORD and m.state.evidence[-1] == f"read:f{MAX_RECORD + 9}.md"
    # a transition archives the list: the next phase's evidence starts there (its calls count for the next list)
    m.begin_transition("phase", m.state.items[0].completed_at or _now())
    assert m.state.evidence == []
    m.add_evidence(["read:b.md"])
    m.install(["Read b.md"], kind="phase", phase_name="Q", phase_number=2, total_phases=2)
    assert m.state.evidence == ["read:b.md"]
    # and it survives the state file, as every component of the journal does
    again = TodoState.model_validate_json(m.state.model_dump_json())
    assert again.evidence == ["read:b.md"]


def _now():
    from datetime import UTC, datetime
    return datetime(2026, 1, 1, tzinfo=UTC)


# -- through the tool ------------------------------------------------------------------------------------------------
@pytest.fixture
def rt(make_job, clock) -> Runtime:
    paths = make_job(files={"notes.md": "# Notes\n", "digest.md": "old\n"})
    r = Runtime(paths, clock, ev.EventStream(paths.events, clock))
    r.tool_names = frozenset(REG.names)
    r.seen = []  # type: ignore[attr-defined]
    r.events.subscribe(r.seen.append)  # type: ignore[attr-defined]
    r.judge_evidence([])
    r.phases.ensure_bootstrap()
    return r


def call(rt: Runtime, name: str, **args: object) -> ToolOutcome:
    parsed = REG.parse(ToolCall(id="c", name=name, arguments=json.dumps(args)))
    return parsed if isinstance(parsed, ToolOutcome) else REG.run(rt, *parsed)


def test_the_trial_s_ticks_are_refused_with_what_to_do(rt) -> None:
    out = call(rt, "todo_complete")
    assert not out.ok
    assert out.content.startswith("todo_complete refused: no successful call of generate_workspace_summary in this "
                                  "phase, which task 1 names.")
    assert "Do it now (call generate_workspace_summary())" in out.content
    assert not rt.todos.state.items[0].done
    (refused,) = [e for e in rt.seen if isinstance(e, ev.TodoRefused)]  # type: ignore[attr-defined]
    assert (refused.index, refused.missing) == (1, ["call generate_workspace_summary()"])
    # the agent does what it was told, in one turn, and the tick goes through with its proof
    assert call(rt, "generate_workspace_summary").ok
    assert call(rt, "todo_complete").ok
    assert rt.todos.state.items[0].proof == ["call:generate_workspace_summary"]
    out = call(rt, "todo_complete")
    assert not out.ok and "read workspace_summary.md with read_file(path='workspace_summary.md')" in out.content
    # a failed call is no evidence
    assert not call(rt, "read_file", path="nope.md").ok
    assert not call(rt, "todo_complete").ok


def test_work_done_before_its_tick_counts_within_the_phase(rt) -> None:
    # an agent that does three tasks' work first, then ticks three times, is not refused
    for name, args in [("generate_workspace_summary", {}), ("read_file", {"path": "workspace_summary.md"}),
                       ("read_file", {"path": "instructions.md"})]:
        assert call(rt, name, **args).ok
    for _ in range(3):
        assert call(rt, "todo_complete").ok
    assert rt.todos.state.done_count == 3


def test_honest_work_is_not_refused(rt) -> None:
    for name, args in [("generate_workspace_summary", {}), ("read_file", {"path": "workspace_summary.md"}),
                       ("read_file", {"path": "instructions.md"})]:
        call(rt, name, **args)
    for _ in range(3):
        call(rt, "todo_complete")
    rt.todos.replace_items([*BOOTSTRAP_TODOS[:3], "Summarise the notes into digest.md",
                            "Create comprehensive execution plan in main_plan.md"], [True, True, True, False, False])
    assert call(rt, "todo_complete").ok  # mentions digest.md in passing: no read of it is asked for


# -- owed: ticks without their evidence --------------------------------------------------------------------------------
def test_an_older_run_s_unproven_ticks_are_owed_until_given(rt) -> None:
    st = rt.todos.state
    st.owed = None  # a state from before the rule
    st.items = [TodoItem(text=t, done=True) for t in BOOTSTRAP_TODOS[:3]] + [TodoItem(text=t)
                                                                              for t in BOOTSTRAP_TODOS[3:]]
    (rt.paths.root / "workspace_summary.md").write_text("# Workspace Summary\n")
    rt.judge_evidence(["Read notes.md", "Summarise the notes into digest.md"])
    owed = {o.text: o.keys for o in rt.todos.state.owed or []}
    assert owed == {"Read notes.md": ["read:notes.md"],
                    BOOTSTRAP_TODOS[0]: ["call:generate_workspace_summary"],
                    BOOTSTRAP_TODOS[1]: ["read:workspace_summary.md"],
                    BOOTSTRAP_TODOS[2]: ["read:instructions.md"]}
    unmet = rt.guards.unmet()
    assert any("was marked done without the evidence it names" in u and "read notes.md with read_file" in u
               for u in unmet)
    assert any("1 more tasks" in u for u in unmet)
    assert rt.guards.verdict("job_complete").complete is False
    # giving it settles it, and only what is still owed is named
    call(rt, "read_file", path="notes.md")
    call(rt, "generate_workspace_summary")
    assert [o.text for o in rt.todos.state.owed or []] == [BOOTSTRAP_TODOS[1], BOOTSTRAP_TODOS[2]]
    call(rt, "read_file", path="workspace_summary.md")
    call(rt, "read_file", path="instructions.md")
    assert rt.todos.state.owed == []
    assert not any("without the evidence" in u for u in rt.guards.unmet())
    # judged once: a second resume does not owe it again
    rt.judge_evidence(["Read notes.md"])
    assert rt.todos.state.owed == []


def test_a_hand_edited_done_task_is_owed_and_a_completed_run_is_left_alone(rt) -> None:
    rt.todos.state.items[2].done = True  # "Read instructions.md", ticked by an edit of the state
    rt.judge_evidence([])
    assert rt.todos.state.owed == [OwedTask(text=BOOTSTRAP_TODOS[2], keys=["read:instructions.md"])]
    assert rt.todos.state.items[2].proof == []
    errors = [e for e in rt.seen if isinstance(e, ev.ErrorEvent) and e.where == "evidence"]  # type: ignore
    assert len(errors) == 1


# -- the demo model answers a refusal in one turn ----------------------------------------------------------------------
def test_the_scripted_agent_gives_the_evidence_a_refusal_names(rt) -> None:
    from console.engine.evidence import refusal
    from console.engine.messages import Message, ModelRequest
    from console.providers.scripted_agent import ScriptedAgent

    tick = ToolCall(id="t1", name="todo_complete", arguments="{}")
    why = refusal(0, "Summarise with list_files() and Read notes.md", [Need("call", "list_files"),
                                                                         Need("read", "notes.md")])
    request = ModelRequest(system="You are an agent.", tools=REG.specs(), protected=rt.todos.render(),
                           messages=[Message.user("Start."), Message.assistant("", [tick]),
                                     Message.tool(tick, why, ok=False)])
    decision = ScriptedAgent().decide(request)
    assert [(c.name, c.args) for c in decision.calls] == [("list_files", {}), ("read_file", {"path": "notes.md"})]
    # a stop refused for ticks an older run made without their evidence: the same
    from console.engine.evidence import owed_line

    stop = ToolCall(id="j1", name="job_complete", arguments="{}")
    blocked = Message.user("[job_complete was refused: the job is not complete (protocol). The job is not "
                           "finished: " + owed_line("Read instructions.md", [Need("read", "instructions.md")]) + ".]",
                           kind="completion_blocked")
    request = request.model_copy(update={"messages": [Message.user("Start."), Message.assistant("", [stop]),
                                                      Message.tool(stop, "refused", ok=False), blocked]})
    decision = ScriptedAgent().decide(request)
    assert [(c.name, c.args) for c in decision.calls] == [("read_file", {"path": "instructions.md"})]
