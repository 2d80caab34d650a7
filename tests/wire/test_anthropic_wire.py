"""AnthropicProvider through the real SDK against the loopback server."""

from __future__ import annotations

import itertools
import json
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from console.engine.messages import Message, ModelRequest, ToolCall, ToolSpec
from console.engine.model import Progress, Provider, ProviderError, Stop, StreamEvent, TextDelta, ToolCallEvent, Usage
from console.providers.anthropic_provider import AnthropicProvider

from .loopback import CannedToolCall, CannedUsage, HttpError, Loopback, Raw, Reply, Stall

SECRET = "sk-ant-test-DO-NOT-LEAK-41b7e0d9"
EPHEMERAL = {"type": "ephemeral"}


@pytest.fixture
def server() -> Iterator[Loopback]:
    with Loopback() as lb:
        yield lb


def make(server: Loopback, **kw: Any) -> AnthropicProvider:
    kw.setdefault("api_key", SECRET)
    kw.setdefault("max_retries", 0)
    return AnthropicProvider("claude-test", base_url=server.base_url, **kw)


def simple(**kw: Any) -> ModelRequest:
    return ModelRequest(system="You are terse.", messages=[Message.user("hi")], tools=[], **kw)


def run(provider: AnthropicProvider, request: ModelRequest) -> list[StreamEvent]:
    # Progress only keeps the engine's stall watchdog quiet (tests/wire/test_faults_attack.py): not content.
    return [e for e in provider.stream(request) if not isinstance(e, Progress)]


def sent_messages(server: Loopback) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = server.last.body["messages"]
    return messages


def breakpoints(body: dict[str, Any]) -> list[str]:
    """Where cache_control markers sit, as readable labels."""
    found = [f"system[{i}]" for i, b in enumerate(body.get("system", [])) if "cache_control" in b]
    found += [f"tools[{i}]" for i, t in enumerate(body.get("tools", [])) if "cache_control" in t]
    for i, msg in enumerate(body["messages"]):
        found += [f"messages[{i}][{j}]" for j, b in enumerate(msg["content"]) if "cache_control" in b]
    return found


# -- streaming ------------------------------------------------------------------------


def test_satisfies_provider_protocol(server: Loopback) -> None:
    provider = make(server)
    assert isinstance(provider, Provider)
    assert (provider.name, provider.model) == ("anthropic", "claude-test")


def test_text_deltas_arrive_in_order_then_usage_then_stop(server: Loopback) -> None:
    server.push(Reply(text=["Hel", "lo, ", "world"]))
    assert run(make(server), simple()) == [
        TextDelta("Hel"),
        TextDelta("lo, "),
        TextDelta("world"),
        Usage(input_tokens=10, output_tokens=5, cached_input_tokens=0),
        Stop("end_turn"),
    ]


def test_tool_input_split_across_deltas_becomes_one_event(server: Loopback) -> None:
    args = ['{"pa', 'th": "src/', 'main.py", "li', 'mit": 20}']
    server.push(Reply(tool_calls=[CannedToolCall("toolu_1", "read_file", args)]))
    events = run(make(server), simple())
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [ToolCallEvent(ToolCall(id="toolu_1", name="read_file", arguments="".join(args)))]
    assert json.loads(calls[0].call.arguments) == {"path": "src/main.py", "limit": 20}
    assert events[-1] == Stop("tool_use")


def test_text_then_two_parallel_tool_calls(server: Loopback) -> None:
    server.push(
        Reply(
            text=["Reading ", "both."],
            tool_calls=[
                CannedToolCall("toolu_a", "read_file", ['{"path":', ' "a.py"}']),
                CannedToolCall("toolu_b", "grep", ['{"pattern"', ': "TODO"}']),
            ],
        )
    )
    events = run(make(server), simple())
    assert [type(e) for e in events] == [TextDelta, TextDelta, ToolCallEvent, ToolCallEvent, Usage, Stop]
    assert events[2] == ToolCallEvent(ToolCall(id="toolu_a", name="read_file", arguments='{"path": "a.py"}'))
    assert events[3] == ToolCallEvent(ToolCall(id="toolu_b", name="grep", arguments='{"pattern": "TODO"}'))


