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
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest

from console.engine.messages import Message, ModelRequest, ToolCall, ToolSpec
from console.engine.model import ProviderError
from console.providers.anthropic_provider import AnthropicProvider
from console.providers.openai_provider import OpenAIProvider

from .loopback import (
    SIGNATURE,
    AnthropicStreamError,
    CannedToolCall,
    CannedUsage,
    Cut,
    EndEarly,
    HttpError,
    KeepAlive,
    Loopback,
    NotUtf8,
    OpenAIStreamError,
    Reply,
    Stall,
    StallAfter,
    anthropic_api_error,
    anthropic_auth_error,
    anthropic_overloaded,
    anthropic_permission_error,
    anthropic_prompt_too_long,
    anthropic_rate_limit,
    local_context_length,
    openai_auth_error,
    openai_context_length,
    openai_overloaded,
    openai_permission_denied,
    openai_rate_limit,
    openai_server_error,
    published_types_status,
    tokens,
    validate_anthropic,
    validate_openai,
)

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
    # New in the strict server: what OpenAI answers that the old hand rules did not check.
    ("an unknown top-level argument", lambda b: b.update(reasoning_budget=5),
     "Unrecognized request argument supplied: reasoning_budget"),
    ("max_tokens and max_completion_tokens together", lambda b: b.update(max_completion_tokens=100),
     "max_tokens and max_completion_tokens cannot both be set"),
    ("max_tokens on an o-series model", lambda b: b.update(model="o3-mini"),
     "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."),
    ("max_tokens on a gpt-5 model", lambda b: b.update(model="gpt-5.1"), "Unsupported parameter: 'max_tokens'"),
    # ... and what only the SDK's published request type knows.
    ("an unknown key in a message", lambda b: msgs(b)[1].update(sender="me"),
     "messages.[1]: Additional properties are not allowed ('sender' was unexpected)"),
    ("an unknown key in a tool call", lambda b: msgs(b)[2]["tool_calls"][0].update(status="done"),
     "('status' was unexpected)"),
    ("an unknown key in a function definition", lambda b: b["tools"][0]["function"].update(returns={}),
     "tools.[0].function: Additional properties are not allowed ('returns' was unexpected)"),
    ("an unknown key in stream_options", lambda b: b["stream_options"].update(include_cost=True),
     "stream_options: Additional properties are not allowed ('include_cost' was unexpected)"),
    ("include_usage not a boolean", lambda b: b["stream_options"].update(include_usage="yes"),
     "Invalid value for 'stream_options.include_usage'"),
    ("temperature as a string", lambda b: b.update(temperature="0.2"), "Invalid value for 'temperature'"),
    ("an unknown tool_choice", lambda b: b.update(tool_choice="sometimes"), "Invalid value for 'tool_choice'"),
    ("n not an integer", lambda b: b.update(n=1.5), "Invalid value for 'n'"),
    ("a tool message without content", lambda b: msgs(b)[3].pop("content"), "content"),
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
    ("max_completion_tokens instead", lambda b: (b.pop("max_tokens"), b.update(max_completion_tokens=100))),
    ("an o-series model with max_completion_tokens",
     lambda b: (b.pop("max_tokens"), b.update(model="o3-mini", max_completion_tokens=100))),
    ("sampling parameters", lambda b: b.update(temperature=0.2, top_p=1, seed=7, parallel_tool_calls=True)),
    ("temperature as an integer", lambda b: b.update(temperature=1)),
    ("tool_choice auto", lambda b: b.update(tool_choice="auto")),
    ("tool_choice naming a function",
     lambda b: b.update(tool_choice={"type": "function", "function": {"name": "grep"}})),
    ("include_obfuscation off", lambda b: b["stream_options"].update(include_obfuscation=False)),
    ("a named user", lambda b: msgs(b)[1].update(name="alice")),
]


@pytest.mark.parametrize(("mutate", "expected"), [pytest.param(m, e, id=i) for i, m, e in OPENAI_BAD])
def test_openai_rule_refuses(mutate: Mutation, expected: str) -> None:
    assert validate_openai(OPENAI_GOOD) is None
    problem = validate_openai(apply(OPENAI_GOOD, mutate))
    assert problem is not None and expected in problem, problem


@pytest.mark.parametrize("mutate", [pytest.param(m, id=i) for i, m in OPENAI_ALSO_GOOD])
def test_openai_rule_accepts(mutate: Mutation) -> None:
    assert validate_openai(apply(OPENAI_GOOD, mutate)) is None


# -- an OpenAI-compatible local server rendering a chat template (vLLM, llama.cpp, LM Studio) -----------


def no_late_system(body: dict[str, Any]) -> None:
    body["messages"] = [m for i, m in enumerate(msgs(body)) if m["role"] != "system" or i == 0]


CHAT_TEMPLATE_GOOD = apply(OPENAI_GOOD, no_late_system)


def call_args(i: int, k: int, args: str) -> Mutation:
    return lambda b: msgs(b)[i]["tool_calls"][k]["function"].update(arguments=args)


