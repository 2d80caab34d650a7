"""OpenAI Chat Completions adapter (also OpenAI-compatible servers: Ollama, vLLM, ...).

Chat Completions rather than the Responses API because it is the protocol the
local servers actually implement; everything here sticks to the common subset.
"""

from __future__ import annotations

import json
import os
import re
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import openai

from console.engine.messages import Message, ModelRequest, ToolCall
from console.engine.model import (
    ProviderError,
    Stop,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCallEvent,
    Usage,
)

# Local servers ignore the key, but the SDK refuses to build a client without one.
_LOCAL_PLACEHOLDER_KEY = "not-needed"
_KEYLIKE = re.compile(r"\b(sk|key)-[\w\-.*]{4,}", re.IGNORECASE)


class OpenAIProvider:
    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        client: openai.OpenAI | None = None,
    ) -> None:
        self.model = model
        self._timeout = timeout
        if client is None:
            key = api_key or os.environ.get("OPENAI_API_KEY")
            if not key:
                if base_url is None:
                    raise ProviderError("openai: no API key - set OPENAI_API_KEY")
                key = _LOCAL_PLACEHOLDER_KEY
            client = openai.OpenAI(api_key=key, base_url=base_url, timeout=timeout, max_retries=max_retries)
        self._client = client

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        params = build_params(self.model, request)
        try:
            yield from self._stream(params, request)
        except openai.OpenAIError as err:
            # `from None`: the SDK exception carries the request (and its auth header) and
            # server text that may echo a masked key; the operator message is built without both.
            raise ProviderError(
                describe_error(err, secret=self._client.api_key, timeout=self._timeout)
            ) from None
        except json.JSONDecodeError:
            raise ProviderError("openai: server sent malformed stream data (not JSON)") from None

    def _stream(self, params: dict[str, Any], request: ModelRequest) -> Iterator[StreamEvent]:
        text_chars = 0
        calls: dict[int, _PartialCall] = {}
        usage: Any = None
        finish: str | None = None
        received = 0

        with self._client.chat.completions.create(**params) as chunks:
            for chunk in chunks:
                received += 1
                if chunk.usage is not None:
                    usage = chunk.usage
                for choice in chunk.choices:
                    if choice.finish_reason:
                        finish = choice.finish_reason
                    delta = choice.delta
                    # A refusal is the model's answer too; surfacing it beats an empty turn.
                    piece = delta.content or delta.refusal
                    if piece:
                        text_chars += len(piece)
                        yield TextDelta(piece)
                    for tc in delta.tool_calls or []:
                        # Some compatible servers omit `index` and send each call whole.
                        index = getattr(tc, "index", None)
                        index = len(calls) if index is None else index
                        _merge_tool_delta(calls.setdefault(index, _PartialCall()), tc)

        if received == 0:
            raise ProviderError(
                "openai: server sent no completion chunks - is base_url an OpenAI-compatible /v1 endpoint?"
            )

        completed = [calls[i].finish() for i in sorted(calls)]
        for call in completed:
            yield ToolCallEvent(call)

        if usage is not None:
            details = getattr(usage, "prompt_tokens_details", None)
            cached = getattr(details, "cached_tokens", None) or 0
            yield Usage(
                input_tokens=usage.prompt_tokens or 0,
                output_tokens=usage.completion_tokens or 0,
                cached_input_tokens=cached,
            )
        else:
            out_chars = text_chars + sum(len(c.name) + len(c.arguments) for c in completed)
            yield Usage(
                input_tokens=_estimate_tokens(_request_chars(request)),
                output_tokens=_estimate_tokens(out_chars),
                reported=False,
            )

        yield _stop(finish, has_calls=bool(completed))


# -- request translation --------------------------------------------------------------


def build_params(model: str, request: ModelRequest) -> dict[str, Any]:
    params: dict[str, Any] = {
        "model": model,
        "messages": to_openai_messages(request),
        "stream": True,
        "stream_options": {"include_usage": True},
        # max_tokens, not max_completion_tokens: local servers only know the former.
        "max_tokens": request.max_output_tokens,
    }
    if request.tools:
        # Omitted when empty: several compatible servers reject `tools: []`.
        params["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
            }
            for t in request.tools
        ]
    return params


