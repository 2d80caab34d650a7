"""Held-out attacks on MCP elicitation (console.engine.tools.mcp_elicitation, console.mcp.session's AskDesk): a
server that asks two questions at once, withdraws its own question (notifications/cancelled), dies while its
question waits, or keeps working after the answer (the call's own timeout); an answer sent just before a question
is asked; the operator's values (escapes, a secret) kept out of the log and the run's state."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.engine import commands as cmds
from console.engine import control
from console.engine import events as ev
from console.engine.control import write_inbox
from console.engine.job import JobPaths
from console.engine.store import JobStore
from console.engine.supervisor import Supervisor
from console.mcp.client import StdioServer
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedTurn as T
from tests.commands_support import bwrap  # noqa: F401  (the fixture)
from tests.conftest import Recording, run_settings
from tests.integration.test_mcp_elicitation import ON, answering, elicited, events, question_id, result, run, started


@pytest.fixture
def job(make_job) -> JobPaths:  # type: ignore[no-untyped-def]
    return make_job()


def server(job: JobPaths, **update: Any) -> Iterator[StdioServer]:
    yield from started(job, ON.model_copy(update=update))


def needs(job: JobPaths) -> list[ev.NeedsOperator]:
    return [e for e in events(job) if isinstance(e, ev.NeedsOperator) and e.reason == "mcp_question"]


def cleared(job: JobPaths) -> list[ev.NeedsOperatorCleared]:
    return [e for e in events(job) if isinstance(e, ev.NeedsOperatorCleared) and e.reason == "mcp_question"]


def test_two_questions_at_once_are_asked_one_after_the_other_each_answered(job, bwrap, clock,  # noqa: F811
                                                                           tmp_path) -> None:
    def operator(sup: Supervisor, need: ev.NeedsOperator, logged: list[str]) -> None:
        who = need.message.rsplit("pair ", 1)[1]
        sup.submit(cmds.Answer(question=question_id(need), set=(f"name=n{who}",)), source="cli")

    for s in server(job):
        run(job, s, [T(calls=[C(name="mcp__asker__pair")]), T(error="end of script")], clock, tmp_path, operator)
    got = result(job, "mcp__asker__pair")
    assert sorted(got.content.splitlines()) == ['ELICITED: accept {"name": "n0"}', 'ELICITED: accept {"name": "n1"}']
    assert [e.action for e in elicited(job)] == ["accept", "accept"]
    assert len(needs(job)) == 2 and len(cleared(job)) == 2


def test_a_question_the_server_withdraws_is_no_longer_the_operators_need(job, bwrap, clock,  # noqa: F811
                                                                         tmp_path) -> None:
    # The server cancels its own question (notifications/cancelled) after half a second and works on for 1 s (ten
    # of the wait's looks; a question the withdrawal did not end would end by the call's end): the question is over
    # then (not waiting its 20 s for an answer nobody reads), and its need is cleared at once.
    for s in server(job, elicitation_timeout=20.0):
        run(job, s, [T(calls=[C(name="mcp__asker__withdraw", arguments={"seconds": 0.5, "after": 1})]),
                     T(error="end of script")], clock, tmp_path)
    assert result(job, "mcp__asker__withdraw").content == "WITHDRAWN"
    (done,) = elicited(job)
    assert (done.action, done.by) == ("cancel", "the server withdrew its question")
    assert len(cleared(job)) == 1


def test_the_server_dying_while_its_question_waits_ends_the_question_and_reports_the_call(
        job, bwrap, clock, tmp_path) -> None:  # noqa: F811
    for s in server(job, elicitation_timeout=30.0, timeout=60.0):
        run(job, s, [T(calls=[C(name="mcp__asker__die")]), T(error="end of script")], clock, tmp_path)
    got = result(job, "mcp__asker__die")
    assert not got.ok
    (done,) = elicited(job)
    assert (done.action, done.by) == ("cancel", "the call's end (the server no longer waits)")
    assert "the server exited during the call" in got.content
    assert len(needs(job)) == 1 and len(cleared(job)) == 1


def test_the_calls_own_timeout_waits_for_the_operator_and_its_remaining_time_is_kept(job, bwrap, clock,  # noqa: F811
                                                                                     tmp_path) -> None:
    # The call may take 3 s of its own; the operator thinks for 4 s, then the server works 1.5 s more: it is
    # within its time (the question's wait is not the call's), and answered.
    def operator(sup: Supervisor, need: ev.NeedsOperator, logged: list[str]) -> None:
        threading.Timer(4.0, lambda: sup.submit(cmds.Answer(set=("name=Ada",)), source="cli")).start()

    for s in server(job, elicitation_timeout=30.0, timeout=3.0):
        run(job, s, [T(calls=[C(name="mcp__asker__ask_then_sleep", arguments={"seconds": 1.5})]),
                     T(error="end of script")], clock, tmp_path, operator)
    got = result(job, "mcp__asker__ask_then_sleep")
    assert got.ok and got.content == 'ELICITED: accept {"name": "Ada"}'


def test_an_answer_sent_before_the_question_is_asked_is_not_applied_to_it(job, bwrap, clock, tmp_path,  # noqa: F811
                                                                          monkeypatch) -> None:
    # The answer reaches the inbox as the call starts, before its question is asked (another shell's
    # `agent-console answer` a moment too soon; the inbox is read only every POLL_INTERVAL while a tool runs). It
    # answers no question: it is refused, and the question waits for an answer sent while it waits, which it takes
    # (the stale one taken instead would say STALE; the question's own time, 60 s, is never waited out).
    monkeypatch.setattr(control, "POLL_INTERVAL", 3.0)
    for s in server(job):
        provider = Recording(clock=clock, script=[T(calls=[C(name="mcp__asker__ask")]), T(error="end of script")])
        sup = Supervisor(job, run_settings(), provider, clock=clock, store=JobStore(tmp_path / "jobs.db"), mcp=[s])

        def on_event(e: object, sup: Supervisor = sup) -> None:
            if isinstance(e, ev.ToolCalled) and e.tool == "mcp__asker__ask":
                write_inbox(job, cmds.Answer(set=("name=STALE",)), source="cli")
            if isinstance(e, ev.NeedsOperator) and e.reason == "mcp_question":
                sup.submit(cmds.Answer(question=question_id(e), set=("name=Ada",)), source="cli")

        sup.subscribe(on_event)
        sup.run()
    assert result(job, "mcp__asker__ask").content == 'ELICITED: accept {"name": "Ada"}'
    said = [(e.status, e.detail) for e in events(job) if isinstance(e, ev.OperatorCommand) and e.status != "received"]
    qid = elicited(job)[0].question
    assert said == [("rejected", "no question of an MCP server waits for an answer now"),
                    ("applied", f"answered question {qid} of MCP server asker (name)")]


def test_the_operators_values_reach_the_server_as_typed_and_never_the_runs_files(job, bwrap, clock,  # noqa: F811
                                                                                  tmp_path) -> None:
    secret = "sk-ant-api03-" + "Zq9" * 20
    typed = "a\x1b[2Jb\nc\\n\x07" + secret
    schema = {"type": "object", "properties": {"token": {"type": "string"}}}

    def operator(sup: Supervisor, need: ev.NeedsOperator, logged: list[str]) -> None:
        sup.submit(cmds.Answer(set=(f"token={typed}",)), source="cli")

    for s in server(job):
        run(job, s, [T(calls=[C(name="mcp__asker__ask", arguments={"schema": schema, "digest": True})]),
                     T(error="end of script")], clock, tmp_path, operator)
    # The server's digest of what it received: the value as typed (escapes, newline, BEL and all).
    sent = hashlib.sha256(json.dumps({"token": typed}, sort_keys=True).encode()).hexdigest()
    assert result(job, "mcp__asker__ask").content == f"ELICITED: accept sha256:{sent}"
    # Nothing the run wrote holds it: the log, the state, the checkpoints, the inbox once read.
    for path in Path(job.root).rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_every_field_of_a_form_of_sixteen_is_in_the_need_and_the_answer_dialogs_fields(job, bwrap, clock,  # noqa: F811
                                                                                       tmp_path) -> None:
    # The need's evidence is what `jobs`, attach, the notifications and the palette's dialog show: a field left out
    # of it (a need keeps 8 lines of evidence) is one the operator is never asked, and a required one left out
    # makes the dialog's answer refused whatever they type.
    schema = {"type": "object", "required": ["f15"],
              "properties": {f"f{i}": {"type": "string", "description": "d" * 200} for i in range(16)}}
    from console.engine.questions import question_fields

    for s in server(job):
        run(job, s, [T(calls=[C(name="mcp__asker__ask", arguments={"schema": schema})]), T(error="end of script")],
            clock, tmp_path, answering(set=("f15=x",)))
    (need,) = needs(job)
    assert [name for name, _line in question_fields(need.evidence)] == [f"f{i}" for i in range(16)]
    assert result(job, "mcp__asker__ask").content == 'ELICITED: accept {"f15": "x"}'


def test_a_field_too_long_to_show_whole_is_refused_never_shown_cut(job, bwrap, clock, tmp_path) -> None:  # noqa: F811
    # 16 fields of 32 choices of 120 characters: the operator cannot be shown them (a need's evidence, a
    # notification stay bounded), so the form is refused whole, as a form not flat and bounded is.
    choices = [f"c{j:02d}" + "x" * 117 for j in range(32)]
    schema = {"type": "object", "properties": {f"f{i}": {"type": "string", "enum": choices} for i in range(16)}}
    for s in server(job):
        run(job, s, [T(calls=[C(name="mcp__asker__ask", arguments={"schema": schema})]), T(error="end of script")],
            clock, tmp_path, answering(cancel=True))
    assert needs(job) == []
    assert result(job, "mcp__asker__ask").content.startswith("REFUSED")
    (refused,) = elicited(job)
    assert "cannot be shown whole" in refused.refused
    assert sum(len(e.model_dump_json()) for e in events(job) if isinstance(e, ev.McpElicited)) < 2000


def test_kill_9_of_the_runner_while_a_question_waits(tmp_path, bwrap) -> None:  # noqa: F811
    """A real run killed -9 while its question waits: `jobs` does not say the dead run needs its operator, an
    answer to it is refused cleanly (no process runs it), and the resumed run reports the call interrupted (never
    asked again unseen) and waits on no dead question."""
    import json as _json
    import os
    import signal
    import subprocess
    import sys

    from tests.integration.test_crash_resume import start, wait_for
    from tests.integration.test_mcp_elicitation import headless_job

    job = headless_job(tmp_path, "elicitation_timeout = 30\n")  # still waiting when the kill comes, however slow
    log = job / ".console" / "events.jsonl"

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "console.cli", *argv], capture_output=True, text=True,
                              timeout=60)

    proc = start(job)
    try:
        wait_for(log, lambda e: isinstance(e, ev.NeedsOperator) and e.reason == "mcp_question")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    row = _json.loads(cli("jobs", "--json").stdout.splitlines()[0])
    assert row["status"] != "needs you", row
    dead = cli("answer", str(job), "--set", "name=Ada")
    assert dead.returncode == 1 and "Traceback" not in dead.stderr, dead
    assert "no process is running" in dead.stderr, dead
    # The resumed run: the question of the dead process is no need of it; the call is reported interrupted. Its
    # own question is given the least time (1 s) the operator's config may give, which it waits out.
    config = Path(os.environ["AGENT_CONSOLE_CONFIG"])
    config.write_text(config.read_text().replace("elicitation_timeout = 30\n", "elicitation_timeout = 1\n"))
    again = start(job)
    try:
        _out, err = again.communicate(timeout=120)
    finally:
        again.kill()
    assert "Traceback" not in err
    after = list(ev.read_events(log))
    first = next(e for e in after if isinstance(e, ev.ToolResult) and e.tool == "mcp__asker__ask")
    assert "interrupted by a crash of the harness" in first.content and "unknown" in first.content
    # The resumed run asked its own question (the agent called the tool again), which ended on its time.
    asked = [e for e in after if isinstance(e, ev.NeedsOperator) and e.reason == "mcp_question"]
    assert len(asked) == 2 and asked[0].message != asked[1].message
    assert [e.by for e in after if isinstance(e, ev.McpElicited)] == ["no answer within 1 s"]
    assert any(isinstance(e, ev.RunEnded) for e in after)
    row = _json.loads(cli("jobs", "--json").stdout.splitlines()[0])
    assert row["status"] != "needs you", row


def test_two_questions_at_once_lengthen_the_calls_time_by_the_time_they_waited_not_more(job, bwrap, clock,  # noqa: F811
                                                                                        tmp_path) -> None:
    # The call may take 2 s of its own. Its two questions wait together 3 s (the first answered after 3 s, the
    # second at once): the call's time grows by those 3 s, not by each question's wait added up (6 s). Its 2.5 s
    # of work after them is past its own 2 s: it times out.
    asked: list[str] = []

    def operator(sup: Supervisor, need: ev.NeedsOperator, logged: list[str]) -> None:
        answer = cmds.Answer(question=question_id(need), set=("name=x",))
        asked.append(question_id(need))
        if len(asked) == 1:
            threading.Timer(3.0, lambda: sup.submit(answer, source="cli")).start()
        else:
            sup.submit(answer, source="cli")

    for s in server(job, elicitation_timeout=30.0, timeout=2.0):
        run(job, s, [T(calls=[C(name="mcp__asker__pair", arguments={"seconds": 2.5})]), T(error="end of script")],
            clock, tmp_path, operator)
    got = result(job, "mcp__asker__pair")
    assert not got.ok and "no answer within 2 s" in got.content, got.content


def test_a_flood_of_questions_at_once_is_refused_past_the_cap_and_the_call_ends(job, bwrap, clock,  # noqa: F811
                                                                                tmp_path) -> None:
    # Twelve at once: the desk holds 8 (the others refused at once), the engine asks 2 (elicitation_per_call), the
    # rest are refused; the operator is asked twice, and the call ends with every answer said.
    for s in server(job, elicitation_timeout=30.0, timeout=20.0):
        run(job, s, [T(calls=[C(name="mcp__asker__pair", arguments={"n": 12})]), T(error="end of script")],
            clock, tmp_path, answering(cancel=True))
    lines = result(job, "mcp__asker__pair").content.splitlines()
    assert len(lines) == 12
    said = sorted(lines)
    assert said[:2] == ["ELICITED: cancel null"] * 2 and all(ln.startswith("REFUSED") for ln in said[2:])
    assert len(needs(job)) == 2 and len(cleared(job)) == 2
    assert len([e for e in elicited(job) if e.refused]) <= 8


def test_the_jobs_deadline_passing_while_a_question_waits_ends_it(job, bwrap, clock, tmp_path) -> None:  # noqa: F811
    # The question's time was bounded by the time left when its call began; the deadline passing while it waits
    # (here: the run's clock moved on two hours as it was asked) ends it at once, not at its own time's end.
    from console.engine.guardrails.config import GuardrailsConfig

    for s in server(job, elicitation_timeout=8.0):
        provider = Recording(clock=clock, script=[T(calls=[C(name="mcp__asker__ask")]), T(error="end of script")])
        sup = Supervisor(job, run_settings(guardrails=GuardrailsConfig(deadline="1h")), provider, clock=clock,
                         store=JobStore(tmp_path / "jobs.db"), mcp=[s])

        def on_event(e: object) -> None:
            if isinstance(e, ev.NeedsOperator) and e.reason == "mcp_question":
                clock.advance(2 * 3600)

        sup.subscribe(on_event)
        sup.run()
    (done,) = elicited(job)
    assert (done.action, done.by) == ("cancel", "the job's deadline passed")


def test_a_failure_while_a_question_waits_clears_its_need(job, bwrap, clock, tmp_path, monkeypatch) -> None:  # noqa: F811
    # The wait fails (the log cannot be written, a fault of the harness): the server is refused, and the need is
    # cleared with the question; else the run said "needs you" for a question no one asks any more, and refused
    # every later question as "the run waits for its operator about something else".
    from console.engine.tools import mcp_elicitation

    monkeypatch.setattr(mcp_elicitation, "LOOK", -1.0)  # time.sleep(-1) raises: the wait's first look fails
    for s in server(job):
        run(job, s, [T(calls=[C(name="mcp__asker__ask")]), T(error="end of script")], clock, tmp_path)
    assert result(job, "mcp__asker__ask").content.startswith("REFUSED")
    assert len(needs(job)) == 1 and len(cleared(job)) == 1


def test_two_answers_at_once_one_is_applied_the_other_refused_as_late(job, bwrap, clock, tmp_path) -> None:  # noqa: F811
    def operator(sup: Supervisor, need: ev.NeedsOperator, logged: list[str]) -> None:
        qid = question_id(need)
        sup.submit(cmds.Answer(question=qid, set=("name=first",)), source="cli")
        sup.submit(cmds.Answer(question=qid, set=("name=second",)), source="tui")

    for s in server(job):
        run(job, s, [T(calls=[C(name="mcp__asker__ask")]), T(error="end of script")], clock, tmp_path, operator)
    assert result(job, "mcp__asker__ask").content == 'ELICITED: accept {"name": "first"}'
    qid = elicited(job)[0].question
    said = [(e.status, e.source, e.detail) for e in events(job) if isinstance(e, ev.OperatorCommand)
            and e.status != "received"]
    assert said == [("applied", "cli", f"answered question {qid} of MCP server asker (name)"),
                    ("rejected", "tui", f"question {qid} was answered already (by operator (cli)): nothing "
                                        "answered")]


def test_a_flood_of_refused_forms_in_one_call_does_not_flood_the_log(job, bwrap, clock, tmp_path) -> None:  # noqa: F811
    # 300 forms no client asks, one after another in one call: each is refused, but the log says so a bounded
    # number of times (the cap of questions a call counts them all), never once each.
    for s in server(job, timeout=60.0):
        run(job, s, [T(calls=[C(name="mcp__asker__bad_flood", arguments={"n": 300})]), T(error="end of script")],
            clock, tmp_path)
    assert result(job, "mcp__asker__bad_flood").content == "300 REFUSED"
    refused = [e for e in elicited(job) if e.refused]
    assert 1 <= len(refused) <= 3, len(refused)
    assert needs(job) == []


def test_a_flood_of_sampling_requests_past_the_cap_does_not_flood_the_log(job, bwrap, clock, tmp_path) -> None:  # noqa: F811
    # The same flood through sampling (the sibling of questions): past sampling_per_call each request is refused,
    # and the log says so once.
    from tests.integration.test_mcp_sampling import run as run_sampling

    for s in server(job, sampling=True, sampling_per_call=2, timeout=60.0):
        run_sampling(job, s, [T(calls=[C(name="mcp__asker__sample_flood", arguments={"n": 300})]),
                              T(error="end of script")], clock, tmp_path)
    assert result(job, "mcp__asker__sample_flood").content == "298 REFUSED"
    sampled = [e for e in events(job) if isinstance(e, ev.McpSampled)]
    assert len([e for e in sampled if not e.refused]) == 2
    assert len([e for e in sampled if e.refused]) == 1, len(sampled)


def test_a_sampling_and_a_question_at_once_are_both_answered(job, bwrap, clock, tmp_path) -> None:  # noqa: F811
    from tests.integration.test_mcp_sampling import ANSWER, Answering

    for s in server(job, sampling=True):
        provider = Answering(clock=clock, script=[T(calls=[C(name="mcp__asker__sample_with_ask")]),
                                                  T(error="end of script")])
        sup = provider.sup = Supervisor(job, run_settings(), provider, clock=clock,
                                        store=JobStore(tmp_path / "jobs.db"), mcp=[s])

        def on_event(e: object, sup: Supervisor = sup) -> None:
            if isinstance(e, ev.NeedsOperator) and e.reason == "mcp_question":
                sup.submit(cmds.Answer(question=question_id(e), set=("name=Ada",)), source="cli")

        sup.subscribe(on_event)
        sup.run()
    got = result(job, "mcp__asker__sample_with_ask").content
    assert got == f'SAMPLED: {ANSWER}\nELICITED: accept {{"name": "Ada"}}'
    assert len(needs(job)) == 1 and len(cleared(job)) == 1


def test_an_answer_naming_the_question_before_is_refused_while_the_next_waits(job, bwrap, clock,  # noqa: F811
                                                                              tmp_path) -> None:
    asked: list[str] = []

    def operator(sup: Supervisor, need: ev.NeedsOperator, logged: list[str]) -> None:
        asked.append(question_id(need))
        if len(asked) == 2:  # the second waits: an answer to the first (sent again, late) is refused
            sup.submit(cmds.Answer(question=asked[0], set=("name=late",)), source="cli")
        sup.submit(cmds.Answer(question=asked[-1], set=(f"name=n{len(asked)}",)), source="cli")

    for s in server(job):
        run(job, s, [T(calls=[C(name="mcp__asker__twice", arguments={"n": 2})]), T(error="end of script")],
            clock, tmp_path, operator)
    assert result(job, "mcp__asker__twice").content == ('ELICITED: accept {"name": "n1"}\n'
                                                         'ELICITED: accept {"name": "n2"}')
    said = [(e.status, e.detail) for e in events(job) if isinstance(e, ev.OperatorCommand) and e.status != "received"]
    assert said[1] == ("rejected", f"question {asked[0]} is not the one waiting (question {asked[1]} of MCP server "
                                   "asker waits now): nothing answered")


def test_a_secret_value_is_answered_from_stdin_never_the_command_line(tmp_path, bwrap) -> None:  # noqa: F811
    """`agent-console answer RUN --secret NAME`: the value is read from standard input (argv is every local
    user's to read, with ps), reaches the server as typed, and no file of the run keeps it."""
    import subprocess
    import sys

    from tests.integration.test_crash_resume import start, wait_for
    from tests.integration.test_mcp_elicitation import headless_job

    job = headless_job(tmp_path)
    log = job / ".console" / "events.jsonl"
    secret = "Ada-" + "7f" * 16
    proc = start(job)
    try:
        wait_for(log, lambda e: isinstance(e, ev.NeedsOperator) and e.reason == "mcp_question")
        argv = [sys.executable, "-m", "console.cli", "answer", str(job), "--set", "count=3", "--secret", "name"]
        got = subprocess.run(argv, input=secret + "\n", capture_output=True, text=True, timeout=60)
        assert got.returncode == 0 and "answer: applied: answered question q" in got.stdout, got
        _out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert "Traceback" not in err and secret not in err
    (res,) = [e for e in ev.read_events(log) if isinstance(e, ev.ToolResult) and e.tool == "mcp__asker__ask"]
    assert res.content == f'ELICITED: accept {{"count": 3, "name": "{secret}"}}'
    # The server echoed it into the conversation (its own words); nothing else of the run holds it.
    for e in ev.read_events(log):
        if not isinstance(e, ev.ToolResult):
            assert secret not in e.model_dump_json(), type(e).__name__
    assert not list((job / ".console" / "inbox").glob("*"))
