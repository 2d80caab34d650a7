"""model_json: a model's JSON by its own serializer is model_dump_json's, byte for byte, for every option the
engine asks it for, and fails as it does."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import BaseModel

from console.engine import events as ev
from console.engine.guardrails import GuardrailState
from console.engine.journal import Checkpoint
from console.engine.messages import Message, ToolCall
from console.engine.model_json import model_data, model_json
from console.engine.state import GuardrailParts, StateSnapshot
from console.engine.todos import TodoState

TS = datetime(2026, 12, 1, 2, 30, tzinfo=UTC)


def samples() -> list[BaseModel]:
    call = ToolCall(id="c1", name="write_file", arguments='{"path": "a.md", "content": "é ✓ \\"q\\""}')
    return [
        ev.TurnStarted(ts=TS, seq=1, session=2, turn=3),
        ev.ToolResult(ts=TS, seq=2, session=2, turn=3, call_id="c1", tool="noop", ok=True, content="ok ✓",
                      duration_ms=0.5),
        ev.AssistantMessage(ts=TS, seq=3, session=2, turn=3, text="Working on it.",
                            tool_calls=[ev.ToolCallRecord(id=call.id, name=call.name, arguments=call.arguments)]),
        Message.user("go"), Message.assistant("", [call]), Message.tool(call, "done\nline 2"),
        Checkpoint(session=1, turn=4), Checkpoint(session=1, turn=4, stage="tools", next_call=1, nudges=2),
        StateSnapshot(todos=TodoState(), guardrails_parts=GuardrailParts(completion_blocks=2)),
        GuardrailState(),
    ]


@pytest.mark.parametrize(("none", "defaults"), [(False, False), (True, False), (False, True), (True, True)])
def test_it_is_model_dump_json_byte_for_byte(none: bool, defaults: bool) -> None:
    for model in samples():
        expected = model.model_dump_json(exclude_none=none, exclude_defaults=defaults).encode()
        assert model_json(model, exclude_none=none, exclude_defaults=defaults) == expected, type(model).__name__


def test_text_it_cannot_encode_fails_as_model_dump_json_does() -> None:
    m = Message.user("half an emoji \ud83d")
    with pytest.raises(ValueError):
        m.model_dump_json()
    with pytest.raises(ValueError):
        model_json(m)


def test_model_data_is_model_dump() -> None:
    for model in samples():
        assert model_data(model) == model.model_dump(), type(model).__name__
