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

The server is STRICT (``Loopback(strict=False)`` turns it off): every request
body is first checked against the rules the real API enforces
(:func:`validate_openai`, :func:`validate_anthropic`, pure functions that
tests call directly). A body the real API would refuse gets what the real API
answers, an HTTP 400 in that provider's error shape, so the SDK raises its
``BadRequestError``; the canned response is not consumed. Rejected requests are
recorded too, with the reason in ``Recorded.rejected`` (see ``Loopback.rejected``).
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass(frozen=True)
class CannedToolCall:
    id: str
    name: str
    # Sent as separate deltas so tests prove the adapter reassembles them.
    arg_chunks: list[str] = field(default_factory=lambda: ["{}"])


@dataclass(frozen=True)
class CannedUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    # OpenAI: prompt_tokens_details.cached_tokens. Anthropic: cache_read_input_tokens.
    cached_tokens: int = 0
    # Anthropic only: cache_creation_input_tokens.
    cache_creation_tokens: int = 0


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


@dataclass(frozen=True)
class HttpError:
    status: int
    body: dict[str, Any] = field(default_factory=dict)


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
    """Accept the request, then say nothing for ``seconds``: exercises client timeouts."""

    seconds: float


Canned = Reply | HttpError | Raw | Stall


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    # Why the strict server refused this request (None: accepted).
    rejected: str | None = None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients drop idle keep-alive sockets (and timeout tests hang up on purpose): not a failure.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class Loopback:
    def __init__(self, *, strict: bool = True) -> None:
        self.strict = strict
        self.requests: list[Recorded] = []
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


def _make_handler(owner: Loopback) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep pytest output clean

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
            if owner.strict and problem is None:
                if self.path.endswith("/chat/completions"):
                    problem = check_openai(body)
                elif self.path.endswith("/messages"):
                    problem = check_anthropic(body)
            if problem is not None:
                owner._record(Recorded("POST", self.path, headers, body, rejected=str(problem)))
                self._send(400, "application/json", json.dumps(_error_body(self.path, problem)).encode())
                return
            owner._record(Recorded("POST", self.path, headers, body))

            canned = owner._pop()
            if canned is None:
                self._send(500, "application/json", b'{"error": {"message": "loopback: queue empty"}}')
            elif isinstance(canned, HttpError):
                self._send(canned.status, "application/json", json.dumps(canned.body).encode())
            elif isinstance(canned, Stall):
                # Waits on the stop event so shutting the server down is never delayed.
                owner._stopping.wait(canned.seconds)
                self.close_connection = True
            elif isinstance(canned, Raw):
                self._send(canned.status, canned.content_type, canned.body, canned.declared_length)
            elif self.path.endswith("/chat/completions"):
                self._send_sse(_openai_events(canned, body))
            elif self.path.endswith("/messages"):
                self._send_sse(_anthropic_events(canned, body))
            else:
                self._send(404, "application/json", b'{"error": {"message": "loopback: unknown path"}}')

        def _send(self, status: int, ctype: str, payload: bytes, declared: int | None = None) -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(declared if declared is not None else len(payload)))
            if declared is not None:
                self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
            if declared is not None:
                self.close_connection = True

        def _send_sse(self, events: Iterator[str]) -> None:
            # Chunked encoding, one SSE event per chunk, so the client parses a real stream.
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for event in events:
                data = event.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler


# -- OpenAI Chat Completions SSE -----------------------------------------------------


def _usage(reply: Reply, body: dict[str, Any]) -> CannedUsage | None:
    return reply.usage(body) if callable(reply.usage) else reply.usage


