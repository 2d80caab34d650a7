"""A stuck alert carries the errors that cause it: for each distinct failing call of the pattern the detector saw, the
call and the first line of its error (a denial's reason, a command that could not run), on one line, bounded and
safe, in the need's evidence (the event, so the webhook, `logs`, `wait` and `jobs`). The agent's own feedback block
is unchanged: it has the results themselves.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from console.cli import main
from console.engine import events as ev
from console.engine.guardrails import GuardrailState
from console.engine.guardrails.escalation import EVIDENCE_CHARS, EVIDENCE_LINES, Escalation, EscalationState
from console.engine.guardrails.feedback import ToolCallSummary
from console.engine.guardrails.feedback_providers import CALL_ERROR_CHARS, call_error
from console.engine.job import JobPaths
from console.engine.job_config import load_job_config
from console.engine.messages import Message, ToolCall
from console.engine.supervisor import Supervisor
from console.engine.tools.limits import CommandWorld
from console.providers.scripted import ScriptedProvider
from tests.conftest import answer_needs, run_settings, time_limit
from tests.provenance_support import record
from tests.unit.test_escalation import enforcer

DATA = Path(__file__).resolve().parent.parent / "data" / "stuck_check"
NOT_RUN = "check could not run: 'python4' was not found on the sandbox's PATH (/usr/local/sbin:/usr/bin:/bin)."
DENIED = "Denied by the sequential policy: job_complete requires check to succeed first (not yet: check)"
DONE_ARGS = '{"confidence": 0.85, "deliverables": ["report.md"], "notes": "done"}'


def _alternate(enf, turns: range) -> None:
    """The trial's agent: job_complete (denied: check has not succeeded) and check (cannot run), turn after turn."""
    for turn in turns:
        if turn % 2:
            call = ToolCall(id=f"c{turn}", name="job_complete", arguments=DONE_ARGS)
            result = Message.tool(call, DENIED, ok=False)
        else:
            call = ToolCall(id=f"c{turn}", name="check", arguments="{}")
            result = Message.tool(call, NOT_RUN, ok=False)
        enf.record_turn(turn, [call], {call.id: result})
        enf.collect_feedback(turn, turns_without_progress=turn)


def test_an_alternation_of_two_failing_calls_asks_with_both_errors() -> None:
    enf, rec = enforcer()
    ask = None
    for start in range(1, 40, 6):
        _alternate(enf, range(start, start + 6))
        if (ask := enf.stuck_ask(idle_turns=start + 5)) is not None:
            break
    assert ask is not None and ask.reason == "stuck"
    assert ask.evidence[0].startswith("alternation: the last 6 calls alternate between job_complete(")
    done = 'job_complete({"confidence":0.85,"deliverables":["report.md"],"notes":"done"})'
    assert f"{done} failed: {DENIED}" in ask.evidence
    assert f"check({{}}) failed: {NOT_RUN}" in ask.evidence
    assert ask.evidence[-2] == "3 stuck nudges without progress (stuck_escalate_after = 3)"
    assert len(ask.evidence) <= EVIDENCE_LINES
    # The message (what `wait` prints, and `jobs`) names the last of them too.
    last = ask.message.split(" (last error: ", 1)[1].split("). Resume", 1)[0]
    assert last in ask.evidence and " failed: " in last
    # The agent's blocks say what they said before: the errors are the operator's evidence, not more feedback.
    blocks = [e.block for e in rec.events if isinstance(e, ev.Feedback)]
    assert blocks and not any("failed: " in b for b in blocks)
    # Recorded with the need: a run killed while it waits asks again with the same errors.
    enf.record_ask(ask)
    again, _ = enforcer()
    again.restore(GuardrailState.model_validate_json(enf.snapshot().model_dump_json()))
    assert again.pending() == ask


def test_a_repeated_failure_and_an_error_run_name_their_error_a_success_names_none() -> None:
    enf, _ = enforcer()
    for turn in range(1, 13):
        call = ToolCall(id=f"c{turn}", name="check", arguments="{}")
        enf.record_turn(turn, [call], {call.id: Message.tool(call, NOT_RUN, ok=False)})
        enf.collect_feedback(turn, turns_without_progress=0)
    ask = enf.stuck_ask(idle_turns=0)
    assert ask is not None
    assert ask.evidence.count(f"check({{}}) failed: {NOT_RUN}") == 1  # the same error once, however often
    ok, _ = enforcer()
    for turn in range(1, 13):
        call = ToolCall(id=f"c{turn}", name="read_file", arguments='{"path": "notes.md"}')
        ok.record_turn(turn, [call], {call.id: Message.tool(call, "the same notes", ok=True)})
        ok.collect_feedback(turn, turns_without_progress=0)
    ask = ok.stuck_ask(idle_turns=0)
    assert ask is not None and not any(" failed: " in line for line in ask.evidence)
    assert "last error" not in ask.message


