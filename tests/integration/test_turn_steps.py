"""The journal steps of a turn: the reply, then each tool call with its result, the last one recorded with the
turn's bookkeeping (one commit and one log append fewer a turn), except when a compaction follows it (which may
ask the model for a summary: the call is recorded before it)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from console.engine import events as ev
from console.engine.journal import JOURNAL_NAME
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedTurn as T
from tests.integration.test_cycle import full_cycle_script


def commits(paths: Any) -> list[dict[str, Any]]:
    lines = (paths.state / JOURNAL_NAME).read_bytes().splitlines()
    return [json.loads(raw) for raw in lines if raw.startswith(b'{"op": "commit"')]


def types(commit: dict[str, Any]) -> list[str]:
    return [e["type"] for e in commit.get("events", [])]


def test_a_turn_with_one_call_is_two_steps_the_reply_then_the_call_with_the_bookkeeping(make_job, run_job) -> None:
    paths = make_job()
    run_job(paths, [T(text="Looking.", calls=[C(name="list_files")]) for _ in range(4)], max_turns=4)
    steps = [c for c in commits(paths) if c["cp"].get("turn", 0) >= 1]
    for turn in range(1, 5):
        mine = [c for c in steps if c["cp"].get("turn") == turn]
        # The reply (stage "tools"); then its call, its result and the turn's usage in the same commit, at the
        # boundary; nothing else is committed for the turn.
        assert [c["cp"].get("stage", "boundary") for c in mine] == ["tools", "boundary"], turn
        assert "assistant_message" in types(mine[0])
        assert {"tool_called", "tool_result", "token_usage"} <= set(types(mine[1]))
    # Each result reached the log once, and the journal once.
    logged = Counter(e.call_id for e in ev.read_events(paths.events) if isinstance(e, ev.ToolResult))
    journaled = Counter(e["call_id"] for c in commits(paths) for e in c.get("events", []) if e["type"] == "tool_result")
    assert len(logged) == 4 and set(logged.values()) == {1} and logged == journaled


def test_turns_with_several_calls_record_each_but_the_last_on_its_own(make_job, run_job) -> None:
    paths = make_job(files={"a.md": "A\n"})
    calls = [C(name="list_files"), C(name="read_file", arguments={"path": "a.md"}), C(name="list_files")]
    run_job(paths, [T(calls=calls) for _ in range(2)], max_turns=2)
    for turn in (1, 2):
        mine = [c for c in commits(paths) if c["cp"].get("turn") == turn]
        assert [(c["cp"].get("stage", "boundary"), c["cp"].get("next_call", 0)) for c in mine] == [
            ("tools", 0), ("tools", 1), ("tools", 2), ("boundary", 0)]
        assert types(mine[3]).count("tool_result") == 1 and "token_usage" in types(mine[3])


def test_a_call_that_asks_for_a_compaction_is_recorded_before_it(make_job, run_job) -> None:
    paths = make_job(files={"a.md": "# A\nAlpha.\n"})
    _, result = run_job(paths, full_cycle_script())
    assert result.ok, result.detail
    compacted = [c for c in commits(paths) if "context_compacted" in types(c)]
    assert compacted, "the phase transitions compact the conversation"
    everything = commits(paths)
    for c in compacted:
        turn = c["cp"]["turn"]
        before = [x for x in everything if x["cp"].get("turn") == turn and x is not c]
        # The call that asked for it (the transition's todo_complete) committed on its own, at stage "tools".
        assert any("tool_result" in types(x) and x["cp"].get("stage") == "tools" for x in before), turn
        assert "tool_result" not in types(c)
