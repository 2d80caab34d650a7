"""OpenAIProvider through the real SDK against the loopback server."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from console.engine.messages import Message, ModelRequest, ToolCall, ToolSpec
from console.engine.model import Progress, Provider, ProviderError, Stop, StreamEvent, TextDelta, ToolCallEvent, Usage
from console.providers.openai_provider import OpenAIProvider

from .loopback import CannedToolCall, CannedUsage, HttpError, Loopback, Raw, Reply, Stall

SECRET = "sk-test-DO-NOT-LEAK-7f3a9c2e"


@pytest.fixture
def server() -> Iterator[Loopback]:
    with Loopback() as lb:
        yield lb


def make(server: Loopback, **kw: Any) -> OpenAIProvider:
    kw.setdefault("api_key", SECRET)
    kw.setdefault("max_retries", 0)
    return OpenAIProvider("gpt-test", base_url=server.openai_url, **kw)


def simple(**kw: Any) -> ModelRequest:
    return ModelRequest(system="You are terse.", messages=[Message.user("hi")], tools=[], **kw)


def run(provider: OpenAIProvider, request: ModelRequest) -> list[StreamEvent]:
    # Progress only keeps the engine's stall watchdog quiet (tests/wire/test_faults_attack.py): not content.
    return [e for e in provider.stream(request) if not isinstance(e, Progress)]


# -- streaming ------------------------------------------------------------------------


def test_satisfies_provider_protocol(server: Loopback) -> None:
    provider = make(server)
    assert isinstance(provider, Provider)
    assert (provider.name, provider.model) == ("openai", "gpt-test")


def test_text_deltas_arrive_in_order_then_usage_then_stop(server: Loopback) -> None:
    server.push(Reply(text=["Hel", "lo, ", "world"]))
    events = run(make(server), simple())
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo, "),
        TextDelta("world"),
        Usage(input_tokens=10, output_tokens=5, cached_input_tokens=0),
        Stop("end_turn"),
    ]


def test_tool_call_split_across_deltas_becomes_one_event(server: Loopback) -> None:
    args = ['{"pa', 'th": "src/', 'main.py", "li', 'mit": 20}']
    server.push(Reply(tool_calls=[CannedToolCall("call_1", "read_file", args)]))
    events = run(make(server), simple())
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [ToolCallEvent(ToolCall(id="call_1", name="read_file", arguments="".join(args)))]
    # Raw text, not parsed: the registry validates it.
    assert json.loads(calls[0].call.arguments) == {"path": "src/main.py", "limit": 20}
    assert events[-1] == Stop("tool_use")


@pytest.mark.parametrize("interleave", [False, True], ids=["sequential", "interleaved"])
def test_two_parallel_tool_calls_assembled_by_index(server: Loopback, interleave: bool) -> None:
    server.push(
        Reply(
            text=["Reading both."],
            tool_calls=[
                CannedToolCall("call_a", "read_file", ['{"path":', ' "a.py"}']),
                CannedToolCall("call_b", "grep", ['{"pattern"', ': "TODO",', ' "path": "."}']),
            ],
            interleave=interleave,
        )
    )
    events = run(make(server), simple())
    assert [type(e) for e in events] == [TextDelta, ToolCallEvent, ToolCallEvent, Usage, Stop]
    assert events[1] == ToolCallEvent(ToolCall(id="call_a", name="read_file", arguments='{"path": "a.py"}'))
    assert events[2] == ToolCallEvent(
        ToolCall(id="call_b", name="grep", arguments='{"pattern": "TODO", "path": "."}')
    )


def test_tool_call_without_arguments_stays_empty(server: Loopback) -> None:
    server.push(Reply(tool_calls=[CannedToolCall("call_1", "list_todos", [])]))
    events = run(make(server), simple())
    # Empty stays empty here: the engine records {} once the reply is known whole (a call cut by max_tokens
    # before its arguments is refused, never run with {}).
    assert ToolCallEvent(ToolCall(id="call_1", name="list_todos", arguments="")) in events


def test_usage_maps_prompt_completion_and_cached_tokens(server: Loopback) -> None:
    server.push(
        Reply(text=["ok"], usage=CannedUsage(input_tokens=1200, output_tokens=34, cached_tokens=1024))
    )
    usage = [e for e in run(make(server), simple()) if isinstance(e, Usage)]
    assert usage == [Usage(input_tokens=1200, output_tokens=34, cached_input_tokens=1024, reported=True)]


def test_missing_usage_is_estimated_and_flagged(server: Loopback) -> None:
    server.push(Reply(text=["x" * 40], usage=None))
    request = simple()
    usage = [e for e in run(make(server), request) if isinstance(e, Usage)]
    assert len(usage) == 1
    assert usage[0].reported is False
    assert usage[0].output_tokens == 10  # 40 chars / 4
    assert usage[0].input_tokens == (len("You are terse.") + len("hi") + 3) // 4


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("stop", Stop("end_turn")),
        ("length", Stop("max_tokens")),
        ("tool_calls", Stop("tool_use")),
        ("content_filter", Stop("end_turn", "content_filter")),
    ],
)
def test_finish_reason_mapping(server: Loopback, finish: str, expected: Stop) -> None:
    server.push(Reply(text=["x"], finish=finish))
    assert run(make(server), simple())[-1] == expected


def test_tool_calls_with_finish_stop_still_mean_tool_use(server: Loopback) -> None:
    # Some compatible servers (older Ollama) finish with "stop" even when calling tools.
    server.push(Reply(tool_calls=[CannedToolCall("c", "ls", ["{}"])], finish="stop"))
    assert run(make(server), simple())[-1] == Stop("tool_use")


def test_compat_server_quirks_whole_calls_without_index_or_id(server: Loopback) -> None:
    # Seen from Ollama-style servers: each call complete in one delta, no index/id, "stop", no usage.
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip
        return f"data: {json.dumps(body)}\n\n"

    whole = [{"function": {"name": "ls", "arguments": '{"path": "."}'}}]
    sse = chunk({"tool_calls": whole}) + chunk({"tool_calls": whole}) + chunk({}, "stop") + "data: [DONE]\n\n"
    server.push(Raw(sse.encode()))
    events = run(make(server), simple())
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert [(c.name, c.arguments) for c in calls] == [("ls", '{"path": "."}')] * 2
    assert all(c.id.startswith("call_") for c in calls)
    assert calls[0].id != calls[1].id
    assert next(e for e in events if isinstance(e, Usage)).reported is False
    assert events[-1] == Stop("tool_use")


# -- request translation --------------------------------------------------------------


def conversation() -> ModelRequest:
    call = ToolCall(id="call_1", name="read_file", arguments='{"path": "a.py"}')
    return ModelRequest(
        system="SYSTEM PROMPT",
        messages=[
            Message.user("fix the bug"),
            Message.assistant("Looking.", [call]),
            Message.tool(call, "print('a')"),
            Message.system("budget: 80% used", kind="notice"),
            Message.assistant("Done."),
            Message.user("thanks"),
        ],
        tools=[ToolSpec(name="read_file", description="Read a file.", parameters={"type": "object"})],
        protected="TODO: [x] fix bug",
        max_output_tokens=777,
    )


def test_request_translation(server: Loopback) -> None:
    server.push(Reply(text=["ok"]))
    run(make(server), conversation())
    rec = server.last
    assert rec.path == "/v1/chat/completions"
    body = rec.body
    assert body["model"] == "gpt-test"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    # A compatible server (a base_url that is not OpenAI's) gets max_tokens; OpenAI itself the newer name.
    assert body["max_tokens"] == 777
    assert "max_completion_tokens" not in body
    # Only the system prompt is a system message, first (chat templates refuse one anywhere else); a harness
    # notice is a tagged user message, right after the tool results (only a Mistral-family server, which refuses a
    # user message there, gets "(no reply)" between them); the protected layer joins the last user message.
    assert body["messages"] == [
        {"role": "system", "content": "SYSTEM PROMPT"},
        {"role": "user", "content": "fix the bug"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "print('a')"},
        {"role": "user", "content": "<system-notice>budget: 80% used</system-notice>"},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "thanks\n\nTODO: [x] fix bug"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": {"type": "object"},
            },
        }
    ]
    # Harness bookkeeping (meta: kind="notice") never reaches the wire.
    assert '"kind"' not in json.dumps(body) and '"meta"' not in json.dumps(body)


def test_key_is_sent_as_bearer_token(server: Loopback) -> None:
    server.push(Reply(text=["ok"]))
    run(make(server), simple())
    assert server.last.headers["authorization"] == f"Bearer {SECRET}"


def test_assistant_with_only_tool_calls_sends_null_content(server: Loopback) -> None:
    call = ToolCall(id="c1", name="ls")
    request = ModelRequest(
        system="s",
        messages=[Message.user("go"), Message.assistant("", [call]), Message.tool(call, "")],
        tools=[],
    )
    server.push(Reply(text=["ok"]))
    run(make(server), request)
    assert server.last.body["messages"][2]["content"] is None


def test_empty_system_protected_and_tools_are_omitted(server: Loopback) -> None:
    server.push(Reply(text=["ok"]))
    run(make(server), ModelRequest(system="", messages=[Message.user("hi")], tools=[]))
    body = server.last.body
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert "tools" not in body


def test_prefix_is_byte_stable_when_only_protected_and_new_turns_change(server: Loopback) -> None:
    first = conversation()
    second = first.model_copy(
        update={"messages": [*first.messages, Message.assistant("np")], "protected": "TODO: [ ] next"}
    )
    server.push(Reply(text=["a"]), Reply(text=["b"]))
    provider = make(server)
    run(provider, first)
    run(provider, second)
    a, b = (r.body["messages"] for r in server.requests)
    prefix = len(a) - 1  # everything before the last user message, which carries the protected block
    assert json.dumps(a[:prefix]) == json.dumps(b[:prefix])
    # The last user message only gained the protected block at its end: a prompt cache (token prefixes) keeps
    # all of its own text too.
    assert a[-1]["content"] == "thanks\n\nTODO: [x] fix bug" and b[prefix] == {"role": "user", "content": "thanks"}
    # After an assistant reply the block is a user message of its own, last.
    assert b[-1] == {"role": "user", "content": "TODO: [ ] next"}


def test_local_server_needs_no_key(server: Loopback, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.push(Reply(text=["ok"]))
    provider = OpenAIProvider("llama3", base_url=server.openai_url, max_retries=0)
    assert run(provider, simple())[0] == TextDelta("ok")


# -- errors ---------------------------------------------------------------------------


def assert_no_secret(err: ProviderError) -> None:
    for text in (str(err), repr(err), repr(err.args)):
        assert SECRET not in text
        assert "7f3a9c2e" not in text  # nor the tail a masking server might echo
        assert "authorization" not in text.lower()
    # No chained SDK exception either: it holds the request and its headers.
    assert err.__cause__ is None
    assert err.__suppress_context__ is True


def test_auth_failure_is_readable_and_never_leaks_key(server: Loopback) -> None:
    masked = f"Incorrect API key provided: {SECRET[:8]}****{SECRET[-4:]}"
    server.push(HttpError(401, {"error": {"message": masked, "type": "invalid_request_error"}}))
    with pytest.raises(ProviderError) as info:
        run(make(server), simple())
    assert str(info.value) == "openai: authentication failed (401) - check OPENAI_API_KEY"
    assert_no_secret(info.value)
    # The key really was on the wire, so the assertion above is meaningful.
    assert SECRET in server.last.headers["authorization"]


def test_bad_request_detail_is_kept_but_scrubbed(server: Loopback) -> None:
    message = f"model 'nope' does not exist (key {SECRET})"
    server.push(HttpError(400, {"error": {"message": message, "type": "invalid_request_error"}}))
    with pytest.raises(ProviderError) as info:
        run(make(server), simple())
    text = str(info.value)
    assert text.startswith("openai: request rejected (400): model 'nope' does not exist")
    assert "\n" not in text
    assert_no_secret(info.value)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (404, "openai: not found (404) - check the model name and base_url"),
        (429, "openai: rate limited (429)"),
        (503, "openai: server error (503): x"),
        (403, "openai: permission denied (403)"),
    ],
)
def test_status_errors(server: Loopback, status: int, expected: str) -> None:
    server.push(HttpError(status, {"error": {"message": "x"}}))
    with pytest.raises(ProviderError) as info:
        run(make(server), simple())
    assert str(info.value).startswith(expected)
    assert_no_secret(info.value)


def test_error_chunk_mid_stream(server: Loopback) -> None:
    # vLLM and others report failures after the 200 as a data chunk carrying "error".
    first = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "par"}, "finish_reason": None}]}  # fmt: skip
    error = {"error": {"message": "engine crashed", "type": "server_error"}}
    server.push(Raw(f"data: {json.dumps(first)}\n\ndata: {json.dumps(error)}\n\n".encode()))
    stream = make(server).stream(simple())
    assert next(stream) == TextDelta("par")
    with pytest.raises(ProviderError) as info:
        next(stream)
    assert str(info.value) == "openai: stream failed: engine crashed"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connection_refused_names_host_and_reason() -> None:
    port = free_port()
    provider = OpenAIProvider("m", api_key=SECRET, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(ProviderError) as info:
        run(provider, simple())
    assert str(info.value) == f"openai: cannot reach http://127.0.0.1:{port} (connection refused)"
    assert_no_secret(info.value)


def test_timeout(server: Loopback) -> None:
    server.push(Stall(5.0))
    with pytest.raises(ProviderError) as info:
        run(make(server, timeout=0.3), simple())
    assert str(info.value) == f"openai: {server.base_url} timed out (timeout 0.3s)"


def test_non_openai_endpoint_is_reported(server: Loopback) -> None:
    server.push(Raw(b"<html>hello</html>", content_type="text/html"))
    with pytest.raises(ProviderError, match="answered with text/html, not an event stream - is base_url an "
                                           "OpenAI-compatible /v1 endpoint") as err:
        run(make(server), simple())
    assert err.value.kind == "fatal"  # asking again gets the same page


def test_missing_key_for_default_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="set OPENAI_API_KEY"):
        OpenAIProvider("gpt-test")


def test_a_local_server_without_a_key_gets_no_authorization_header(server: Loopback, monkeypatch) -> None:
    """The README: "any value in OPENAI_API_KEY is accepted, none is sent if unset". The SDK needs a key to build
    a client, and the placeholder it was given went out as "Authorization: Bearer not-needed"."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.push(Reply(text=["ok"]))
    events = run(OpenAIProvider("gpt-test", base_url=server.openai_url, max_retries=0), simple())
    assert TextDelta("ok") in events
    assert "authorization" not in server.last.headers and "api-key" not in server.last.headers
    # With a key, it is sent as before.
    server.push(Reply(text=["ok"]))
    run(make(server), simple())
    assert server.last.headers["authorization"] == f"Bearer {SECRET}"
