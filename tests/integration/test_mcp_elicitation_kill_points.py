"""A kill -9 at every durable write of a run whose MCP call samples the run's model and then asks its operator a
question (elicitation), then a resume: the call is never sent twice, the sampling's tokens are counted once at most
(never twice, though the question wrote them to the log before the call's step committed), the call's tool_called is
in the log once (the resume does not log it again when the question wrote it), the question once at most and no view
is left waiting on it, and every event of the log is there once, in seq order.

The question's need must reach the log while the call waits (console.engine.tools.mcp_elicitation), so the call's
intent is journaled again, saying how much of its sampling the log holds, before the step's events are written
early: a resume counts those samplings without logging them again. The server is the engine's port in memory (as in
test_mcp_sampling_kill_points), which writes each call, sampling and answer it got to a file outside the job
folder; the operator answers each question as it is asked."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from console.engine import commands as cmds
from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.job import JobPaths
from console.engine.supervisor import Supervisor
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_elicitation import ElicitAsk
from console.engine.tools.mcp_sampling import SamplingAsk
from console.engine.tools.mcp_tools import McpCallResult, McpToolInfo
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedTurn as T
from console.view.state.fold import ConsoleState
from tests.conftest import run_settings
from tests.integration.test_kill_points import KILLED, replay_from
from tests.integration.test_mcp_kill_points import kill_at, points
from tests.integration.test_mcp_sampling_kill_points import Answering, _write
from tests.sweeps import Sweep
from tests.sweeps import points as sweep_points

TOOL = "mcp__quiz__go"
SCRIPT = [T(calls=[C(name="add_note", arguments={"text": "before"})]), T(calls=[C(name=TOOL, arguments={})]),
          T(calls=[C(name="add_note", arguments={"text": "after"})]), T(error="end of script")]
FORM = {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}


class Quiz:
    """A server that samples the run's model, then asks the operator, in each call; what it got goes to ``log``."""

    def __init__(self, log: Path) -> None:
        self.config = McpServerConfig(name="quiz", command=["quiz"], sampling=True, elicitation=True)
        self.tools = [McpToolInfo("go", "A quiz.", {"type": "object", "properties": {}})]
        self.log = log

    def call(self, tool: str, arguments: dict[str, Any], timeout: float, should_stop: Any = None, *,
             ask: Any = None, elicit: Any = None) -> McpCallResult:
        _write(self.log, "call")
        idea = ask(SamplingAsk((("user", "an idea?"),), 100))
        _write(self.log, "sampled")
        answer = elicit(ElicitAsk("Which city?", FORM), lambda: "")
        _write(self.log, f"answered {answer.action}")
        return McpCallResult(True, f"idea: {idea.text}; city: {answer.content.get('city')}")

    def close(self) -> None:
        pass


def run(root: Path, script: list[T], log: Path, asked: Callable[[], None] = lambda: None) -> Supervisor:
    """The run; ``asked`` is called when the question is asked (the probe notes how many writes came before)."""
    clock = FakeClock(step=0.001)
    sup = Supervisor(JobPaths(root), run_settings(), Answering(clock=clock, script=script), clock=clock,
                     mcp=[Quiz(log)])

    def operator(e: object) -> None:
        if isinstance(e, ev.NeedsOperator) and e.reason == "mcp_question":
            asked()
            sup.submit(cmds.Answer(set=("city=Lyon",)), source="cli")

    sup.subscribe(operator)
    sup.run()
    return sup


@pytest.mark.sweep
def test_a_kill_at_any_write_asks_once_counts_once_and_leaves_no_question_waiting(make_job, tmp_path: Path,
                                                                                 sweep: Sweep) -> None:
    base = make_job()
    probe = tmp_path / "probe"
    shutil.copytree(base.root, probe)
    seen: list[tuple[str, bool]] = []
    before: list[int] = []
    found = points(lambda: run(probe, SCRIPT, tmp_path / "probe.log", asked=lambda: before.append(len(seen))),
                   into=seen)
    assert (tmp_path / "probe.log").read_text() == "call\nsampled\nanswered accept\n"
    # A sample of the points (every one with --full-sweeps), and always the writes that put the question in the log
    # while the call waits (its intent, then the step's events): the kills this test is about.
    window = {before[0] + 1, before[0] + 2}
    cases = sorted({*sweep.select(sweep_points(found)), *(c for c in sweep_points(found) if c.n in window)})
    interrupted_after_the_question = 0
    for n, tear in [(c.n, c.tear) for c in cases]:
        name = f"k{n}{'t' if tear else ''}"
        root, log = tmp_path / name, tmp_path / f"{name}.log"
        shutil.copytree(base.root, root)
        assert kill_at(lambda root=root, log=log: run(root, SCRIPT, log), n, tear) == KILLED
        sup = run(root, replay_from(root, SCRIPT), log)
        got = log.read_text().splitlines() if log.exists() else []
        evs = list(ev.read_events(root / ".console" / "events.jsonl"))
        where = f"kill at {n} ({found[n - 1][0]}{', torn' if tear else ''})"
        assert got.count("call") <= 1, f"{where}: the server was asked {got.count('call')} times"
        usage = [e for e in evs if isinstance(e, ev.TokenUsage)]
        sampling = [e for e in usage if e.source == "mcp_sampling"]
        assert len(sampling) <= got.count("sampled"), f"{where}: {len(sampling)} samplings counted"
        ledger = sum(e.input_tokens + e.output_tokens for e in usage)
        assert sup.guardrails.budget_state.tokens_used == ledger, where
        questions = [e for e in evs if isinstance(e, ev.NeedsOperator)]
        assert len(questions) <= 1, f"{where}: the question is in the log {len(questions)} times"
        called = [e for e in evs if isinstance(e, ev.ToolCalled) and e.tool == TOOL]
        assert len(called) == 1, f"{where}: the call is in the log {len(called)} times"
        seqs = [e.seq for e in evs]
        assert seqs == sorted(set(seqs)), f"{where}: an event twice, or out of order"
        state = ConsoleState()
        for e in evs:
            state.apply(e)
        assert state.needs is None, f"{where}: the views still wait on {state.needs}"
        assert evs[-1].type == "run_ended", where
        (result,) = [e for e in evs if isinstance(e, ev.ToolResult) and e.tool == TOOL]
        if not result.ok and questions:  # the question reached the log, the call's step never committed
            assert "interrupted by a crash" in result.content, where
            assert sampling, f"{where}: the sampling the question logged is not in the ledger"
            interrupted_after_the_question += 1
    assert interrupted_after_the_question  # a kill during the question's wait was hit