def _openai_events(reply: Reply, body: dict[str, Any]) -> Iterator[str]:
    model = str(body.get("model", ""))

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
        obj: dict[str, Any] = {
            "id": "chatcmpl-loopback",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(obj)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for piece in reply.text:
        yield chunk({"content": piece})

    for index, call in enumerate(reply.tool_calls):
        head = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        yield chunk({"tool_calls": [head]})
        if not reply.interleave:
            for part in call.arg_chunks:
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
    if reply.interleave:
        longest = max((len(c.arg_chunks) for c in reply.tool_calls), default=0)
        for step in range(longest):
            for index, call in enumerate(reply.tool_calls):
                if step < len(call.arg_chunks):
                    part = call.arg_chunks[step]
                    yield chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})

    finish = reply.finish or ("tool_calls" if reply.tool_calls else "stop")
    yield chunk({}, finish)
    if (u := _usage(reply, body)) is not None:
        usage = {
            "prompt_tokens": u.input_tokens,
            "completion_tokens": u.output_tokens,
            "total_tokens": u.input_tokens + u.output_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
        }
        yield chunk(None, usage=usage)
    yield "data: [DONE]\n\n"


# -- Anthropic Messages SSE -----------------------------------------------------------


def _anthropic_events(reply: Reply, body: dict[str, Any]) -> Iterator[str]:
    model = str(body.get("model", ""))

    def event(name: str, data: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

    u = _usage(reply, body) or CannedUsage()
    start_usage = {
        "input_tokens": u.input_tokens,
        "output_tokens": 1,
        "cache_read_input_tokens": u.cached_tokens,
        "cache_creation_input_tokens": u.cache_creation_tokens,
    }
    message = {
        "id": "msg_loopback",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    yield event("message_start", {"message": message})
    yield event("ping", {})

    index = 0
    if reply.text:
        yield event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
        for piece in reply.text:
            yield event(
                "content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": piece}}
            )
        yield event("content_block_stop", {"index": index})
        index += 1
    for call in reply.tool_calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        yield event("content_block_start", {"index": index, "content_block": block})
        for part in call.arg_chunks:
            delta = {"type": "input_json_delta", "partial_json": part}
            yield event("content_block_delta", {"index": index, "delta": delta})
        yield event("content_block_stop", {"index": index})
        index += 1

    finish = reply.finish or ("tool_use" if reply.tool_calls else "end_turn")
    delta_usage = {"output_tokens": u.output_tokens}
    yield event(
        "message_delta", {"delta": {"stop_reason": finish, "stop_sequence": None}, "usage": delta_usage}
    )
    yield event("message_stop", {})


# -- strict request validation ----------------------------------------------------------
#
# The rules each real API enforces on a request body, as far as our adapters can break them. Sources: the
# OpenAI OpenAPI spec (CreateChatCompletionRequest, ChatCompletionRequestMessage, FunctionObject) and the error
# texts the API returns; Anthropic's Messages API reference ("Create a Message", tool use) and its error texts.
# Messages quote the real APIs' wording where it is known, so a failure reads like the production error.


class Invalid(Exception):
    """One reason a request is refused: ``param`` is the path of the offending field (OpenAI's ``param``)."""

    def __init__(self, param: str | None, message: str) -> None:
        super().__init__(param, message)
        self.param = param
        self.message = message

    def __str__(self) -> str:
        return f"{self.param}: {self.message}" if self.param else self.message


TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
TOOL_USE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool")
# Content part types each OpenAI role accepts in the list form of `content`.
OPENAI_PARTS = {
    "system": {"text"},
    "developer": {"text"},
    "user": {"text", "image_url", "input_audio", "file"},
    "assistant": {"text", "refusal"},
    "tool": {"text"},
}
ANTHROPIC_BLOCKS = {
    "user": {"text", "image", "document", "tool_result", "search_result"},
    "assistant": {"text", "tool_use", "thinking", "redacted_thinking"},
}
MAX_CACHE_BREAKPOINTS = 4


def _error_body(path: str, problem: Invalid) -> dict[str, Any]:
    if path.endswith("/messages"):
        return {"type": "error", "error": {"type": "invalid_request_error", "message": str(problem)}}
    return {"error": {"message": problem.message, "type": "invalid_request_error", "param": problem.param,
                      "code": None}}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _need(cond: bool, param: str | None, message: str) -> None:
    if not cond:
        raise Invalid(param, message)


def validate_openai(body: Any) -> str | None:
    """Why the OpenAI Chat Completions API would refuse this body, or None if it would accept it."""
    problem = check_openai(body)
    return None if problem is None else str(problem)


