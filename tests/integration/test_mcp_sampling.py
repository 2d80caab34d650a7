"""A server's sampling requests (sampling/createMessage), answered by the run's own model only when the operator's
config enables them for that server (console.engine.tools.mcp_sampling), against a server of ours
(tests/mcp_servers/sampler.py) started confined, through whole runs with the scripted model.

The model that answers the samplings is the scripted agent with one more trick (:class:`Answering`): a request whose
system prompt is the harness's sampling one is answered with fixed text and usage, so the agent's script is not
consumed by the server's requests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.guardrails import GuardrailsConfig
from console.engine.job import JobPaths
from console.engine.model import Stop, TextDelta, Usage
from console.engine.store import JobStore
from console.engine.supervisor import Supervisor
from console.engine.tools.confine import Bwrap
from console.engine.tools.limits import CommandWorld
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_sampling import HARNESS_SYSTEM
from console.mcp.client import StdioServer, start_servers
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedTurn as T
from console.view import present
from tests.commands_support import PY_HOME, bwrap  # noqa: F401  (the fixture)
from tests.conftest import Recording, answer_needs, run_settings

VENV = os.path.realpath(sys.prefix)
SERVERS = os.path.realpath(Path(__file__).parent.parent / "mcp_servers")
WORLD = CommandWorld(read_only=(PY_HOME, VENV, SERVERS))
ARGV = [os.path.join(VENV, "bin", "python"), os.path.join(SERVERS, "sampler.py")]
OFF = McpServerConfig(name="sampler", command=ARGV)
ON = McpServerConfig(name="sampler", command=ARGV, sampling=True, sampling_max_tokens=64, sampling_per_call=3)
ESC = "\x1b]52;c;aGFjaw==\x07\x1b[2J[bold red]x[/]"
ANSWER = "forty-two"


class Answering(Recording):
    """The scripted agent; a sampling request (the harness's sampling system prompt) is answered with ANSWER, 40
    tokens in and 5 out, without taking a turn of the script."""

    sup: Supervisor

    def stream(self, request: Any) -> Any:
        if request.system.startswith(HARNESS_SYSTEM):
            self.requests.append(request)
            return iter([TextDelta(ANSWER), Usage(40, 5), Stop("end_turn")])
        return super().stream(request)


@pytest.fixture
def job(make_job) -> JobPaths:  # type: ignore[no-untyped-def]
    return make_job()


def started(job: JobPaths, config: McpServerConfig, world: CommandWorld = WORLD) -> Iterator[StdioServer]:
    """``config``'s server started confined in ``job``'s folder (closed after), started without a problem."""
    servers, problems = start_servers([config], str(job.root), world)
    assert problems == []
    try:
        yield servers[0]
    finally:
        servers[0].close()


@pytest.fixture
def on(job: JobPaths, bwrap: Bwrap) -> Iterator[StdioServer]:  # noqa: F811
    yield from started(job, ON)


@pytest.fixture
def off(job: JobPaths, bwrap: Bwrap) -> Iterator[StdioServer]:  # noqa: F811
    yield from started(job, OFF)


def run(job: JobPaths, server: Any, script: list[T], clock: FakeClock, tmp_path: Path,
        **settings: Any) -> Answering:
    provider = Answering(clock=clock, script=script)
    provider.sup = Supervisor(job, run_settings(**settings), provider, clock=clock,
                              store=JobStore(tmp_path / "jobs.db"), mcp=[server])
    answer_needs(provider.sup)  # a spent budget asks the operator: stopped
    provider.sup.run()
    return provider


def events(job: JobPaths) -> list[ev.EventBase]:
    return list(ev.read_events(job.events))


def result(job: JobPaths, tool: str) -> ev.ToolResult:
    (got,) = [e for e in events(job) if isinstance(e, ev.ToolResult) and e.tool == tool]
    return got


def sampled(job: JobPaths) -> list[ev.McpSampled]:
    return [e for e in events(job) if isinstance(e, ev.McpSampled)]


def sampling_usage(job: JobPaths) -> list[ev.TokenUsage]:
    return [e for e in events(job) if isinstance(e, ev.TokenUsage) and e.source == "mcp_sampling"]


def test_off_by_default_the_capability_is_not_advertised_and_a_request_is_refused(job, off, clock,
                                                                                  tmp_path) -> None:
    script = [T(calls=[C(name="mcp__sampler__caps")]), T(calls=[C(name="mcp__sampler__ask")]),
              T(error="end of script")]
    provider = run(job, off, script, clock, tmp_path)
    assert result(job, "mcp__sampler__caps").content == "SAMPLING=False"
    got = result(job, "mcp__sampler__ask").content
    assert got.startswith("REFUSED") and "SAMPLED" not in got
    assert not any(r.system.startswith(HARNESS_SYSTEM) for r in provider.requests)  # the model was never asked
    assert sampled(job) == [] and sampling_usage(job) == []


def test_enabled_the_runs_model_answers_and_its_tokens_are_the_runs_spend(job, on, clock, tmp_path) -> None:
    script = [T(calls=[C(name="mcp__sampler__caps")]),
              T(calls=[C(name="mcp__sampler__ask", arguments={"text": "what is 6 x 7? " + ESC, "max_tokens": 5000,
                                                               "system": "be brief", "context": "allServers"})]),
              T(error="end of script")]
    provider = run(job, on, script, clock, tmp_path,
                   guardrails=GuardrailsConfig.model_validate({"budget_tokens": 1_000_000}))
    assert result(job, "mcp__sampler__caps").content == "SAMPLING=True"
    assert result(job, "mcp__sampler__ask").content == f"SAMPLED(scripted-agent,endTurn): {ANSWER}"
    (asked,) = [r for r in provider.requests if r.system.startswith(HARNESS_SYSTEM)]
    # The server's words, and nothing of the run: no tools, no todo list, no conversation of the agent's.
    assert [m.content for m in asked.messages] == ["what is 6 x 7? " + ESC]
    assert asked.tools == [] and asked.protected == "" and asked.system.endswith("be brief")
    assert asked.max_output_tokens == 64  # the server asked 5000: the operator's sampling_max_tokens holds
    (said,) = sampled(job)
    assert (said.server, said.tool, said.refused, said.input_tokens, said.output_tokens, said.max_tokens) == (
        "sampler", "ask", "", 40, 5, 64)
    assert "includeContext 'allServers' not honoured" in said.note
    (usage,) = sampling_usage(job)
    assert (usage.input_tokens, usage.output_tokens, usage.mcp_server) == (40, 5, "sampler")
    call = next(e for e in events(job) if isinstance(e, ev.ToolCalled) and e.tool == "mcp__sampler__ask")
    assert usage.call_id == said.call_id == call.call_id
    # The budget counts it: what the guardrails say is used is every token_usage's tokens, the sampling's with them.
    every = sum(e.input_tokens + e.output_tokens for e in events(job) if isinstance(e, ev.TokenUsage))
    assert provider.sup.guardrails.budget_state.tokens_used == every and every > 45
    # The operator reads it (escaped: nothing of the server's text is in the event, and the line is safe).
    line = present.describe(said)
    assert line is not None and "sampled the run's model during ask: 40 in, 5 out (at most 64)" in line.text
    assert "\x1b" not in job.events.read_text()


def test_a_flood_is_answered_up_to_the_cap_of_a_call(job, on, clock, tmp_path) -> None:
    script = [T(calls=[C(name="mcp__sampler__flood", arguments={"n": 20})]), T(error="end of script")]
    provider = run(job, on, script, clock, tmp_path)
    lines = result(job, "mcp__sampler__flood").content.splitlines()
    assert lines[:3] == [f"SAMPLED(scripted-agent,endTurn): {ANSWER}"] * 3
    assert len(lines) == 20 and all("at most 3 sampling requests are answered during one tool call" in x
                                    for x in lines[3:])
    assert sum(r.system.startswith(HARNESS_SYSTEM) for r in provider.requests) == 3
    assert len(sampling_usage(job)) == 3
    # The refusals past the cap are logged once (a flood of them writes one event, not one each).
    assert [bool(e.refused) for e in sampled(job)] == [False] * 3 + [True]


def test_a_spent_budget_refuses_a_sampling_before_the_model_is_asked(job, on, clock, tmp_path) -> None:
    # 40 + 5 tokens a sampling against a budget of 40 (the agent's turn is counted at its end): the first is
    # answered, the second finds the budget spent.
    script = [T(calls=[C(name="mcp__sampler__flood", arguments={"n": 3})]), T(error="end of script")]
    provider = run(job, on, script, clock, tmp_path,
                   guardrails=GuardrailsConfig.model_validate({"budget_tokens": 40}))
    lines = result(job, "mcp__sampler__flood").content.splitlines()
    assert lines[0].startswith("SAMPLED")
    assert all("the run's budget is spent (token budget spent" in x for x in lines[1:])
    assert sum(r.system.startswith(HARNESS_SYSTEM) for r in provider.requests) == 1


def test_an_image_in_a_request_refuses_it(job, on, clock, tmp_path) -> None:
    provider = run(job, on, [T(calls=[C(name="mcp__sampler__image")]), T(error="end of script")], clock, tmp_path)
    got = result(job, "mcp__sampler__image").content
    assert got.startswith("REFUSED") and "its messages hold image content: only text is answered" in got
    assert not any(r.system.startswith(HARNESS_SYSTEM) for r in provider.requests)
    (said,) = sampled(job)
    assert said.refused == "its messages hold image content: only text is answered"


class Stopping(Answering):
    """The operator stops the run (twice: the stop that ends a call in flight) while the model is asked to sample."""

    def stream(self, request: Any) -> Any:
        if request.system.startswith(HARNESS_SYSTEM):
            self.sup.command("stop")
            self.sup.command("stop")
        return super().stream(request)


def test_the_operators_stop_ends_a_sampling_and_its_call(job, on, clock, tmp_path) -> None:
    provider = Stopping(clock=clock, script=[T(calls=[C(name="mcp__sampler__ask")]), T(error="end of script")])
    provider.sup = Supervisor(job, run_settings(), provider, clock=clock, store=JobStore(tmp_path / "jobs.db"),
                              mcp=[on])
    provider.sup.run()
    got = result(job, "mcp__sampler__ask")
    assert not got.ok and "stopped by the operator (the call was cancelled)" in got.content
    (said,) = sampled(job)
    assert said.refused == "the run is stopping: no sampling"
    assert sampling_usage(job) == []
    # The server serves on: between calls, a request of its is refused (no call to charge it to).
    assert "sampling is answered only during a tool call" in on.call("ask", {}, 30).text
    assert [n.why for n in on.news() if n.state is None] == [
        "it asked for sampling between two of its tool calls (there is no call to charge it to), which this client "
        "refuses (answered with an error; said once)"]


@pytest.mark.parametrize("enabled", [False, True])
def test_an_http_servers_sampling_is_answered_only_when_enabled(job, clock, tmp_path, enabled: bool) -> None:
    from console.mcp.http import HttpServer
    from tests.mcp_servers.http_server import serve

    with serve(stateful=True) as srv:
        config = McpServerConfig(name="web", url=srv.mcp, sampling=enabled)
        server = HttpServer(config, [f"{srv.base}/"], {})
        try:
            run(job, server, [T(calls=[C(name="mcp__web__muse")]), T(error="end of script")], clock, tmp_path)
        finally:
            server.close()
    got = result(job, "mcp__web__muse").content
    assert got == (f"SAMPLED: {ANSWER}" if enabled else got) and got.startswith("SAMPLED" if enabled else "REFUSED")
    assert len(sampling_usage(job)) == enabled


class Endless(Answering):
    """A model that never ends its answer to a sampling (it streams a word every 50 ms, for ever)."""

    def stream(self, request: Any) -> Any:
        if not request.system.startswith(HARNESS_SYSTEM):
            return super().stream(request)

        def words() -> Iterator[Any]:
            import time

            while True:
                time.sleep(0.05)
                yield TextDelta("word ")

        return words()


def test_a_sampling_that_never_ends_is_hung_up_on_at_the_calls_timeout(job, bwrap, clock, tmp_path) -> None:  # noqa: F811
    servers, _ = start_servers([ON.model_copy(update={"timeout": 2.0})], str(job.root), WORLD)
    try:
        provider = Endless(clock=clock, script=[T(calls=[C(name="mcp__sampler__ask")]), T(error="end of script")])
        provider.sup = Supervisor(job, run_settings(), provider, clock=clock, store=JobStore(tmp_path / "jobs.db"),
                                  mcp=servers)
        provider.sup.run()
    finally:
        servers[0].close()
    got = result(job, "mcp__sampler__ask")
    # The sampling is cut at the call's time; what ends the call is a race at that instant (CI, beside a CPU hog,
    # saw the second): the client hanging up, or the server answering with the refusal it was just given.
    assert ((not got.ok and "no answer within 2 s" in got.content)
            or "sampling refused: the tool call's time is up (timeout 2 s" in got.content), got.content
    (said,) = sampled(job)
    assert said.refused.startswith("the tool call's time is up (timeout 2 s")


def test_a_samplings_cost_counts_in_the_fleets_spend_of_the_day(job, on, clock, tmp_path) -> None:
    # Counted in the run's own budget and in `costs`, a sampling's cost was never in the fleet's daily spend.
    from console.engine.cost import Prices
    from console.engine.guardrails.fleet import local_day
    from console.engine.store.fleet import FleetLimits, SqliteFleet, StoreFleetBudget

    db = tmp_path / "jobs.db"
    fleet = StoreFleetBudget(SqliteFleet(db), job.root, "quickstart", lambda: FleetLimits(daily_usd=1000.0), "t:r")
    script = [T(calls=[C(name="mcp__sampler__flood", arguments={"n": 2})]), T(error="end of script")]
    provider = Answering(clock=clock, script=script)
    provider.sup = Supervisor(job, run_settings(prices=Prices(input=3.0, output=15.0)), provider, clock=clock,
                              store=JobStore(db), mcp=[on], fleet=fleet)
    answer_needs(provider.sup)
    provider.sup.run()
    costs = [e.cost_usd for e in events(job) if isinstance(e, ev.TokenUsage) and e.cost_usd]
    assert len(sampling_usage(job)) == 2 and all(u.cost_usd for u in sampling_usage(job))
    assert SqliteFleet(db).spend(local_day(clock.now())) == {"quickstart": pytest.approx(sum(costs))}
