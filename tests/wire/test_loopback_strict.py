"""The strict loopback: each rule refuses a minimal bad body and accepts the good one, and a refusal reaches
the real SDKs as the 400 ``BadRequestError`` the real API would cause.

The validators are pure functions (``validate_openai`` / ``validate_anthropic``), so the rule tables call
them directly; the SDK tests prove the server really says no over HTTP. The wire tests in this folder run
against the same strict server: every request our providers send there must pass it.
"""

from __future__ import annotations

import copy
import http.client
import json
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest

from console.engine.messages import Message, ModelRequest, ToolCall, ToolSpec
from console.engine.model import ProviderError
from console.providers.anthropic_provider import AnthropicProvider
from console.providers.openai_provider import OpenAIProvider

from .loopback import Loopback, Reply, validate_anthropic, validate_openai

EPH = {"type": "ephemeral"}
Mutation = Callable[[dict[str, Any]], object]


@pytest.fixture
def server() -> Iterator[Loopback]:
    with Loopback() as lb:
        yield lb


def apply(base: dict[str, Any], mutate: Mutation) -> dict[str, Any]:
    body = copy.deepcopy(base)
    mutate(body)
    return body


def msgs(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = body["messages"]
    return messages


# -- OpenAI Chat Completions ----------------------------------------------------------------


def oa_call(cid: str, name: str = "read_file", args: str = '{"path": "a"}') -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def oa_tool(name: str, params: Any = None) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": name, "description": "d", "parameters": params or {"type": "object"}}
    return {"type": "function", "function": fn}


OPENAI_GOOD: dict[str, Any] = {
    "model": "gpt-test",
    "stream": True,
    "stream_options": {"include_usage": True},
    "max_tokens": 100,
    "messages": [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [oa_call("c1"), oa_call("c2", "grep")]},
        # Results in any order among themselves.
        {"role": "tool", "tool_call_id": "c2", "content": "B"},
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
        {"role": "user", "content": [{"type": "text", "text": "next"}]},
        {"role": "assistant", "content": "Reading.", "tool_calls": [oa_call("c3")]},
        {"role": "tool", "tool_call_id": "c3", "content": [{"type": "text", "text": "C"}]},
        {"role": "system", "content": "TODO"},
    ],
    "tools": [oa_tool("read_file"), oa_tool("grep")],
}


def oa_insert(at: int, message: dict[str, Any]) -> Mutation:
    return lambda b: msgs(b).insert(at, message)


