"""Anthropic Messages API adapter.

Uses the raw event stream (``messages.create(stream=True)``) rather than the
SDK's accumulating helper: we only need deltas, and reading the raw events keeps
the usage accounting explicit.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anthropic

try:  # the SDK moved from httpx to httpx2; catch transport errors from whichever it uses
    import httpx2
except ImportError:  # pragma: no cover - older SDKs
    import httpx as httpx2  # type: ignore[no-redef]

from console.engine.messages import Message, ModelRequest, ToolCall
from console.engine.model import ProviderError, Stop, StreamEvent, TextDelta, ToolCallEvent, Usage

_EPHEMERAL = {"type": "ephemeral"}
_LOCAL_PLACEHOLDER_KEY = "not-needed"
_KEYLIKE = re.compile(r"\b(sk|key)-[\w\-.*]{4,}", re.IGNORECASE)


class AnthropicProvider:
    name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        client: anthropic.Anthropic | None = None,
    ) -> None:
        self.model = model
        self._timeout = timeout
        if client is None:
            client = _make_client(api_key, base_url, timeout, max_retries)
        self._client = client

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        params = build_params(self.model, request)
        secret = self._client.api_key or self._client.auth_token
        try:
            yield from self._stream(params)
        except anthropic.AnthropicError as err:
            # `from None`: the SDK exception carries the request (and its auth header) and
            # server text that may echo a masked key; the operator message is built without both.
            raise ProviderError(describe_error(err, secret=secret, timeout=self._timeout)) from None
        except httpx2.TransportError as err:
            # The SDK wraps transport errors raised while connecting, not those while reading the stream.
            raise ProviderError(f"anthropic: connection lost mid-stream ({_network_reason(err)})") from None
        except json.JSONDecodeError:
            raise ProviderError("anthropic: server sent malformed stream data (not JSON)") from None

    def _stream(self, params: dict[str, Any]) -> Iterator[StreamEvent]:
        calls: dict[int, _PartialCall] = {}
        usage = _UsageTally()
        stop_reason: str | None = None
        started = False

        with self._client.messages.create(**params) as events:
            for event in events:
                kind = event.type
                if kind == "message_start":
                    started = True
                    usage.start(event.message.usage)
                elif kind == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        calls[event.index] = _PartialCall(block.id, block.name, initial=block.input)
                    elif block.type == "text" and block.text:
                        yield TextDelta(block.text)
                elif kind == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        if delta.text:
                            yield TextDelta(delta.text)
                    elif delta.type == "input_json_delta" and event.index in calls:
                        calls[event.index].parts.append(delta.partial_json)
                elif kind == "message_delta":
                    usage.delta(event.usage)
                    stop_reason = event.delta.stop_reason or stop_reason

        if not started:
            raise ProviderError(
                "anthropic: server sent no message_start - is base_url an Anthropic endpoint?"
            )

        # Emitted after the text, as the stream protocol requires, in block order.
        for index in sorted(calls):
            yield ToolCallEvent(calls[index].finish())
        yield usage.report()
        yield _stop(stop_reason)


def _make_client(
    api_key: str | None, base_url: str | None, timeout: float, retries: int
) -> anthropic.Anthropic:
    # None lets the SDK fall back to ANTHROPIC_AUTH_TOKEN and on-disk profiles.
    key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
    try:
        client = anthropic.Anthropic(api_key=key, base_url=base_url, timeout=timeout, max_retries=retries)
    except anthropic.AnthropicError as err:
        # e.g. a broken profile under ANTHROPIC_CONFIG_DIR; the message names a path, not a secret.
        raise ProviderError(
            f"anthropic: cannot load credentials - set ANTHROPIC_API_KEY ({_scrub(str(err), key)})"
        ) from None
    if client.api_key or client.auth_token or client.credentials:
        return client
    if base_url is None:
        # The SDK itself would only fail at request time, with a TypeError.
        raise ProviderError("anthropic: no API key - set ANTHROPIC_API_KEY")
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
        if not arguments:
            # Proxies that do not stream input send it whole in content_block_start.
            arguments = json.dumps(self.initial) if self.initial else "{}"
        return ToolCall(id=self.id, name=self.name, arguments=arguments)


@dataclass
class _UsageTally:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    reported: bool = False

    def start(self, u: Any) -> None:
        self.reported = True
        self.input_tokens = u.input_tokens or 0
        self.output_tokens = u.output_tokens or 0
        self.cache_read = u.cache_read_input_tokens or 0
        self.cache_creation = u.cache_creation_input_tokens or 0

    def delta(self, u: Any) -> None:
        # message_delta counts are cumulative; input fields are optional and override when present.
        self.output_tokens = u.output_tokens or self.output_tokens
        if u.input_tokens is not None:
            self.input_tokens = u.input_tokens
        if u.cache_read_input_tokens is not None:
            self.cache_read = u.cache_read_input_tokens
        if u.cache_creation_input_tokens is not None:
            self.cache_creation = u.cache_creation_input_tokens

    def report(self) -> Usage:
        # Anthropic's input_tokens excludes cached tokens; the engine budgets on total prompt size.
        total = self.input_tokens + self.cache_read + self.cache_creation
        return Usage(total, self.output_tokens, cached_input_tokens=self.cache_read, reported=self.reported)


def _stop(raw: str | None) -> Stop:
    if raw == "tool_use":
        return Stop("tool_use")
    if raw == "max_tokens":
        return Stop("max_tokens")
    # Keep unusual reasons (refusal, pause_turn, ...) visible to the operator.
    return Stop("end_turn", "" if raw in ("end_turn", "stop_sequence") else (raw or "no stop_reason"))


# -- errors ---------------------------------------------------------------------------


def describe_error(err: anthropic.AnthropicError, *, secret: str | None, timeout: float) -> str:
    """One line for the operator, built from status and error type, never from headers."""
    if isinstance(err, anthropic.APITimeoutError):
        return f"anthropic: {_origin(err)} timed out (timeout {timeout:g}s)"
    if isinstance(err, anthropic.APIConnectionError):
        return f"anthropic: cannot reach {_origin(err)} ({_network_reason(err)})"
    if isinstance(err, anthropic.AuthenticationError):
        return "anthropic: authentication failed (401) - check ANTHROPIC_API_KEY"
    if isinstance(err, anthropic.PermissionDeniedError):
        return "anthropic: permission denied (403) - the key may not have access to this model"
    if isinstance(err, anthropic.RateLimitError):
        return _with_detail("anthropic: rate limited (429)", err, secret)
    if isinstance(err, anthropic.NotFoundError):
        return _with_detail("anthropic: not found (404) - check the model name and base_url", err, secret)
    if isinstance(err, anthropic.APIStatusError):
        status = err.status_code
        if status < 400:
            # An `event: error` inside a 200 stream, e.g. overloaded_error mid-generation.
            return _with_detail(f"anthropic: stream error ({err.type or 'error'})", err, secret)
        if status == 529:
            return "anthropic: overloaded (529) - try again later"
        if status >= 500:
            return f"anthropic: server error ({status}) - try again later"
        return _with_detail(f"anthropic: request rejected ({status})", err, secret)
    if isinstance(err, anthropic.APIError):
        return _with_detail("anthropic: request failed", err, secret)
    return f"anthropic: {type(err).__name__}"


def _with_detail(prefix: str, err: anthropic.AnthropicError, secret: str | None) -> str:
    detail = _server_detail(getattr(err, "body", None))
    return f"{prefix}: {_scrub(detail, secret)}" if detail else prefix


def _server_detail(body: object) -> str:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            msg = inner.get("message") or inner.get("type")
            return str(msg) if msg else ""
        return str(inner) if isinstance(inner, str) else ""
    return body if isinstance(body, str) else ""


def _scrub(text: str, secret: str | None) -> str:
    # Servers echo (masked) keys in 4xx messages; strip anything key-shaped and cap the length.
    if secret and len(secret) >= 6:
        text = text.replace(secret, "***")
    text = _KEYLIKE.sub("***", text)
    line = " ".join(text.split())
    return line if len(line) <= 200 else line[:197] + "..."


def _origin(err: anthropic.APIError) -> str:
    # scheme://host:port only: a path or query string could carry a key.
    url = err.request.url
    port = f":{url.port}" if url.port else ""
    return f"{url.scheme}://{url.host}{port}"


def _network_reason(err: BaseException) -> str:
    chain: list[BaseException] = [err] if not isinstance(err, anthropic.AnthropicError) else []
    cause = err.__cause__ or err.__context__
    while cause is not None and len(chain) < 8:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    text = " ".join(str(c) for c in chain).lower()
    if any(isinstance(c, ConnectionRefusedError) for c in chain) or "connection refused" in text:
        return "connection refused"
    if any(isinstance(c, socket.gaierror) for c in chain) or "name or service not known" in text:
        return "host not found"
    if "ssl" in text or "certificate" in text:
        return "TLS error"
    if chain:
        first = re.sub(r"\[Errno -?\d+\]\s*", "", str(chain[0])).strip()
        return _scrub(first, None).lower() or type(chain[0]).__name__
    return "network error"