CHAT_TEMPLATE_BAD: list[tuple[str, Mutation, str]] = [
    ("a system message last (as OpenAI accepts)", lambda b: msgs(b).append({"role": "system", "content": "TODO"}),
     "messages.[8].role: System message must be at the beginning."),
    ("a system message second", oa_insert(1, {"role": "system", "content": "more"}),
     "System message must be at the beginning."),
    ("replayed arguments that are not JSON", call_args(2, 1, '{"path": '),
     'The "function.arguments" parameter must be in JSON format'),
    ("replayed arguments that are empty", call_args(6, 0, ""), "must be in JSON format"),
    ("replayed arguments that are a JSON array", call_args(2, 0, "[1, 2]"), "must be a JSON object, got list"),
    ("a developer message", lambda b: msgs(b)[0].update(role="developer"), "Unexpected message role."),
    ("no user message", lambda b: b.update(messages=[msgs(b)[0], {"role": "assistant", "content": "Hi."}]),
     "No user query found in messages."),
    ("tools empty", lambda b: b.update(tools=[]), "too short"),
    # The OpenAI rules hold too: the dialect is a superset.
    ("a result missing", lambda b: msgs(b).pop(4), "did not have response messages: c1"),
    ("a tool name with a dot", lambda b: b["tools"][0]["function"].update(name="fs.read"), "pattern"),
]

CHAT_TEMPLATE_ALSO_GOOD: list[tuple[str, Mutation]] = [
    ("as sent", lambda b: None),
    # vLLM uses whichever limit is set; OpenAI refuses both.
    ("max_tokens and max_completion_tokens together", lambda b: b.update(max_completion_tokens=100)),
    ("max_tokens with an o-series model name", lambda b: b.update(model="o3-mini")),
    # vLLM's request model ignores (and logs) unknown fields, and takes its own extensions.
    ("vLLM's chat_template_kwargs", lambda b: b.update(chat_template_kwargs={"enable_thinking": False})),
    ("reasoning_content replayed on an assistant message", lambda b: msgs(b)[6].update(reasoning_content="hm")),
    ("arguments of an empty object", call_args(6, 0, "{}")),
]


@pytest.mark.parametrize(("mutate", "expected"), [pytest.param(m, e, id=i) for i, m, e in CHAT_TEMPLATE_BAD])
def test_chat_template_rule_refuses(mutate: Mutation, expected: str) -> None:
    assert validate_openai(CHAT_TEMPLATE_GOOD, "chat_template") is None
    problem = validate_openai(apply(CHAT_TEMPLATE_GOOD, mutate), "chat_template")
    assert problem is not None and expected in problem, problem


@pytest.mark.parametrize("mutate", [pytest.param(m, id=i) for i, m in CHAT_TEMPLATE_ALSO_GOOD])
def test_chat_template_rule_accepts(mutate: Mutation) -> None:
    assert validate_openai(apply(CHAT_TEMPLATE_GOOD, mutate), "chat_template") is None


def test_the_dialects_differ_where_the_servers_do() -> None:
    # OpenAI takes a trailing system message and refuses both token limits; a chat template the other way round.
    late_system = OPENAI_GOOD
    both_limits = apply(CHAT_TEMPLATE_GOOD, lambda b: b.update(max_completion_tokens=100))
    assert validate_openai(late_system) is None
    assert validate_openai(late_system, "chat_template") == (
        "messages.[8].role: System message must be at the beginning.")
    assert validate_openai(both_limits, "chat_template") is None
    assert validate_openai(both_limits) == "max_tokens: max_tokens and max_completion_tokens cannot both be set"
    with pytest.raises(ValueError, match="unknown OpenAI dialect"):
        validate_openai(OPENAI_GOOD, "vllm")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="openai_dialect must be one of"):
        Loopback(openai_dialect="vllm")  # type: ignore[arg-type]


def test_the_published_request_types_are_in_force() -> None:
    """pydantic compiles the SDKs' TypedDicts; if a future SDK breaks that, this says why (the hand rules go on)."""
    status = published_types_status()
    assert len(status) == 8 and set(status.values()) == {"ok"}, status


# -- Anthropic Messages ----------------------------------------------------------------------