def to_openai_messages(request: ModelRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    out.extend(_to_openai_message(m) for m in request.messages)
    if request.protected:
        # Last, so everything before it stays byte-identical across turns (prompt caching).
        out.append({"role": "system", "content": request.protected})
    return out


def _to_openai_message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        return {
            "role": "assistant",
            # null rather than "" next to tool calls: what OpenAI itself returns and vLLM expects.
            "content": m.content or None,
            "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in m.tool_calls
            ],
        }
    return {"role": m.role, "content": m.content}


# -- response assembly ----------------------------------------------------------------


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    args: list[str] = field(default_factory=list)

    def finish(self) -> ToolCall:
        arguments = "".join(self.args) or "{}"
        return ToolCall(id=self.id or f"call_{uuid.uuid4().hex[:12]}", name=self.name, arguments=arguments)


def _merge_tool_delta(slot: _PartialCall, tc: Any) -> None:
    # id and name are assigned, not appended: some servers repeat them on every delta.
    if tc.id and not slot.id:
        slot.id = tc.id
    fn = tc.function
    if fn is None:
        return
    if fn.name and not slot.name:
        slot.name = fn.name
    if fn.arguments:
        slot.args.append(fn.arguments)


def _stop(finish: str | None, *, has_calls: bool) -> Stop:
    if finish == "length":
        return Stop("max_tokens")
    # Ollama has reported "stop" alongside tool calls; the calls are what the engine must act on.
    if finish in ("tool_calls", "function_call") or has_calls:
        return Stop("tool_use")
    reason: StopReason = "end_turn"
    return Stop(reason, "" if finish == "stop" else (finish or "no finish_reason"))


def _request_chars(request: ModelRequest) -> int:
    chars = len(request.system) + len(request.protected)
    for m in request.messages:
        chars += len(m.content) + sum(len(c.name) + len(c.arguments) for c in m.tool_calls)
    for t in request.tools:
        chars += len(t.name) + len(t.description) + len(json.dumps(t.parameters))
    return chars


def _estimate_tokens(chars: int) -> int:
    return (chars + 3) // 4


# -- errors ---------------------------------------------------------------------------


def describe_error(err: openai.OpenAIError, *, secret: str | None, timeout: float) -> str:
    """One line for the operator, built from status and error type, never from headers."""
    if isinstance(err, openai.APITimeoutError):
        return f"openai: {_origin(err)} timed out (timeout {timeout:g}s)"
    if isinstance(err, openai.APIConnectionError):
        return f"openai: cannot reach {_origin(err)} ({_network_reason(err)})"
    if isinstance(err, openai.AuthenticationError):
        return "openai: authentication failed (401) - check OPENAI_API_KEY"
    if isinstance(err, openai.PermissionDeniedError):
        return "openai: permission denied (403) - the key may not have access to this model"
    if isinstance(err, openai.RateLimitError):
        return _with_detail("openai: rate limited (429)", err, secret)
    if isinstance(err, openai.NotFoundError):
        return _with_detail("openai: not found (404) - check the model name and base_url", err, secret)
    if isinstance(err, openai.APIStatusError):
        if err.status_code >= 500:
            return f"openai: server error ({err.status_code}) - try again later"
        return _with_detail(f"openai: request rejected ({err.status_code})", err, secret)
    if isinstance(err, openai.APIError):
        return _with_detail("openai: stream failed", err, secret)
    return f"openai: {type(err).__name__}"


def _with_detail(prefix: str, err: openai.OpenAIError, secret: str | None) -> str:
    detail = _server_detail(getattr(err, "body", None))
    return f"{prefix}: {_scrub(detail, secret)}" if detail else prefix


def _server_detail(body: object) -> str:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            msg = inner.get("message") or inner.get("code") or inner.get("type")
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


def _origin(err: openai.APIError) -> str:
    # scheme://host:port only: a path or query string could carry a key (e.g. Azure ?api-key=).
    url = err.request.url
    port = f":{url.port}" if url.port else ""
    return f"{url.scheme}://{url.host}{port}"


def _network_reason(err: BaseException) -> str:
    chain: list[BaseException] = []
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
