"""Escalation in whole runs: when nudging does not help, the run pauses and asks its operator, with the evidence,
instead of nudging for hours, ending quietly, or retrying a dead endpoint for ten minutes.

In process, with the scripted replay (or the real OpenAI SDK against a port where nothing listens) on a FakeClock,
and an operator who answers each ``needs_operator`` through the control channel; then as an operator meets it, with
``agent-console run --headless --script`` and its commands from another shell, a kill -9 while the run waits
included (it asks again when resumed, nothing lost, nothing done twice).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.guardrails import GuardrailsConfig
from console.engine.job import JobPaths
from console.engine.loop import ShutdownReason
from console.engine.messages import ModelRequest
from console.engine.model import StreamEvent
from console.engine.model_call import ProviderUnreachable
from console.engine.supervisor import Supervisor
from console.providers.openai_provider import OpenAIProvider
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedProvider
from console.providers.scripted import ScriptedTurn as T
from tests.conftest import answer_needs, run_settings, time_limit


class Recording(ScriptedProvider):
    """The scripted replay, keeping every request (what the agent saw)."""

    def __init__(self, clock: FakeClock, script: list[T]) -> None:
        super().__init__(clock=clock, script=script)
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        self.requests.append(request)
        yield from super().stream(request)


def events(paths: JobPaths) -> list[ev.EventBase]:
    return list(ev.read_events(paths.events))


def reread() -> T:
    return T(text="Reading it once more.", calls=[C(name="read_file", arguments={"path": "instructions.md"})])


def run(paths: JobPaths, script: list[T], clock: FakeClock, *answers: str, **settings: object):
    provider = Recording(clock, script)
    sup = Supervisor(paths, run_settings(**settings), provider, clock=clock)
    asked = answer_needs(sup, answers)
    with time_limit(60):  # a run left waiting for an operator who never comes must fail, not hang the suite
        result = sup.run()
    return result, asked, provider


# -- stuck ----------------------------------------------------------------------------------------------------------
def test_a_looping_agent_is_asked_about_after_three_nudges_resume_starts_over_stop_ends(make_job, clock) -> None:
    paths = make_job()
    result, asked, provider = run(paths, [reread() for _ in range(60)], clock, "resume")
    evs = events(paths)
    # The detector nudged at the 4th, 8th and 12th repeat; the third nudge asked, and the run held after turn 12.
    assert [a.reason for a in asked] == ["stuck", "stuck"] and all(a.paused for a in asked)
    first = asked[0]
    assert first.message.startswith("the agent looks stuck: 3 nudges without progress did not help")
    assert first.evidence[0].startswith('repeat: read_file({"path":"instructions.md"}) returned the same result 4 ')
    assert "returned the same result 12 times in a row" in first.evidence[2]
    assert first.evidence[-2:] == ["3 stuck nudges without progress (stuck_escalate_after = 3)",
                                   "no todo completed for 12 turns"]
    turn_of = {e.seq: e.turn for e in evs if isinstance(e, ev.AssistantMessage)}
    asked_after = [max(t for s, t in turn_of.items() if s < a.seq) for a in asked]
    # The operator's resume started the count over: three more nudges (12 more repeats), then it asked again.
    assert asked_after == [12, 24]
    assert len(provider.requests) == 24  # the stop came while it waited: turn 25 was never asked
    told = [m for m in provider.requests[12].messages if m.meta.get("kind") == "operator_notice"]
    assert len(told) == 1 and "Your operator saw that the run was stuck" in told[0].content
    cleared = [e for e in evs if isinstance(e, ev.NeedsOperatorCleared)]
    assert [(c.reason, c.by) for c in cleared] == [("stuck", "operator's resume"), ("stuck", "operator's stop")]
    assert result.reason is ShutdownReason.USER_SHUTDOWN and "looked stuck" in result.detail


def test_progress_between_nudges_never_asks(make_job, clock) -> None:
    paths = make_job()
    done = T(calls=[C(name="generate_workspace_summary"), C(name="todo_complete")])  # the task's work, then its tick
    script = [*[reread() for _ in range(8)], done, *[reread() for _ in range(8)], T(error="end of script")]
    result, asked, _ = run(paths, script, clock)
    assert not asked and result.reason is ShutdownReason.ERROR and "end of script" in result.detail
    assert len([e for e in events(paths) if isinstance(e, ev.StuckDetected)]) == 4  # nudged, never escalated


def test_stuck_escalate_after_zero_keeps_the_old_nudges_only(make_job, clock) -> None:
    paths = make_job()
    result, asked, _ = run(paths, [*[reread() for _ in range(20)], T(error="end of script")], clock,
                           guardrails=GuardrailsConfig(stuck_escalate_after=0))
    assert not asked and result.reason is ShutdownReason.ERROR


# -- refused stops --------------------------------------------------------------------------------------------------
def test_refused_stops_past_the_cap_ask_resume_gives_the_full_count_again(make_job, clock) -> None:
    paths = make_job()
    result, asked, provider = run(paths, [T(text="I think I'm done.") for _ in range(20)], clock, "resume",
                                  guardrails=GuardrailsConfig(max_completion_blocks=2))
    evs = events(paths)
    blocked = [e.blocks for e in evs if isinstance(e, ev.CompletionBlocked)]
    assert blocked == [1, 2, 3, 1, 2, 3]  # resumed: the full max_completion_blocks again
    assert [a.reason for a in asked] == ["completion_refused", "completion_refused"]
    assert asked[0].evidence[0].startswith("protocol: ")
    assert asked[0].evidence[-1].endswith("(max_completion_blocks = 2)")
    told = [m for m in provider.requests[3].messages if m.meta.get("kind") == "operator_notice"]
    assert len(told) == 1 and "reviewed the refused stops" in told[0].content
    last_refusal = [m for m in provider.requests[3].messages if m.meta.get("kind") == "completion_blocked"][-1]
    assert "waits for your operator" in last_refusal.content  # the agent was told, then the operator
    assert result.reason is ShutdownReason.COMPLETION_BLOCKED and "tried to stop 3 times" in result.detail


# -- provider down --------------------------------------------------------------------------------------------------
def closed_port() -> int:
    """A loopback port where nothing listens: connecting to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_refused_connection_asks_within_30_s_resume_tries_again_stop_ends_resumably(make_job) -> None:
    paths = make_job()
    clock = FakeClock(step=0.001)
    provider = OpenAIProvider("gpt-test", api_key="sk-test", base_url=f"http://127.0.0.1:{closed_port()}/v1",
                              timeout=5, max_retries=0)
    sup = Supervisor(paths, run_settings(), provider, clock=clock, seed=5)
    asked = answer_needs(sup, ["resume"])
    started = time.monotonic()
    with time_limit(60):
        result = sup.run()
    evs = events(paths)
    assert [a.reason for a in asked] == ["provider_down", "provider_down"]
    assert "connection refused" in asked[0].message and "connection refused" in asked[0].evidence[0]
    assert "unreachable_wait" in asked[0].evidence[-1]
    # Within ~30 s of the run's clock from the first refusal, each time (the waits are the fake clock's): first the
    # session's readiness check (seed 004's check_ollama_ready), before any turn; then turn 1, after the resume.
    turn1 = next(e for e in evs if isinstance(e, ev.TurnStarted))
    assert asked[0].seq < turn1.seq < asked[1].seq
    for need in asked:
        before = [e for e in evs if isinstance(e, ev.TurnStarted | ev.SessionStarted) and e.seq < need.seq][-1]
        assert 0 < (need.ts - before.ts).total_seconds() <= 31
    retries = [e for e in evs if isinstance(e, ev.ModelRetry)]
    assert retries and {r.max_wait_s for r in retries} == {30} and {r.cause for r in retries} == {"connection refused"}
    assert all(r.turn == 1 for r in retries) and turn1.turn == 1  # the same turn, asked again after the resume
    assert result.reason is ShutdownReason.MODEL_UNAVAILABLE and "connection refused" in result.detail
    assert "unreachable_wait" in result.detail
    assert not [e for e in evs if isinstance(e, ev.AssistantMessage)]
    assert time.monotonic() - started < 30  # real time: nothing slept for real