def an_use(uid: str, name: str = "read_file", inp: Any = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": uid, "name": name, "input": {"path": "a"} if inp is None else inp}


def an_result(uid: str, content: str = "R", **kw: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": uid, "content": content, **kw}


def text(t: str, **kw: Any) -> dict[str, Any]:
    return {"type": "text", "text": t, **kw}


def thinking(t: str, signature: str = "EqQBCkgIBxAB") -> dict[str, Any]:
    return {"type": "thinking", "thinking": t, "signature": signature}


def enabled(budget: int) -> dict[str, Any]:
    return {"type": "enabled", "budget_tokens": budget}


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
    ("max_tokens negative", lambda b: b.update(max_tokens=-1), "max_tokens"),
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
    # New in the strict server.
    ("a thinking block without signature", an_content(3, [{"type": "thinking", "thinking": "hm"}, an_use("toolu_c")]),
     "messages.3.content.0.thinking.signature: Field required"),
    ("a thinking block with an empty signature", an_content(3, [thinking("hm", signature=""), an_use("toolu_c")]),
     "signature: Field required"),
    ("a redacted_thinking block without data", an_content(3, [{"type": "redacted_thinking"}, an_use("toolu_c")]),
     "redacted_thinking.data: Field required"),
    ("a thinking budget under 1024", lambda b: b.update(max_tokens=4000, thinking=enabled(512)),
     "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"),
    ("a thinking budget not under max_tokens", lambda b: b.update(thinking=enabled(2048)),
     "`max_tokens` must be greater than `thinking.budget_tokens`"),
    ("thinking on, the tool turn passed back without its thinking",
     lambda b: b.update(max_tokens=4000, thinking=enabled(1024), messages=msgs(b)[:5]),
     "messages.3.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`"),
    ("a top-level cache_control as a fifth breakpoint",
     lambda b: (b.update(cache_control=EPH), msgs(b)[0]["content"][0].update(cache_control=EPH)), "maximum of 4"),
    ("an unknown top-level argument", lambda b: b.update(top_n=3), "top_n: Extra inputs are not permitted"),
    ("an unknown key in a block", lambda b: msgs(b)[0]["content"][0].update(lang="en"),
     "messages.0.content.0.lang: Extra inputs are not permitted"),
    ("an unknown key in a tool", lambda b: b["tools"][0].update(returns={}), "tools.0.returns: Extra inputs"),
    ("metadata.user_id a number", lambda b: b.update(metadata={"user_id": 7}),
     "metadata.user_id: Input should be a valid string"),
    ("an unknown service_tier", lambda b: b.update(service_tier="premium"), "service_tier: Input should be"),
    ("is_error a string", lambda b: msgs(b)[2]["content"][1].update(is_error="true"), "is_error"),
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
    # The published type: "Set to `0` to populate the prompt cache without generating a response."
    ("max_tokens 0 (cache pre-warming)", lambda b: b.update(max_tokens=0)),
    ("a signed thinking block first", an_content(3, [thinking("hm"), an_use("toolu_c")])),
    ("a redacted_thinking block", an_content(3, [{"type": "redacted_thinking", "data": "EmwK"}, an_use("toolu_c")])),
    ("thinking on, the tool turn passed back with its thinking",
     lambda b: (b.update(max_tokens=4000, thinking=enabled(1024), messages=msgs(b)[:5]),
                msgs(b)[3].update(content=[thinking("hm"), an_use("toolu_c")]))),
    ("adaptive thinking, an ordinary last turn", lambda b: b.update(thinking={"type": "adaptive"})),
    ("cache_control null is no breakpoint", lambda b: (msgs(b)[0]["content"][0].update(cache_control=EPH),
                                                      msgs(b)[1]["content"][0].update(cache_control=None))),
    ("a top-level cache_control as the fourth breakpoint", lambda b: b.update(cache_control=EPH)),
    ("a 1h cache ttl", lambda b: b["system"][0].update(cache_control={"type": "ephemeral", "ttl": "1h"})),
    ("metadata with a user id", lambda b: b.update(metadata={"user_id": "u-1"})),
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


# == streams shaped like recorded ones, as the real SDKs see them =====================================


def oa_client(server: Loopback, *, timeout: float = 5.0, retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-loopback", base_url=server.openai_url, max_retries=retries, timeout=timeout)


def an_client(server: Loopback, *, timeout: float = 5.0, retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="sk-loopback", base_url=server.base_url, max_retries=retries, timeout=timeout)


HI = [{"role": "user", "content": "hi"}]
USAGE = {"include_usage": True}


def oa_stream(client: openai.OpenAI, **kw: Any) -> tuple[list[Any], BaseException | None]:
    """The chunks the SDK yields, and what it raised (None if the stream ended normally)."""
    got: list[Any] = []
    kw.setdefault("stream_options", USAGE)
    try:
        with client.chat.completions.create(model="gpt-test", messages=HI, stream=True, **kw) as chunks:  # type: ignore
            got.extend(chunks)
    except Exception as err:
        return got, err
    return got, None


def an_stream(client: anthropic.Anthropic, **kw: Any) -> tuple[list[Any], BaseException | None]:
    got: list[Any] = []
    try:
        with client.messages.create(model="claude-test", max_tokens=100, messages=HI, stream=True,  # type: ignore
                                    **kw) as events:
            got.extend(events)
    except Exception as err:
        return got, err
    return got, None


def raw_sse(server: Loopback, path: str, body: dict[str, Any]) -> tuple[bytes, list[str]]:
    """The response body as bytes (http.client undoes the chunking) and its SSE events (split on blank lines)."""
    host, port = server.base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"content-type": "application/json"})
        data = conn.getresponse().read()
    finally:
        conn.close()
    return data, [e for e in data.decode("utf-8", errors="replace").split("\n\n") if e]


def dump(obj: Any) -> dict[str, Any]:
    """What the server actually sent for this SDK object (fields set), without the SDK's defaults."""
    out: dict[str, Any] = obj.model_dump(exclude_unset=True)
    return out


TEXT = "Reading both files, then I'll grep."
CALLS = [CannedToolCall.of("call_a", "read_file", {"path": "src/main.py"}),
         CannedToolCall.of("call_b", "grep", {"pattern": "TODO", "path": "."})]


def test_openai_stream_is_shaped_like_a_recorded_one(server: Loopback) -> None:
    usage = CannedUsage(1200, 40, cached_tokens=1024, reasoning_tokens=12)
    server.push(Reply.of(TEXT, *CALLS, usage=usage))
    chunks, err = oa_stream(oa_client(server))
    assert err is None
    for c in chunks:
        assert (c.id, c.object, c.model, c.service_tier) == ("chatcmpl-loopback", "chat.completion.chunk",
                                                            "gpt-test", "default")
        assert isinstance(c.created, int) and c.system_fingerprint.startswith("fp_")
    *body, finish, last = chunks
    assert dump(body[0].choices[0].delta) == {"role": "assistant", "content": "", "refusal": None}
    # Text in many small deltas, one token each.
    texts = [c.choices[0].delta.content for c in body if c.choices[0].delta.content]
    assert texts == tokens(TEXT) and len(texts) > 8
    # Parallel tool calls: id, type and name on the first delta of each index only; arguments in pieces.
    deltas = [tc for c in body for tc in c.choices[0].delta.tool_calls or []]
    for index, call in enumerate(CALLS):
        mine = [d for d in deltas if d.index == index]
        assert dump(mine[0]) == {"index": index, "id": call.id, "type": "function",
                                 "function": {"name": call.name, "arguments": ""}}
        assert all(dump(d) == {"index": index, "function": {"arguments": d.function.arguments}} for d in mine[1:])
        parts = [d.function.arguments for d in mine[1:]]
        assert len(parts) >= 5 and all(1 <= len(p) <= 4 for p in parts)
        assert json.loads("".join(parts)) == json.loads(call.arguments)
    # The finish chunk has an empty delta; the usage chunk no choices.
    assert dump(finish.choices[0].delta) == {} and finish.choices[0].finish_reason == "tool_calls"
    assert all(c.usage is None for c in chunks[:-1])
    assert last.choices == []
    assert (last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.total_tokens) == (1200, 40, 1240)
    assert last.usage.prompt_tokens_details.cached_tokens == 1024
    assert last.usage.completion_tokens_details.reasoning_tokens == 12


def test_openai_raw_stream_usage_nulls_padding_and_done(server: Loopback) -> None:
    server.push(Reply.of("Hi there."))
    _, events = raw_sse(server, "/v1/chat/completions",
                        {"model": "gpt-test", "messages": HI, "stream": True, "stream_options": USAGE})
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    objs = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
    # With include_usage every chunk carries "usage": null until the last; OpenAI pads each with "obfuscation".
    assert [o["usage"] for o in objs[:-1]] == [None] * (len(objs) - 1) and objs[-1]["usage"]["total_tokens"] == 15
    assert all("obfuscation" in o for o in objs)
    assert ", " not in events[1] and '"content":"Hi"' in events[1]  # compact JSON, as the API sends it


def test_openai_without_include_usage_there_is_no_usage_at_all(server: Loopback) -> None:
    server.push(Reply.of("Hi there."))
    _, events = raw_sse(server, "/v1/chat/completions", {"model": "gpt-test", "messages": HI, "stream": True})
    assert events[-1] == "data: [DONE]"
    assert not any('"usage"' in e for e in events)
    assert json.loads(events[-2].removeprefix("data: "))["choices"][0]["finish_reason"] == "stop"


def test_openai_reply_that_opens_with_a_tool_call(server: Loopback) -> None:
    # What the API sends then: the role, content null and the first call's head in one chunk.
    server.push(Reply(tool_calls=CALLS))
    chunks, err = oa_stream(oa_client(server))
    assert err is None
    first = dump(chunks[0].choices[0].delta)
    assert first == {"role": "assistant", "content": None, "refusal": None, "tool_calls": [
        {"index": 0, "id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": ""}}]}
    heads = [tc.id for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or [] if tc.id]
    assert heads == ["call_a", "call_b"]