OPENAI_BAD: list[tuple[str, Mutation, str]] = [
    ("no model", lambda b: b.pop("model"), "model"),
    ("empty model", lambda b: b.update(model=""), "model"),
    ("no messages", lambda b: b.pop("messages"), "Missing required parameter: 'messages'"),
    ("empty messages", lambda b: b.update(messages=[]), "too short"),
    ("unknown role", lambda b: msgs(b)[1].update(role="bot"), "Supported values"),
    ("function role", lambda b: msgs(b)[1].update(role="function"), "Supported values"),
    ("a user message inside the tool block", oa_insert(3, {"role": "user", "content": "hurry"}),
     "must be followed by tool messages"),
    ("a system message inside the tool block", oa_insert(4, {"role": "system", "content": "n"}),
     "did not have response messages: c1"),
    ("a result missing", lambda b: msgs(b).pop(4), "did not have response messages: c1"),
    ("results missing at the end", lambda b: b.update(messages=msgs(b)[:3]), "c1, c2"),
    ("a tool message without a block", oa_insert(2, {"role": "tool", "tool_call_id": "c1", "content": "x"}),
     "must be a response to a preceeding message with 'tool_calls'"),
    ("a result after the block closed", oa_insert(6, {"role": "tool", "tool_call_id": "c1", "content": "x"}),
     "must be a response to a preceeding message"),
    ("a result answering an older block", oa_insert(8, {"role": "tool", "tool_call_id": "c1", "content": "x"}),
     "must be a response to a preceeding message"),
    ("a result answering no call", lambda b: msgs(b)[3].update(tool_call_id="zz"), "must be a response"),
    ("a call answered twice", lambda b: msgs(b)[4].update(tool_call_id="c2"), "must be a response"),
    ("a tool message without tool_call_id", lambda b: msgs(b)[3].pop("tool_call_id"), "tool_call_id"),
    ("a tool call without id", lambda b: msgs(b)[2]["tool_calls"][0].pop("id"), "'id'"),
    ("duplicate call ids", lambda b: msgs(b)[2]["tool_calls"][1].update(id="c1"), "Duplicate tool_call id"),
    ("a tool call of type tool", lambda b: msgs(b)[2]["tool_calls"][0].update(type="tool"), "'function'"),
    ("a tool call without name", lambda b: msgs(b)[2]["tool_calls"][0]["function"].pop("name"), "'name'"),
    ("arguments as an object", lambda b: msgs(b)[2]["tool_calls"][0]["function"].update(arguments={"path": "a"}),
     "expected a string"),
    ("empty tool_calls", lambda b: msgs(b)[6].update(tool_calls=[]), "too short"),
    ("assistant without content or calls", lambda b: msgs(b)[2].pop("tool_calls"), "got null"),
    ("user content null", lambda b: msgs(b)[1].update(content=None), "got null"),
    ("content of the wrong type", lambda b: msgs(b)[1].update(content=5), "expected one of a string or array"),
    ("an image part in a system message", lambda b: msgs(b)[0].update(content=[{"type": "image_url"}]),
     "Supported values"),
    ("a text part without text", lambda b: msgs(b)[5].update(content=[{"type": "text"}]), "'text'"),
    ("tools empty", lambda b: b.update(tools=[]), "too short"),
    ("a tool of another type", lambda b: b["tools"][0].update(type="custom"), "'function'"),
    ("a tool name with a space", lambda b: b["tools"][0]["function"].update(name="read file"), "pattern"),
    ("a tool name with a dot", lambda b: b["tools"][0]["function"].update(name="fs.read"), "pattern"),
    ("a tool name of 65 chars", lambda b: b["tools"][0]["function"].update(name="x" * 65), "pattern"),
    ("duplicate tool names", lambda b: b["tools"][1]["function"].update(name="read_file"), "unique"),
    ("parameters not an object schema", lambda b: b["tools"][0]["function"].update(parameters={"type": "array"}),
     "JSON Schema of 'type: \"object\"'"),
    ("stream_options without stream", lambda b: b.pop("stream"), "only allowed when 'stream' is enabled"),
    ("stream_options with stream false", lambda b: b.update(stream=False), "only allowed when 'stream'"),
    ("max_tokens 0", lambda b: b.update(max_tokens=0), "max_tokens"),
    ("tool_choice without tools", lambda b: (b.pop("tools"), b.update(tool_choice="auto")), "tool_choice"),
]

OPENAI_ALSO_GOOD: list[tuple[str, Mutation]] = [
    ("as sent", lambda b: None),
    ("no tools", lambda b: (b.pop("tools"), b.update(messages=[msgs(b)[0], msgs(b)[1]]))),
    ("not streaming", lambda b: (b.pop("stream"), b.pop("stream_options"))),
    ("developer role", lambda b: msgs(b)[0].update(role="developer")),
    ("parameters omitted", lambda b: b["tools"][0]["function"].pop("parameters")),
    ("empty tool result", lambda b: msgs(b)[3].update(content="")),
    ("a 64-char tool name", lambda b: b["tools"][0]["function"].update(name="a-Z_9" + "x" * 59)),
    ("assistant text only", oa_insert(6, {"role": "assistant", "content": "Thinking."})),
]


@pytest.mark.parametrize(("mutate", "expected"), [pytest.param(m, e, id=i) for i, m, e in OPENAI_BAD])
def test_openai_rule_refuses(mutate: Mutation, expected: str) -> None:
    assert validate_openai(OPENAI_GOOD) is None
    problem = validate_openai(apply(OPENAI_GOOD, mutate))
    assert problem is not None and expected in problem, problem


@pytest.mark.parametrize("mutate", [pytest.param(m, id=i) for i, m in OPENAI_ALSO_GOOD])
def test_openai_rule_accepts(mutate: Mutation) -> None:
    assert validate_openai(apply(OPENAI_GOOD, mutate)) is None


# -- Anthropic Messages ----------------------------------------------------------------------