class DownThenBack(ScriptedProvider):
    """The scripted agent behind an endpoint that refuses its first ``down`` requests (the server is off)."""

    def __init__(self, down: int, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.down = down
        self.requests = 0

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        self.requests += 1
        if self.requests <= self.down:
            raise ProviderUnreachable("openai: cannot reach http://127.0.0.1:8080 (connection refused)",
                                      "connection refused")
        yield from super().stream(request)


def test_a_provider_back_in_the_morning_finds_the_run_waiting_and_it_finishes(make_job, clock) -> None:
    paths = make_job("quickstart")
    provider = DownThenBack(down=1000, clock=clock)
    sup = Supervisor(paths, run_settings(), provider, clock=clock, seed=2)

    def answer(e: ev.EventBase) -> None:
        if isinstance(e, ev.NeedsOperator):
            provider.down = 0  # the server is back by the time the operator reads the notification
            sup.resume()

    sup.subscribe(answer)
    with time_limit(60):
        result = sup.run()
    assert result.ok, result.detail
    evs = events(paths)
    (need,) = [e for e in evs if isinstance(e, ev.NeedsOperator)]
    assert need.reason == "provider_down"
    replies = [e.turn for e in evs if isinstance(e, ev.AssistantMessage)]
    assert replies == list(range(1, len(replies) + 1))  # turn 1 asked again under its number, nothing twice


def test_overload_keeps_its_backoff_bounded_by_elapsed_time_then_asks(make_job, clock) -> None:
    from console.engine.model import ProviderError

    class Overloaded(ScriptedProvider):
        """Each attempt takes 50 s of the run's clock, then says 529."""

        def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
            clock.advance(50)
            raise ProviderError("anthropic: overloaded (529)", kind="transient", cause="overloaded")
            yield  # a generator

    paths = make_job()
    sup = Supervisor(paths, run_settings(retry_total_wait=300), Overloaded(clock=clock), clock=clock, seed=4)
    asked = answer_needs(sup)
    with time_limit(60):
        result = sup.run()
    evs = events(paths)
    retries = [e for e in evs if isinstance(e, ev.ModelRetry)]
    # Counting only the waits, 50 s attempts would have gone on for 300 s of waits (well past 10 minutes); the
    # elapsed bound stops them within 300 s of the first failure, plus the last attempt.
    assert retries and all(r.max_wait_s == 300 for r in retries) and retries[-1].waited_s <= 300
    turn = next(e for e in evs if isinstance(e, ev.TurnStarted))
    (need,) = asked
    assert need.reason == "provider_down" and "retry_total_wait" in need.evidence[-1]
    assert (need.ts - turn.ts).total_seconds() <= 300 + 50 + 50 + 1
    assert result.reason is ShutdownReason.MODEL_UNAVAILABLE


# -- as an operator meets it: the CLI, the inbox, a kill -9 while the run waits --------------------------------------
def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ.copy())