def test_chat_template_server_streams_like_vllm() -> None:
    with Loopback(openai_dialect="chat_template") as server:
        server.push(Reply.of("Hi there.", thinking=["Short", " one."], usage=CannedUsage(30, 9)))
        chunks, err = oa_stream(oa_client(server))
    assert err is None
    assert all(c.system_fingerprint is None and c.service_tier is None for c in chunks)
    assert dump(chunks[0].choices[0].delta) == {"role": "assistant", "content": ""}
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 39
    assert chunks[-1].usage.prompt_tokens_details is None  # vLLM reports no cache it did not use


def tool_deltas(chunks: list[Any]) -> list[dict[str, Any]]:
    return [dump(tc) for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]


def test_quirk_no_usage(server: Loopback) -> None:
    server.push(Reply.of("Hi.", usage=None))
    chunks, err = oa_stream(oa_client(server))
    assert err is None and all(c.usage is None for c in chunks) and all(c.choices for c in chunks)


def test_quirk_tool_calls_without_ids(server: Loopback) -> None:
    server.push(Reply(tool_calls=CALLS, tool_ids=False))
    chunks, _ = oa_stream(oa_client(server))
    deltas = tool_deltas(chunks)
    assert not any("id" in d for d in deltas)
    assert [d["function"]["name"] for d in deltas if "name" in d["function"]] == ["read_file", "grep"]
    assert {d["index"] for d in deltas} == {0, 1}


