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
        call(4, "job_complete", {"summary": "Stopped early on purpose", "deliverables": ["instructions.md"],
                                 "confidence": 0.3, "notes": "wire test"}),
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
    assert result.ok and result.outcome.confidence == 0.3
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
