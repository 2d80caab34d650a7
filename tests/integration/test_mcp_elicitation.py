"""A server's questions to the operator (elicitation, form mode), asked only when the operator's config enables them
for that server (console.engine.tools.mcp_elicitation), against a server of ours (tests/mcp_servers/asker.py) started
confined, through whole runs with the scripted model: the question is the run's need, in the log while the call
waits; the operator's answer (the `answer` command) is checked against the form and reaches the server."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from console.engine import commands as cmds
from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.job import JobPaths
from console.engine.store import JobStore
from console.engine.supervisor import Supervisor
from console.engine.tools.limits import CommandWorld
from console.engine.tools.mcp_config import McpServerConfig
from console.mcp.client import StdioServer
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedTurn as T
from console.view import present
from tests.commands_support import PY_HOME, bwrap  # noqa: F401  (the fixture)
from tests.conftest import Recording, run_settings
from tests.integration.test_mcp_sampling import started as sampling_started

VENV = os.path.realpath(sys.prefix)
SERVERS = os.path.realpath(Path(__file__).parent.parent / "mcp_servers")
WORLD = CommandWorld(read_only=(PY_HOME, VENV, SERVERS))
ARGV = [os.path.join(VENV, "bin", "python"), os.path.join(SERVERS, "asker.py")]
OFF = McpServerConfig(name="asker", command=ARGV)
ON = McpServerConfig(name="asker", command=ARGV, elicitation=True, elicitation_timeout=60)
ESC = "\x1b]52;c;aGFjaw==\x07\x1b[2J[bold red]x[/]"


@pytest.fixture
def job(make_job) -> JobPaths:  # type: ignore[no-untyped-def]
    return make_job()


def started(job: JobPaths, config: McpServerConfig) -> Iterator[StdioServer]:
    yield from sampling_started(job, config, WORLD)


@pytest.fixture
def on(job: JobPaths, bwrap) -> Iterator[StdioServer]:  # type: ignore[no-untyped-def]  # noqa: F811
    yield from started(job, ON)


@pytest.fixture
def off(job: JobPaths, bwrap) -> Iterator[StdioServer]:  # type: ignore[no-untyped-def]  # noqa: F811
    yield from started(job, OFF)


Operator = Callable[[Supervisor, ev.NeedsOperator, list[str]], None]


def run(job: JobPaths, server: Any, script: list[T], clock: FakeClock, tmp_path: Path,
        operator: Operator | None = None) -> list[str]:
    """The run, with ``operator`` answering each question (it is handed the need and what the log held then)."""
    provider = Recording(clock=clock, script=script)
    sup = Supervisor(job, run_settings(), provider, clock=clock, store=JobStore(tmp_path / "jobs.db"), mcp=[server])
    logged: list[str] = []

    def on_event(e: object) -> None:
        if isinstance(e, ev.NeedsOperator) and e.reason == "mcp_question" and operator is not None:
            operator(sup, e, logged)

    sup.subscribe(on_event)
    sup.run()
    return logged


def events(job: JobPaths) -> list[ev.EventBase]:
    return list(ev.read_events(job.events))


def result(job: JobPaths, tool: str) -> ev.ToolResult:
    (got,) = [e for e in events(job) if isinstance(e, ev.ToolResult) and e.tool == tool]
    return got


def elicited(job: JobPaths) -> list[ev.McpElicited]:
    return [e for e in events(job) if isinstance(e, ev.McpElicited)]


def answering(**args: Any) -> Operator:
    def operator(sup: Supervisor, need: ev.NeedsOperator, logged: list[str]) -> None:
        sup.submit(cmds.Answer(**args), source="cli")

    return operator


def question_id(need: ev.NeedsOperator) -> str:
    return need.message.split("question ", 1)[1].split(",", 1)[0]


def test_off_by_default_the_capability_is_not_advertised_and_a_question_is_refused(job, off, clock,
                                                                                  tmp_path) -> None:
    script = [T(calls=[C(name="mcp__asker__caps")]), T(calls=[C(name="mcp__asker__ask")]), T(error="end of script")]
    run(job, off, script, clock, tmp_path, answering(set=("name=x",)))
    assert result(job, "mcp__asker__caps").content == "ELICITATION=False"
    assert result(job, "mcp__asker__ask").content.startswith("REFUSED")
    assert not [e for e in events(job) if isinstance(e, ev.NeedsOperator)] and elicited(job) == []


def test_enabled_the_question_is_the_runs_need_in_the_log_while_it_waits_and_the_answer_reaches_the_server(
        job, on, clock, tmp_path) -> None:
    seen: list[list[str]] = []

    def operator(sup: Supervisor, need: ev.NeedsOperator, logged: list[str]) -> None:
        # As another process reads it (attach, jobs, `agent-console answer`): the need reaches the log while the
        # call waits (the operator answers only once it has: never before, whatever the machine's load).
        def whole_lines() -> list[str]:
            # The run appends as this reads: a last line without its newline is still being written.
            text = job.events.read_text()
            return text[:text.rfind("\n") + 1].splitlines()

        def read_then_answer() -> None:
            while not (types := [json.loads(ln)["type"] for ln in whole_lines()]) or types[-1] != "needs_operator":
                time.sleep(0.02)
            seen.append(types)
            sup.submit(cmds.Answer(question=question_id(need), set=("name=Ada", "count=3", "urgent=yes",
                                                                       "color=green")), source="cli")

        threading.Thread(target=read_then_answer, daemon=True).start()

    script = [T(calls=[C(name="mcp__asker__caps")]), T(calls=[C(name="mcp__asker__ask")]), T(error="end of script")]
    run(job, on, script, clock, tmp_path, operator)
    assert result(job, "mcp__asker__caps").content == "ELICITATION=True"
    # The run's header says what the server may ask (the operator's config let it).
    (server,) = [e for e in events(job) if isinstance(e, ev.McpServerEvent) and e.state == "ready"][:1]
    assert server.may == ["elicitation"] and "may ask you questions" in present.describe(server).text
    got = result(job, "mcp__asker__ask")
    assert got.ok and got.content == 'ELICITED: accept {"color": "green", "count": 3, "name": "Ada", "urgent": true}'
    (logged,) = seen
    assert logged[-1] == "needs_operator" and "tool_called" in logged  # the step's events so far, in order
    (need,) = [e for e in events(job) if isinstance(e, ev.NeedsOperator)]
    assert need.reason == "mcp_question" and not need.paused
    assert "MCP server asker asks (question q" in need.message and "during ask): Who are you?" in need.message
    assert need.evidence == ["name (string, 0..40 characters, required): Your name", "count (integer, 1..10)",
                             "urgent (boolean)", "color (one of red, green)"]
    (done,) = elicited(job)
    assert (done.action, done.fields, done.by) == ("accept", ["color", "count", "name", "urgent"], "operator (cli)")
    cleared = [e for e in events(job) if isinstance(e, ev.NeedsOperatorCleared)]
    assert [c.reason for c in cleared] == ["mcp_question"]
    # The operator's values are the server's: the log keeps the fields' names, never the values.
    assert not [e for e in events(job) if not isinstance(e, ev.ToolResult) and "Ada" in e.model_dump_json()]
    (received,) = [e for e in events(job) if isinstance(e, ev.OperatorCommand) and e.status == "received"]
    assert received.args["set"] == ["name=...", "count=...", "urgent=...", "color=..."]
    applied = [e for e in events(job) if isinstance(e, ev.OperatorCommand) and e.status == "applied"]
    assert [a.detail for a in applied] == [f"answered question {done.question} of MCP server asker (name, count, "
                                           "urgent, color)"]
    # Every event once, in the order of their seqs (what was written early is not written again at the commit).
    seqs = [e.seq for e in events(job)]
    assert seqs == sorted(set(seqs))


def test_a_wrong_answer_is_refused_with_why_and_the_question_waits_on(job, on, clock, tmp_path) -> None:
    tries = [("count=3",), ("name=Ada", "count=11"), ("name=Ada", "colour=red"), ("name=Ada", "urgent=maybe"),
             ("name=" + "x" * 41,), ("name=Ada", "color=blue"), ("name=Ada",)]

    def operator(sup: Supervisor, need: ev.NeedsOperator, logged: list[str]) -> None:
        sup.submit(cmds.Answer(question="q000000", set=("name=Bob",)), source="cli")  # another question's id
        for values in tries:
            sup.submit(cmds.Answer(set=values), source="cli")

    run(job, on, [T(calls=[C(name="mcp__asker__ask")]), T(error="end of script")], clock, tmp_path, operator)
    assert result(job, "mcp__asker__ask").content == 'ELICITED: accept {"name": "Ada"}'
    said = [(e.status, e.detail) for e in events(job) if isinstance(e, ev.OperatorCommand) and e.status != "received"]
    qid = elicited(job)[0].question
    assert said == [
        ("rejected", f"question q000000 is not the one waiting (question {qid} of MCP server asker waits now): "
                     "nothing answered"),
        ("rejected", f"not answered: required field missing: name; question {qid} still waits"),
        ("rejected", f"not answered: count: out of its bounds (1..10); question {qid} still waits"),
        ("rejected", f"not answered: the question has no field 'colour' (its fields: name, count, urgent, color); "
                     f"question {qid} still waits"),
        ("rejected", f"not answered: urgent: true or false expected; question {qid} still waits"),
        ("rejected", f"not answered: name: at most 40 characters; question {qid} still waits"),
        ("rejected", f"not answered: color: one of red, green expected; question {qid} still waits"),
        ("applied", f"answered question {qid} of MCP server asker (name)"),
    ]


@pytest.mark.parametrize("how", ["decline", "cancel"])
def test_a_decline_or_a_cancel_reaches_the_server_without_values(job, on, clock, tmp_path, how: str) -> None:
    run(job, on, [T(calls=[C(name="mcp__asker__ask")]), T(error="end of script")], clock, tmp_path,
        answering(**{how: True}))
    assert result(job, "mcp__asker__ask").content == f"ELICITED: {how} null"
    (done,) = elicited(job)
    assert done.action == how and done.fields == []


def test_an_answer_with_no_question_waiting_is_refused(job, on, clock, tmp_path) -> None:
    provider = Recording(clock=clock, script=[T(calls=[C(name="mcp__asker__caps")]), T(error="end of script")])
    sup = Supervisor(job, run_settings(), provider, clock=clock, store=JobStore(tmp_path / "jobs.db"), mcp=[on])
    sup.submit(cmds.Answer(set=("name=x",)), source="cli")
    sup.run()
    (said,) = [e for e in events(job) if isinstance(e, ev.OperatorCommand) and e.status != "received"]
    assert (said.status, said.detail) == ("rejected", "no question of an MCP server waits for an answer now")


def test_no_answer_within_the_questions_time_cancels_it_and_the_call_goes_on(job, bwrap, clock,  # noqa: F811
                                                                             tmp_path) -> None:
    config = ON.model_copy(update={"elicitation_timeout": 1.0, "timeout": 5.0})
    for server in started(job, config):
        run(job, server, [T(calls=[C(name="mcp__asker__twice", arguments={"n": 2})]), T(error="end of script")],
            clock, tmp_path)
    # Each question waited its second, the call's own 5 s untouched by it (lengthened while a question waits).
    assert result(job, "mcp__asker__twice").content == "ELICITED: cancel null\nELICITED: cancel null"
    assert [(e.action, e.by) for e in elicited(job)] == [("cancel", "no answer within 1 s")] * 2
    assert [e.reason for e in events(job) if isinstance(e, ev.NeedsOperatorCleared)] == ["mcp_question"] * 2


def test_the_operators_stop_cancels_the_question(job, on, clock, tmp_path) -> None:
    def operator(sup: Supervisor, need: ev.NeedsOperator, logged: list[str]) -> None:
        sup.command("stop")

    run(job, on, [T(calls=[C(name="mcp__asker__ask")]), T(calls=[C(name="mcp__asker__caps")]),
                  T(error="end of script")], clock, tmp_path, operator)
    assert result(job, "mcp__asker__ask").content == "ELICITED: cancel null"
    assert [(e.action, e.by) for e in elicited(job)] == [("cancel", "the operator's stop")]
    ended = [e for e in events(job) if isinstance(e, ev.RunEnded)]
    assert ended and ended[-1].reason == "user_shutdown"  # after the turn: the next call was never made
    assert not [e for e in events(job) if isinstance(e, ev.ToolResult) and e.tool == "mcp__asker__caps"]


@pytest.mark.parametrize("schema, why", [
    ({"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}, "type object is not one"),
    ({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}}, "only flat fields"),
    ({"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(17)}}, "17 fields (at most 16)"),
    ({"type": "object", "properties": {"a b": {"type": "string"}}}, "is not letters, digits"),
    ({"type": "object", "properties": {"a": {"type": "string", "enum": ["x", ESC]}}}, "short printable text"),
    ({"type": "object", "properties": {}, "required": ["ghost"]}, "does not define (ghost)"),
])
def test_a_form_that_is_not_flat_and_bounded_is_refused_whole(job, on, clock, tmp_path, schema: dict[str, Any],
                                                              why: str) -> None:
    script = [T(calls=[C(name="mcp__asker__ask", arguments={"schema": schema})]), T(error="end of script")]
    run(job, on, script, clock, tmp_path, answering(set=("a=x",)))
    assert result(job, "mcp__asker__ask").content.startswith("REFUSED")
    (said,) = elicited(job)
    assert said.refused.startswith("its form is not one the operator is asked: ") and why in said.refused
    assert not [e for e in events(job) if isinstance(e, ev.NeedsOperator)]


def test_a_url_to_open_is_never_handed_to_the_operator(job, on, clock, tmp_path) -> None:
    run(job, on, [T(calls=[C(name="mcp__asker__url")]), T(error="end of script")], clock, tmp_path,
        answering(set=("a=x",)))
    assert "elicitation refused: it asks the operator to open a URL" in result(job, "mcp__asker__url").content
    assert "evil.example" not in job.events.read_text().replace(result(job, "mcp__asker__url").content, "")
    assert not [e for e in events(job) if isinstance(e, ev.NeedsOperator)]


def test_hostile_text_in_the_question_is_shown_escaped(job, on, clock, tmp_path) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "title": ESC, "description": "x\ny"}}}
    script = [T(calls=[C(name="mcp__asker__ask", arguments={"message": ESC + "\nline two", "schema": schema})]),
              T(error="end of script")]
    run(job, on, script, clock, tmp_path, answering(cancel=True))
    (need,) = [e for e in events(job) if isinstance(e, ev.NeedsOperator)]
    for text in [need.message, *need.evidence]:
        assert "\x1b" not in text and "\x07" not in text and "\n" not in text
    shown = present.describe(need)
    assert "\x1b" not in shown.text + shown.detail + "".join(shown.lines)


def test_the_per_call_cap_refuses_a_flood_of_questions(job, bwrap, clock, tmp_path) -> None:  # noqa: F811
    for server in started(job, ON.model_copy(update={"elicitation_per_call": 2})):
        run(job, server, [T(calls=[C(name="mcp__asker__twice", arguments={"n": 4})]), T(error="end of script")],
            clock, tmp_path, answering(cancel=True))
    lines = result(job, "mcp__asker__twice").content.splitlines()
    assert lines[:2] == ["ELICITED: cancel null"] * 2 and all(ln.startswith("REFUSED") for ln in lines[2:])
    # The refusals past the cap are said once (a flood of them writes one event, not one each).
    assert [bool(e.refused) for e in elicited(job)] == [False, False, True]


@pytest.mark.parametrize("enabled", [False, True])
def test_an_http_servers_question_is_asked_only_when_enabled(job, clock, tmp_path, enabled: bool) -> None:
    from console.mcp.http import HttpServer
    from tests.mcp_servers.http_server import serve

    with serve(stateful=True) as srv:
        server = HttpServer(McpServerConfig(name="web", url=srv.mcp, elicitation=enabled), [f"{srv.base}/"], {})
        try:
            run(job, server, [T(calls=[C(name="mcp__web__quiz")]), T(error="end of script")], clock, tmp_path,
                answering(set=("city=Lyon",)))
        finally:
            server.close()
    got = result(job, "mcp__web__quiz").content
    assert got == "ELICITED: accept {'city': 'Lyon'}" if enabled else got.startswith("REFUSED")
    assert len(elicited(job)) == enabled


def headless_job(tmp_path: Path, config: str = "") -> Path:
    """A job folder whose scripted agent calls the asker's ``ask`` first, the operator's config enabling its
    questions (``config``: more keys of its ``[[mcp.servers]]`` entry)."""
    paths = f'["{VENV}", "{SERVERS}", "{PY_HOME}"]'
    Path(os.environ["AGENT_CONSOLE_CONFIG"]).write_text(
        f'[sandbox_limits]\nread_only = {paths}\n\n[[mcp.servers]]\nname = "asker"\n'
        f'command = {json.dumps(ARGV)}\nelicitation = true\n{config}')
    job = tmp_path / "job"
    job.mkdir()
    (job / "instructions.md").write_text(
        "# Ask the operator\n\n## Phase 1: Ask\n- [ ] Run `mcp__asker__ask`\n- [ ] List the files of the job folder\n"
        "- [ ] Record what the server answered as a note\n- [ ] Record the end as a note\n"
        "- [ ] Record the last word as a note\n")
    (job / "job.toml").write_text(f'name = "asker"\n[model]\nprovider = "scripted"\nspeed = 0\n'
                                  f'[sandbox]\nread_only = {paths}\n[[mcp]]\nname = "asker"\nrequired = true\n')
    return job


def test_answered_from_another_shell_as_an_operator_would(tmp_path, bwrap) -> None:  # noqa: F811
    """The whole way: the operator's config enables the server's questions, a job names the server and runs
    headless; `jobs` says the run needs its operator, a wrong `agent-console answer` is refused at once with why
    (exit 1), the right one is applied (exit 0) and the server has the values."""
    import subprocess

    from tests.integration.test_crash_resume import start, wait_for

    job = headless_job(tmp_path)
    log = job / ".console" / "events.jsonl"
    proc = start(job)

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "console.cli", *argv], capture_output=True, text=True,
                              timeout=60)

    try:
        wait_for(log, lambda e: isinstance(e, ev.NeedsOperator) and e.reason == "mcp_question")
        jobs = cli("jobs", "--json")
        row = json.loads(jobs.stdout.splitlines()[0])
        assert jobs.returncode == 0 and row["status"] == "needs you" and "MCP server asker asks" in row["detail"], row
        wrong = cli("answer", str(job), "--set", "count=3")
        assert wrong.returncode == 1, wrong
        assert "answer: rejected: not answered: required field missing: name; question q" in wrong.stdout
        right = cli("answer", str(job), "--set", "name=Ada", "--set", "count=3")
        assert right.returncode == 0 and "answer: applied: answered question q" in right.stdout, right
        _out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert "Traceback" not in err
    (got,) = [e for e in ev.read_events(log) if isinstance(e, ev.ToolResult) and e.tool == "mcp__asker__ask"]
    assert got.content == 'ELICITED: accept {"count": 3, "name": "Ada"}'
    late = cli("answer", str(job), "--set", "name=Bob")
    assert late.returncode == 1 and "nothing to answer" in late.stderr + late.stdout


def test_a_log_that_cannot_be_written_while_the_question_waits_refuses_it_and_leaves_no_need(job, on, clock,
                                                                                          tmp_path, monkeypatch
                                                                                          ) -> None:
    """Found reading the wait again: the question's need was recorded, then the log's write failed (a full disk),
    and the need was never cleared: every view would have said the run needs its operator for good."""
    from console.engine.tools.mcp_tools import _CallRecord

    real = _CallRecord.asked
    failed: list[int] = []

    def full_disk(self: _CallRecord, questions: list[str]) -> None:
        if not failed:  # the question's first write to the log
            failed.append(1)
            raise OSError(28, "No space left on device")
        real(self, questions)

    monkeypatch.setattr(_CallRecord, "asked", full_disk)
    run(job, on, [T(calls=[C(name="mcp__asker__ask")]), T(error="end of script")], clock, tmp_path,
        answering(set=("name=x",)))
    assert failed and result(job, "mcp__asker__ask").content.startswith("REFUSED")
    cleared = [e for e in events(job) if isinstance(e, ev.NeedsOperatorCleared)]
    assert [(c.reason, c.by) for c in cleared] == [("mcp_question", "the harness could not wait for the answer")]


def test_a_resume_while_a_question_waits_is_refused_at_once_naming_the_answer(job, on, clock, tmp_path) -> None:
    """Tried as an operator: `resume RUN` while a question waited said "not confirmed ... it applies at the next
    turn boundary" (held with the call), then was refused there. A resume answers no question: refused at once."""
    def operator(sup: Supervisor, need: ev.NeedsOperator, logged: list[str]) -> None:
        sup.submit(cmds.Resume(), source="cli")
        sup.submit(cmds.Answer(cancel=True), source="cli")

    run(job, on, [T(calls=[C(name="mcp__asker__ask")]), T(error="end of script")], clock, tmp_path, operator)
    said = [(e.command, e.status, e.detail) for e in events(job)
            if isinstance(e, ev.OperatorCommand) and e.status != "received"]
    assert said[0][:2] == ("resume", "rejected")
    assert said[0][2].startswith("not paused: it waits for question from an MCP server: agent-console answer ")
    assert said[1][:2] == ("answer", "applied")
    seqs = {e.command: e.seq for e in events(job) if isinstance(e, ev.OperatorCommand) and e.status != "received"}
    (cleared,) = [e for e in events(job) if isinstance(e, ev.NeedsOperatorCleared)]
    assert seqs["resume"] < cleared.seq  # refused while the question waited, not at the turn's end


def test_a_question_between_two_calls_is_refused_and_said_once(job, on) -> None:
    """A server that asks in the background, once its call has ended: no call to hold, no operator to ask for it
    then: refused (the server is told), and said once among the server's news."""
    import time as clock_time

    from console.mcp.session import BETWEEN_QUESTIONS

    assert on.call("later", {"seconds": 0.2}, 30).text == "scheduled"
    got = ""
    for _ in range(200):  # the server's own time: its answer, whenever the machine lets it come
        got = on.call("later_result", {}, 30).text
        if got != "NOTHING YET":
            break
        clock_time.sleep(0.05)
    assert got.startswith("REFUSED") and "a question is asked only during a tool call" in got
    news = [n.why for n in on.news() if n.state is None]
    assert news == [f"it asked for {BETWEEN_QUESTIONS}, which this client refuses (answered with an error; said once)"]
