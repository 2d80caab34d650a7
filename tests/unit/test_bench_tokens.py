"""benchmarks/tokens.py: the replay of a recorded trajectory through the real engine keeps the information
(no split pairs, protected layers in every prompt, the agent's last 3 results whole), and the peers' rules
are the ones their sources describe. The cost ratios are the benchmark's to report, not asserted here."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from console.engine.context.carryover import split_pairs
from console.engine.messages import Message, ToolCall
from tests.benchmarks import load

ROOT = Path(__file__).resolve().parents[2]
TRAJECTORY = ROOT / "tests" / "data" / "trajectories" / "github_issue.traj.json"  # mini-swe-agent, MIT
WINDOW = 9_000  # small enough that the replayed job, three times over, makes the engine mask and compact


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load("tokens")


@pytest.fixture(scope="module")
def work(bench: ModuleType):
    return bench.recorded([TRAJECTORY] * 3)


@pytest.fixture(scope="module")
def comparison(bench: ModuleType, work):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bench, "ANTHROPIC_TRIGGERS", (6_000, 3_000))
        mp.setattr(bench, "ANTHROPIC_CLEAR_AT_LEAST", (0, 1_000))
        return bench.compare(WINDOW, work, bench.SONNET)


def conversation(n: int, size: int = 400) -> list[Message]:
    conv = [Message.user("the task")]
    for i in range(n):
        call = ToolCall(id=f"c{i}", name="read_file", arguments=json.dumps({"path": f"f{i}"}))
        conv += [Message.assistant(f"step {i}", [call]), Message.tool(call, f"content {i}\n" * size)]
    return conv


def test_the_recorded_run_is_replayed_step_by_step(bench: ModuleType, work) -> None:
    recorded = bench.replay.load(TRAJECTORY)
    assert len(recorded.steps) == 10 and recorded.task
    first = recorded.steps[0]
    assert first.action and first.observation.startswith("<returncode>")
    # Per copy: read the task, one read per step, todo_complete; then the completion todos and job_complete.
    per_copy = 1 + len(recorded.steps) + 1
    assert len(work.script) == 3 * per_copy + 3 + 1
    assert work.script[-1][1].name == "job_complete"
    # The tool results are the recorded observations, through the engine's own read_file.
    assert work.files["obs/01-001.txt"] == bench.replay._cut(first.observation)


def test_ours_keeps_the_information_while_it_masks_and_compacts(bench: ModuleType, comparison) -> None:
    ours, base = comparison.runs["ours"], comparison.runs["unmanaged"]
    assert ours.calls == base.calls and ours.calls[-1] == "job_complete"
    m = comparison.measures["ours"]
    assert m.requests == len(ours.requests)
    assert m.splits == 0
    assert m.protected == m.requests  # system prompt, tools, todo list and plan in every prompt
    assert m.intact == m.requests  # the agent's last 3 results whole in every prompt
    assert m.checks_pass and m.fits(WINDOW)
    # Not vacuous: the engine really managed the context on this run.
    masked = [r for r in ours.requests if any(x.meta.get("masked") for x in r.messages)]
    compacted = [r for r in ours.requests if r.messages and r.messages[0].meta.get("kind") == "summary"]
    assert masked and compacted
    assert m.peak < comparison.measures["unmanaged"].peak
    for r in ours.requests:  # and independently of the measure: every call has its result
        assert split_pairs(r.messages) == 0
        recent = [x for x in r.messages if x.role == "tool"][-3:]
        assert not any(x.meta.get("masked") for x in recent)


def test_every_peer_is_priced_on_the_same_requests_and_keeps_the_information(bench, comparison) -> None:
    base = comparison.runs["unmanaged"]
    for name in bench.PEERS:
        assert comparison.runs[name] is base
        for rule in bench.RULES:
            x = comparison.peer(name, rule)
            assert x.requests == len(base.requests) and x.checks_pass, (name, x.label)
            assert x.cached[rule] + x.written[rule] <= x.input_tokens
    best = comparison.best_anthropic["prefix"]
    assert all(comparison.anthropic[best].cost["prefix"] <= m.cost["prefix"] for m in comparison.anthropic.values()
               if m.fits(WINDOW) and m.checks_pass)


def test_the_agents_own_earlier_replies_kept_are_counted_for_every_policy(bench, comparison) -> None:
    """Issue 37 point 6: of every reply the agent made so far (as the unmanaged prompts hold them), the share each
    policy's prompts hold as written. The peers drop tool results only; ours compacts, so it keeps fewer."""
    base = comparison.runs["unmanaged"]
    said = sum(len(bench._replies(r)) for r in base.requests)
    assert said > len(base.requests)  # every prompt after the first holds earlier replies
    for name in bench.PEERS:
        for rule in bench.RULES:
            x = comparison.peer(name, rule)
            assert (x.replies, x.replies_kept, x.replies_kept_pct) == (said, said, 100.0), name
    ours = comparison.measures["ours"]
    assert ours.replies == said
    # The compaction replaced the older replies with its summary: counted as lost, not as kept.
    assert 0 < ours.replies_kept < said and ours.replies_kept_pct < 100.0
    compacted = [k for k, r in enumerate(comparison.runs["ours"].requests)
                 if r.messages and r.messages[0].meta.get("kind") == "summary"]
    assert sum(len(bench._replies(comparison.runs["ours"].requests[k])) for k in compacted) < sum(
        len(bench._replies(base.requests[k])) for k in compacted)