def test_quirk_whole_calls(server: Loopback) -> None:
    server.push(Reply(text=["ok"], tool_calls=CALLS, whole_calls=True))
    chunks, _ = oa_stream(oa_client(server))
    assert tool_deltas(chunks) == [
        {"index": k, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for k, c in enumerate(CALLS)]


def test_quirk_whole_calls_without_index_or_id(server: Loopback) -> None:
    server.push(Reply(tool_calls=CALLS, whole_calls=True, tool_index=False, tool_ids=False))
    chunks, _ = oa_stream(oa_client(server))
    deltas = tool_deltas(chunks)
    assert deltas == [{"type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in CALLS]
    assert all(tc.index is None for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or [])


def test_quirk_split_calls_without_index(server: Loopback) -> None:
    server.push(Reply(tool_calls=CALLS[:1], tool_index=False))
    chunks, _ = oa_stream(oa_client(server))
    head, *parts = tool_deltas(chunks)
    assert head == {"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": ""}}
    assert parts and all(d == {"function": {"arguments": d["function"]["arguments"]}} for d in parts)
    assert "".join(d["function"]["arguments"] for d in parts) == CALLS[0].arguments


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_quirk_reasoning_deltas_before_the_answer(server: Loopback, field: str) -> None:
    server.push(Reply.of("42.", thinking=["The", " answer", " is", " 42"], reasoning_field=field))
    chunks, _ = oa_stream(oa_client(server))
    seen = [("think", (c.choices[0].delta.model_extra or {})[field]) if field in (c.choices[0].delta.model_extra or {})
            else ("say", c.choices[0].delta.content) for c in chunks if c.choices and (
                c.choices[0].delta.content or c.choices[0].delta.model_extra)]
    assert seen == [("think", "The"), ("think", " answer"), ("think", " is"), ("think", " 42"), ("say", "42"),
                    ("say", ".")]


def test_anthropic_stream_is_shaped_like_a_recorded_one(server: Loopback) -> None:
    usage = CannedUsage(50, 34, cached_tokens=3000, cache_creation_tokens=200)
    server.push(Reply.of(TEXT, *CALLS, thinking=["Two files", ", then grep."], usage=usage))
    events, err = an_stream(an_client(server))
    assert err is None
    start = events[0]
    assert start.type == "message_start" and start.message.model == "claude-test" and start.message.content == []
    u = start.message.usage
    assert (u.input_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens, u.output_tokens) == (
        50, 3000, 200, 1)
    blocks: dict[int, list[Any]] = {}
    for e in events:
        if e.type.startswith("content_block"):
            blocks.setdefault(e.index, []).append(e)
    thinking, text, *uses = (blocks[i] for i in sorted(blocks))
    assert dump(thinking[0].content_block) == {"type": "thinking", "thinking": "", "signature": ""}
    assert [d.delta.type for d in thinking[1:-1]] == ["thinking_delta", "thinking_delta", "signature_delta"]
    assert thinking[-2].delta.signature == SIGNATURE and thinking[-1].type == "content_block_stop"
    assert "".join(d.delta.text for d in text[1:-1]) == TEXT and len(text) > 10
    for call, use in zip(CALLS, uses, strict=True):
        assert dump(use[0].content_block) == {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        parts = [d.delta.partial_json for d in use[1:-1]]
        assert parts[0] == "" and len(parts) > 5  # the API opens with an empty partial_json
        assert json.loads("".join(parts)) == json.loads(call.arguments)
    delta, stop = events[-2:]
    assert delta.type == "message_delta" and delta.delta.stop_reason == "tool_use"
    assert (delta.usage.output_tokens, delta.usage.input_tokens, delta.usage.cache_read_input_tokens) == (34, 50, 3000)
    assert stop.type == "message_stop"


def test_anthropic_raw_stream_names_each_event_and_pings_once(server: Loopback) -> None:
    server.push(Reply.of("Hi there.", CALLS[0]))
    _, events = raw_sse(server, "/v1/messages", {"model": "claude-test", "max_tokens": 10, "messages": HI,
                                                 "stream": True, "tools": [{"name": "read_file",
                                                                            "input_schema": {"type": "object"}}]})
    names = [e.split("\n")[0].removeprefix("event: ") for e in events]
    assert all(json.loads(e.split("\n")[1].removeprefix("data: "))["type"] == n for e, n in zip(events, names,
                                                                                                  strict=True))
    assert names[:3] == ["message_start", "content_block_start", "ping"] and names.count("ping") == 1
    assert names[-2:] == ["message_delta", "message_stop"]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_our_adapters_reassemble_realistic_streams(server: Loopback, kind: str) -> None:
    request = ModelRequest(system="S", messages=[Message.user("go")], tools=[
        ToolSpec(name="read_file", description="Read.", parameters={"type": "object"}),
        ToolSpec(name="grep", description="Search.", parameters={"type": "object"})])
    server.push(Reply.of(TEXT, *CALLS))
    provider: OpenAIProvider | AnthropicProvider = (
        OpenAIProvider("gpt-test", api_key="k", base_url=server.openai_url, max_retries=0) if kind == "openai"
        else AnthropicProvider("claude-test", api_key="k", base_url=server.base_url, max_retries=0))
    events = list(provider.stream(request))
    calls = [e.call for e in events if type(e).__name__ == "ToolCallEvent"]
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        (c.id, c.name, json.loads(c.arguments)) for c in CALLS]
    assert "".join(e.text for e in events if type(e).__name__ == "TextDelta") == TEXT


# == faults ============================================================================================


ERROR_HELPERS: list[tuple[str, Callable[[], HttpError], type[Exception], int, dict[str, Any]]] = [
    ("openai 429", openai_rate_limit, openai.RateLimitError, 429, {"code": "rate_limit_exceeded"}),
    ("openai 429 quota", lambda: openai_rate_limit(quota=True), openai.RateLimitError, 429,
     {"code": "insufficient_quota", "type": "insufficient_quota"}),
    ("openai 500", openai_server_error, openai.InternalServerError, 500, {"type": "server_error"}),
    ("openai 503", openai_overloaded, openai.InternalServerError, 503, {"type": "server_error"}),
    ("openai context", lambda: openai_context_length(128000, 130500), openai.BadRequestError, 400,
     {"code": "context_length_exceeded", "param": "messages", "message":
      "This model's maximum context length is 128000 tokens. However, your messages resulted in 130500 tokens. "
      "Please reduce the length of the messages."}),
    ("vllm context", lambda: local_context_length(32768, 33000), openai.BadRequestError, 400,
     {"type": "BadRequestError", "code": 400}),
    ("openai 401", openai_auth_error, openai.AuthenticationError, 401, {"code": "invalid_api_key"}),
    ("openai 403", openai_permission_denied, openai.PermissionDeniedError, 403, {"code": "model_not_found"}),
]
ANTHROPIC_ERROR_HELPERS: list[tuple[str, Callable[[], HttpError], type[Exception], int, dict[str, Any]]] = [
    ("anthropic 429", anthropic_rate_limit, anthropic.RateLimitError, 429, {"type": "rate_limit_error"}),
    ("anthropic 500", anthropic_api_error, anthropic.InternalServerError, 500,
     {"type": "api_error", "message": "Internal server error"}),
    ("anthropic 529", anthropic_overloaded, anthropic.OverloadedError, 529,
     {"type": "overloaded_error", "message": "Overloaded"}),
    ("anthropic context", lambda: anthropic_prompt_too_long(210500, 200000), anthropic.BadRequestError, 400,
     {"type": "invalid_request_error", "message": "prompt is too long: 210500 tokens > 200000 maximum"}),
    ("anthropic 401", anthropic_auth_error, anthropic.AuthenticationError, 401, {"type": "authentication_error"}),
    ("anthropic 403", anthropic_permission_error, anthropic.PermissionDeniedError, 403, {"type": "permission_error"}),
]


@pytest.mark.parametrize(("make", "exc", "status", "fields"),
                         [pytest.param(m, e, s, f, id=i) for i, m, e, s, f in ERROR_HELPERS])
def test_openai_error_bodies_reach_the_sdk(server: Loopback, make: Callable[[], HttpError], exc: type[Exception],
                                           status: int, fields: dict[str, Any]) -> None:
    server.push(make())
    _, err = oa_stream(oa_client(server))
    assert isinstance(err, exc) and isinstance(err, openai.APIStatusError) and err.status_code == status
    assert isinstance(err.body, dict) and fields.items() <= err.body.items(), err.body  # the SDK unwraps "error"


@pytest.mark.parametrize(("make", "exc", "status", "fields"),
                         [pytest.param(m, e, s, f, id=i) for i, m, e, s, f in ANTHROPIC_ERROR_HELPERS])
def test_anthropic_error_bodies_reach_the_sdk(server: Loopback, make: Callable[[], HttpError], exc: type[Exception],
                                              status: int, fields: dict[str, Any]) -> None:
    server.push(make())
    _, err = an_stream(an_client(server))
    assert isinstance(err, exc) and isinstance(err, anthropic.APIStatusError) and err.status_code == status
    assert isinstance(err.body, dict) and err.body["type"] == "error" and err.body["request_id"] == "req_loopback"
    assert fields.items() <= err.body["error"].items(), err.body
    assert err.response.headers["request-id"] == "req_loopback"


def test_retry_after_headers_are_sent(server: Loopback) -> None:
    server.push(openai_rate_limit(retry_after=3), anthropic_rate_limit(retry_after=7, retry_after_ms=7000))
    _, oa_err = oa_stream(oa_client(server))
    _, an_err = an_stream(an_client(server))
    assert isinstance(oa_err, openai.RateLimitError) and oa_err.response.headers["retry-after"] == "3"
    assert oa_err.response.headers["x-ratelimit-remaining-tokens"] == "0"
    assert isinstance(an_err, anthropic.RateLimitError)
    assert (an_err.response.headers["retry-after"], an_err.response.headers["retry-after-ms"]) == ("7", "7000")
    assert an_err.response.headers["anthropic-ratelimit-input-tokens-remaining"] == "0"


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_the_sdk_retry_waits_as_retry_after_ms_says(server: Loopback, kind: str) -> None:
    wait = 0.3
    if kind == "openai":
        server.push(openai_rate_limit(retry_after=None, retry_after_ms=wait * 1000), Reply.of("ok"))
        got, err = oa_stream(oa_client(server, retries=1))
    else:
        server.push(anthropic_rate_limit(retry_after=None, retry_after_ms=wait * 1000), Reply.of("ok"))
        got, err = an_stream(an_client(server, retries=1))
    assert err is None and got
    first, second = server.accepted
    assert server.accepted_count == 2 and not server.rejected and server.pending == 0
    assert second.at - first.at >= wait
    assert second.headers["x-stainless-retry-count"] == "1"


def test_cut_resets_the_connection_mid_stream(server: Loopback) -> None:
    server.push(Cut(Reply.of("Hello, world"), after=3), Cut(Reply.of("Hello, world"), after=3))
    got, err = oa_stream(oa_client(server))
    # role chunk, "Hello", ",", then a reset: the OpenAI SDK wraps it as a connection error.
    assert [c.choices[0].delta.content for c in got] == ["", "Hello", ","]
    assert isinstance(err, openai.APIConnectionError) and not isinstance(err, openai.APITimeoutError)
    assert "reset" in str(err.__cause__).lower()
    events, err = an_stream(an_client(server))
    # message_start, content_block_start, (ping): the Anthropic SDK lets the transport error through unwrapped.
    assert [e.type for e in events] == ["message_start", "content_block_start"]
    assert type(err).__name__ == "ReadError" and "reset" in str(err).lower()


def test_cut_without_reset_is_an_incomplete_body(server: Loopback) -> None:
    server.push(Cut(Reply.of("Hello, world"), after=2, reset=False))
    got, err = oa_stream(oa_client(server))
    assert len(got) == 2
    assert isinstance(err, openai.APIConnectionError) and "incomplete chunked read" in str(err.__cause__)


def test_end_early_is_a_clean_end_without_the_protocol_end(server: Loopback) -> None:
    server.push(EndEarly(Reply.of("Hello, world"), after=3), EndEarly(Reply.of("Hello, world"), after=4))
    got, err = oa_stream(oa_client(server))
    assert err is None and len(got) == 3  # no finish_reason chunk, no usage, no [DONE]: and no error either
    assert not any(c.choices[0].finish_reason for c in got)
    events, err = an_stream(an_client(server))
    assert err is None
    assert [e.type for e in events] == ["message_start", "content_block_start", "content_block_delta"]


def test_end_early_in_raw_bytes(server: Loopback) -> None:
    server.push(EndEarly(Reply.of("Hello, world"), after=2))
    _, events = raw_sse(server, "/v1/chat/completions", {"model": "gpt-test", "messages": HI, "stream": True})
    assert len(events) == 2 and "[DONE]" not in "".join(events) and "finish_reason\":\"stop" not in "".join(events)


def test_keep_alive_outlives_the_read_timeout(server: Loopback) -> None:
    server.push(KeepAlive(Reply.of("Hello, world"), after=2, every=0.1, total=0.9))
    began = time.monotonic()
    got, err = oa_stream(oa_client(server, timeout=0.5))
    # Each comment resets the client's read timeout: the stream is slow, not dead, as far as httpx can tell.
    assert err is None and time.monotonic() - began >= 0.9
    assert "".join(c.choices[0].delta.content or "" for c in got if c.choices) == "Hello, world"


def test_keep_alive_comments_on_the_wire(server: Loopback) -> None:
    server.push(KeepAlive(Reply.of("Hi"), after=1, every=0.05, total=0.3))
    _, events = raw_sse(server, "/v1/messages", {"model": "claude-test", "max_tokens": 10, "messages": HI,
                                                 "stream": True})
    comments = [e for e in events if e.startswith(":")]
    assert 2 <= len(comments) <= 7 and set(comments) == {": keep-alive"}
    assert events[0].startswith("event: message_start") and events[-1].startswith("event: message_stop")


def test_keep_alive_then_cut(server: Loopback) -> None:
    server.push(KeepAlive(Reply.of("Hello, world"), after=2, every=0.05, total=0.3, then="cut"))
    began = time.monotonic()
    got, err = oa_stream(oa_client(server, timeout=1))
    assert len(got) == 2 and isinstance(err, openai.APIConnectionError) and time.monotonic() - began >= 0.3


def test_stall_after_times_out_an_impatient_client_mid_stream(server: Loopback) -> None:
    server.push(StallAfter(Reply.of("Hello, world"), after=2, seconds=30),
                StallAfter(Reply.of("Hello, world"), after=3, seconds=30))
    began = time.monotonic()
    got, err = oa_stream(oa_client(server, timeout=0.3))
    assert len(got) == 2 and isinstance(err, openai.APITimeoutError)
    events, err = an_stream(an_client(server, timeout=0.3))
    assert [e.type for e in events] == ["message_start", "content_block_start"]
    assert type(err).__name__ == "ReadTimeout"  # unwrapped by the Anthropic SDK, as a reset is
    assert time.monotonic() - began < 15  # two 0.3 s timeouts, not the stalls' 30 s (room for a loaded machine)


def test_stall_after_then_the_rest_for_a_patient_client(server: Loopback) -> None:
    server.push(StallAfter(Reply.of("Hello, world"), after=2, seconds=0.3))
    got, err = oa_stream(oa_client(server, timeout=2))
    assert err is None and got[-1].usage.total_tokens == 15


def test_anthropic_stream_error_event(server: Loopback) -> None:
    server.push(AnthropicStreamError(after=4), AnthropicStreamError(after=1, type="api_error"))
    events, err = an_stream(an_client(server))
    assert [e.type for e in events] == ["message_start", "content_block_start", "content_block_delta"]
    # A 200 response, so no status class: the SDK raises its base APIStatusError with the event's body.
    assert type(err) is anthropic.APIStatusError and err.status_code == 200
    assert err.body == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"},
                        "request_id": "req_loopback"}
    events, err = an_stream(an_client(server))
    assert [e.type for e in events] == ["message_start"]
    assert isinstance(err, anthropic.APIStatusError) and err.body["error"] == {"type": "api_error",
                                                                                 "message": "Internal server error"}


def test_openai_stream_error_chunk(server: Loopback) -> None:
    server.push(OpenAIStreamError(after=2, message="engine crashed", code="internal"))
    got, err = oa_stream(oa_client(server))
    assert len(got) == 2
    assert type(err) is openai.APIError and err.message == "engine crashed"
    assert err.body == {"message": "engine crashed", "type": "server_error", "param": None, "code": "internal"}


def test_a_stream_error_for_the_other_api_is_a_loopback_error(server: Loopback) -> None:
    server.push(AnthropicStreamError())
    _, err = oa_stream(oa_client(server))
    assert isinstance(err, openai.InternalServerError) and "AnthropicStreamError" in str(err)


def test_not_utf8(server: Loopback) -> None:
    server.push(NotUtf8(), NotUtf8(), NotUtf8())
    data, _ = raw_sse(server, "/v1/chat/completions", {"model": "gpt-test", "messages": HI, "stream": True})
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    assert "Grüße" in data.decode("latin-1")
    # Neither SDK turns it into one of its own errors: the decoding error escapes from the iteration.
    assert isinstance(oa_stream(oa_client(server))[1], UnicodeDecodeError)
    assert isinstance(an_stream(an_client(server))[1], UnicodeDecodeError)


@pytest.mark.parametrize("canned", [
    Stall(30),
    StallAfter(Reply.of("Hello"), after=1, seconds=30),
    KeepAlive(Reply.of("Hello"), after=1, every=0.05, total=30),
], ids=["stall", "stall-after", "keep-alive"])
def test_a_stalled_response_never_delays_shutdown(canned: Any) -> None:
    outcome: list[Any] = []
    with Loopback() as server:
        server.push(canned)
        client = oa_client(server, timeout=60)
        worker = threading.Thread(target=lambda: outcome.append(oa_stream(client)), daemon=True)
        worker.start()
        deadline = time.monotonic() + 5
        while server.accepted_count == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        began = time.monotonic()
    assert time.monotonic() - began < 15  # not the response's 30 s (room for a loaded machine)
    worker.join(timeout=5)
    assert not worker.is_alive() and outcome and outcome[0][1] is not None  # the client saw the hang-up


def test_accepted_and_rejected_are_counted(server: Loopback) -> None:
    server.push(Reply.of("a"), Reply.of("b"), Reply.of("c"))
    client = oa_client(server)
    oa_stream(client)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="gpt-test", messages=[], stream=True)
    oa_stream(client)
    assert server.accepted_count == 2 and len(server.rejected) == 1 and len(server.requests) == 3
    assert [r.rejected is None for r in server.requests] == [True, False, True]
    assert server.accepted == [server.requests[0], server.requests[2]] and server.pending == 1


