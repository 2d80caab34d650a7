"""A kill -9 at every durable write of a run whose MCP call samples the run's model, then a resume: the sampling's
tokens are counted at most once (never twice), and the run's budget always counts what its ledger (the token_usage
events) says was spent.

A sampling happens inside a tool call whose intent is journaled before the server is asked; its usage is journaled
with that intent as soon as the model answered (console.engine.tools.mcp_sampling). A kill before the call's result
is recorded loses the call's step (its events and budget counts); the resume never sends the call again, and counts
the journaled usage then. The server is the engine's port in memory (as in test_mcp_kill_points), which asks for one
sampling per call and writes each call and each sampling it got answered to a file outside the job folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.job import JobPaths
from console.engine.model import Stop, TextDelta, Usage
from console.engine.supervisor import Supervisor
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_sampling import HARNESS_SYSTEM, SamplingAsk
from console.engine.tools.mcp_tools import McpCallResult, McpToolInfo
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedProvider
from console.providers.scripted import ScriptedTurn as T
from tests.conftest import run_settings
from tests.integration.test_kill_points import KILLED, replay_from
from tests.integration.test_mcp_kill_points import kill_at, points

TOOL = "mcp__muse__idea"
SCRIPT = [T(calls=[C(name="add_note", arguments={"text": "before"})]), T(calls=[C(name=TOOL, arguments={})]),
          T(calls=[C(name="add_note", arguments={"text": "after"})]), T(error="end of script")]


def _write(log: Path, line: str) -> None:
    with open(log, "a") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())


class Muse:
    """A server that samples the run's model once in each call, and writes what it got to ``log``."""

    def __init__(self, log: Path) -> None:
        self.config = McpServerConfig(name="muse", command=["muse"], sampling=True)
        self.tools = [McpToolInfo("idea", "An idea.", {"type": "object", "properties": {}})]
        self.log = log

    def call(self, tool: str, arguments: dict[str, Any], timeout: float, should_stop: Any = None, *,
             ask: Any = None) -> McpCallResult:
        _write(self.log, "call")
        answer = ask(SamplingAsk((("user", "an idea?"),), 100))
        _write(self.log, "sampled")
        return McpCallResult(True, f"idea: {answer.text}")

    def close(self) -> None:
        pass


class Answering(ScriptedProvider):
    """A sampling request is answered with 40 tokens in and 5 out, outside the script."""

    def stream(self, request: Any) -> Any:
        if request.system.startswith(HARNESS_SYSTEM):
            return iter([TextDelta("a kite"), Usage(40, 5), Stop("end_turn")])
        return super().stream(request)


def run(root: Path, script: list[T], log: Path) -> Supervisor:
    clock = FakeClock(step=0.001)
    sup = Supervisor(JobPaths(root), run_settings(), Answering(clock=clock, script=script), clock=clock,
                     mcp=[Muse(log)])
    sup.run()
    return sup


def test_a_kill_at_any_write_counts_a_sampling_once_at_most_and_the_budget_as_the_ledger(make_job,
                                                                                         tmp_path: Path) -> None:
    base = make_job()
    probe = tmp_path / "probe"
    shutil.copytree(base.root, probe)
    found = points(lambda: run(probe, SCRIPT, tmp_path / "probe.log"))
    assert (tmp_path / "probe.log").read_text() == "call\nsampled\n"
    cases = [(n, False) for n in range(1, len(found) + 1)] + [(n, True) for n, (_, t) in enumerate(found, 1) if t]
    counted_on_resume = 0
    for n, tear in cases:
        name = f"k{n}{'t' if tear else ''}"
        root, log = tmp_path / name, tmp_path / f"{name}.log"
        shutil.copytree(base.root, root)
        assert kill_at(lambda root=root, log=log: run(root, SCRIPT, log), n, tear) == KILLED
        sup = run(root, replay_from(root, SCRIPT), log)
        got = log.read_text().splitlines() if log.exists() else []
        evs = list(ev.read_events(root / ".console" / "events.jsonl"))
        usage = [e for e in evs if isinstance(e, ev.TokenUsage)]
        sampling = [e for e in usage if e.source == "mcp_sampling"]
        where = f"kill at {n} ({found[n - 1][0]}{', torn' if tear else ''})"
        assert got.count("call") <= 1, f"{where}: the server was asked {got.count('call')} times"
        assert len(sampling) <= got.count("sampled"), f"{where}: {len(sampling)} samplings counted"
        # What the budget counted is what the ledger says was spent: no sampling counted in one and not the other.
        ledger = sum(e.input_tokens + e.output_tokens for e in usage)
        assert sup.guardrails.budget_state.tokens_used == ledger, where
        (result,) = [e for e in evs if isinstance(e, ev.ToolResult) and e.tool == TOOL]
        if not result.ok and sampling:  # interrupted after its sampling: the resume counted the journaled usage
            assert "interrupted by a crash" in result.content
            counted_on_resume += 1
    assert counted_on_resume  # the journaled usage was hit