def test_tool_call_without_input_deltas_stays_empty(server: Loopback) -> None:
    server.push(Reply(tool_calls=[CannedToolCall("toolu_1", "list_todos", [])]))
    events = run(make(server), simple())
    # Empty stays empty here: the engine records {} once the reply is known whole (a call cut by max_tokens
    # before its arguments is refused, never run with {}).
    assert ToolCallEvent(ToolCall(id="toolu_1", name="list_todos", arguments="")) in events


def test_usage_counts_whole_prompt_and_cache_reads(server: Loopback) -> None:
    usage = CannedUsage(input_tokens=50, output_tokens=34, cached_tokens=3000, cache_creation_tokens=200)
    server.push(Reply(text=["ok"], usage=usage))
    reported = [e for e in run(make(server), simple()) if isinstance(e, Usage)]
    # 50 uncached + 3000 read from cache + 200 written to cache = the full prompt.
    assert reported == [Usage(input_tokens=3250, output_tokens=34, cached_input_tokens=3000, reported=True,
                              cache_write_tokens=200)]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("end_turn", Stop("end_turn")),
        ("stop_sequence", Stop("end_turn")),
        ("tool_use", Stop("tool_use")),
        ("max_tokens", Stop("max_tokens")),
        ("refusal", Stop("end_turn", "refusal")),
    ],
)
def test_stop_reason_mapping(server: Loopback, raw: str, expected: Stop) -> None:
    server.push(Reply(text=["x"], finish=raw))
    assert run(make(server), simple())[-1] == expected


# -- request translation --------------------------------------------------------------


def tools() -> list[ToolSpec]:
    return [
        ToolSpec(name="read_file", description="Read a file.", parameters={"type": "object"}),
        ToolSpec(name="grep", description="Search.", parameters={"type": "object"}),
    ]


def test_system_tools_and_limits(server: Loopback) -> None:
    server.push(Reply(text=["ok"]))
    run(
        make(server),
        ModelRequest(system="SYS", messages=[Message.user("hi")], tools=tools(), max_output_tokens=99),
    )
    body = server.last.body
    assert server.last.path == "/v1/messages"
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 99
    assert body["stream"] is True
    assert body["system"] == [{"type": "text", "text": "SYS", "cache_control": EPHEMERAL}]
    assert body["tools"] == [
        {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}},
        {
            "name": "grep",
            "description": "Search.",
            "input_schema": {"type": "object"},
            "cache_control": EPHEMERAL,
        },
    ]