def an_use(uid: str, name: str = "read_file", inp: Any = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": uid, "name": name, "input": {"path": "a"} if inp is None else inp}


def an_result(uid: str, content: str = "R", **kw: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": uid, "content": content, **kw}


def text(t: str, **kw: Any) -> dict[str, Any]:
    return {"type": "text", "text": t, **kw}


ANTHROPIC_GOOD: dict[str, Any] = {
    "model": "claude-test",
    "max_tokens": 100,
    "stream": True,
    "system": [text("S", cache_control=EPH)],
    "tools": [
        {"name": "read_file", "description": "d", "input_schema": {"type": "object"}},
        {"name": "grep", "description": "d", "input_schema": {"type": "object"}, "cache_control": EPH},
    ],
    "messages": [
        {"role": "user", "content": [text("go")]},
        {"role": "assistant", "content": [text("Two."), an_use("toolu_a"), an_use("toolu_b", "grep", {})]},
        # Results first, in any order; text after them is fine.
        {"role": "user", "content": [an_result("toolu_b"), an_result("toolu_a", is_error=True), text("note")]},
        {"role": "assistant", "content": [an_use("toolu_c")]},
        {"role": "user", "content": [an_result("toolu_c", cache_control=EPH), text("TODO")]},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "TODO"},
    ],
}


def an_content(i: int, blocks: list[dict[str, Any]] | str) -> Mutation:
    return lambda b: msgs(b)[i].update(content=blocks)


ANTHROPIC_BAD: list[tuple[str, Mutation, str]] = [
    ("no model", lambda b: b.pop("model"), "model"),
    ("no max_tokens", lambda b: b.pop("max_tokens"), "max_tokens"),
    ("max_tokens 0", lambda b: b.update(max_tokens=0), "max_tokens"),
    ("max_tokens a string", lambda b: b.update(max_tokens="100"), "max_tokens"),
    ("no messages", lambda b: b.pop("messages"), "messages"),
    ("empty messages", lambda b: b.update(messages=[]), "at least one message"),
    ("a system role message", lambda b: msgs(b).insert(0, {"role": "system", "content": "S"}), "top-level `system`"),
    ("a tool role message", lambda b: msgs(b)[6].update(role="tool"), "'user' or 'assistant'"),
    ("first message from the assistant", lambda b: b.update(messages=msgs(b)[5:]), "first message"),
    ("two user messages in a row", lambda b: msgs(b).insert(6, {"role": "user", "content": "again"}), "alternate"),
    ("two assistant messages in a row", lambda b: msgs(b).pop(6) and msgs(b).append({"role": "assistant",
                                                                                      "content": "x"}), "alternate"),
    ("an empty text block", an_content(0, [text("")]), "non-empty"),
    ("a whitespace text block", an_content(0, [text(" \n")]), "non-whitespace"),
    ("an empty system block", lambda b: b.update(system=[text("")]), "non-empty"),
    ("a system block of another type", lambda b: b.update(system=[{"type": "image"}]), "'text'"),
    ("empty content", an_content(0, []), "non-empty content"),
    ("empty string content", an_content(6, ""), "non-empty content"),
    ("a tool_use left unanswered", an_content(2, [text("no results")]), "Did not find 2 `tool_result`"),
    ("one result missing", an_content(2, [an_result("toolu_a")]), "Did not find 2"),
    ("results after text", an_content(2, [text("first"), an_result("toolu_a"), an_result("toolu_b")]),
     "at the beginning of this message"),
    ("a result between text", an_content(2, [an_result("toolu_a"), text("x"), an_result("toolu_b")]),
     "Did not find 2"),
    ("a result answering no tool_use", an_content(6, [an_result("toolu_zz")]), "unexpected `tool_use_id`"),
    ("a result answering an older message", an_content(6, [an_result("toolu_a")]), "unexpected `tool_use_id`"),
    ("a call answered twice", an_content(4, [an_result("toolu_c"), an_result("toolu_c")]), "only once"),
    ("a tool_result in an assistant message", an_content(5, [an_result("toolu_c")]), "not allowed"),
    ("a tool_use in a user message", an_content(6, [an_use("toolu_x")]), "not allowed"),
    ("tool_use input as a string", an_content(3, [an_use("toolu_c", inp='{"path": "a"}')]), "dictionary"),
    ("tool_use id with a dot", lambda b: (msgs(b)[3].update(content=[an_use("toolu.c")]),
                                          msgs(b)[4]["content"][0].update(tool_use_id="toolu.c")), "pattern"),
    ("duplicate tool_use ids", lambda b: (msgs(b)[3].update(content=[an_use("toolu_a")]),
                                          msgs(b)[4]["content"][0].update(tool_use_id="toolu_a")), "unique"),
    ("a tool_use as the last message", lambda b: b.update(messages=msgs(b)[:4]), "without `tool_result` blocks"),
    ("tool blocks without tools", lambda b: b.pop("tools"), "must define tools"),
    ("a tool name with a space", lambda b: b["tools"][0].update(name="read file"), "pattern"),
    ("a tool name of 65 chars", lambda b: b["tools"][0].update(name="x" * 65), "pattern"),
    ("duplicate tool names", lambda b: b["tools"][1].update(name="read_file"), "unique"),
    ("input_schema missing", lambda b: b["tools"][0].pop("input_schema"), "input_schema"),
    ("input_schema not an object", lambda b: b["tools"][0].update(input_schema={"type": "array"}), "'object'"),
    ("five cache breakpoints", lambda b: (msgs(b)[0]["content"][0].update(cache_control=EPH),
                                          msgs(b)[1]["content"][0].update(cache_control=EPH)), "maximum of 4"),
    ("a cache_control of another type", lambda b: msgs(b)[0]["content"][0].update(cache_control={"type": "x"}),
     "ephemeral"),
    ("tool_choice without tools", lambda b: (b.update(messages=msgs(b)[:1]), b.pop("tools"),
                                             b.update(tool_choice={"type": "auto"})), "tool_choice"),
]

ANTHROPIC_ALSO_GOOD: list[tuple[str, Mutation]] = [
    ("as sent", lambda b: None),
    ("system as a string", lambda b: b.update(system="S")),
    ("no system", lambda b: b.pop("system")),
    ("no tools and no tool blocks", lambda b: (b.pop("tools"), b.update(messages=msgs(b)[:1]))),
    ("a result without content", lambda b: msgs(b)[4]["content"][0].pop("content")),
    ("a result with text blocks", lambda b: msgs(b)[4]["content"][0].update(content=[text("C")])),
    ("an empty final assistant message", lambda b: msgs(b).append({"role": "assistant", "content": ""})),
    ("four cache breakpoints", lambda b: msgs(b)[0]["content"][0].update(cache_control=EPH)),
    ("a 64-char tool name", lambda b: b["tools"][0].update(name="a-Z_9" + "x" * 59)),
]


@pytest.mark.parametrize(("mutate", "expected"), [pytest.param(m, e, id=i) for i, m, e in ANTHROPIC_BAD])
def test_anthropic_rule_refuses(mutate: Mutation, expected: str) -> None:
    assert validate_anthropic(ANTHROPIC_GOOD) is None
    problem = validate_anthropic(apply(ANTHROPIC_GOOD, mutate))
    assert problem is not None and expected in problem, problem


@pytest.mark.parametrize("mutate", [pytest.param(m, id=i) for i, m in ANTHROPIC_ALSO_GOOD])
def test_anthropic_rule_accepts(mutate: Mutation) -> None:
    assert validate_anthropic(apply(ANTHROPIC_GOOD, mutate)) is None


@pytest.mark.parametrize("body", [None, [], "x", 3])
def test_a_body_that_is_not_an_object_is_refused(body: Any) -> None:
    assert validate_openai(body) is not None
    assert validate_anthropic(body) is not None


# -- the refusal over HTTP, through the real SDKs ------------------------------------------------


def test_openai_sdk_gets_a_bad_request_error(server: Loopback) -> None:
    server.push(Reply(text=["never sent"]))
    client = openai.OpenAI(api_key="k", base_url=server.openai_url, max_retries=0)
    orphan = [{"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "call_1", "content": "r"}]
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="gpt-test", messages=orphan)  # type: ignore[arg-type]
    err = info.value
    assert err.status_code == 400
    assert isinstance(err.body, dict)
    assert err.body["type"] == "invalid_request_error" and err.body["param"] == "messages.[1].role"
    assert "must be a response to a preceeding message with 'tool_calls'" in err.body["message"]
    # Recorded with its reason; the canned reply is still queued for the next (valid) request.
    assert [r.rejected for r in server.requests] == [server.rejected[0].rejected]
    client.chat.completions.create(model="gpt-test", messages=orphan[:1], stream=True).close()
    assert len(server.requests) == 2 and server.last.rejected is None


def test_anthropic_sdk_gets_a_bad_request_error(server: Loopback) -> None:
    server.push(Reply(text=["never sent"]))
    client = anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0)
    results_after_text = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "text", "text": "here"},
                                     {"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"}]},
    ]
    tools = [{"name": "ls", "input_schema": {"type": "object"}}]
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model="claude-test", max_tokens=10, messages=results_after_text,  # type: ignore
                               tools=tools)  # type: ignore[arg-type]
    err = info.value
    assert err.status_code == 400
    assert isinstance(err.body, dict) and err.body["type"] == "error"
    assert err.body["error"]["type"] == "invalid_request_error"
    assert err.body["error"]["message"].startswith("messages.2: Did not find 1 `tool_result` block(s)")
    assert len(server.rejected) == 1 and server.rejected[0].path == "/v1/messages"