def test_an_unknown_argument_over_http(server: Loopback) -> None:
    server.push(Reply.of("never"))
    with pytest.raises(openai.BadRequestError) as info:
        oa_client(server).chat.completions.create(model="gpt-test", messages=HI,  # type: ignore[arg-type]
                                                  extra_body={"top_k": 5})
    assert info.value.body == {"message": "Unrecognized request argument supplied: top_k",
                               "type": "invalid_request_error", "param": None, "code": None}


def test_chat_template_refusal_over_http() -> None:
    late = [*HI, {"role": "assistant", "content": "Hello."}, {"role": "system", "content": "be brief"},
            {"role": "user", "content": "again"}]
    with Loopback(openai_dialect="chat_template") as server, pytest.raises(openai.BadRequestError) as info:
        oa_client(server).chat.completions.create(model="qwen3", messages=late)  # type: ignore[arg-type]
    assert info.value.body == {"message": "messages.[2].role: System message must be at the beginning.",
                               "type": "BadRequestError", "param": "messages.[2].role", "code": 400}


# -- our adapter against the chat-template server ----------------------------------------------------------


def test_our_openai_adapter_passes_the_chat_template_server() -> None:
    """A local Qwen-style server must take what our OpenAI adapter sends for a real agent turn: the system prompt,
    a harness notice mid-conversation, a malformed tool call being replayed, and the protected block last."""
    good = ToolCall(id="call_a", name="read_file", arguments='{"path": "a.py"}')
    broken = ToolCall(id="call_b", name="read_file", arguments='{"path": ')
    request = ModelRequest(
        system="SYSTEM PROMPT",
        messages=[
            Message.user("fix the bug"),
            Message.assistant("Looking.", [good, broken]),
            Message.tool(good, "print('a')"),
            Message.tool(broken, "Invalid arguments for read_file: not valid JSON", ok=False),
            Message.system("budget: 80% used", kind="notice"),
            Message.assistant("Done."),
            Message.user("thanks"),
        ],
        tools=[ToolSpec(name="read_file", description="Read a file.", parameters={"type": "object"})],
        protected="TODO: [x] fix bug",
    )
    with Loopback(openai_dialect="chat_template") as server:
        server.push(Reply.of("ok"))
        provider = OpenAIProvider("qwen3", base_url=server.openai_url, max_retries=0)
        try:
            list(provider.stream(request))
        except ProviderError as exc:
            pytest.fail(f"a chat-template server refuses what our adapter sends: {exc}\n"
                        f"request: {json.dumps(server.last.body)[:2000]}")
    assert not server.rejected


