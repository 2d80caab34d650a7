"""Anthropic Messages API adapter.

Uses the raw event stream (``messages.create(stream=True)``) rather than the
SDK's accumulating helper: we only need deltas, and reading the raw events keeps
the usage accounting explicit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from console.providers.lean_import import deferred, lazy_inits, without

# The SDK imported without what this adapter never uses (console.providers.lean_import): its type packages give
# each name when first asked for; its other clouds' clients and its tool runner (Vertex, Bedrock, AWS, Google
# Cloud, Foundry: each imports every one of the SDK's resources, beta and organization APIs included) are
# imported only if one is asked for; aiohttp, for an optional client, not at all. A runner's import of the SDK: 84
# -> 52 MB of peak memory, ~3,000 -> ~1,400 modules, 0.75 -> 0.3 s of CPU (what is left is mostly the beta types
# its request tracing imports).
with without("aiohttp"), lazy_inits("anthropic.types"), \
        deferred("anthropic", ["lib.vertex", "lib.bedrock", "lib.aws", "lib.google_cloud", "lib.foundry", "lib.tools"]):
    import anthropic

try:  # the SDK moved from httpx to httpx2; catch transport errors from whichever it uses
    import httpx2
except ImportError:  # pragma: no cover - older SDKs
    # httpx is absent where the SDK brought httpx2 (the one mypy sees): only an older SDK takes this branch.
    import httpx as httpx2  # type: ignore[no-redef, import-not-found, unused-ignore]

from console.engine.messages import Message, ModelRequest, ToolCall
from console.engine.model import (
    ErrorKind,
    IncompleteStream,
    Progress,
    ProviderError,
    ReasoningDelta,
    Stop,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    Usage,
    current_call,
)
from console.engine.model_call import ProviderUnreachable
from console.providers.errors import (
    classify,
    error,
    is_context_overflow,
    network_reason,
    not_a_stream,
    origin,
    response_headers,
    scrub,
    server_detail,
    unreachable_reason,
    with_detail,
)
from console.providers.hang_up import before_headers, hang_up, track_connections

_EPHEMERAL = {"type": "ephemeral"}
_LOCAL_PLACEHOLDER_KEY = "not-needed"


# The stream's events as the server's JSON objects, not the SDK's models: the SDK builds a model of every event (a
# walk of its fields in Python), many times the cost of decoding it, and a reply is streamed a few tokens an event
# (console.providers.openai_provider._RawStream: the same for OpenAI, measured). The SDK's own Stream still reads the
# events (its SSE decoder, `ping` skipped, an `error` event raised as the SDK's status error) and the request goes
# through the client's post() (the SDK's documented way to send a request it has no method for: base_url, auth,
# version header, retries, errors as the SDK's).
_RawStream = anthropic.Stream[object]


class AnthropicProvider:
    name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 0,
        client: anthropic.Anthropic | None = None,
        key_variable: str = "ANTHROPIC_API_KEY",
    ) -> None:
        self.model = model
        self._timeout = timeout
        self._key_variable = key_variable
        if client is None:
            # No SDK retries: the engine retries the whole turn, interruptibly (the SDK would sleep where a
            # stop cannot reach it, and honour a retry-after of an hour).
            client = _make_client(api_key, base_url, timeout, max_retries, key_variable)
        track_connections(client)  # a call abandoned before its headers can be hung up (see hang_up)
        self._client = client

    def check_ready(self) -> None:
        """Ready without a request: Anthropic's API is a hosted service, not a local server that may not be running
        yet (seed 004's check is for those); the first turn's own failures take the retry and ask path."""

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        params = build_params(self.model, request)
        secret = self._client.api_key or self._client.auth_token
        try:
            yield from self._stream(params)
        except anthropic.AnthropicError as err:
            # `from None`: the SDK exception carries the request (and its auth header) and
            # server text that may echo a masked key; the operator message is built without both.
            raise to_provider_error(err, secret=secret, timeout=self._timeout,
                                    key_variable=self._key_variable) from None
        except httpx2.TransportError as err:
            # The SDK wraps transport errors raised while connecting, not those while reading the stream.
            raise ProviderError(
                f"anthropic: connection lost mid-stream ({network_reason(err, include_self=True)})",
                kind="transient", cause="connection lost") from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ProviderError("anthropic: the server sent malformed stream data (not JSON in UTF-8)",
                                kind="transient", cause="malformed stream") from None
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
            # JSON of the wrong shape (a message_start without its message, a null usage): the server broke
            # the protocol mid-stream; asking again is the only thing to do.
            raise ProviderError(f"anthropic: the server sent a malformed stream event ({type(exc).__name__})",
                                kind="transient", cause="malformed stream") from None

    def _stream(self, params: dict[str, Any]) -> Iterator[StreamEvent]:
        calls: dict[int, _PartialCall] = {}
        usage = _UsageTally()
        stop_reason: str | None = None
        started = finished = False

        opened: Any  # the SDK's Stream of the events' JSON objects (dicts, or whatever a broken server sent)
        with before_headers():  # abandoned before the headers: hung up all the same (see hang_up)
            opened = self._client.post("/v1/messages", body=params, cast_to=object, stream=True,
                                       stream_cls=_RawStream)
        with opened as events:
            if (handle := current_call()) is not None:
                handle.on_cancel(hang_up(events))  # the engine hangs up from its own thread (see hang_up)
            not_a_stream("anthropic", events, "an Anthropic endpoint")
            for event in events:  # each event the server's JSON object, as it sent it (see _RawStream)
                kind = event["type"]
                if kind == "message_start":
                    started = True
                    usage.start(event["message"]["usage"])
                elif kind == "content_block_start":
                    block = event["content_block"]
                    if block["type"] == "tool_use":
                        calls[event["index"]] = _PartialCall(block["id"], block["name"], initial=block.get("input"))
                    elif block["type"] == "text" and block.get("text"):
                        yield TextDelta(block["text"])
                    elif block["type"] == "thinking" and block.get("thinking"):
                        yield ReasoningDelta(block["thinking"])
                elif kind == "content_block_delta":
                    delta = event["delta"]
                    if delta["type"] == "text_delta":
                        if delta.get("text"):
                            yield TextDelta(delta["text"])
                    elif delta["type"] == "thinking_delta":
                        if delta.get("thinking"):
                            yield ReasoningDelta(delta["thinking"])
                    elif delta["type"] == "input_json_delta" and event["index"] in calls:
                        calls[event["index"]].parts.append(delta["partial_json"])
                        yield Progress(len(delta["partial_json"]))  # a slow big call is not a stall
                elif kind == "message_delta":
                    usage.delta(event["usage"])
                    stop_reason = event["delta"].get("stop_reason") or stop_reason
                elif kind == "message_stop":
                    finished = True
                if kind in ("content_block_start", "content_block_stop", "message_delta"):
                    yield Progress()  # model output all the same (only `ping` is a keep-alive)

        if not started:
            # An event stream that ended before message_start: cut like any other (a server that is not
            # Anthropic-compatible answers with a status or a body that is not a stream).
            raise IncompleteStream("anthropic: the stream ended before message_start (is base_url an Anthropic "
                                   "endpoint?)")
        if not finished:
            # No message_stop: the stream was cut. A partial reply, above all a partial tool call, is never
            # executed: the engine asks again.
            raise IncompleteStream("anthropic: the stream ended without message_stop (cut mid-way)")

        # Emitted after the text, as the stream protocol requires, in block order.
        for index in sorted(calls):
            yield ToolCallEvent(calls[index].finish())
        yield usage.report()
        yield _stop(stop_reason)


def _make_client(
    api_key: str | None, base_url: str | None, timeout: float, retries: int, key_variable: str
) -> anthropic.Anthropic:
    # None lets the SDK fall back to ANTHROPIC_AUTH_TOKEN and on-disk profiles.
    key = api_key or os.environ.get(key_variable) or None
    try:
        client = anthropic.Anthropic(api_key=key, base_url=base_url, timeout=timeout, max_retries=retries)
    except anthropic.AnthropicError as err:
        # e.g. a broken profile under ANTHROPIC_CONFIG_DIR; the message names a path, not a secret.
        raise ProviderError(
            f"anthropic: cannot load credentials - set {key_variable} ({scrub(str(err), key)})"
        ) from None
    if client.api_key or client.auth_token or client.credentials:
        return client
    if base_url is None:
        # The SDK itself would only fail at request time, with a TypeError.
        raise ProviderError(f"anthropic: no API key - set {key_variable}")
    # Local Anthropic-compatible servers ignore the key, but the SDK insists on one.
    return anthropic.Anthropic(
        api_key=_LOCAL_PLACEHOLDER_KEY, base_url=base_url, timeout=timeout, max_retries=retries
    )


# -- request translation --------------------------------------------------------------


def build_params(model: str, request: ModelRequest) -> dict[str, Any]:
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_output_tokens,
        "messages": to_anthropic_messages(request),
        "stream": True,
    }
    if request.system:
        # Breakpoint 1 of 3: system prompt (tools precede it in the cache prefix order).
        params["system"] = [{"type": "text", "text": request.system, "cache_control": _EPHEMERAL}]
    if request.tools:
        tools: list[dict[str, Any]] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
        # Breakpoint 2 of 3: the tool list, which only changes when the toolset does.
        tools[-1]["cache_control"] = _EPHEMERAL
        params["tools"] = tools
    return params


def to_anthropic_messages(request: ModelRequest) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        # The API requires strict user/assistant alternation, so same-role neighbours merge.
        # This is also what groups all results of one assistant turn into one user message.
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    # Tool blocks without tool definitions are refused by the API ("Requests which include tool_use or
    # tool_result blocks must define tools"): a request with no tools (the summary) gets them as text.
    as_text = not request.tools
    for m in request.messages:
        add(_wire_role(m), _text_blocks(m) if as_text else _blocks(m))

    for turn in turns:
        if turn["role"] == "user":
            # The API rejects user content where text precedes tool_result blocks.
            results = [b for b in turn["content"] if b["type"] == "tool_result"]
            others = [b for b in turn["content"] if b["type"] != "tool_result"]
            turn["content"] = results + others

    if turns:
        # Breakpoint 3 of 3: end of the conversation, so the next turn reuses all of it.
        turns[-1]["content"][-1]["cache_control"] = _EPHEMERAL

    if request.protected:
        # After the breakpoint: it changes every turn and must not invalidate the cached prefix.
        add("user", [_text(request.protected)])
    return turns


def _wire_role(m: Message) -> str:
    return "assistant" if m.role == "assistant" else "user"


def _blocks(m: Message) -> list[dict[str, Any]]:
    if m.role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id or ""}
        if m.meta.get("ok") is False:
            # The harness knows the call failed (bad arguments, refused path); say so on the wire.
            result["is_error"] = True
        if m.content:
            result["content"] = m.content
        return [result]
    if m.role == "system":
        # Anthropic has no mid-conversation system role; a tagged user block keeps it distinguishable.
        return [_text(f"<system-notice>{m.content}</system-notice>")]
    blocks: list[dict[str, Any]] = []
    # Whitespace-only text blocks are rejected by the API.
    if m.content.strip():
        blocks.append(_text(m.content))
    if m.role == "assistant":
        blocks.extend(
            {"type": "tool_use", "id": c.id, "name": c.name, "input": _parse_input(c.arguments)}
            for c in m.tool_calls
        )
    return blocks


def _text_blocks(m: Message) -> list[dict[str, Any]]:
    """The message with its tool calls and results written out as text (for a request without tools)."""
    if m.role == "tool":
        status = "error" if m.meta.get("ok") is False else "result"
        return [_text(f"[tool {status} of {m.name or 'a tool'} ({m.tool_call_id or '?'})]\n{m.content or '(empty)'}")]
    if m.role == "assistant" and m.tool_calls:
        lines = [m.content] if m.content.strip() else []
        lines += [f"[tool call {c.name}({c.arguments[:2000]}) id {c.id}]" for c in m.tool_calls]
        return [_text("\n".join(lines))]
    return _blocks(m)


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _parse_input(arguments: str) -> dict[str, Any]:
    # The model's malformed JSON was already reported back as a tool error; the API
    # only accepts an object here, so replaying it as {} keeps the history sendable.
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# -- response assembly ----------------------------------------------------------------


@dataclass
class _PartialCall:
    id: str
    name: str
    parts: list[str] = field(default_factory=list)
    initial: object = None

    def finish(self) -> ToolCall:
        arguments = "".join(self.parts)
        if not arguments and self.initial:
            # Proxies that do not stream input send it whole in content_block_start. Otherwise empty stays
            # empty: {} only once the reply is known to be whole (a call cut by max_tokens is never run).
            arguments = json.dumps(self.initial)
        return ToolCall(id=self.id, name=self.name, arguments=arguments)


@dataclass
class _UsageTally:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    reported: bool = False

    def start(self, u: dict[str, Any]) -> None:
        self.reported = True
        self.input_tokens = u.get("input_tokens") or 0
        self.output_tokens = u.get("output_tokens") or 0
        self.cache_read = u.get("cache_read_input_tokens") or 0
        self.cache_creation = u.get("cache_creation_input_tokens") or 0

    def delta(self, u: dict[str, Any]) -> None:
        # message_delta counts are cumulative; input fields are optional and override when present.
        self.output_tokens = u.get("output_tokens") or self.output_tokens
        if u.get("input_tokens") is not None:
            self.input_tokens = u["input_tokens"]
        if u.get("cache_read_input_tokens") is not None:
            self.cache_read = u["cache_read_input_tokens"]
        if u.get("cache_creation_input_tokens") is not None:
            self.cache_creation = u["cache_creation_input_tokens"]

    def report(self) -> Usage:
        # Anthropic's input_tokens excludes cached tokens; the engine budgets on total prompt size.
        total = self.input_tokens + self.cache_read + self.cache_creation
        return Usage(total, self.output_tokens, cached_input_tokens=self.cache_read, reported=self.reported,
                     cache_write_tokens=self.cache_creation)


def _stop(raw: str | None) -> Stop:
    if raw == "tool_use":
        return Stop("tool_use")
    if raw == "max_tokens":
        return Stop("max_tokens")
    # Keep unusual reasons (refusal, pause_turn, ...) visible to the operator.
    return Stop("end_turn", "" if raw in ("end_turn", "stop_sequence") else (raw or "no stop_reason"))


# -- errors ---------------------------------------------------------------------------


def to_provider_error(err: anthropic.AnthropicError, *, secret: str | None, timeout: float,
                      key_variable: str = "ANTHROPIC_API_KEY") -> ProviderError:
    """One line for the operator, and whether asking again can help."""
    message = describe_error(err, secret=secret, timeout=timeout, key_variable=key_variable)
    if isinstance(err, anthropic.AuthenticationError | anthropic.PermissionDeniedError):
        # Asking again gets the same answer until the operator fixes the key: the run's end names it, then resume.
        what = "a working key" if isinstance(err, anthropic.AuthenticationError) else "a key with access to this model"
        return ProviderError(message, kind="fatal", cause=f"status {err.status_code}",
                             fix=f"set {key_variable} to {what}")
    if (unreachable := unreachable_reason(err)) is not None and isinstance(err, anthropic.APIConnectionError):
        # Refused, no such host, no route, or no answer to the connection: nobody is there (a short bound).
        return ProviderUnreachable(message, unreachable)
    if isinstance(err, anthropic.APITimeoutError):
        return ProviderError(message, kind="transient", cause="timed out")
    if isinstance(err, anthropic.APIConnectionError):
        return ProviderError(message, kind="transient", cause=network_reason(err))
    if isinstance(err, anthropic.APIStatusError):
        status = err.status_code
        detail = server_detail(err.body) or str(err.message)
        if status < 400:
            # An `event: error` inside a 200 stream (overloaded_error, api_error mid-generation).
            kind: ErrorKind = "context" if is_context_overflow(None, detail) else "transient"
            return ProviderError(message, kind=kind, cause=f"stream error ({err.type or 'error'})")
        cause = ("rate limited" if status == 429 else "overloaded" if status == 529
                 else f"server error {status}" if status >= 500 else f"status {status}")
        return error(message, kind=classify(status, detail), cause=cause, headers=response_headers(err))
    if isinstance(err, anthropic.APIError):
        return ProviderError(message, kind="transient", cause="stream error")
    return ProviderError(message, kind="fatal")


def describe_error(err: anthropic.AnthropicError, *, secret: str | None, timeout: float,
                   key_variable: str = "ANTHROPIC_API_KEY") -> str:
    """One line for the operator, built from status and error type, never from headers."""
    if isinstance(err, anthropic.APITimeoutError) and unreachable_reason(err) is not None:
        return f"anthropic: cannot reach {origin(err)} (no answer to the connection within {timeout:g}s)"
    if isinstance(err, anthropic.APITimeoutError):
        return f"anthropic: {origin(err)} timed out (timeout {timeout:g}s)"
    if isinstance(err, anthropic.APIConnectionError):
        return f"anthropic: cannot reach {origin(err)} ({network_reason(err)})"
    if isinstance(err, anthropic.AuthenticationError):
        return f"anthropic: authentication failed (401) - check {key_variable}"
    if isinstance(err, anthropic.PermissionDeniedError):
        return f"anthropic: permission denied (403) - the key in {key_variable} may not have access to this model"
    if isinstance(err, anthropic.RateLimitError):
        return with_detail("anthropic: rate limited (429)", err, secret)
    if isinstance(err, anthropic.NotFoundError):
        return with_detail("anthropic: not found (404) - check the model name and base_url", err, secret)
    if isinstance(err, anthropic.APIStatusError):
        status = err.status_code
        if status < 400:
            return with_detail(f"anthropic: stream error ({err.type or 'error'})", err, secret)
        if status == 529:
            return with_detail("anthropic: overloaded (529)", err, secret)
        if status >= 500:
            return with_detail(f"anthropic: server error ({status})", err, secret)
        return with_detail(f"anthropic: request rejected ({status})", err, secret)
    if isinstance(err, anthropic.APIError):
        return with_detail("anthropic: request failed", err, secret)
    return f"anthropic: {type(err).__name__}"