def test_a_reply_changed_in_the_prompt_is_not_counted_as_kept(bench: ModuleType) -> None:
    conv = conversation(4)
    run = bench.Run([bench.ModelRequest(system="s", messages=conv, tools=[], protected="")], [10], ["read_file"], 0)
    said = [bench._replies(r) for r in run.requests]
    changed = bench.measure(run, bench.SONNET, lambda r: r.model_copy(update={"messages": [
        m.model_copy(update={"content": "elided"}) if m.content == "step 2" else m for m in r.messages]}),
        replies=said)
    assert (changed.replies, changed.replies_kept) == (4, 3)
    dropped = bench.measure(run, bench.SONNET, lambda r: r.model_copy(update={"messages": r.messages[:1]}),
                            replies=said)
    assert (dropped.replies, dropped.replies_kept, dropped.replies_kept_pct) == (4, 0, 0.0)


def test_swe_agent_keeps_the_template_and_the_last_five_observations(bench: ModuleType) -> None:
    conv = conversation(8)
    seen = bench.peers.swe_agent_last_n(conv)
    full = [m for m in seen if m.role == "tool" and not m.content.startswith("Old environment output")]
    assert full == [m for m in conv if m.role == "tool"][-5:]
    assert seen[0] is conv[0]
    assert seen[2].content == "Old environment output: (400 lines omitted)"


def test_anthropic_clear_tool_uses_stateless_and_sticky(bench: ModuleType) -> None:
    peers = bench.peers
    conv = conversation(6, size=50)
    assert peers.anthropic_clear_tool_uses(conv, prompt_tokens=1_000, trigger=2_000) is conv
    cleared = peers.anthropic_clear_tool_uses(conv, prompt_tokens=3_000, trigger=2_000)
    assert [m.content for m in cleared if m.role == "tool"][:3] == ["[cleared]"] * 3
    assert [m for m in cleared if m.role == "tool"][3:] == [m for m in conv if m.role == "tool"][3:]
    assert [m for m in cleared if m.role != "tool"] == [m for m in conv if m.role != "tool"]  # inputs stay
    # clear_at_least: a clearing that frees less is not applied.
    assert peers.anthropic_clear_tool_uses(conv, 3_000, trigger=2_000, clear_at_least=10**6) is conv
    # Sticky: once cleared, results stay cleared, and the trigger is measured on the edited prompt.
    sticky = peers.StickyClearing(trigger=2_000, keep=3)
    first = sticky(conv, 3_000)
    assert first == cleared
    call = ToolCall(id="c6", name="read_file", arguments=json.dumps({"path": "f6"}))
    longer = [*conv, Message.assistant("step 6", [call]), Message.tool(call, "content 6\n" * 50)]
    again = sticky(longer, 1_900 + 200)  # the edited prompt is under the trigger: nothing more cleared
    assert [m.content for m in again if m.role == "tool"].count("[cleared]") == 3
    assert sticky(longer, 5_000) == peers.anthropic_clear_tool_uses(longer, 5_000, trigger=2_000)  # past it again