def test_the_model_list_is_openais_list_models_answer() -> None:
    """GET /v1/models as OpenAI's OpenAPI schema has it (listModels -> ListModelsResponse: object "list", data of
    Model {id, object "model", created, owned_by}, all required): the SDK's own types take it field by field; a GET
    of a URL the API does not serve is its 404, which the SDK raises as NotFoundError; neither is a chat request."""
    with Loopback(models=("qwen3:8b", "llama3.1:8b")) as server:
        client = openai.OpenAI(api_key="sk-list", base_url=server.openai_url, max_retries=0)
        raw = client.models.with_raw_response.list()
        body = json.loads(raw.http_response.text)
        assert raw.http_response.status_code == 200 and set(body) == {"object", "data"} and body["object"] == "list"
        for item in body["data"]:
            assert set(item) == {"id", "object", "created", "owned_by"} and item["object"] == "model"
            openai.types.Model.model_validate(item, strict=True)
        assert [m.id for m in client.models.list()] == ["qwen3:8b", "llama3.1:8b"]
        with pytest.raises(openai.NotFoundError) as err:
            client.get("/nothing/here", cast_to=object)
        assert "Invalid URL (GET /v1/nothing/here)" in str(err.value)
        assert [r.path for r in server.listed] == ["/v1/models", "/v1/models", "/v1/nothing/here"]
        assert server.requests == [] and server.pending == 0