def test_parallel_tool_results_go_in_one_user_message(server: Loopback) -> None:
    a = ToolCall(id="toolu_a", name="read_file", arguments='{"path": "a.py"}')
    b = ToolCall(id="toolu_b", name="grep", arguments='{"pattern": "x"}')
    request = ModelRequest(
        system="SYS",
        messages=[
            Message.user("look"),
            Message.assistant("Two reads.", [a, b]),
            Message.tool(a, "A"),
            Message.tool(b, "B"),
        ],
        tools=tools(),
    )
    server.push(Reply(text=["ok"]))
    run(make(server), request)
    assert sent_messages(server) == [
        {"role": "user", "content": [{"type": "text", "text": "look"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Two reads."},
                {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a.py"}},
                {"type": "tool_use", "id": "toolu_b", "name": "grep", "input": {"pattern": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "A"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "B", "cache_control": EPHEMERAL},
            ],
        },
    ]


def long_conversation() -> ModelRequest:
    call = ToolCall(id="toolu_1", name="read_file", arguments='{"path": "a.py"}')
    broken = ToolCall(id="toolu_2", name="read_file", arguments='{"path": ')
    return ModelRequest(
        system="SYS",
        messages=[
            Message.system("session resumed", kind="restart_marker"),
            Message.user("fix the bug"),
            Message.assistant("", [call]),
            Message.tool(call, "print('a')"),
            Message.system("budget: 80% used"),
            Message.assistant("Retrying.", [broken]),
            Message.user("also, hurry"),
            Message.tool(broken, "error: invalid JSON"),
            Message.assistant("Done."),
            Message.user("thanks"),
        ],
        tools=tools(),
        protected="TODO: [x] fix bug",
    )


def test_conversation_translation_alternates_and_groups(server: Loopback) -> None:
    server.push(Reply(text=["ok"]))
    run(make(server), long_conversation())
    msgs = sent_messages(server)
    roles = [m["role"] for m in msgs]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert all(x != y for x, y in itertools.pairwise(roles))

    # System notices become tagged user text, merged with the neighbouring user turn.
    assert msgs[0]["content"] == [
        {"type": "text", "text": "<system-notice>session resumed</system-notice>"},
        {"type": "text", "text": "fix the bug"},
    ]
    # Empty assistant text is dropped (the API rejects empty text blocks).
    assert msgs[1]["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}}
    ]
    assert msgs[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print('a')"},
        {"type": "text", "text": "<system-notice>budget: 80% used</system-notice>"},
    ]
    # Malformed arguments are replayed as {} so the history stays sendable.
    assert msgs[3]["content"][1] == {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {}}
    # tool_result blocks must lead their user message, even if user text came first.
    assert [b["type"] for b in msgs[4]["content"]] == ["tool_result", "text"]
    assert msgs[4]["content"][0]["tool_use_id"] == "toolu_2"


def test_protected_block_is_last_and_after_the_cache_breakpoint(server: Loopback) -> None:
    server.push(Reply(text=["ok"]))
    run(make(server), long_conversation())
    body = server.last.body
    last = body["messages"][-1]
    assert last["role"] == "user"
    assert last["content"][-2:] == [
        {"type": "text", "text": "thanks", "cache_control": EPHEMERAL},
        {"type": "text", "text": "TODO: [x] fix bug"},
    ]
    n = len(body["messages"]) - 1
    assert breakpoints(body) == ["system[0]", "tools[1]", f"messages[{n}][0]"]


def test_protected_after_assistant_turn_gets_its_own_user_message(server: Loopback) -> None:
    request = ModelRequest(
        system="S",
        messages=[Message.user("go"), Message.assistant("partial answer")],
        tools=[],
        protected="PLAN",
    )
    server.push(Reply(text=["ok"]))
    run(make(server), request)
    assert sent_messages(server) == [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "partial answer", "cache_control": EPHEMERAL}],
        },
        {"role": "user", "content": [{"type": "text", "text": "PLAN"}]},
    ]


def test_empty_system_and_tools_are_omitted(server: Loopback) -> None:
    server.push(Reply(text=["ok"]))
    run(make(server), ModelRequest(system="", messages=[Message.user("hi")], tools=[]))
    body = server.last.body
    assert "system" not in body
    assert "tools" not in body
    assert breakpoints(body) == ["messages[0][0]"]


def test_meta_never_reaches_the_wire(server: Loopback) -> None:
    server.push(Reply(text=["ok"]))
    run(make(server), long_conversation())
    assert "restart_marker" not in json.dumps(server.last.body)


# -- errors ---------------------------------------------------------------------------


def assert_no_secret(err: ProviderError) -> None:
    for text in (str(err), repr(err), repr(err.args)):
        assert SECRET not in text
        assert "41b7e0d9" not in text
        assert "x-api-key" not in text.lower()
        assert "authorization" not in text.lower()
    assert err.__cause__ is None
    assert err.__suppress_context__ is True


def test_auth_failure_is_readable_and_never_leaks_key(server: Loopback) -> None:
    body = {"type": "error", "error": {"type": "authentication_error", "message": f"invalid key {SECRET}"}}
    server.push(HttpError(401, body))
    with pytest.raises(ProviderError) as info:
        run(make(server), simple())
    assert str(info.value) == "anthropic: authentication failed (401) - check ANTHROPIC_API_KEY"
    assert_no_secret(info.value)
    # The key really was on the wire (header name depends on the SDK version).
    assert any(SECRET in v for v in server.last.headers.values())