def test_malformed_json_is_a_400(server: Loopback) -> None:
    host, port = server.base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("POST", "/v1/messages", body=b"{not json", headers={"content-type": "application/json"})
        response = conn.getresponse()
        payload = json.loads(response.read())
    finally:
        conn.close()
    assert response.status == 400
    assert payload["error"] == {"type": "invalid_request_error", "message": "the request body is not valid JSON"}
    assert server.rejected[0].rejected == "the request body is not valid JSON"


# -- through our providers: a refusal surfaces as a ProviderError, a valid history passes ------------


def orphan_result() -> ModelRequest:
    """A history no engine path should produce: a tool result with no call before it."""
    call = ToolCall(id="call_1", name="read_file", arguments="{}")
    tools = [ToolSpec(name="read_file", description="Read.", parameters={"type": "object"})]
    return ModelRequest(system="S", messages=[Message.user("go"), Message.tool(call, "r")], tools=tools)


def test_openai_provider_reports_the_refusal(server: Loopback) -> None:
    provider = OpenAIProvider("gpt-test", api_key="k", base_url=server.openai_url, max_retries=0)
    with pytest.raises(ProviderError, match=r"^openai: request rejected \(400\): Invalid parameter: messages "
                                            r"with role 'tool' must be a response"):
        list(provider.stream(orphan_result()))
    assert len(server.rejected) == 1


