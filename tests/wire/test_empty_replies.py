"""A reply with nothing to replay (reasoning only, blank text, or nothing at all) never breaks a later request.

The conversation keeps such a reply as the model sent it (an assistant message with empty content, which the
event log records); what goes over the wire is for each provider to shape. Servers differ: OpenAI takes an empty
assistant message; Mistral-family servers (their chat templates, mistral_common) refuse it, refuse two user
messages in a row and a user message right after tool results; Anthropic refuses empty text blocks and same-role
neighbours. Every request here must pass all of those at once, through the real SDKs and the strict loopback.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import openai
import pytest

from console.engine import events as ev
from console.engine.guardrails import GuardrailsConfig
from console.engine.messages import Message, ModelRequest, ToolCall, ToolSpec
from console.engine.model import Notice, ProviderError
from console.engine.supervisor import Supervisor
from console.providers.anthropic_provider import AnthropicProvider, to_anthropic_messages
from console.providers.anthropic_provider import build_params as anthropic_params
from console.providers.openai_provider import NO_REPLY, OpenAIProvider, to_openai_messages
from tests.conftest import answer_needs, run_settings

from .loopback import CannedToolCall, Loopback, Reply, validate_anthropic, validate_openai
from .mistral_rules import ALTERNATE, EMPTY_REPLY

Mutation = Callable[[dict[str, Any]], object]
DIALECTS = ("openai", "chat_template", "mistral_template")


def apply(base: dict[str, Any], mutate: Mutation) -> dict[str, Any]:
    body = copy.deepcopy(base)
    mutate(body)
    return body


def call(cid: str, name: str = "read_file") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": '{"path": "a"}'}}


# -- the Mistral-family rules, as the strict loopback applies them --------------------------------------------------

MISTRAL_GOOD: dict[str, Any] = {
    "model": "devstral",
    "stream": True,
    "max_tokens": 100,
    "messages": [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]},
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
        {"role": "tool", "tool_call_id": "c2", "content": "B"},
        {"role": "assistant", "content": "Read both."},
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": "Reading.", "tool_calls": [call("c3")]},
        {"role": "tool", "tool_call_id": "c3", "content": "C"},
    ],
    "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}],
}


def msgs(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = body["messages"]
    return messages


def insert(at: int, *added: dict[str, Any]) -> Mutation:
    return lambda b: msgs(b).__setitem__(slice(at, at), list(added))


MISTRAL_BAD: list[tuple[str, Mutation, str]] = [
    ("a user message right after tool results (a harness notice)", lambda b: msgs(b).append(
        {"role": "user", "content": "TODO"}), "Unexpected role 'user' after role 'tool'"),
    ("an empty reply", insert(6, {"role": "assistant", "content": ""}, {"role": "user", "content": "go on"}),
     EMPTY_REPLY),
    ("a reasoning-only reply", insert(6, {"role": "assistant", "content": "", "reasoning_content": "hm"},
                                      {"role": "user", "content": "go on"}), EMPTY_REPLY),
    ("a reply of blank text", insert(6, {"role": "assistant", "content": "\n\n"}, {"role": "user", "content": "x"}),
     EMPTY_REPLY),
    ("an empty reply after tool results", insert(5, {"role": "assistant", "content": ""}), EMPTY_REPLY),
    ("two user messages in a row", insert(2, {"role": "user", "content": "and hurry"}), ALTERNATE),
    ("two replies of text in a row", insert(6, {"role": "assistant", "content": "Also."}), ALTERNATE),
    ("an empty reply left out between two user messages", insert(7, {"role": "user", "content": "go on"}),
     ALTERNATE),
    ("a reply first", lambda b: msgs(b).insert(1, {"role": "assistant", "content": "Hello."}), ALTERNATE),
    ("a system message later", lambda b: msgs(b).insert(6, {"role": "system", "content": "budget"}),
     "Only user and assistant roles are supported"),
    ("a reply last", lambda b: msgs(b).append({"role": "assistant", "content": "Done."}),
     "Expected last role User or Tool"),
    ("replayed arguments that are not JSON",
     lambda b: msgs(b)[2]["tool_calls"][0]["function"].update(arguments='{"path": '), "must be in JSON format"),
    # The OpenAI rules hold too: the dialect is a superset.
    ("a result missing", lambda b: msgs(b).pop(4), "did not have response messages: c2"),
]

MISTRAL_ALSO_GOOD: list[tuple[str, Mutation]] = [
    ("as sent", lambda b: None),
    ("a user message after tool results and a reply", lambda b: msgs(b).extend(
        [{"role": "assistant", "content": NO_REPLY}, {"role": "user", "content": "TODO"}])),
    ("reasoning_content on a reply with text", lambda b: msgs(b)[5].update(reasoning_content="hm")),
    ("a reply as text parts", lambda b: msgs(b)[5].update(content=[{"type": "text", "text": "Read both."}])),
    ("no system message", lambda b: msgs(b).pop(0)),
    ("the user's turn last", lambda b: msgs(b).extend([{"role": "assistant", "content": "Ok."},
                                                       {"role": "user", "content": "thanks"}])),
]


@pytest.mark.parametrize(("mutate", "expected"), [pytest.param(m, e, id=i) for i, m, e in MISTRAL_BAD])
def test_mistral_rule_refuses(mutate: Mutation, expected: str) -> None:
    assert validate_openai(MISTRAL_GOOD, "mistral_template") is None
    problem = validate_openai(apply(MISTRAL_GOOD, mutate), "mistral_template")
    assert problem is not None and expected in problem, problem


@pytest.mark.parametrize("mutate", [pytest.param(m, id=i) for i, m in MISTRAL_ALSO_GOOD])
def test_mistral_rule_accepts(mutate: Mutation) -> None:
    assert validate_openai(apply(MISTRAL_GOOD, mutate), "mistral_template") is None


def test_the_shapes_mistral_refuses_are_fine_for_openai() -> None:
    """The mode models a stricter server, not a stricter OpenAI: OpenAI takes an empty reply and tool -> user."""
    for mutate in (MISTRAL_BAD[0][1], MISTRAL_BAD[1][1], MISTRAL_BAD[5][1]):
        assert validate_openai(apply(MISTRAL_GOOD, mutate)) is None


def test_a_mistral_refusal_over_http_is_vllms_400() -> None:
    body = apply(MISTRAL_GOOD, MISTRAL_BAD[0][1])
    with Loopback(openai_dialect="mistral_template") as server, pytest.raises(openai.BadRequestError) as info:
        openai.OpenAI(api_key="k", base_url=server.openai_url, max_retries=0).chat.completions.create(
            model="devstral", messages=msgs(body), max_tokens=10)  # type: ignore[arg-type]
    assert info.value.body == {"message": "messages.[9].role: Unexpected role 'user' after role 'tool'",
                               "type": "BadRequestError", "param": "messages.[9].role", "code": 400}


# -- conversations with empty replies, replayed through both adapters ------------------------------------------------

READ = ToolCall(id="call_read1", name="read_file", arguments='{"path": "a.py"}')
TOOLS = [ToolSpec(name="read_file", description="Read a file.", parameters={"type": "object"})]


def notice(text: str) -> Message:
    return Message.user(text, kind="completion_blocked")


# As the engine builds them: a conversation ends with the user's (or the harness's) turn or with tool results, never
# with a reply (a reply without a tool call is followed by the completion check's notice, or the run ends).
CONVERSATIONS: dict[str, list[Message]] = {
    "an empty reply": [Message.user("fix it"), Message.assistant(""), notice("Not done: fix it.")],
    # The engine keeps a reasoning-only reply as an empty one: reasoning is shown to the operator, never replayed.
    "a reasoning-only reply, then a blank one": [
        Message.user("fix it"), Message.assistant(""), notice("Not done."), Message.assistant("\n \n"),
        notice("Still not done.")],
    "several empty replies in a row": [
        Message.user("fix it"), *[m for n in range(4) for m in (Message.assistant(""), notice(f"Not done ({n})."))]],
    "empty replies back to back": [Message.user("fix it"), Message.assistant(""), Message.assistant(""),
                                   notice("Not done.")],
    "an empty reply after tool results": [
        Message.user("fix it"), Message.assistant("", [READ]), Message.tool(READ, "print('a')"),
        Message.assistant(""), notice("Not done."), Message.assistant("Fixed."), notice("Not checked.")],
    "a harness notice after tool results": [
        Message.user("fix it"), Message.assistant("Reading.", [READ]), Message.tool(READ, "print('a')"),
        Message.system("budget: 80% used", kind="notice")],
    "an empty reply last": [Message.user("fix it"), Message.assistant("", [READ]), Message.tool(READ, "x"),
                            Message.assistant("")],
    "an empty reply before a reply of text": [Message.user("fix it"), Message.assistant(""), Message.assistant("Ok."),
                                              notice("Not done.")],
}


def request_of(messages: list[Message], protected: str = "TODO: [ ] fix it") -> ModelRequest:
    return ModelRequest(system="SYSTEM", messages=messages, tools=TOOLS, protected=protected)


def cases() -> list[Any]:
    return [pytest.param(name, protected, id=f"{name}{'' if protected else ', no protected layer'}")
            for name in CONVERSATIONS for protected in ("TODO: [ ] fix it", "")]


@pytest.mark.parametrize(("name", "protected"), cases())
def test_every_server_takes_the_replayed_conversation(name: str, protected: str) -> None:
    request = request_of(CONVERSATIONS[name], protected)
    kept = request.model_dump_json()
    for dialect in DIALECTS:
        with Loopback(openai_dialect=dialect) as server:
            server.push(Reply.of("ok"))
            try:
                list(OpenAIProvider("m", base_url=server.openai_url, max_retries=0).stream(request))
            except ProviderError as exc:
                pytest.fail(f"{dialect} refuses: {exc}\n{json.dumps(server.last.body['messages'], indent=1)}")
            sent = server.last.body["messages"]
        assert not any(m["role"] == "assistant" and not m.get("tool_calls") and not (m["content"] or "").strip()
                       for m in sent), sent
    with Loopback() as server:
        server.push(Reply.of("ok"))
        try:
            list(AnthropicProvider("claude-test", api_key="k", base_url=server.base_url, max_retries=0).stream(request))
        except ProviderError as exc:
            pytest.fail(f"anthropic refuses: {exc}\n{json.dumps(server.last.body['messages'], indent=1)}")
    # The conversation itself is untouched: the log and a resume keep what the model really sent.
    assert request.model_dump_json() == kept


def test_what_the_wire_says_for_empty_replies() -> None:
    """Nothing of an empty reply reaches the wire; what was around it joins up, and (for a server that needs the
    turns to alternate) a harness message after tool results follows an assistant turn that says no reply was given
    there."""
    sent = to_openai_messages(request_of(CONVERSATIONS["several empty replies in a row"]))
    assert sent == [{"role": "system", "content": "SYSTEM"},
                    {"role": "user", "content": "fix it\n\nNot done (0).\n\nNot done (1).\n\nNot done (2).\n\n"
                                                "Not done (3).\n\nTODO: [ ] fix it"}]
    # Other servers take the harness's message right after the tool results: no turn the model did not say.
    plain = to_openai_messages(request_of(CONVERSATIONS["an empty reply after tool results"]))
    assert [m["role"] for m in plain] == ["system", "user", "assistant", "tool", "user", "assistant", "user"]
    assert NO_REPLY not in json.dumps(plain)
    # A Mistral-family server (strict alternation) gets an assistant turn saying no reply was given there.
    sent = to_openai_messages(request_of(CONVERSATIONS["an empty reply after tool results"]), alternate=True)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user", "assistant",
                                         "user"]
    assert sent[4] == {"role": "assistant", "content": NO_REPLY}
    assert sent[5] == {"role": "user", "content": "Not done."}
    assert sent[6:] == [{"role": "assistant", "content": "Fixed."},
                        {"role": "user", "content": "Not checked.\n\nTODO: [ ] fix it"}]
    # Anthropic: the empty reply is no turn at all; the notice joins the tool result's user turn, results first.
    turns = to_anthropic_messages(request_of(CONVERSATIONS["an empty reply after tool results"]))
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant", "user"]
    assert [b["type"] for b in turns[2]["content"]] == ["tool_result", "text"]


def test_the_prefix_stays_cacheable_across_an_empty_reply() -> None:
    """Turn after turn, what was sent before is sent again byte for byte: the empty reply changes nothing of the
    prefix, only the protected layer at the end moves."""
    first = request_of(CONVERSATIONS["an empty reply after tool results"][:3])
    second = request_of(CONVERSATIONS["an empty reply after tool results"][:5])
    a, b = to_openai_messages(first, alternate=True), to_openai_messages(second, alternate=True)
    assert a[-2] == b[-2] == {"role": "assistant", "content": NO_REPLY}
    assert json.dumps(a[:-1]) == json.dumps(b[:-1])
    assert b[-1]["content"].startswith("Not done.") and a[-1]["content"] == "TODO: [ ] fix it"
    for request in (first, second):
        assert validate_anthropic(anthropic_params("claude-test", request)) is None


# -- the whole engine, with replies that have nothing to replay ---------------------------------------------------


def script() -> list[Reply]:
    def tool(cid: str, name: str, args: dict[str, Any]) -> Reply:
        return Reply(tool_calls=[CannedToolCall.of(cid, name, args)])

    return [
        tool("call_sum00001", "generate_workspace_summary", {}),
        Reply(),  # nothing at all
        Reply(thinking=["The todo list says ", "to read the instructions first."]),  # reasoning only
        Reply(text=["\n\n"]),  # blank text
        Reply(),  # and again, in a row
        tool("call_read0001", "read_file", {"path": "instructions.md"}),
        Reply(thinking=["Hmm."]),  # right after tool results
        Reply.of("I read the instructions."),
    ]


@pytest.mark.parametrize("kind", [*DIALECTS, "anthropic"])
def test_a_run_goes_on_through_empty_replies_on_every_server(kind: str, make_job: Any, clock: Any) -> None:
    paths = make_job()
    replies = script()
    # A stop refused by the completion check is what follows a reply without a tool call; no operator is asked.
    guard = GuardrailsConfig.model_validate({"max_completion_blocks": 50, "stuck_escalate_after": 0})
    with Loopback(openai_dialect=kind if kind != "anthropic" else "openai") as server:
        server.push(*replies)
        if kind == "anthropic":
            provider: Any = AnthropicProvider("claude-test", api_key="k", base_url=server.base_url, max_retries=0)
        else:
            provider = OpenAIProvider("devstral", base_url=server.openai_url, max_retries=0)
        sup = Supervisor(paths, run_settings(provider="anthropic" if kind == "anthropic" else "openai",
                                             guardrails=guard, max_turns=len(replies)), provider, clock=clock)
        answer_needs(sup)
        result = sup.run()
        requests = list(server.requests)
    assert not [r.rejected for r in requests if r.rejected], [r.rejected for r in requests]
    assert len(requests) == len(replies) and server.pending == 0
    assert result.reason.value == "max_turns", result
    evs = list(ev.read_events(paths.events))
    said = [e for e in evs if isinstance(e, ev.AssistantMessage)]
    # The log keeps what the model really sent: empty, blank, and the reasoning beside it.
    assert [e.text for e in said] == ["", "", "", "\n\n", "", "", "", "I read the instructions."]
    assert said[2].reasoning == "The todo list says to read the instructions first." and said[6].reasoning == "Hmm."
    assert sum(isinstance(e, ev.CompletionBlocked) for e in evs) == 6
    assert not [e for e in evs if isinstance(e, ev.ErrorEvent)]
    last = json.dumps(requests[-1].body)
    assert "to read the instructions first" not in last  # reasoning is never replayed


# -- the alternation is adapted to the server, not imposed on every one ---------------------------------------------


def test_a_server_that_refuses_the_order_is_asked_again_alternating_once(make_job: Any, clock: Any) -> None:
    """A model whose name does not say Mistral, behind a Mistral template: the first request is refused (400, the
    template's own words), sent again with the turns alternating, and the run keeps that shape; the operator reads
    it once. OpenAI-shaped servers never get the made-up turn."""
    request = request_of(CONVERSATIONS["a harness notice after tool results"])
    with Loopback(openai_dialect="mistral_template") as server:
        server.push(Reply.of("ok"), Reply.of("again"))
        provider = OpenAIProvider("local-model", base_url=server.openai_url, max_retries=0)
        assert not provider.alternate
        events = list(provider.stream(request))
        notices = [e for e in events if isinstance(e, Notice)]
        assert len(notices) == 1 and "refused the order of the messages" in notices[0].text
        assert provider.alternate
        list(provider.stream(request))
        bodies = [r for r in server.requests]
    assert [bool(r.rejected) for r in bodies] == [True, False, False]
    assert NO_REPLY in json.dumps(bodies[1].body["messages"])
    with Loopback() as server:
        server.push(Reply.of("ok"))
        plain = OpenAIProvider("gpt-4.1", base_url=server.openai_url, max_retries=0)
        assert not [e for e in plain.stream(request) if isinstance(e, Notice)]
        assert NO_REPLY not in json.dumps(server.last.body["messages"]) and not plain.alternate
    assert OpenAIProvider("mistralai/Devstral-Small-2507", base_url="http://127.0.0.1:9", max_retries=0).alternate
