"""A scriptable local stand-in for the OpenAI and Anthropic HTTP APIs.

The adapters are tested through the real SDKs against this server, so the
tests cover what actually goes over the wire (JSON bodies, headers, SSE
framing) rather than what a mock of the SDK would accept. It binds to
127.0.0.1 on an ephemeral port and never touches the network.

Usage::

    with Loopback() as server:
        server.push(Reply(text=["Hel", "lo"]))
        provider = OpenAIProvider("m", api_key="k", base_url=server.openai_url)
        ...
        assert server.requests[0].body["messages"][0]["role"] == "system"

Each request pops one canned response from a FIFO queue; the same ``Reply`` is
rendered as OpenAI chunks or Anthropic events depending on the path hit.

STRICT. Every request body is first checked against the rules the real API
enforces (``Loopback(strict=False)`` turns it off): hand-written rules plus the
SDKs' own published request types, see :mod:`tests.wire.wire_rules`
(:func:`validate_openai`, :func:`validate_anthropic` are pure functions that
tests call directly). A body the real API would refuse gets what the real API
answers, an HTTP 400 in that provider's error shape, so the SDK raises its
``BadRequestError``; the canned response is not consumed. Rejected requests are
recorded too, with the reason in ``Recorded.rejected`` (``Loopback.rejected``,
``Loopback.accepted``). ``Loopback(openai_dialect="chat_template")`` makes the
OpenAI path behave like a local server rendering a Qwen-style chat template
(vLLM, llama.cpp, LM Studio): stricter request rules, vLLM-shaped chunks;
``openai_dialect="mistral_template"`` like one serving a Mistral-family model
(strict user/assistant alternation, text in every reply: see
:mod:`tests.wire.mistral_rules`). ``Loopback(takes_limit="max_completion_tokens")``
refuses ``max_tokens`` as an Azure OpenAI reasoning deployment does, whatever
the model is called (``"max_tokens"``: the reverse, as an older Azure API version).

SHAPED LIKE RECORDED STREAMS. A ``Reply`` is rendered the way the real APIs
stream (checked against recorded production streams):

- OpenAI: every chunk carries id/object/created/model/service_tier/
  system_fingerprint and ``obfuscation`` padding (and ``usage: null`` when
  usage is requested; the ``chat_template`` dialect sends vLLM's leaner
  chunks, without service_tier, fingerprint, padding or refusal); the first
  delta is ``{"role": "assistant", "content":
  "", "refusal": null}`` (or, for a reply that starts with a tool call,
  ``content: null`` plus that call's head, as the API does); one chunk per text
  piece; each tool call's first delta alone carries ``id``, ``type`` and
  ``function.name`` (with ``arguments: ""``), the arguments follow in pieces
  keyed by ``index``; then ``{"delta": {}, "finish_reason": ...}``; then, only
  if ``stream_options.include_usage``, a ``choices: []`` chunk with ``usage``
  (``prompt_tokens_details.cached_tokens``,
  ``completion_tokens_details.reasoning_tokens``); then ``data: [DONE]``.
- Anthropic: ``message_start`` (usage with input, cache read/creation and
  ``output_tokens: 1``), the first ``content_block_start``, a ``ping``, deltas
  (``thinking_delta`` + ``signature_delta``, ``text_delta``,
  ``input_json_delta`` starting with an empty ``partial_json``),
  ``content_block_stop``, ``message_delta`` (stop_reason and cumulative usage),
  ``message_stop``.

``Reply.of`` and ``CannedToolCall.of`` cut text and arguments into realistic
small pieces. Local-server quirks are ``Reply`` options (``usage=None``,
``tool_ids``, ``tool_index``, ``whole_calls``, ``thinking``).

MODELS. ``GET /v1/models`` answers as OpenAI's OpenAPI schema has it (``listModels``: no parameters, a
``ListModelsResponse``: ``object: "list"``, ``data`` of ``Model``, each with ``id``, ``object: "model"``,
``created`` and ``owned_by``), listing ``models``; any other GET is OpenAI's 404 (``Invalid URL (GET ...)``).
These requests are recorded apart, in ``Loopback.listed`` (``requests`` stays the chat's), and never consume a
canned response: ``Loopback.models_answer(*faults)`` queues ``HttpError``/``Stall`` answers for the next lists
(a model server still loading answers 503 until it is ready; ``models_loaded()`` drops those still queued).

FAULTS. Besides ``Reply``, the queue takes the fault modes a fault-injection
suite needs, each documented on its class: ``HttpError`` (with headers, and
helpers for the providers' real error bodies: ``openai_rate_limit``,
``anthropic_overloaded``, ``openai_context_length``, ...), ``Raw``, ``Stall``,
``StallAfter``, ``Cut``, ``EndEarly``, ``KeepAlive``, ``AnthropicStreamError``,
``OpenAIStreamError``, ``NotUtf8``. Every wait is on the server's stop event,
so leaving the ``with`` block is never delayed by a stalled response.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Self

from .wire_rules import (
    CHAT_TEMPLATE,
    MISTRAL_TEMPLATE,
    OPENAI,
    OPENAI_DIALECTS,
    Invalid,
    OpenAIDialect,
    TokenLimit,
    check_anthropic,
    check_openai,
    check_token_limit,
    error_body,
    published_types_status,
    validate_anthropic,
    validate_openai,
)

__all__ = [
    "CHAT_TEMPLATE", "MISTRAL_TEMPLATE", "OPENAI", "OPENAI_DIALECTS", "AnthropicStreamError", "Canned",
    "CannedToolCall", "CannedUsage", "Cut", "EndEarly", "HttpError", "Invalid", "KeepAlive", "Loopback", "NotUtf8",
    "OpenAIDialect", "OpenAIStreamError", "Raw", "Recorded", "Reply", "Stall", "StallAfter", "TokenLimit",
    "anthropic_api_error",
    "anthropic_auth_error", "anthropic_events", "anthropic_overloaded", "anthropic_permission_error",
    "anthropic_prompt_too_long", "anthropic_rate_limit", "check_anthropic", "check_openai", "check_token_limit",
    "local_context_length",
    "openai_auth_error", "openai_context_length", "openai_events", "openai_overloaded", "openai_permission_denied",
    "openai_rate_limit", "openai_server_error", "pieces", "published_types_status", "tokens", "validate_anthropic",
    "validate_openai",
]

# -- splitting like a real stream ---------------------------------------------------------------

_TOKEN = re.compile(r"\s*[A-Za-z0-9_]+|\s*[^\sA-Za-z0-9_]|\s+")


def tokens(text: str) -> list[str]:
    """``text`` cut the way a model streams it: a word with its leading space, or one punctuation mark, per
    piece ("Hello, world" -> ["Hello", ",", " world"]). Joined back it is ``text``."""
    return _TOKEN.findall(text)


def pieces(text: str, size: int = 4) -> list[str]:
    """``text`` in pieces of ``size`` characters: how tool arguments arrive (a few characters a delta)."""
    return [text[i:i + size] for i in range(0, len(text), size)]


# -- what the queue holds ---------------------------------------------------------------------


@dataclass(frozen=True)
class CannedToolCall:
    id: str
    name: str
    # Sent as separate deltas so tests prove the adapter reassembles them.
    arg_chunks: list[str] = field(default_factory=lambda: ["{}"])

    @classmethod
    def of(cls, id: str, name: str, arguments: dict[str, Any] | str = "{}", *, size: int = 4) -> CannedToolCall:
        """A call whose arguments (an object, or raw text) stream in pieces of ``size`` characters."""
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return cls(id, name, pieces(raw, size))

    @property
    def arguments(self) -> str:
        return "".join(self.arg_chunks)


@dataclass(frozen=True)
class CannedUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    # OpenAI: prompt_tokens_details.cached_tokens. Anthropic: cache_read_input_tokens.
    cached_tokens: int = 0
    # Anthropic only: cache_creation_input_tokens.
    cache_creation_tokens: int = 0
    # OpenAI only: completion_tokens_details.reasoning_tokens (part of output_tokens).
    reasoning_tokens: int = 0


# A real-looking (opaque, base64) signature for thinking blocks.
SIGNATURE = "EqQBCkgIBxABGAIqQLoopbackSignatureNotVerifiedByAnyoneZmFrZS1zaWduYXR1cmU="


@dataclass(frozen=True)
class Reply:
    """One successful streamed completion, protocol-neutral."""

    text: list[str] = field(default_factory=list)
    tool_calls: list[CannedToolCall] = field(default_factory=list)
    # None means "the server did not report usage" (as some local servers do). A callable is asked,
    # with the request body, when the reply is sent: a server that counts the prompt it was given.
    usage: CannedUsage | Callable[[dict[str, Any]], CannedUsage] | None = field(
        default_factory=lambda: CannedUsage(10, 5))
    # Wire value (e.g. "stop"/"tool_calls" or "end_turn"/"tool_use"); None picks the natural one.
    finish: str | None = None
    # OpenAI only: round-robin the argument deltas of parallel calls, which the spec allows.
    interleave: bool = False
    # Reasoning streamed before the answer. OpenAI path: `reasoning_content` deltas, as vLLM (with a reasoning
    # parser) and DeepSeek send them (`reasoning_field="reasoning"`: the other field name in use). Anthropic path: a
    # `thinking` block (thinking_delta pieces, then one signature_delta carrying `signature`).
    thinking: list[str] = field(default_factory=list)
    signature: str = SIGNATURE
    reasoning_field: str = "reasoning_content"
    # OpenAI-compatible quirks of local servers (the OpenAI path only):
    # tool_ids=False: no `id` on any tool-call delta (seen from Ollama-style servers; the client must invent one).
    tool_ids: bool = True
    # tool_index=False: no `index` on tool-call deltas. With whole_calls, each call complete in its own delta (the
    # Ollama-style shape); without, the argument pieces carry no index either: only their order tells whose they are.
    tool_index: bool = True
    # whole_calls=True: each call in ONE delta, name and complete arguments together (servers that do not stream
    # tool arguments).
    whole_calls: bool = False

    @classmethod
    def of(cls, text: str = "", *calls: CannedToolCall, **kw: Any) -> Reply:
        """A reply whose text streams token by token (see :func:`tokens`)."""
        return cls(text=tokens(text), tool_calls=list(calls), **kw)


@dataclass(frozen=True)
class HttpError:
    """A non-200 answer: ``status``, a JSON ``body`` and optional ``headers`` (e.g. ``{"retry-after": "3"}`` or
    ``{"retry-after-ms": "50"}``, both honoured by the SDKs' retry loops). See the ``openai_*`` and
    ``anthropic_*`` helpers for the real bodies."""

    status: int
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Raw:
    """Arbitrary bytes, for malformed or truncated streams.

    ``declared_length`` larger than ``body`` makes the server close the
    connection early, which the client sees as a dropped stream.
    """

    body: bytes
    status: int = 200
    content_type: str = "text/event-stream"
    declared_length: int | None = None


@dataclass(frozen=True)
class Stall:
    """Accept the request, then say nothing for ``seconds`` (not even headers), then hang up: exercises client
    timeouts."""

    seconds: float


@dataclass(frozen=True)
class StallAfter:
    """A mid-stream stall: send the first ``after`` events of ``reply`` (headers included), say nothing for
    ``seconds``, then send the rest. A client whose read timeout is shorter times out mid-stream; a patient one
    gets the whole reply."""

    reply: Reply
    after: int = 1
    seconds: float = 1.0


@dataclass(frozen=True)
class Cut:
    """Send the first ``after`` SSE events of ``reply``, then reset the connection (TCP RST: no terminating chunk,
    no end marker). ``reset=False`` closes it instead (FIN, still without the terminating chunk)."""

    reply: Reply
    after: int = 1
    reset: bool = True


@dataclass(frozen=True)
class EndEarly:
    """Send the first ``after`` SSE events of ``reply``, then end the HTTP body cleanly (terminating chunk) without
    the protocol's end: no finish_reason chunk, usage chunk or ``[DONE]`` (OpenAI), no ``message_delta`` or
    ``message_stop`` (Anthropic) unless they fall within ``after``."""

    reply: Reply
    after: int = 1


@dataclass(frozen=True)
class Paced:
    """A server generating as a model does: ``reply``'s events ``gap`` seconds apart, each in a chunk of its own
    (a token a chunk, a chunk every few milliseconds), the first at once with the headers."""

    reply: Reply
    gap: float = 0.005


@dataclass(frozen=True)
class Whole:
    """A server that had the whole reply before it answered (a local server, a short answer): ``reply``'s events
    sent in one write, so they come together, not one by one as the scheduler lets the server's thread write them."""

    reply: Reply


@dataclass(frozen=True)
class KeepAlive:
    """A server that keeps the stream open without progress: after ``after`` events of ``reply``, an SSE comment
    ``: keep-alive`` every ``every`` seconds for ``total`` seconds. The bytes keep a client's read timeout from
    firing, so only an overall deadline catches it. Then ``then="finish"`` sends the rest of the reply,
    ``then="cut"`` resets the connection."""

    reply: Reply
    after: int = 1
    every: float = 0.1
    total: float = 1.0
    then: Literal["finish", "cut"] = "finish"


@dataclass(frozen=True)
class AnthropicStreamError:
    """An ``event: error`` inside a 200 stream, as Anthropic sends when it fails mid-generation (overloaded_error,
    api_error, ...): the first ``after`` events of ``reply``, the error event, then the body ends. Anthropic path
    only."""

    after: int = 1
    type: str = "overloaded_error"
    message: str | None = None  # None: the API's text for `type`
    reply: Reply = field(default_factory=lambda: Reply(text=["Partial", " answer"]))


@dataclass(frozen=True)
class OpenAIStreamError:
    """A ``data: {"error": {...}}`` chunk inside a 200 stream, as OpenAI-compatible servers (vLLM, LiteLLM, Azure)
    report a failure after the headers: the first ``after`` events of ``reply``, the error chunk, then the body
    ends. OpenAI path only."""

    after: int = 1
    message: str = "The server had an error while processing your request. Sorry about that!"
    type: str = "server_error"
    code: str | int | None = None
    reply: Reply = field(default_factory=lambda: Reply(text=["Partial", " answer"]))


@dataclass(frozen=True)
class NotUtf8:
    """A 200 event stream whose bytes are not UTF-8: ``reply`` rendered as usual, then encoded with ``encoding``
    (latin-1 by default, so the non-ASCII text of the default reply becomes invalid UTF-8)."""

    reply: Reply = field(default_factory=lambda: Reply(text=["Grüße", ", café"]))
    encoding: str = "latin-1"


Canned = (Reply | HttpError | Raw | Stall | StallAfter | Cut | EndEarly | KeepAlive | Paced | Whole
          | AnthropicStreamError | OpenAIStreamError | NotUtf8)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    # Why the strict server refused this request (None: accepted).
    rejected: str | None = None
    # time.monotonic() when the request arrived (retry and back-off tests).
    at: float = field(default_factory=time.monotonic)


# -- the providers' real error bodies -----------------------------------------------------------
#
# Bodies and headers as the APIs send them (see the providers' error docs: https://platform.openai.com/docs/guides/
# error-codes and https://docs.anthropic.com/en/api/errors). Push them: ``server.push(openai_rate_limit())``.


def _retry_headers(retry_after: float | None, retry_after_ms: float | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
    if retry_after_ms is not None:
        headers["retry-after-ms"] = f"{retry_after_ms:g}"
    return headers


def openai_rate_limit(retry_after: float | None = 3, *, retry_after_ms: float | None = None,
                      model: str = "gpt-4.1", quota: bool = False) -> HttpError:
    """429 rate_limit_exceeded (tokens per minute) with retry-after; ``quota=True``: 429 insufficient_quota, which
    no wait fixes."""
    if quota:
        return HttpError(429, {"error": {
            "message": "You exceeded your current quota, please check your plan and billing details. For more "
                       "information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/"
                       "api-errors.",
            "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}})
    wait = retry_after_ms / 1000 if retry_after_ms is not None else retry_after or 1
    headers = {"x-ratelimit-limit-tokens": "30000", "x-ratelimit-remaining-tokens": "0",
               "x-ratelimit-reset-tokens": f"{wait:g}s", "x-request-id": "req_loopback429",
               **_retry_headers(retry_after, retry_after_ms)}
    return HttpError(429, {"error": {
        "message": f"Rate limit reached for {model} in organization org-loopback on tokens per min (TPM): Limit "
                   f"30000, Used 29500, Requested 1200. Please try again in {wait:g}s. Visit "
                   "https://platform.openai.com/account/rate-limits to learn more.",
        "type": "tokens", "param": None, "code": "rate_limit_exceeded"}}, headers)


def openai_server_error(status: int = 500) -> HttpError:
    """500 server_error, the API's own apology."""
    return HttpError(status, {"error": {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error", "param": None, "code": None}})


def openai_overloaded(retry_after: float | None = None) -> HttpError:
    """503: the engine is overloaded."""
    return HttpError(503, {"error": {"message": "The engine is currently overloaded, please try again later",
                                     "type": "server_error", "param": None, "code": None}},
                     _retry_headers(retry_after, None))


def openai_context_length(limit: int = 128000, used: int = 130000) -> HttpError:
    """400 context_length_exceeded, in OpenAI's words."""
    return HttpError(400, {"error": {
        "message": f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
                   f"{used} tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})


def local_context_length(limit: int = 32768, used: int = 33000, completion: int = 1024) -> HttpError:
    """The same refusal from vLLM (an OpenAI-compatible local server): 400, BadRequestError, code 400."""
    return HttpError(400, {"error": {
        "message": f"This model's maximum context length is {limit} tokens. However, you requested {used} tokens "
                   f"({used - completion} in the messages, {completion} in the completion). Please reduce the length "
                   "of the messages or completion.",
        "type": "BadRequestError", "param": None, "code": 400}})


def openai_auth_error(key: str = "sk-proj-loopback0000") -> HttpError:
    """401 invalid_api_key, echoing the key masked as the API does."""
    return HttpError(401, {"error": {
        "message": f"Incorrect API key provided: {key[:8]}{'*' * 8}{key[-4:]}. You can find your API key at "
                   "https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}})


def openai_permission_denied(model: str = "gpt-4.1") -> HttpError:
    """403: the project may not use this model."""
    return HttpError(403, {"error": {
        "message": f"Project `proj_loopback` does not have access to model `{model}`",
        "type": "invalid_request_error", "param": None, "code": "model_not_found"}})


def _anthropic_error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> HttpError:
    return HttpError(status, {"type": "error", "error": {"type": kind, "message": message},
                              "request_id": "req_loopback"}, {"request-id": "req_loopback", **(headers or {})})


def anthropic_rate_limit(retry_after: float | None = 3, *, retry_after_ms: float | None = None) -> HttpError:
    """429 rate_limit_error with retry-after and the anthropic-ratelimit-* headers."""
    headers = {"anthropic-ratelimit-input-tokens-limit": "50000", "anthropic-ratelimit-input-tokens-remaining": "0",
               "anthropic-ratelimit-input-tokens-reset": "2030-01-01T00:00:00Z",
               **_retry_headers(retry_after, retry_after_ms)}
    return _anthropic_error(429, "rate_limit_error",
                            "This request would exceed the rate limit for your organization (loopback) of 50,000 "
                            "input tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-"
                            "limits. You can see the response headers for current usage. Please reduce the prompt "
                            "length or the maximum tokens requested, or try again later.", headers)


def anthropic_api_error() -> HttpError:
    """500 api_error."""
    return _anthropic_error(500, "api_error", "Internal server error")


def anthropic_overloaded() -> HttpError:
    """529 overloaded_error."""
    return _anthropic_error(529, "overloaded_error", "Overloaded")


def anthropic_prompt_too_long(used: int = 210000, limit: int = 200000) -> HttpError:
    """400 invalid_request_error: the prompt exceeds the context window."""
    return _anthropic_error(400, "invalid_request_error", f"prompt is too long: {used} tokens > {limit} maximum")


def anthropic_auth_error() -> HttpError:
    """401 authentication_error."""
    return _anthropic_error(401, "authentication_error", "invalid x-api-key")


def anthropic_permission_error() -> HttpError:
    """403 permission_error."""
    return _anthropic_error(403, "permission_error",
                            "Your API key does not have permission to use the specified resource.")


_ANTHROPIC_STREAM_ERRORS = {"overloaded_error": "Overloaded", "api_error": "Internal server error",
                            "rate_limit_error": "Rate limited", "invalid_request_error": "Invalid request"}


# -- the server ---------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients drop idle keep-alive sockets (and timeout tests hang up on purpose): not a failure.
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class Loopback:
    def __init__(self, *, strict: bool = True, openai_dialect: OpenAIDialect = OPENAI,
                 takes_limit: TokenLimit | None = None, models: tuple[str, ...] = ("gpt-4.1", "gpt-4.1-mini")) -> None:
        if openai_dialect not in OPENAI_DIALECTS:
            raise ValueError(f"openai_dialect must be one of {OPENAI_DIALECTS}, not {openai_dialect!r}")
        self.strict = strict
        self.openai_dialect: OpenAIDialect = openai_dialect
        # A deployment that takes one name of the output limit only (see wire_rules.check_token_limit), checked
        # even when not strict: "max_completion_tokens" answers max_tokens as Azure's reasoning deployments do.
        self.takes_limit: TokenLimit | None = takes_limit
        self.requests: list[Recorded] = []
        self.models = models
        self.listed: list[Recorded] = []  # the GET requests (the model list), apart from the chat's
        self._models_faults: deque[HttpError | Stall] = deque()
        self._queue: deque[Canned] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _make_handler(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, name="loopback", daemon=True
        )

    # -- lifecycle -------------------------------------------------------------

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_url(self) -> str:
        # The OpenAI SDK expects the /v1 prefix in base_url; Anthropic's adds it itself.
        return f"{self.base_url}/v1"

    # -- scripting -------------------------------------------------------------

    def push(self, *responses: Canned) -> None:
        with self._lock:
            self._queue.extend(responses)

    def models_answer(self, *faults: HttpError | Stall) -> None:
        """The next GET /models requests get these, one each, before the list again."""
        with self._lock:
            self._models_faults.extend(faults)

    def models_loaded(self) -> None:
        """The faults still queued for GET /models are dropped: the list from now on."""
        with self._lock:
            self._models_faults.clear()

    @property
    def pending(self) -> int:
        """How many pushed responses no request has consumed yet."""
        with self._lock:
            return len(self._queue)

    def _pop(self) -> Canned | None:
        with self._lock:
            return self._queue.popleft() if self._queue else None

    def _record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)

    @property
    def last(self) -> Recorded:
        return self.requests[-1]

    @property
    def rejected(self) -> list[Recorded]:
        """The requests the strict server refused, in order."""
        with self._lock:
            return [r for r in self.requests if r.rejected is not None]

    @property
    def accepted(self) -> list[Recorded]:
        """The requests that passed validation (each consumed one canned response), in order."""
        with self._lock:
            return [r for r in self.requests if r.rejected is None]

    @property
    def accepted_count(self) -> int:
        """How many requests passed validation: with retries on, how many attempts reached the canned queue."""
        return len(self.accepted)

    def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the server is stopping; True if it is."""
        return self._stopping.wait(seconds)


def _make_handler(owner: Loopback) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep pytest output clean

        def do_GET(self) -> None:
            """OpenAI's ``listModels`` (GET /v1/models, no parameters), or its 404 for a URL it does not serve."""
            headers = {k.lower(): v for k, v in self.headers.items()}
            with owner._lock:
                owner.listed.append(Recorded("GET", self.path, headers, {}))
                fault = owner._models_faults.popleft() if self.path == "/v1/models" and owner._models_faults \
                    else None
            if self.path != "/v1/models":
                self._send(404, "application/json", json.dumps({"error": {
                    "message": f"Invalid URL (GET {self.path})", "type": "invalid_request_error", "param": None,
                    "code": None}}).encode())
            elif isinstance(fault, HttpError):
                self._send(fault.status, "application/json", json.dumps(fault.body).encode(), headers=fault.headers)
            elif isinstance(fault, Stall):
                owner._wait(fault.seconds)
                self.close_connection = True
            else:
                data = [{"id": m, "object": "model", "created": 1686935002, "owned_by": "system"}
                        for m in owner.models]
                self._send(200, "application/json", json.dumps({"object": "list", "data": data}).encode())

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body, problem = {}, Invalid(None, "the request body is not valid JSON")
            else:
                problem = None
            openai = self.path.endswith("/chat/completions")
            if openai and problem is None:
                problem = check_token_limit(body, owner.takes_limit)
            if owner.strict and problem is None:
                if openai:
                    problem = check_openai(body, owner.openai_dialect)
                elif self.path.endswith("/messages"):
                    problem = check_anthropic(body)
            if problem is not None:
                owner._record(Recorded("POST", self.path, headers, body, rejected=str(problem)))
                payload = error_body(self.path, problem, owner.openai_dialect)
                self._send(400, "application/json", json.dumps(payload).encode())
                return
            owner._record(Recorded("POST", self.path, headers, body))

            canned = owner._pop()
            if canned is None:
                self._send(500, "application/json", b'{"error": {"message": "loopback: queue empty"}}')
            elif isinstance(canned, HttpError):
                self._send(canned.status, "application/json", json.dumps(canned.body).encode(), headers=canned.headers)
            elif isinstance(canned, Stall):
                owner._wait(canned.seconds)
                self.close_connection = True
            elif isinstance(canned, Raw):
                self._send(canned.status, canned.content_type, canned.body, canned.declared_length)
            elif not openai and not self.path.endswith("/messages"):
                self._send(404, "application/json", b'{"error": {"message": "loopback: unknown path"}}')
            else:
                self._stream(canned, body, openai=openai)

        # -- streaming ----------------------------------------------------------

        def _stream(self, canned: Canned, body: dict[str, Any], *, openai: bool) -> None:
            reply = canned if isinstance(canned, Reply) else getattr(canned, "reply", None)
            assert isinstance(reply, Reply), canned
            if isinstance(canned, AnthropicStreamError | OpenAIStreamError) and (
                    openai != isinstance(canned, OpenAIStreamError)):
                self._send(500, "application/json", json.dumps({"error": {
                    "message": f"loopback: {type(canned).__name__} pushed for {self.path}"}}).encode())
                return
            events = (openai_events(reply, body, owner.openai_dialect) if openai else anthropic_events(reply, body))
            encoding = canned.encoding if isinstance(canned, NotUtf8) else "utf-8"
            data = [e.encode(encoding) for e in events]
            after = getattr(canned, "after", 1 if isinstance(canned, Paced) else len(data))

            self.send_response(200)
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("transfer-encoding", "chunked")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            if isinstance(canned, Whole):
                self._write(b"".join(f"{len(e):x}\r\n".encode() + e + b"\r\n" for e in data) + b"0\r\n\r\n")
                return
            # Chunked encoding, one SSE event per chunk, so the client parses a real stream.
            if not self._chunks(data[:after]):
                return
            rest = data[after:]
            if isinstance(canned, Cut):
                self._hang_up(reset=canned.reset)
                return
            if isinstance(canned, EndEarly):
                rest = []
            elif isinstance(canned, Paced):
                for event in rest:
                    if owner._wait(canned.gap):
                        return self._hang_up(reset=False)
                    if not self._chunks([event]):
                        return
                rest = []
            elif isinstance(canned, StallAfter):
                if owner._wait(canned.seconds):
                    return self._hang_up(reset=False)
            elif isinstance(canned, KeepAlive):
                deadline = time.monotonic() + canned.total
                while (left := deadline - time.monotonic()) > 0:
                    if owner._wait(min(canned.every, left)):
                        return self._hang_up(reset=False)
                    if not self._chunks([b": keep-alive\n\n"]):
                        return
                if canned.then == "cut":
                    self._hang_up(reset=True)
                    return
            elif isinstance(canned, AnthropicStreamError):
                message = canned.message or _ANTHROPIC_STREAM_ERRORS.get(canned.type, canned.type)
                error = {"type": "error", "error": {"type": canned.type, "message": message},
                         "request_id": "req_loopback"}
                rest = [f"event: error\ndata: {_dumps(error)}\n\n".encode()]
            elif isinstance(canned, OpenAIStreamError):
                error = {"error": {"message": canned.message, "type": canned.type, "param": None, "code": canned.code}}
                rest = [f"data: {_dumps(error)}\n\n".encode()]
            if self._chunks(rest):
                self._write(b"0\r\n\r\n")

        def _chunks(self, events: list[bytes]) -> bool:
            return all(self._write(f"{len(e):x}\r\n".encode() + e + b"\r\n") for e in events)

        def _write(self, data: bytes) -> bool:
            """False if the client has gone (it hung up, or timed out and closed)."""
            try:
                self.wfile.write(data)
                self.wfile.flush()
            except OSError:
                self.close_connection = True
                return False
            return True

        def _hang_up(self, *, reset: bool) -> None:
            """Close without the terminating chunk: TCP RST (``reset``) or FIN."""
            self.close_connection = True
            try:
                if reset:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    # Drop every reference to the socket now, so the kernel resets it here and not after the
                    # server's own shutdown(SHUT_WR), which would send a FIN first.
                    self.rfile.close()
                    self.connection.close()
                else:
                    self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def _send(self, status: int, ctype: str, payload: bytes, declared: int | None = None,
                  headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(declared if declared is not None else len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if declared is not None:
                self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
            if declared is not None:
                self.close_connection = True

    return Handler


def _dumps(obj: Any) -> str:
    # As the APIs send it: compact, and UTF-8 rather than \u escapes.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _usage(reply: Reply, body: dict[str, Any]) -> CannedUsage | None:
    return reply.usage(body) if callable(reply.usage) else reply.usage


# -- OpenAI Chat Completions SSE -----------------------------------------------------


def openai_events(reply: Reply, body: dict[str, Any], dialect: OpenAIDialect = OPENAI) -> list[str]:
    """``reply`` as the SSE events of a Chat Completions stream (``data: [DONE]`` last), shaped like OpenAI's or,
    with ``dialect="chat_template"``, like vLLM's."""
    model = str(body.get("model", ""))
    real = dialect == OPENAI
    u = _usage(reply, body)
    include_usage = isinstance(body.get("stream_options"), dict) and body["stream_options"].get("include_usage")
    report_usage = bool(include_usage) and u is not None
    base: dict[str, Any] = {"id": "chatcmpl-loopback", "object": "chat.completion.chunk", "created": 1700000000,
                            "model": model}
    if real:
        base.update(service_tier="default", system_fingerprint="fp_loopback")
    counter = iter(range(1 << 30))

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, usage: Any = None) -> str:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        obj: dict[str, Any] = {**base, "choices": choices}
        if report_usage:
            obj["usage"] = usage  # null on every chunk but the last, as with include_usage
        if real:
            # OpenAI pads each chunk with random characters (stream_options.include_obfuscation, on by default).
            obj["obfuscation"] = "Lb0x9kQz"[: next(counter) % 8]
        return f"data: {_dumps(obj)}\n\n"

    calls = reply.tool_calls

    def head(index: int, call: CannedToolCall, arguments: str = "") -> dict[str, Any]:
        tc: dict[str, Any] = {"index": index, "id": call.id, "type": "function",
                              "function": {"name": call.name, "arguments": arguments}}
        if not reply.tool_ids:
            del tc["id"]
        if not reply.tool_index:
            del tc["index"]
        return tc

    def part(index: int, text: str) -> dict[str, Any]:
        return {"function": {"arguments": text}} if not reply.tool_index else {"index": index,
                                                                                "function": {"arguments": text}}

    events: list[str] = []
    first: dict[str, Any] = {"role": "assistant", "content": ""}
    if real:
        first["refusal"] = None
    merged = real and calls and not reply.text and not reply.thinking
    if merged:
        # What OpenAI sends when the answer opens with a tool call: the role and the first call's head together.
        c0 = calls[0]
        first = {"role": "assistant", "content": None,
                 "tool_calls": [head(0, c0, c0.arguments if reply.whole_calls else "")], "refusal": None}
    events.append(chunk(first))
    for piece in reply.thinking:
        events.append(chunk({reply.reasoning_field: piece}))
    for piece in reply.text:
        events.append(chunk({"content": piece}))

    for index, call in enumerate(calls):
        if reply.whole_calls:
            if not (merged and index == 0):
                events.append(chunk({"tool_calls": [head(index, call, call.arguments)]}))
            continue
        if not (merged and index == 0):
            events.append(chunk({"tool_calls": [head(index, call)]}))
        if not reply.interleave:
            events.extend(chunk({"tool_calls": [part(index, p)]}) for p in call.arg_chunks)
    if reply.interleave and not reply.whole_calls:
        longest = max((len(c.arg_chunks) for c in calls), default=0)
        for step in range(longest):
            for index, call in enumerate(calls):
                if step < len(call.arg_chunks):
                    events.append(chunk({"tool_calls": [part(index, call.arg_chunks[step])]}))

    finish = reply.finish or ("tool_calls" if calls else "stop")
    events.append(chunk({}, finish))
    if report_usage:
        assert u is not None
        usage: dict[str, Any] = {
            "prompt_tokens": u.input_tokens,
            "completion_tokens": u.output_tokens,
            "total_tokens": u.input_tokens + u.output_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
        }
        if not real:  # vLLM: no audio or prediction counters
            usage["prompt_tokens_details"] = {"cached_tokens": u.cached_tokens} if u.cached_tokens else None
            usage["completion_tokens_details"] = (
                {"reasoning_tokens": u.reasoning_tokens} if u.reasoning_tokens else None)
        events.append(chunk(None, usage=usage))
    events.append("data: [DONE]\n\n")
    return events


# -- Anthropic Messages SSE -----------------------------------------------------------


def anthropic_events(reply: Reply, body: dict[str, Any]) -> list[str]:
    """``reply`` as the SSE events of a Messages stream, shaped like Anthropic's (``message_stop`` last)."""
    model = str(body.get("model", ""))

    def event(name: str, data: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {_dumps({'type': name, **data})}\n\n"

    u = _usage(reply, body) or CannedUsage()
    start_usage = {
        "input_tokens": u.input_tokens,
        "cache_creation_input_tokens": u.cache_creation_tokens,
        "cache_read_input_tokens": u.cached_tokens,
        "cache_creation": {"ephemeral_5m_input_tokens": u.cache_creation_tokens, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 1,
        "service_tier": "standard",
    }
    message = {
        "model": model,
        "id": "msg_loopback",
        "type": "message",
        "role": "assistant",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    events = [event("message_start", {"message": message})]
    pinged = False

    def block(index: int, start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal pinged
        # The API pings once, right after the first block opens (after its empty input delta, for tool_use).
        ping_after = 1 if start["type"] == "tool_use" else 0
        events.append(event("content_block_start", {"index": index, "content_block": start}))
        for n, delta in enumerate([None, *deltas]):
            if n == ping_after and not pinged:
                events.append(event("ping", {}))
                pinged = True
            if delta is not None:
                events.append(event("content_block_delta", {"index": index, "delta": delta}))
        events.append(event("content_block_stop", {"index": index}))

    index = 0
    if reply.thinking:
        deltas = [{"type": "thinking_delta", "thinking": p} for p in reply.thinking]
        block(index, {"type": "thinking", "thinking": "", "signature": ""},
              [*deltas, {"type": "signature_delta", "signature": reply.signature}])
        index += 1
    if reply.text:
        block(index, {"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in reply.text])
        index += 1
    for call in reply.tool_calls:
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in ["", *call.arg_chunks]]
        block(index, {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}, deltas)
        index += 1
    if not pinged:
        events.insert(1, event("ping", {}))

    finish = reply.finish or ("tool_use" if reply.tool_calls else "end_turn")
    delta_usage = {"input_tokens": u.input_tokens, "cache_creation_input_tokens": u.cache_creation_tokens,
                   "cache_read_input_tokens": u.cached_tokens, "output_tokens": u.output_tokens}
    events.append(event("message_delta", {"delta": {"stop_reason": finish, "stop_sequence": None},
                                          "usage": delta_usage}))
    events.append(event("message_stop", {}))
    return events


class ServedInThread:
    """A small test server's life (the fault tests' own servers): ``self.server`` served by ``self.thread`` from
    ``with`` to its end, ``self.stopping`` set first so that handlers waiting on it return; ``url`` its address."""

    server: ThreadingHTTPServer
    thread: threading.Thread
    stopping: threading.Event
    scheme = "http"

    def serve(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{self.scheme}://{host}:{port}"