def test_bad_request_detail_is_kept_but_scrubbed(server: Loopback) -> None:
    message = f"messages.1: tool_use ids must be unique (key {SECRET})"
    server.push(
        HttpError(400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}})
    )
    with pytest.raises(ProviderError) as info:
        run(make(server), simple())
    assert str(info.value).startswith(
        "anthropic: request rejected (400): messages.1: tool_use ids must be unique"
    )
    assert_no_secret(info.value)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (404, "anthropic: not found (404) - check the model name and base_url"),
        (429, "anthropic: rate limited (429)"),
        (529, "anthropic: overloaded (529): x"),
        (500, "anthropic: server error (500): x"),
    ],
)
def test_status_errors(server: Loopback, status: int, expected: str) -> None:
    server.push(HttpError(status, {"type": "error", "error": {"type": "x_error", "message": "x"}}))
    with pytest.raises(ProviderError) as info:
        run(make(server), simple())
    assert str(info.value).startswith(expected)
    assert_no_secret(info.value)


def test_error_event_mid_stream(server: Loopback) -> None:
    start = {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
             "model": "claude-test", "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {"input_tokens": 1, "output_tokens": 1}}}  # fmt: skip
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    sse = f"event: message_start\ndata: {json.dumps(start)}\n\nevent: error\ndata: {json.dumps(error)}\n\n"
    server.push(Raw(sse.encode()))
    with pytest.raises(ProviderError) as info:
        run(make(server), simple())
    assert str(info.value) == "anthropic: stream error (overloaded_error): Overloaded"


def test_connection_dropped_mid_stream(server: Loopback) -> None:
    start = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "par"}}
    sse = (
        f"event: content_block_start\ndata: {json.dumps(start)}\n\n"
        f"event: content_block_delta\ndata: {json.dumps(delta)}\n\n"
    ).encode()
    server.push(Raw(sse, declared_length=len(sse) + 500))
    stream = (e for e in make(server).stream(simple()) if not isinstance(e, Progress))
    # What arrived before the drop was already delivered; the drop itself is a readable error.
    assert next(stream) == TextDelta("par")
    with pytest.raises(ProviderError, match=r"^anthropic: connection lost mid-stream"):
        next(stream)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connection_refused_names_host_and_reason() -> None:
    port = free_port()
    provider = AnthropicProvider("m", api_key=SECRET, base_url=f"http://127.0.0.1:{port}", max_retries=0)
    with pytest.raises(ProviderError) as info:
        run(provider, simple())
    assert str(info.value) == f"anthropic: cannot reach http://127.0.0.1:{port} (connection refused)"
    assert_no_secret(info.value)


def test_timeout(server: Loopback) -> None:
    server.push(Stall(5.0))
    with pytest.raises(ProviderError) as info:
        run(make(server, timeout=0.3), simple())
    assert str(info.value) == f"anthropic: {server.base_url} timed out (timeout 0.3s)"


def test_non_anthropic_endpoint_is_reported(server: Loopback) -> None:
    server.push(Raw(b"<html>hello</html>", content_type="text/html"))
    with pytest.raises(ProviderError, match="answered with text/html, not an event stream - is base_url an "
                                           "Anthropic endpoint") as err:
        run(make(server), simple())
    assert err.value.kind == "fatal"  # asking again gets the same page


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Any:
    """An environment where the SDK can find no key, token, federation or profile."""
    for var in list(os.environ):
        if var.startswith("ANTHROPIC_"):
            monkeypatch.delenv(var)
    # The SDK looks for profiles under ~/.config/anthropic.
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_missing_key_for_default_endpoint(no_credentials: Any) -> None:
    with pytest.raises(ProviderError, match=r"^anthropic: no API key - set ANTHROPIC_API_KEY$"):
        AnthropicProvider("claude-test")


def test_broken_profile_dir_is_reported(no_credentials: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(no_credentials / "nowhere"))
    with pytest.raises(ProviderError, match=r"^anthropic: cannot load credentials - set ANTHROPIC_API_KEY"):
        AnthropicProvider("claude-test")


def test_local_server_needs_no_key(server: Loopback, no_credentials: Any) -> None:
    server.push(Reply(text=["ok"]))
    provider = AnthropicProvider("local", base_url=server.base_url, max_retries=0)
    assert run(provider, simple())[0] == TextDelta("ok")