def test_openhands_masks_observations_outside_the_attention_window(bench: ModuleType) -> None:
    conv = conversation(60, size=2)
    seen = bench.peers.openhands_observation_masking(conv, attention_window=100)
    events = len(conv)
    for i, (before, after) in enumerate(zip(conv, seen, strict=True)):
        if before.role == "tool" and i < events - 100:
            assert after.content == "<MASKED>" and after.tool_call_id == before.tool_call_id
        else:
            assert after == before
    assert bench.peers.openhands_observation_masking(conversation(10), 100) == conversation(10)


def test_the_script_prints_the_table_and_the_ratios_last_and_fails_on_a_lost_result(bench, monkeypatch,
                                                                                      capsys) -> None:
    monkeypatch.setattr(bench, "ANTHROPIC_TRIGGERS", (6_000,))
    monkeypatch.setattr(bench, "ANTHROPIC_CLEAR_AT_LEAST", (0,))
    monkeypatch.setattr(sys, "argv", ["tokens.py", "--trajectory", str(TRAJECTORY), str(TRAJECTORY),
                                      "--context-window", str(WINDOW)])
    bench.main()
    lines = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(lines[-1])
    assert summary["information_checks_pass"] is True
    (w,) = summary["windows"]
    assert set(w["ours_to_best_peer"]) == {"breakpoints", "prefix"}
    assert w["policies"]["ours"]["last_3_results_intact_pct"] == 100.0
    assert all(p["own_replies_kept_pct"] == 100.0 for name, p in w["policies"].items() if name != "ours")
    assert 0 < w["policies"]["ours"]["own_replies_kept_pct"] <= 100.0  # (two copies: no compaction at this window)
    assert any(line.startswith(f"ours / best peer at {WINDOW:,}: ") for line in lines)
    # MCP's search-and-load step (issue 36, point 4): what it saves grows with the tools; a few are cheap loaded.
    mcp = {row["tools"]: row for row in summary["mcp_tool_search"]}
    assert sorted(mcp) == [5, 50, 200]
    assert 0 < mcp[5]["saved"] < mcp[50]["saved"] < mcp[200]["saved"]
    assert all(r["saved"] == r["all_offered"] - r["search"] and r["search"] < r["search_3_loaded"]
               < r["all_offered"] for r in mcp.values() if r["tools"] > 5)
    # Asking for more than the engine keeps: the check fails for ours, loudly.
    monkeypatch.setattr(bench, "INTACT_N", 5)
    with pytest.raises(SystemExit) as exc:
        bench.main()
    assert exc.value.code == 1
    assert "INFORMATION CHECK FAILED" in capsys.readouterr().err


def test_a_file_that_is_not_a_trajectory_is_refused(bench: ModuleType, tmp_path: Path) -> None:
    shapes = ("not json", "42", "{}", "[]", '{"trajectory": [1, 2]}', '[1, "x"]', '{"history": [{"role": 3}]}',
              '{"messages": "text"}')
    for text in shapes:
        bad = tmp_path / "bad.traj"
        bad.write_text(text)
        with pytest.raises(SystemExit):
            bench.replay.load(bad)
    # Odd but readable: content blocks, a step without output, control characters in the output.
    odd = tmp_path / "odd.traj.json"
    odd.write_text(json.dumps([{"role": "user", "content": "task"},
                               {"role": "assistant", "content": ["block", 7]},
                               {"role": "assistant", "content": "x\n```mswea_bash_command\nls\n```"},
                               {"role": "user", "content": "\x1b[2J\r\x00out"}]))
    loaded = bench.replay.load(odd)
    assert [s.action for s in loaded.steps] == ["", "ls"]
    assert bench.replay.build([loaded]).files["obs/01-001.txt"] == "(no output)"
