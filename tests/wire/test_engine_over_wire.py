"""The whole engine driven by the real SDKs over the loopback server: a job from start to job_complete."""

from __future__ import annotations

import json

import pytest

from console.engine import events as ev
from console.engine.guardrails import GuardrailsConfig
from console.engine.supervisor import Supervisor
from console.providers.anthropic_provider import AnthropicProvider
from console.providers.openai_provider import OpenAIProvider
from tests.conftest import run_settings

from .loopback import CannedToolCall, CannedUsage, Loopback, Reply

SECRET = "sk-test-NEVER-IN-LOGS-5d1e"


def script() -> list[Reply]:
    def call(i: int, name: str, args: dict) -> Reply:
        raw = json.dumps(args)
        half = len(raw) // 2
        return Reply(text=["On ", "it."], tool_calls=[CannedToolCall(f"call_{i}", name, [raw[:half], raw[half:]])],
                     usage=CannedUsage(input_tokens=3000 + i, output_tokens=40, cached_tokens=2500))

    return [
        call(1, "generate_workspace_summary", {}),
        call(2, "todo_complete", {}),
        call(3, "read_file", {"path": "instructions.md"}),
        call(4, "job_complete", {"summary": "Stopped early on purpose", "deliverables": [],
                                 "confidence": 0.6, "notes": "wire test"}),
    ]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_job_runs_end_to_end_over_the_wire(kind, make_job, clock) -> None:
    paths = make_job()
    with Loopback() as server:
        server.push(*script())
        if kind == "openai":
            provider = OpenAIProvider("gpt-test", api_key=SECRET, base_url=server.openai_url, max_retries=0)
        else:
            provider = AnthropicProvider("claude-test", api_key=SECRET, base_url=server.base_url, max_retries=0)
        # This test is about the wire: the job ends early on purpose, so the completion check is off.
        free_stop = GuardrailsConfig.model_validate({"completion": {"type": "none"}})
        result = Supervisor(paths, run_settings(provider=kind, guardrails=free_stop), provider, clock=clock).run()
        requests = list(server.requests)
    # A free stop of unfinished work: accepted, and honestly incomplete.
    assert result.outcome.confidence == 0.6 and result.ended == "incomplete"
    assert len(requests) == 4
    evs = list(ev.read_events(paths.events))
    usage = [e for e in evs if isinstance(e, ev.TokenUsage)]
    assert [u.reported for u in usage] == [True] * 4
    assert usage[0].output_tokens == 40 and usage[0].cached_input_tokens == 2500
    assert [e.tool for e in evs if isinstance(e, ev.ToolResult)] == [
        "generate_workspace_summary", "todo_complete", "read_file", "job_complete"]
    assert all(e.ok for e in evs if isinstance(e, ev.ToolResult))
    for r in requests:
        body = json.dumps(r.body)
        assert "ACTIVE TODO LIST" in body and "YOUR ONLY JOB" in body
    last = requests[-1].body
    if kind == "openai":
        assert last["messages"][0]["role"] == "system" and "ACTIVE TODO LIST" in last["messages"][-1]["content"]
    else:
        final_block = last["messages"][-1]["content"][-1]
        assert "ACTIVE TODO LIST" in final_block["text"]
    assert SECRET not in paths.events.read_text()
    assert SECRET not in "".join(p.read_text(errors="replace") for p in paths.state.rglob("*") if p.is_file())


def test_a_priced_model_shows_its_cost_everywhere(make_job, clock, tmp_path) -> None:
    """Anthropic's usage (uncached input, cache reads, cache writes, output) priced from the registry's table,
    checked against a hand computation in the events, the headless log, the jobs table and the closing line."""
    import io

    from console.engine.store import JobStore
    from console.headless import HeadlessLog
    from console.providers import registry

    model = "claude-sonnet-4-5-20250929"  # a dated release of a model in the table
    info = registry.model_info("anthropic", model)
    assert info is not None and info.prices is not None
    p = info.prices
    usage = CannedUsage(input_tokens=50, output_tokens=40, cached_tokens=3000, cache_creation_tokens=200)
    by_hand = (50 * p.input + 3000 * p.cached_input + 200 * p.cache_write + 40 * p.output) / 1e6
    assert by_hand == pytest.approx((50 * 3.0 + 3000 * 0.30 + 200 * 3.75 + 40 * 15.0) / 1e6)  # $0.0024
    paths = make_job()
    store = JobStore(tmp_path / "jobs.db")
    out = io.StringIO()
    with Loopback() as server:
        replies = script()
        server.push(*(Reply(text=r.text, tool_calls=r.tool_calls, usage=usage) for r in replies))
        provider = AnthropicProvider(model, api_key=SECRET, base_url=server.base_url, max_retries=0)
        free_stop = GuardrailsConfig.model_validate({"completion": {"type": "none"}})
        sup = Supervisor(paths, run_settings(provider="anthropic", model=model, guardrails=free_stop,
                                             prices=p), provider, clock=clock, store=store)
        sup.subscribe(HeadlessLog(out))
        assert sup.run().ended == "incomplete"  # the script stops early on purpose (a free stop)
    evs = [e for e in ev.read_events(paths.events) if isinstance(e, ev.TokenUsage)]
    assert len(evs) == 4 and all(e.cache_write_tokens == 200 for e in evs)
    assert all(e.cost_usd == pytest.approx(by_hand) for e in evs)
    assert evs[-1].job_cost_usd == pytest.approx(4 * by_hand) == pytest.approx(sup.job_cost())
    log = out.getvalue()
    assert log.count("| $0.0024]") == 4 and "job cost $0.0096" in log  # 4 x $0.0024
    (row,) = store.list()
    assert row.cost_usd == pytest.approx(4 * by_hand)
