"""How the journal writes a message: the model's own serializer when nothing goes to a blob, the same JSON as the
general path (which puts long texts in blobs and turns a lone surrogate into '?'), and read back the same."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.engine.blobs import INLINE_LIMIT
from console.engine.job import JobPaths
from console.engine.journal import Checkpoint, Conversation, Journal, _dumps, _encode
from console.engine.messages import Message, ToolCall
from console.engine.state import StateSnapshot
from tests.sweeps import examples

NOW = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)
# Any text, lone surrogates and control characters included (what a tool's output may hold).
texts = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=40)
metas = st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                                                       texts, st.lists(st.integers(0, 9), max_size=3)), max_size=3)


def general(j: Journal, m: Message) -> bytes:
    return _encode(_dumps(j._externalize_message(m, set())))


# The job folder is only where the journal would be: nothing is written to it here.
@pytest.mark.sweep
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=texts, meta=metas, arguments=texts, role=st.sampled_from(["user", "assistant", "tool"]))
def test_a_message_without_blobs_is_the_same_json_as_by_the_general_path(tmp_path: Path, content: str,
                                                                          meta: dict[str, object], arguments: str,
                                                                          role: str) -> None:
    j = Journal(JobPaths(tmp_path))
    call = ToolCall(id="c1", name="write_file", arguments=arguments)
    m = Message(role=role, content=content, meta=meta,  # type: ignore[arg-type]
                tool_calls=[call] if role == "assistant" else [], tool_call_id="c1" if role == "tool" else None)
    data, refs = j._message_json(m)
    assert refs == ()
    assert json.loads(data) == json.loads(general(j, m))
    assert Message.model_validate(json.loads(data)) == Message.model_validate(json.loads(general(j, m)))


def test_long_texts_still_go_to_blobs_and_come_back_whole(make_job) -> None:
    paths = make_job()
    j = Journal(paths)
    big = "x" * (INLINE_LIMIT + 1)
    call = ToolCall(id="c1", name="write_file", arguments=json.dumps({"content": big}))
    conv = Conversation([Message.user("hi"), Message.assistant("", [call]), Message.tool(call, big + "!")])
    j.commit(Checkpoint(session=1, turn=1), conv, state=None, events=[], effects=[], full_state=StateSnapshot,
             system="S")
    conv.append(Message.user("half an emoji \ud83d in a notice"))
    j.commit(Checkpoint(session=1, turn=2), conv, state=None, events=[], effects=[], full_state=StateSnapshot,
             system="S")
    raw = j.path.read_bytes()
    assert big.encode() not in raw and b'"$blob"' in raw
    loaded = Journal(paths).load(NOW)
    assert loaded.conversation[:3] == list(conv)[:3]
    assert loaded.conversation[3].content == "half an emoji ? in a notice"