def test_anthropic_provider_reports_the_refusal(server: Loopback) -> None:
    provider = AnthropicProvider("claude-test", api_key="k", base_url=server.base_url, max_retries=0)
    with pytest.raises(ProviderError, match=r"^anthropic: request rejected \(400\): messages.0.content.0: "
                                            r"unexpected `tool_use_id`"):
        list(provider.stream(orphan_result()))
    assert len(server.rejected) == 1


def tool_history() -> list[Message]:
    a = ToolCall(id="call_a", name="read_file", arguments='{"path": "a.py"}')
    bad = ToolCall(id="call_b", name="read_file", arguments='{"path": ')
    return [
        Message.user("Begin.", kind="kickoff"),
        Message.assistant("", [a, bad]),
        Message.tool(a, "print('a')"),
        Message.tool(bad, "Invalid arguments for read_file: not valid JSON", ok=False),
        Message.user("[feedback]", kind="feedback"),
        Message.assistant("Done reading."),
    ]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_the_llm_summary_request_is_valid(server: Loopback, kind: str) -> None:
    """The request behind `[context] summary = "llm"` (a phase transition): the history it summarizes holds
    tool calls and results, and it is sent with no tool definitions."""
    from console.engine.context.summary import llm_summary_request

    request = llm_summary_request(tool_history())
    server.push(Reply(text=["summary"]))
    if kind == "openai":
        provider: OpenAIProvider | AnthropicProvider = OpenAIProvider(
            "gpt-test", api_key="k", base_url=server.openai_url, max_retries=0)
    else:
        provider = AnthropicProvider("claude-test", api_key="k", base_url=server.base_url, max_retries=0)
    try:
        list(provider.stream(request))
    except ProviderError as exc:
        pytest.fail(f"{kind} sent a request the real API refuses: {exc}\n"
                    f"request: {json.dumps(server.last.body)[:1500]}")
    assert not server.rejected