def start(paths: JobPaths, script: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "console.cli", "run", str(paths.root), "--headless", "--in-place",
                             "--script", str(script), "--speed", "0", "--max-turns", "100000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())


def logged(paths: JobPaths) -> list[dict]:
    if not paths.events.exists():
        return []
    # The run is appending as this reads: a last line without its newline is still being written (read next time).
    text = paths.events.read_text()
    whole = text[:text.rfind("\n") + 1]
    return [json.loads(line) for line in whole.splitlines() if line.strip()]


def wait_for(paths: JobPaths, proc: subprocess.Popen, what: str, count: int) -> list[dict]:
    """The log once it holds ``count`` events of type ``what`` (a hang guard, not a speed requirement)."""
    deadline = time.monotonic() + 90
    while True:
        evs = logged(paths)
        if sum(1 for e in evs if e["type"] == what) >= count:
            return evs
        assert time.monotonic() < deadline, f"no {count} x {what}: {[e['type'] for e in evs][-20:]}"
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.05)


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def kill9(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)


def test_a_looping_run_asks_a_kill_while_it_waits_asks_again_resume_goes_on_stop_ends(make_job,
                                                                                      tmp_path: Path) -> None:
    paths = make_job(instructions="# Read the notes\n\nRead instructions.md again and again.\n")
    script = tmp_path / "turns.jsonl"
    turn = {"text": "Reading it once more.", "calls": [{"name": "read_file", "arguments": {"path": "instructions.md"}}]}
    script.write_text("\n".join(json.dumps(turn) for _ in range(500)) + "\n")
    proc = start(paths, script)
    try:
        evs = wait_for(paths, proc, "needs_operator", 1)
        need = next(e for e in evs if e["type"] == "needs_operator")
        assert need["reason"] == "stuck" and need["paused"] is True
        time.sleep(0.3)
        assert sum(1 for e in logged(paths) if e["type"] == "assistant_message") == 12  # it holds
        kill9(proc)  # while it waits: the need was recorded with the step that asked it
        proc = start(paths, script)
        evs = wait_for(paths, proc, "needs_operator", 2)
        again = [e for e in evs if e["type"] == "needs_operator"][-1]
        assert (again["reason"], again["evidence"]) == ("stuck", need["evidence"])  # asked again, same evidence
        assert sum(1 for e in evs if e["type"] == "assistant_message") == 12  # before any new turn
        resumed = cli("resume", paths.run_id)  # from another shell, through the inbox
        assert resumed.returncode == 0, resumed.stderr
        evs = wait_for(paths, proc, "needs_operator", 3)
        assert [e["by"] for e in evs if e["type"] == "needs_operator_cleared"] == ["operator's resume"]
        # The count started over: 12 more repeats before the next ask, not one.
        assert sum(1 for e in evs if e["type"] == "assistant_message") == 24
        stop = cli("stop", paths.run_id, "--wait", "60")
        assert stop.returncode == 0 and stop.stdout.startswith("stop: applied"), (stop.stdout, stop.stderr)
        code, _out, err = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert code == 3 and "Traceback" not in err, err
    evs = logged(paths)
    (ended,) = [e for e in evs if e["type"] == "run_ended"]  # the killed process never got to say it ended
    assert ended["reason"] == "user_shutdown"
    replies = [e["turn"] for e in evs if e["type"] == "assistant_message"]
    assert replies == list(range(1, 25))  # nothing lost, nothing done twice


