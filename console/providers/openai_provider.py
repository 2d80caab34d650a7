"""OpenAI Chat Completions adapter (also OpenAI-compatible servers: Ollama, vLLM, ...).

Chat Completions rather than the Responses API because it is the protocol the
local servers actually implement; everything here sticks to the common subset.

Why one module of ~520 lines: it is one adapter, the one place that knows the OpenAI SDK (the CLI's start-up
test keeps it from loading unless a run uses it). Its parts are one request's round trip: the request built
(messages, the token-limit parameter a server accepts), the stream folded back into the engine's events
(partial tool calls, stop reasons) and the SDK's errors turned into the engine's, which may retry the request
with what a server refused (the limit parameter, the message order). Split, each piece would import the others
and the SDK; the Anthropic adapter is kept the same way.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from console.providers.lean_import import lazy_inits, without

# The SDK's optional aiohttp client, never used here, and its ~470 type modules, of which some 55 are (imported as
# they are asked for): console.providers.lean_import.
with without("aiohttp"), lazy_inits("openai.types"):
    import openai

try:  # the SDK moved from httpx to httpx2; catch transport errors from whichever it uses
    import httpx2
except ImportError:  # pragma: no cover - older SDKs
    # httpx is absent where the SDK brought httpx2 (the one mypy sees): only an older SDK takes this branch.
    import httpx as httpx2  # type: ignore[no-redef, import-not-found, unused-ignore]

from console.engine.messages import Message, ModelRequest, ToolCall
from console.engine.model import (
    IncompleteStream,
    Notice,
    Progress,
    ProviderError,
    ReasoningDelta,
    Stop,
    StopReason,
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
from console.providers.token_limit import MAX_TOKENS_PARAMS, TokenLimit, token_limit

# Local servers ignore the key, but the SDK refuses to build a client without one: it is given this, and each
# request omits the Authorization header it would make of it (_NO_AUTH), so a server without a key gets none.
_LOCAL_PLACEHOLDER_KEY = "not-needed"
_NO_AUTH = {"Authorization": openai.Omit()}

# OpenAI's hosts, and Azure OpenAI's (Azure AI Foundry's): where max_completion_tokens is the name to start with.
# A server's answers to GET /models that say it is there but cannot serve yet: a model still loading (llama.cpp's
# server, vLLM), a proxy in front of a backend that is down or slow.
NOT_READY = frozenset({502, 503, 504})
_COMPLETION_TOKENS_HOSTS = ("openai.com", "openai.azure.com", "cognitiveservices.azure.com", "services.ai.azure.com")


# The stream's chunks as the server's JSON objects, not the SDK's ChatCompletionChunk models: the SDK builds a model
# of every chunk (a walk of its fields in Python), ~17 times the cost of decoding it (a reply is streamed a token a
# chunk: measured 0.085-0.094 ms of CPU a chunk through the SDK's models, 0.005 as the JSON; benchmarks/
# fleet_scale.py, issue 37). The SDK's own Stream still reads the events (its SSE decoder, "[DONE]", an error
# event raised as APIError, its timeouts) and the request goes through the client's post() (its documented way
# to send a request it has no method for: base_url, auth, headers, retries, errors as the SDK's), which also
# skips create()'s walk of the whole conversation to transform it (plain JSON here already).
_RawStream = openai.Stream[object]


class OpenAIProvider:
    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 0,
        client: openai.OpenAI | None = None,
        key_variable: str = "OPENAI_API_KEY",
        max_tokens_param: str = "auto",
    ) -> None:
        self.model = model
        self._timeout = timeout
        self._key_variable = key_variable
        if max_tokens_param not in MAX_TOKENS_PARAMS:
            raise ProviderError(f"openai: max_tokens_param must be one of {', '.join(MAX_TOKENS_PARAMS)}, not "
                                f"{scrub(str(max_tokens_param), None)!r}")
        where = base_url if base_url is not None or client is None else str(client.base_url)
        # The output limit's name: the host's, until a server refuses it (once; an operator's choice is kept).
        self.limit_param: TokenLimit = (limit_param_for(where) if max_tokens_param == "auto"
                                        # one of MAX_TOKENS_PARAMS, checked above (a str mypy cannot narrow)
                                        else max_tokens_param)  # type: ignore[assignment]
        self._adapt = max_tokens_param == "auto"
        # Strict user/assistant alternation (NO_REPLY after tool results): for Mistral-family models from the start,
        # for any other server once it refuses a message order (once). Others never see a made-up assistant turn.
        self.alternate = mistral_family(model)
        self._extra_headers: dict[str, Any] = {}
        if client is None:
            key = api_key or os.environ.get(key_variable)
            if not key:
                if base_url is None:
                    raise ProviderError(f"openai: no API key - set {key_variable}")
                key = _LOCAL_PLACEHOLDER_KEY
                self._extra_headers = _NO_AUTH
            # No SDK retries: the engine retries the whole turn, interruptibly, and says so (an SDK retry
            # sleeps where a stop cannot reach it, and honours any retry-after, even an hour).
            client = openai.OpenAI(api_key=key, base_url=base_url, timeout=timeout, max_retries=max_retries)
        track_connections(client)  # a call abandoned before its headers can be hung up (see hang_up)
        self._client = client

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        secret = self._client.api_key
        try:
            yield from self._stream(request)
        except openai.OpenAIError as err:
            # `from None`: the SDK exception carries the request (and its auth header) and
            # server text that may echo a masked key; the operator message is built without both.
            raise to_provider_error(err, secret=secret, timeout=self._timeout,
                                    key_variable=self._key_variable) from None
        except httpx2.TransportError as err:
            # Raised while reading the stream (a reset, a cut), which the SDK does not wrap.
            raise ProviderError(f"openai: connection lost mid-stream ({network_reason(err, include_self=True)})",
                                kind="transient", cause="connection lost") from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ProviderError("openai: the server sent malformed stream data (not JSON in UTF-8)",
                                kind="transient", cause="malformed stream") from None
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
            # JSON of the wrong shape (`data: 42`, a null choice, a string delta): the server broke the
            # protocol mid-stream; asking again is the only thing to do, and the operator reads why.
            raise ProviderError(f"openai: the server sent a malformed stream chunk ({type(exc).__name__})",
                                kind="transient", cause="malformed stream") from None

    def check_ready(self) -> None:
        """Seed 004's ``check_ollama_ready`` for any server that speaks the protocol, once per session start:
        ``GET /models`` (the SDK's ``models.list()``), the cheapest request there is (no tokens, no model loaded
        for it). Not reached (refused, no such host, timed out) or not ready yet (502/503/504: a model still
        loading, a proxy whose backend is down) is a transient ProviderError the engine retries and then asks
        its operator about; any other answer says the server is there (a 401, or a 404 from a server without the
        list, is the chat request's to report)."""
        secret = self._client.api_key
        try:
            with before_headers():  # a stop during the check hangs it up (see hang_up)
                self._client.models.with_raw_response.list()  # the answer's status is all: its body is not parsed
        except openai.APIStatusError as err:
            if err.status_code in NOT_READY:
                raise to_provider_error(err, secret=secret, timeout=self._timeout,
                                        key_variable=self._key_variable) from None
        except openai.APIConnectionError as err:  # a timeout is one too
            raise to_provider_error(err, secret=secret, timeout=self._timeout,
                                    key_variable=self._key_variable) from None

    def _open(self, request: ModelRequest) -> Iterator[Notice | Any]:
        """The response stream (last), after a notice for each way the server refused the request's shape and it
        was sent again, adapted, before any output: the output limit's name ("auto" only), the order of the
        messages (a Mistral-family template). Each adaptation happens once per provider and is kept; a 400 before
        any output is not a fault, so the engine's retries, and its count of a model being unavailable, never
        see it."""
        while True:
            params = build_params(self.model, request, limit=self.limit_param, alternate=self.alternate)
            try:
                with before_headers():  # abandoned before the headers: hung up all the same (see hang_up)
                    opened = self._client.post(
                        "/chat/completions", body=params, cast_to=object, stream=True, stream_cls=_RawStream,
                        options={"headers": self._extra_headers, "security": {"bearer_auth": True}})
                yield opened
                return
            except openai.BadRequestError as err:
                detail = scrub(server_detail(err.body) or str(err.message), self._client.api_key)
                if self._adapt and refused_limit(err) == self.limit_param:
                    refused = self.limit_param
                    other: TokenLimit = "max_tokens" if refused == "max_completion_tokens" else "max_completion_tokens"
                    self.limit_param, self._adapt = other, False
                    yield Notice(f"openai: {origin(err)} refused {refused} for {self.model} ({detail}); asked again "
                                 f"with {other}, which this run uses from now on")
                elif not self.alternate and refused_order(err):
                    self.alternate = True
                    yield Notice(f"openai: {origin(err)} refused the order of the messages for {self.model} "
                                 f"({detail}); asked again with user and assistant turns alternating, as this run "
                                 "does from now on")
                else:
                    raise

    def _stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        text_chars = 0
        calls: dict[int, _PartialCall] = {}
        usage: Any = None
        finish: str | None = None
        received = 0

        opened: Any = None
        for opened in self._open(request):
            if isinstance(opened, Notice):
                yield opened
        with opened as chunks:
            if (handle := current_call()) is not None:
                handle.on_cancel(hang_up(chunks))  # the engine hangs up from its own thread (see hang_up)
            not_a_stream("openai", chunks, "an OpenAI-compatible /v1 endpoint")
            for chunk in chunks:  # each chunk the server's JSON object, as it sent it (see _RawStream)
                received += 1
                if chunk.get("usage") is not None:
                    usage = chunk["usage"]
                for choice in chunk.get("choices") or []:
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
                    delta = choice.get("delta")
                    if delta is None:
                        continue
                    # vLLM, SGLang and DeepSeek stream reasoning as reasoning_content; LM Studio, Ollama and
                    # OpenRouter as reasoning. Shown to the operator, never part of the answer.
                    thought = delta.get("reasoning_content") or delta.get("reasoning")
                    if isinstance(thought, str) and thought:
                        yield ReasoningDelta(thought)
                    # A refusal is the model's answer too; surfacing it beats an empty turn.
                    piece = delta.get("content") or delta.get("refusal")
                    if piece:
                        text_chars += len(piece)
                        yield TextDelta(piece)
                    for tc in delta.get("tool_calls") or []:
                        _merge_tool_delta(_slot(calls, tc), tc)
                        # A slow big call is not a stall: every chunk is model output (keep-alives are not).
                        fn = tc.get("function")
                        yield Progress(len(fn.get("arguments") or "") if fn is not None else 0)

        if received == 0:
            # An event stream that ended before its first chunk: cut like any other (a server that is not
            # OpenAI-compatible at all answers with a status or a body that is not a stream).
            raise IncompleteStream("openai: the stream ended before its first chunk (is base_url an "
                                   "OpenAI-compatible /v1 endpoint?)")
        if finish is None:
            # No finish_reason: the stream was cut (or the server closed it early). A partial reply, above all
            # a partial tool call, is never executed: the engine asks again.
            raise IncompleteStream("openai: the stream ended without a finish_reason (cut mid-way)")

        completed = [calls[i].finish() for i in sorted(calls)]
        for call in completed:
            yield ToolCallEvent(call)

        if usage is not None:
            details = usage.get("prompt_tokens_details")
            cached = (details.get("cached_tokens") if details is not None else None) or 0
            yield Usage(
                input_tokens=usage.get("prompt_tokens") or 0,
                output_tokens=usage.get("completion_tokens") or 0,
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


def limit_param_for(base_url: str | None) -> TokenLimit:
    """The output limit's name to start with: max_completion_tokens for OpenAI's and Azure OpenAI's hosts (their
    reasoning models refuse max_tokens), max_tokens for any other server that speaks the protocol."""
    if base_url is None:
        return "max_completion_tokens"
    host = (urlsplit(base_url).hostname or "").lower().rstrip(".")
    if any(host == h or host.endswith(f".{h}") for h in _COMPLETION_TOKENS_HOSTS):
        return "max_completion_tokens"
    return "max_tokens"


# How servers say they do not take a parameter: OpenAI's and Azure's "Unsupported parameter: 'max_tokens' is not
# supported with this model. Use 'max_completion_tokens' instead." (param max_tokens, code unsupported_parameter),
# Azure's older API versions' "Unrecognized request argument supplied: max_completion_tokens", a pydantic server's
# "extra_forbidden ... Extra inputs are not permitted". Not "max_tokens is too large" (a limit, not a name).
_REFUSED = re.compile(r"unsupported|not supported|unrecognized|unknown|not permitted|not allowed|extra_forbidden",
                      re.IGNORECASE)
_LIMIT_NAME = re.compile(r"\b(max_completion_tokens|max_tokens)\b")


def refused_limit(err: openai.BadRequestError) -> TokenLimit | None:
    """The output limit's name a 400 says the server does not take (the one it names first), or None."""
    message = server_detail(err.body) or str(err.message)
    if not _REFUSED.search(message):
        return None
    body = err.body if isinstance(err.body, dict) else {}
    inner = body.get("error", body)
    if (param := token_limit(inner.get("param") if isinstance(inner, dict) else None)) is not None:
        return param
    named = _LIMIT_NAME.search(message)
    return token_limit(named.group(1)) if named else None


# -- request translation --------------------------------------------------------------


def build_params(model: str, request: ModelRequest, *, limit: TokenLimit = "max_completion_tokens",
                 alternate: bool = False) -> dict[str, Any]:
    params: dict[str, Any] = {
        "model": model,
        "messages": to_openai_messages(request, alternate=alternate),
        "stream": True,
        "stream_options": {"include_usage": True},
        limit: request.max_output_tokens,
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


# Mistral-family models: their chat templates (and mistral_common, which vLLM and Mistral's API validate with) need
# user and assistant turns to alternate.
_MISTRAL = re.compile(r"mistral|mixtral|devstral|codestral|magistral|ministral|pixtral|voxtral", re.IGNORECASE)
# What such a server says when the order is not what it takes (mistral_common; the Jinja templates).
_ORDER = re.compile(r"Unexpected role '\w+' after role|roles must alternate", re.IGNORECASE)


def mistral_family(model: str) -> bool:
    return bool(_MISTRAL.search(model))


def refused_order(err: openai.BadRequestError) -> bool:
    """A 400 that says the messages' order is not the one the server takes (strict alternation)."""
    return bool(_ORDER.search(server_detail(err.body) or str(err.message)))


def to_openai_messages(request: ModelRequest, *, alternate: bool = False) -> list[dict[str, Any]]:
    """The conversation in the shape every server that speaks the protocol accepts, at once.

    OpenAI takes almost anything; the chat templates of local servers (vLLM, llama.cpp, LM Studio) do not. Qwen-style
    templates refuse a system message that is not first; Mistral-family ones (and mistral_common, which vLLM and
    Mistral's API validate with) count the user messages and the assistant messages without tool calls, need them
    to alternate (user first), refuse a user message right after tool results, and an assistant message without
    text or calls. So: one system message, first; a harness notice (role system in our conversation) is a tagged
    user message; a reply with nothing to replay (no text, no calls: reasoning only, or nothing at all) is left
    out, and what was around it joins up; neighbouring user messages are merged, and so are neighbouring replies
    of text only. With ``alternate`` (a Mistral-family server), a user message that follows tool results gets
    :data:`NO_REPLY` before it (what happened there: the model said nothing between its results and the harness's
    message); other servers take a user message there, and never see a turn the model did not say. The protected
    layer (todo list, plan,
    memory) joins the last user message, or is a user message of its own, after everything that stays the same
    from turn to turn (the cacheable prefix is as long as before). The conversation itself is left as it was:
    the event log keeps what the model really sent.
    """
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for m in request.messages:
        _add(out, _to_openai_message(m), alternate)
    if request.protected:
        _add(out, {"role": "user", "content": request.protected}, alternate)
    return out


# Said by no one: the assistant's place between tool results and a user message (or an empty reply's, there).
NO_REPLY = "(no reply)"


def _add(out: list[dict[str, Any]], msg: dict[str, Any], alternate: bool) -> None:
    """Append ``msg`` to the wire conversation ``out``, keeping it in the shape :func:`to_openai_messages` says."""
    role = msg["role"]
    plain = role == "assistant" and not msg.get("tool_calls")
    if plain and not (msg["content"] or "").strip():
        return  # nothing to replay (mistral_common: "Assistant message must have either content or tool_calls")
    last = out[-1] if out else None
    if last is not None and last["role"] == role and (role == "user" or (plain and not last.get("tool_calls"))):
        joined = "\n\n".join(part for part in (last["content"], msg["content"]) if part)
        out[-1] = {"role": role, "content": joined}
        return
    if alternate and role == "user" and last is not None and last["role"] == "tool":
        out.append({"role": "assistant", "content": NO_REPLY})
    out.append(msg)


def _to_openai_message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content}
    if m.role == "system":
        return {"role": "user", "content": f"<system-notice>{m.content}</system-notice>"}
    if m.role == "assistant" and m.tool_calls:
        return {
            "role": "assistant",
            # null rather than "" next to tool calls: what OpenAI itself returns and vLLM expects.
            "content": m.content or None,
            "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _replayable(c.arguments)}}
                for c in m.tool_calls
            ],
        }
    return {"role": m.role, "content": m.content}


def _replayable(arguments: str) -> str:
    # The engine records malformed arguments as a note object already; this guards older journals (and
    # empty strings, which vLLM's parser rejects).
    try:
        return arguments if isinstance(json.loads(arguments), dict) else "{}"
    except (ValueError, RecursionError):
        return "{}"


# -- response assembly ----------------------------------------------------------------


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    args: list[str] = field(default_factory=list)

    def finish(self) -> ToolCall:
        # Empty stays empty: a no-argument call is {} only once the reply is known to be whole (the engine
        # refuses the last call of a reply cut by max_tokens when its arguments are not a complete object).
        arguments = "".join(self.args)
        return ToolCall(id=self.id or f"call_{uuid.uuid4().hex[:12]}", name=self.name, arguments=arguments)


def _slot(calls: dict[int, _PartialCall], tc: dict[str, Any]) -> _PartialCall:
    """The call a delta belongs to. Servers that omit ``index`` either send each call whole (an id or a
    name starts a new call) or split one call's arguments over deltas that carry neither (a continuation)."""
    index = tc.get("index")
    if index is None:
        fn, tid = tc.get("function"), tc.get("id")
        starts = bool(tid and all(c.id != tid for c in calls.values())) or bool(fn is not None and fn.get("name"))
        if calls and not starts:
            if tid:
                return next(c for c in calls.values() if c.id == tid)
            return calls[max(calls)]
        index = max(calls, default=-1) + 1
    return calls.setdefault(index, _PartialCall())


def _merge_tool_delta(slot: _PartialCall, tc: dict[str, Any]) -> None:
    # id and name are assigned, not appended: some servers repeat them on every delta.
    if tc.get("id") and not slot.id:
        slot.id = tc["id"]
    fn = tc.get("function")
    if fn is None:
        return
    if fn.get("name") and not slot.name:
        slot.name = fn["name"]
    if fn.get("arguments"):
        slot.args.append(fn["arguments"])


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


def to_provider_error(err: openai.OpenAIError, *, secret: str | None, timeout: float,
                      key_variable: str = "OPENAI_API_KEY") -> ProviderError:
    """One line for the operator, and whether asking again can help."""
    message = describe_error(err, secret=secret, timeout=timeout, key_variable=key_variable)
    if isinstance(err, openai.AuthenticationError | openai.PermissionDeniedError):
        # Asking again gets the same answer until the operator fixes the key: the run's end names it, then resume.
        what = "a working key" if isinstance(err, openai.AuthenticationError) else "a key with access to this model"
        return ProviderError(message, kind="fatal", cause=f"status {err.status_code}",
                             fix=f"set {key_variable} to {what}")
    if (unreachable := unreachable_reason(err)) is not None and isinstance(err, openai.APIConnectionError):
        # Refused, no such host, no route, or no answer to the connection: nobody is there (a short bound).
        return ProviderUnreachable(message, unreachable)
    if isinstance(err, openai.APITimeoutError):
        return ProviderError(message, kind="transient", cause="timed out")
    if isinstance(err, openai.APIConnectionError):
        return ProviderError(message, kind="transient", cause=network_reason(err))
    if isinstance(err, openai.APIStatusError):
        status = err.status_code
        kind = classify(status, server_detail(err.body) or str(err.message))
        if status == 429 and _code(err) == "insufficient_quota":
            # Out of credit, not rate limited: no wait brings credit back.
            return ProviderError(f"{message} - the account has no quota left: add credit, then resume",
                                 kind="fatal", fix="add credit to the account")
        cause = ("rate limited" if status == 429 else f"server error {status}" if status >= 500
                 else f"status {status}")
        return error(message, kind=kind, cause=cause, headers=response_headers(err))
    if isinstance(err, openai.APIError):
        # An error event inside the stream (e.g. a server error mid-generation): no status, worth a retry
        # unless it says the prompt is too long.
        kind = "context" if is_context_overflow(None, str(err.message)) else "transient"
        return ProviderError(message, kind=kind, cause="stream error")
    return ProviderError(message, kind="fatal")


def _code(err: openai.APIStatusError) -> str:
    body = err.body if isinstance(err.body, dict) else {}
    inner = body.get("error", body) if isinstance(body, dict) else {}
    code = (inner.get("code") or inner.get("type")) if isinstance(inner, dict) else None
    return str(code or getattr(err, "code", "") or "")


def describe_error(err: openai.OpenAIError, *, secret: str | None, timeout: float,
                   key_variable: str = "OPENAI_API_KEY") -> str:
    """One line for the operator, built from status and error type, never from headers."""
    if isinstance(err, openai.APITimeoutError) and unreachable_reason(err) is not None:
        return f"openai: cannot reach {origin(err)} (no answer to the connection within {timeout:g}s)"
    if isinstance(err, openai.APITimeoutError):
        return f"openai: {origin(err)} timed out (timeout {timeout:g}s)"
    if isinstance(err, openai.APIConnectionError):
        return f"openai: cannot reach {origin(err)} ({network_reason(err)})"
    if isinstance(err, openai.AuthenticationError):
        return f"openai: authentication failed (401) - check {key_variable}"
    if isinstance(err, openai.PermissionDeniedError):
        return f"openai: permission denied (403) - the key in {key_variable} may not have access to this model"
    if isinstance(err, openai.RateLimitError):
        return with_detail("openai: rate limited (429)", err, secret)
    if isinstance(err, openai.NotFoundError):
        return with_detail("openai: not found (404) - check the model name and base_url", err, secret)
    if isinstance(err, openai.APIStatusError):
        if err.status_code >= 500:
            return with_detail(f"openai: server error ({err.status_code})", err, secret)
        return with_detail(f"openai: request rejected ({err.status_code})", err, secret)
    if isinstance(err, openai.APIError):
        return with_detail("openai: stream failed", err, secret)
    return f"openai: {type(err).__name__}"