def test_an_error_line_is_the_first_line_bounded_and_safe() -> None:
    def line(result: str, name: str = "check", args: str = "{}") -> str:
        return call_error(ToolCallSummary.of(name, args, False, result))

    # A command's bare status is followed by its output's first line (why it failed); other lines are cut.
    assert line("exit code 2\nmissing: incident 3\nsecond\n") == "check({}) failed: exit code 2: missing: incident 3"
    assert line("check could not run: 'x' does not exist.\nmore") == ("check({}) failed: check could not run: 'x' "
                                                                     "does not exist.")
    assert line("") == "check({}) failed: (no message)"
    hostile = line("\x1b]0;pwned\x07\x1b[2J" + "A" * 5000, name="bad\x1bname", args='{"p": "\\u202e"}')
    assert hostile.isprintable() and "\x1b" not in hostile and "\u202e" not in hostile
    assert len(hostile) <= CALL_ERROR_CHARS <= EVIDENCE_CHARS


def test_the_errors_kept_are_bounded_and_forgotten_with_the_nudges() -> None:
    esc = Escalation(3)
    for i in range(10):
        esc.nudged(f"error: t{i} failed", [f"t{i}() failed: e{i}", "x" * 1000])
    assert len(esc.state.errors) <= 3 and all(len(e) <= EVIDENCE_CHARS for e in esc.state.errors)
    evidence = esc.stuck_evidence(idle_turns=20)
    assert len(evidence) <= EVIDENCE_LINES  # nothing of it is cut when asked
    esc.ask("stuck", "stuck", evidence)
    assert esc.state.evidence == [x[:EVIDENCE_CHARS] for x in evidence]
    assert EscalationState.model_validate_json(esc.state.model_dump_json()) == esc.state
    assert esc.answered() == "stuck" and esc.state.errors == []
    esc.nudged("repeat", ["a() failed: b"])
    assert esc.progressed() and esc.state.errors == []
    # A state recorded before the errors were kept reads back as none kept.
    assert EscalationState.model_validate({"stuck_nudges": 2, "nudges": ["repeat"]}).errors == []


def test_the_trials_run_asks_with_the_commands_error(tmp_path, clock, capsys) -> None:
    # The trial's job (bad-16), its check a program the start lets through (a path in the job folder a command
    # might build) that never appears: every call fails, the agent alternates, the run asks. No sandbox is
    # needed for that failure, so this runs the same with and without bubblewrap.
    root = tmp_path / "job"
    shutil.copytree(DATA, root)
    paths = JobPaths(root)
    record(paths)  # the operator's run, as `run` starts it (logs shows no other)
    job = load_job_config(paths)
    sup = Supervisor(paths, run_settings(guardrails=job.guardrails, tools=tuple(job.tools), commands=CommandWorld()),
                     ScriptedProvider(clock=clock), clock=clock)
    asked = answer_needs(sup, ["stop"])
    with time_limit(120):
        sup.run()
    assert asked and asked[0].reason == "stuck"
    needed = next(e for e in ev.read_events(paths.events) if isinstance(e, ev.NeedsOperator))
    line = "check({}) failed: check could not run: './bin/check' does not exist."
    assert line in needed.evidence, needed.evidence
    assert any(x.startswith("job_complete(") and "failed: Denied by the sequential policy" in x
               for x in needed.evidence), needed.evidence
    # ...and `logs` prints it under the need.
    capsys.readouterr()
    assert main(["logs", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"    {line}" in out and "NEEDS YOU (stuck)" in out


def test_a_tool_failure_the_registry_worded_is_not_prefixed_twice() -> None:
    """A stuck evidence line read "read_file(...) failed: read_file failed: No such file": the registry's result
    already names the tool and "failed"; the line says it once."""
    said = "read_file failed: [Errno 2] No such file or directory: 'missing.md'. Check the path and try again."
    enf, _ = enforcer()
    for turn in range(1, 13):
        call = ToolCall(id=f"c{turn}", name="read_file", arguments='{"path": "missing.md"}')
        enf.record_turn(turn, [call], {call.id: Message.tool(call, said, ok=False)})
        enf.collect_feedback(turn, turns_without_progress=0)
    ask = enf.stuck_ask(idle_turns=0)
    assert ask is not None
    assert not any(x.count("failed") > 1 for x in ask.evidence), ask.evidence
    line = next(x for x in ask.evidence if x.startswith("read_file("))
    assert line == ('read_file({"path":"missing.md"}) failed: [Errno 2] No such file or directory: '
                    "'missing.md'. Check the path and try again.")
    assert "failed: read_file failed" not in ask.message