def validate_anthropic(body: Any) -> str | None:
    """Why the Anthropic Messages API would refuse this body, or None if it would accept it."""
    problem = check_anthropic(body)
    return None if problem is None else str(problem)


def check_openai(body: Any) -> Invalid | None:
    try:
        _openai(body)
    except Invalid as problem:
        return problem
    return None


def check_anthropic(body: Any) -> Invalid | None:
    try:
        _anthropic(body)
    except Invalid as problem:
        return problem
    return None


# -- OpenAI Chat Completions ------------------------------------------------------------


def _openai(body: Any) -> None:
    _need(isinstance(body, dict), None, "the request body must be a JSON object")
    _need(isinstance(body.get("model"), str) and body["model"] != "", "model", "you must provide a model parameter")
    messages = body.get("messages")
    _need(isinstance(messages, list), "messages", "Missing required parameter: 'messages'.")
    _need(len(messages) > 0, "messages", "[] is too short - 'messages'")
    for key in ("max_tokens", "max_completion_tokens"):
        if body.get(key) is not None:
            _need(_is_int(body[key]) and body[key] >= 1, key, f"Invalid '{key}': expected an integer >= 1.")
    if "stream" in body:
        _need(isinstance(body["stream"], bool), "stream", "Invalid type for 'stream': expected a boolean.")
    if body.get("stream_options") is not None:
        _need(body.get("stream") is True, "stream_options",
              "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
        _need(isinstance(body["stream_options"], dict), "stream_options", "expected an object.")
    _openai_tools(body)

    pending: dict[str, bool] = {}  # tool_call ids of the open assistant block -> answered yet
    open_at = -1
    for i, msg in enumerate(messages):
        where = f"messages.[{i}]"
        _need(isinstance(msg, dict), where, "each message must be an object")
        role = msg.get("role")
        _need(role in OPENAI_ROLES, f"{where}.role",
              f"Invalid value: {role!r}. Supported values are: {', '.join(map(repr, OPENAI_ROLES))}.")
        missing = [cid for cid, answered in pending.items() if not answered]
        if role != "tool" and missing:
            raise Invalid(f"messages.[{open_at}].role",
                          "An assistant message with 'tool_calls' must be followed by tool messages responding to "
                          "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                          + ", ".join(missing))
        if role != "tool":
            pending = {}
        _openai_content(msg, where, role)
        if role == "tool":
            cid = msg.get("tool_call_id")
            _need(isinstance(cid, str) and cid != "", f"{where}.tool_call_id",
                  "Missing required parameter: 'tool_call_id'.")
            _need(pending.get(cid) is False, f"{where}.role",
                  "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
                  f"'tool_calls' (no open tool_call with id {cid!r}).")
            pending[cid] = True
        elif role == "assistant" and msg.get("tool_calls") is not None:
            pending = _openai_tool_calls(msg["tool_calls"], where)
            open_at = i
    missing = [cid for cid, answered in pending.items() if not answered]
    if missing:
        raise Invalid(f"messages.[{open_at}].role",
                      "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                      "'tool_call_id'. The following tool_call_ids did not have response messages: "
                      + ", ".join(missing))


def _openai_content(msg: dict[str, Any], where: str, role: str) -> None:
    content = msg.get("content")
    if content is None:
        if role == "assistant":
            _need(bool(msg.get("tool_calls")) or msg.get("function_call") is not None, f"{where}.content",
                  "Invalid value for 'content': expected a string, got null.")
            return
        raise Invalid(f"{where}.content", "Invalid value for 'content': expected a string, got null.")
    if isinstance(content, str):
        return
    _need(isinstance(content, list), f"{where}.content",
          f"Invalid type for '{where}.content': expected one of a string or array of objects.")
    for j, part in enumerate(content):
        at = f"{where}.content.[{j}]"
        _need(isinstance(part, dict), at, "expected an object.")
        kind = part.get("type")
        _need(kind in OPENAI_PARTS[role], f"{at}.type",
              f"Invalid value: {kind!r}. Supported values are: {', '.join(sorted(OPENAI_PARTS[role]))}.")
        if kind == "text":
            _need(isinstance(part.get("text"), str), f"{at}.text", "Missing required parameter: 'text'.")


def _openai_tool_calls(calls: Any, where: str) -> dict[str, bool]:
    _need(isinstance(calls, list), f"{where}.tool_calls", "expected an array.")
    _need(len(calls) > 0, f"{where}.tool_calls", f"[] is too short - '{where}.tool_calls'")
    ids: dict[str, bool] = {}
    for k, call in enumerate(calls):
        at = f"{where}.tool_calls.[{k}]"
        _need(isinstance(call, dict), at, "expected an object.")
        cid = call.get("id")
        _need(isinstance(cid, str) and cid != "", f"{at}.id", "Missing required parameter: 'id'.")
        _need(cid not in ids, f"{at}.id", f"Duplicate tool_call id {cid!r} in one assistant message.")
        _need(call.get("type") == "function", f"{at}.type", f"Invalid value: {call.get('type')!r}. "
              "Supported values are: 'function'.")
        fn = call.get("function")
        _need(isinstance(fn, dict), f"{at}.function", "Missing required parameter: 'function'.")
        _need(isinstance(fn.get("name"), str) and fn["name"] != "", f"{at}.function.name",
              "Missing required parameter: 'name'.")
        _need(isinstance(fn.get("arguments"), str), f"{at}.function.arguments",
              f"Invalid type for '{at}.function.arguments': expected a string.")
        ids[cid] = False
    return ids


def _openai_tools(body: dict[str, Any]) -> None:
    tools = body.get("tools")
    if tools is None:
        _need(body.get("tool_choice") is None, "tool_choice",
              "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.")
        return
    _need(isinstance(tools, list), "tools", "Invalid type for 'tools': expected an array.")
    _need(len(tools) > 0, "tools", "[] is too short - 'tools'")
    names: set[str] = set()
    for k, tool in enumerate(tools):
        at = f"tools.[{k}]"
        _need(isinstance(tool, dict) and tool.get("type") == "function", f"{at}.type",
              "Invalid value. Supported values are: 'function'.")
        fn = tool.get("function")
        _need(isinstance(fn, dict), f"{at}.function", "Missing required parameter: 'function'.")
        name = fn.get("name")
        _need(isinstance(name, str) and TOOL_NAME.fullmatch(name) is not None, f"{at}.function.name",
              f"Invalid '{at}.function.name': string does not match pattern. Expected a string that matches the "
              "pattern '^[a-zA-Z0-9_-]{1,64}$'.")
        _need(name not in names, "tools", f"Duplicate function name {name!r}: tool names must be unique.")
        names.add(name)
        if fn.get("description") is not None:
            _need(isinstance(fn["description"], str), f"{at}.function.description", "expected a string.")
        if fn.get("parameters") is not None:
            params = fn["parameters"]
            _need(isinstance(params, dict) and params.get("type") == "object", f"{at}.function.parameters",
                  f"Invalid schema for function {name!r}: schema must be a JSON Schema of 'type: \"object\"', "
                  f"got 'type: \"{params.get('type') if isinstance(params, dict) else None}\"'.")


# -- Anthropic Messages -------------------------------------------------------------------


def _anthropic(body: Any) -> None:
    _need(isinstance(body, dict), None, "the request body must be a JSON object")
    _need(isinstance(body.get("model"), str) and body["model"] != "", "model", "Field required")
    _need("max_tokens" in body, "max_tokens", "Field required")
    _need(_is_int(body["max_tokens"]) and body["max_tokens"] >= 1, "max_tokens",
          "Input should be a valid integer greater than or equal to 1")
    messages = body.get("messages")
    _need(isinstance(messages, list), "messages", "Field required")
    _need(len(messages) > 0, "messages", "at least one message is required")
    if "stream" in body:
        _need(isinstance(body["stream"], bool), "stream", "Input should be a valid boolean")
    breakpoints = _anthropic_system(body.get("system"))
    has_tools = _anthropic_tools(body)
    breakpoints += sum(1 for t in body.get("tools") or [] if isinstance(t, dict) and "cache_control" in t)

    seen_ids: set[str] = set()
    open_ids: list[str] = []  # tool_use ids of the previous assistant message
    uses_tool_blocks = False
    prev_role: str | None = None
    for i, msg in enumerate(messages):
        where = f"messages.{i}"
        _need(isinstance(msg, dict), where, "Input should be an object")
        role = msg.get("role")
        if role == "system":
            raise Invalid("messages", 'Unexpected role "system". The Messages API accepts a top-level `system` '
                                      'parameter, not "system" as an input message role.')
        _need(role in ("user", "assistant"), f"{where}.role", "Input should be 'user' or 'assistant'")
        if i == 0:
            _need(role == "user", "messages", 'first message must use the "user" role')
        _need(role != prev_role, "messages",
              f'roles must alternate between "user" and "assistant", but found multiple "{role}" roles in a row')
        prev_role = role
        blocks = _anthropic_blocks(msg.get("content"), where, role, last=i == len(messages) - 1)
        breakpoints += sum(1 for b in blocks if "cache_control" in b)
        kinds = [b["type"] for b in blocks]
        uses_tool_blocks = uses_tool_blocks or "tool_use" in kinds or "tool_result" in kinds
        if role == "user":
            results = [b for b in blocks if b["type"] == "tool_result"]
            leading = 0
            while leading < len(kinds) and kinds[leading] == "tool_result":
                leading += 1
            for k, block in enumerate(results):
                uid = block["tool_use_id"]
                if uid not in open_ids:
                    raise Invalid(f"{where}.content.{kinds.index('tool_result') + k}",
                                  f"unexpected `tool_use_id` found in `tool_result` blocks: {uid}. Each `tool_result`"
                                  " block must have a corresponding `tool_use` block in the previous message.")
            answered = [b["tool_use_id"] for b in results]
            _need(len(set(answered)) == len(answered), where, "each `tool_use` may be answered only once "
                  "(duplicate `tool_use_id` in `tool_result` blocks)")
            if open_ids:
                _need(leading >= len(open_ids) and set(answered) == set(open_ids), where,
                      f"Did not find {len(open_ids)} `tool_result` block(s) at the beginning of this message. "
                      "Messages following `tool_use` blocks must begin with a matching number of `tool_result` "
                      "blocks.")
            open_ids = []
        else:
            open_ids = []
            for k, block in enumerate(blocks):
                if block["type"] != "tool_use":
                    continue
                uid = block["id"]
                _need(uid not in seen_ids, f"{where}.content.{k}", f"`tool_use` ids must be unique: {uid}")
                seen_ids.add(uid)
                open_ids.append(uid)
            if open_ids and i == len(messages) - 1:
                raise Invalid(where, f"`tool_use` ids were found without `tool_result` blocks immediately after: "
                                     f"{', '.join(open_ids)}. Each `tool_use` block must have a corresponding "
                                     "`tool_result` block in the next message.")
    _need(not uses_tool_blocks or has_tools, None,
          "Requests which include `tool_use` or `tool_result` blocks must define tools.")
    _need(breakpoints <= MAX_CACHE_BREAKPOINTS, None,
          f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints}.")


def _anthropic_text(block: dict[str, Any], at: str) -> None:
    text = block.get("text")
    _need(isinstance(text, str), f"{at}.text", "Field required")
    _need(text != "", at, "text content blocks must be non-empty")
    _need(text.strip() != "", at, "text content blocks must contain non-whitespace text")


def _cache_control(block: dict[str, Any], at: str) -> None:
    if "cache_control" in block:
        cc = block["cache_control"]
        _need(isinstance(cc, dict) and cc.get("type") == "ephemeral", f"{at}.cache_control.type",
              "Input should be 'ephemeral'")


def _anthropic_system(system: Any) -> int:
    if system is None or isinstance(system, str):
        return 0
    _need(isinstance(system, list), "system", "Input should be a valid string or list of text blocks")
    for k, block in enumerate(system):
        at = f"system.{k}"
        _need(isinstance(block, dict) and block.get("type") == "text", f"{at}.type", "Input should be 'text'")
        _anthropic_text(block, at)
        _cache_control(block, at)
    return sum(1 for b in system if "cache_control" in b)


def _anthropic_tools(body: dict[str, Any]) -> bool:
    tools = body.get("tools")
    if tools is None:
        _need(body.get("tool_choice") is None, "tool_choice", "tool_choice may only be specified while providing "
                                                              "tools.")
        return False
    _need(isinstance(tools, list), "tools", "Input should be a valid list")
    names: set[str] = set()
    for k, tool in enumerate(tools):
        at = f"tools.{k}"
        _need(isinstance(tool, dict), at, "Input should be an object")
        name = tool.get("name")
        _need(isinstance(name, str) and TOOL_NAME.fullmatch(name) is not None, f"{at}.custom.name",
              "String should match pattern '^[a-zA-Z0-9_-]{1,64}$'")
        _need(name not in names, "tools", f"Tool names must be unique. Duplicate: {name}")
        names.add(name)
        schema = tool.get("input_schema")
        _need(isinstance(schema, dict), f"{at}.custom.input_schema", "Field required")
        _need(schema.get("type") == "object", f"{at}.custom.input_schema.type", "Input should be 'object'")
        if tool.get("description") is not None:
            _need(isinstance(tool["description"], str), f"{at}.custom.description", "Input should be a valid string")
        _cache_control(tool, at)
    return bool(tools)


def _anthropic_blocks(content: Any, where: str, role: str, *, last: bool) -> list[dict[str, Any]]:
    """The message's content as a list of checked blocks (a string is one text block)."""
    if isinstance(content, str):
        # An empty final assistant message is allowed (a prefill); any other must say something.
        _need(content != "" or (last and role == "assistant"), where,
              "all messages must have non-empty content except for the optional final assistant message")
        if content == "":
            return []
        _need(content.strip() != "" or (last and role == "assistant"), f"{where}.content",
              "text content blocks must contain non-whitespace text")
        return [{"type": "text", "text": content}]
    _need(isinstance(content, list), f"{where}.content", "Input should be a valid string or list")
    _need(len(content) > 0 or (last and role == "assistant"), where,
          "all messages must have non-empty content except for the optional final assistant message")
    for k, block in enumerate(content):
        at = f"{where}.content.{k}"
        _need(isinstance(block, dict), at, "Input should be an object")
        kind = block.get("type")
        _need(kind in ANTHROPIC_BLOCKS[role], f"{at}.type",
              f"{kind!r} blocks are not allowed in a {role!r} message")
        _cache_control(block, at)
        if kind == "text":
            _anthropic_text(block, at)
        elif kind == "tool_use":
            uid = block.get("id")
            _need(isinstance(uid, str) and TOOL_USE_ID.fullmatch(uid) is not None, f"{at}.id",
                  "String should match pattern '^[a-zA-Z0-9_-]+$'")
            _need(isinstance(block.get("name"), str) and block["name"] != "", f"{at}.name", "Field required")
            _need(isinstance(block.get("input"), dict), f"{at}.input", "Input should be a valid dictionary")
        elif kind == "tool_result":
            _need(isinstance(block.get("tool_use_id"), str), f"{at}.tool_use_id", "Field required")
            if "is_error" in block:
                _need(isinstance(block["is_error"], bool), f"{at}.is_error", "Input should be a valid boolean")
            inner = block.get("content")
            if isinstance(inner, list):
                for n, sub in enumerate(inner):
                    _need(isinstance(sub, dict) and sub.get("type") in ("text", "image", "document",
                                                                         "search_result"),
                          f"{at}.content.{n}.type", "Input should be 'text', 'image', 'document' or 'search_result'")
                    if sub["type"] == "text":
                        _anthropic_text(sub, f"{at}.content.{n}")
            else:
                _need(inner is None or isinstance(inner, str), f"{at}.content",
                      "Input should be a valid string or list")
    return content