def test_a_spend_limit_asks_a_kill_while_it_waits_loses_no_grant_and_stop_ends_out_of_budget(make_job,
                                                                                            tmp_path: Path) -> None:
    paths = make_job(files={"job.toml": "[guardrails]\nbudget_tokens = 3000\n"})
    script = tmp_path / "turns.jsonl"
    turn = {"text": "Looking around.", "calls": [{"name": "list_files", "arguments": {}}]}
    script.write_text("\n".join(json.dumps(turn) for _ in range(200)) + "\n")
    proc = start(paths, script)
    try:
        evs = wait_for(paths, proc, "needs_operator", 1)
        assert [e["reason"] for e in evs if e["type"] == "needs_operator"] == ["budget"]
        kill9(proc)
        proc = start(paths, script)
        evs = wait_for(paths, proc, "needs_operator", 2)  # the limit is still reached: asked again
        replies = sum(1 for e in evs if e["type"] == "assistant_message")
        assert cli("resume", paths.run_id).returncode == 0
        evs = wait_for(paths, proc, "budget_raised", 1)
        (raised,) = [e for e in evs if e["type"] == "budget_raised"]
        assert (raised["limit"], raised["grants"]) == (6000, 1)
        evs = wait_for(paths, proc, "needs_operator", 3)  # the slice is spent too
        assert sum(1 for e in evs if e["type"] == "assistant_message") > replies
        assert cli("stop", paths.run_id, "--wait", "60").returncode == 0
        code, _out, err = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert code == 1 and "incomplete (out of budget)" in err and "Traceback" not in err, err
    evs = logged(paths)
    assert [e["budget"] for e in evs if e["type"] == "budget_exhausted"] == ["tokens", "tokens"]  # once per limit
    replies = [e["turn"] for e in evs if e["type"] == "assistant_message"]
    assert replies == list(range(1, len(replies) + 1))
    state = json.loads((paths.state / "guardrails.json").read_text())
    assert state["budget"]["token_grants"] == 1  # the grant survived: kept in the guardrails' recorded state
