"""Smoke test of benchmarks/tokens.py: four context policies priced on one small scripted trajectory."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from console.engine.messages import Message, ToolCall
from console.engine.model import Usage

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "tokens.py"
READS = 48
WINDOW = 24_000
TRIGGER = 20_000  # Anthropic's default is 100k: far more than a 48-read run ever sends


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_tokens", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def comparison(bench: ModuleType):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bench, "ANTHROPIC_TRIGGER", TRIGGER)
        return bench.compare(WINDOW, READS, bench.SONNET)


def test_every_policy_runs_the_same_trajectory(bench: ModuleType, comparison) -> None:
    calls = {name: run.calls for name, run in comparison.runs.items()}
    assert set(calls) == set(bench.POLICIES)
    assert len(calls["ours"]) == len(bench.script(READS))
    assert calls["ours"][-1] == "job_complete"
    assert all(c == calls["ours"] for c in calls.values())
    # Ours really managed the context (it masked, or restarted), the others saw the unmanaged run's requests.
    assert comparison.measures["ours"].peak <= WINDOW < comparison.measures["unmanaged"].peak
    outputs = {m.output_tokens for m in comparison.measures.values()}
    assert len(outputs) == 1


def test_swe_agent_keeps_the_template_and_the_last_five_observations(bench: ModuleType, comparison) -> None:
    for request in comparison.runs["unmanaged"].requests:
        seen = bench.swe_agent_last_n(request.messages)
        assert len(seen) == len(request.messages)
        results = [m for m in request.messages if m.role == "tool"]
        full = [m for m in seen if m.role == "tool" and not m.content.startswith("Old environment output")]
        assert full == results[-5:]
        first_user = next(i for i, m in enumerate(request.messages) if m.role == "user")
        assert seen[first_user] is request.messages[first_user]
        for before, after in zip(request.messages, seen, strict=True):
            if after is not before:
                assert before.role == "tool" and before.tool_call_id == after.tool_call_id
                assert after.content == f"Old environment output: ({len(before.content.splitlines())} lines omitted)"
    assert comparison.measures["swe-agent"].full_observations_max == 5


def test_anthropic_clears_all_but_the_last_three_results_past_the_trigger(bench: ModuleType, comparison) -> None:
    conv = [Message.user("the task")]
    for i in range(6):
        call = ToolCall(id=f"c{i}", name="read_file", arguments=json.dumps({"path": f"f{i}"}))
        conv += [Message.assistant(f"step {i}", [call]), Message.tool(call, f"content {i}\n" * 50)]
    assert bench.anthropic_clear_tool_uses(conv, prompt_tokens=1_000, trigger=2_000) is conv
    cleared = bench.anthropic_clear_tool_uses(conv, prompt_tokens=3_000, trigger=2_000)
    results = [m.content for m in cleared if m.role == "tool"]
    assert results == ["[cleared]"] * 3 + [m.content for m in conv if m.role == "tool"][-3:]
    assert [m for m in cleared if m.role != "tool"] == [m for m in conv if m.role != "tool"]  # tool inputs stay

    anthropic = comparison.measures["anthropic"]
    assert anthropic.peak <= TRIGGER < anthropic.sent_peak  # the model never sees more than the trigger


def test_cached_tokens_cost_less_and_a_moving_mask_breaks_the_cache(bench: ModuleType, comparison) -> None:
    prices = bench.SONNET
    million = 1_000_000
    assert (prices.cost(Usage(million, 0, million)) < prices.cost(Usage(million, 0, 0))
            < prices.cost(Usage(million, 0, 0, True, million)))

    m = comparison.measures
    unmanaged = m["unmanaged"]
    uncached = (unmanaged.input_tokens * prices.input + unmanaged.output_tokens * prices.output) / million
    assert unmanaged.cached["breakpoints"] > 0.9 * unmanaged.input_tokens
    assert unmanaged.cost["breakpoints"] < uncached / 2
    # Masking the 6th-newest observation every turn leaves only tools and system prompt cacheable.
    swe = m["swe-agent"]
    assert swe.cached["breakpoints"] < 0.5 * swe.input_tokens
    assert swe.cost["breakpoints"] > swe.cost["prefix"]
    for x in m.values():
        assert x.cached["prefix"] + x.written["prefix"] <= x.input_tokens
        assert x.cached["breakpoints"] + x.written["breakpoints"] <= x.input_tokens
        assert x.splits == 0 and x.protected == x.requests

    assert comparison.best_peer("breakpoints") in ("swe-agent", "anthropic")  # unmanaged overflows the window
    assert comparison.ratio("breakpoints") == pytest.approx(
        m["ours"].cost["breakpoints"] / m[comparison.best_peer("breakpoints")].cost["breakpoints"])


def test_the_script_prints_a_table_and_json_last(bench: ModuleType, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["tokens.py", "--reads", "32", "--window", "20000", "--prices", "3,0.3,3.75,15"])
    bench.main()
    lines = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(lines[-1])
    assert set(summary["policies"]) == set(bench.POLICIES)
    assert len(set(summary["tool_calls"].values())) == 1
    assert summary["policies"]["unmanaged"]["fits_window"] is False
    assert any(line.startswith("ours / best peer = ") for line in lines)
