"""stream_turn keeps the model's tool calls as they came when nothing in them needs cleaning (no copy, every turn),
and cleans a call whose name, arguments or id holds a lone surrogate (half an emoji): then a cleaned copy, the
provider's own object left as it was."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from console.engine.messages import ModelRequest, ToolCall
from console.engine.model import Stop, StreamEvent, ToolCallEvent, Usage
from console.engine.turn import SessionDeps, stream_turn
from tests.conftest import run_settings


class Once:
    name, model = "once", "m"
    runs_inline = True

    def __init__(self, calls: list[ToolCall]) -> None:
        self.calls = calls

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        yield from [ToolCallEvent(c) for c in self.calls]
        yield Usage(10, 2)
        yield Stop("tool_use")


def deps(provider: Once) -> SessionDeps:
    events = SimpleNamespace(streams_text=False, holds_lines=False, emit=lambda *a, **k: None)
    runtime: Any = SimpleNamespace(events=events, guards=SimpleNamespace(seconds_to_cut=lambda: None))
    operator: Any = SimpleNamespace(apply_while_asking=lambda rt: None, channel=SimpleNamespace(doorbell=None))
    return SessionDeps(runtime, provider, None, run_settings(), operator)  # type: ignore[arg-type]


REQUEST = ModelRequest(system="s", messages=[], tools=[], protected="")


def test_a_clean_call_is_kept_as_it_came() -> None:
    call = ToolCall(id="c1", name="read_file", arguments='{"path": "a.md"}')
    out = stream_turn(deps(Once([call])), 1, REQUEST)
    assert out.calls == [call] and out.calls[0] is call


def test_a_call_with_a_lone_surrogate_is_cleaned_in_a_copy() -> None:
    bad = [ToolCall(id="c\ud800", name="read_file", arguments="{}"),
           ToolCall(id="c2", name="read\udcff", arguments="{}"),
           ToolCall(id="c3", name="write_file", arguments='{"content": "x\ud83d"}')]
    out = stream_turn(deps(Once(bad)), 1, REQUEST)
    assert [(c.id, c.name, c.arguments) for c in out.calls] == [
        ("c?", "read_file", "{}"), ("c2", "read?", "{}"), ("c3", "write_file", '{"content": "x?"}')]
    assert bad[0].id == "c\ud800" and bad[2].arguments.endswith("\ud83d\"}")  # the provider's own, untouched
    assert all(a is not b for a, b in zip(out.calls, bad, strict=True))
