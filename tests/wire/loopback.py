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
"""

from __future__ import annotations

import json
import sys
import threading
from collections import deque
from collections.abc import Iterator
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
    # None means "the server did not report usage" (as some local servers do).
    usage: CannedUsage | None = field(default_factory=lambda: CannedUsage(10, 5))
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


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients drop idle keep-alive sockets (and timeout tests hang up on purpose): not a failure.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class Loopback:
    def __init__(self) -> None:
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


def _make_handler(owner: Loopback) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep pytest output clean

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else {}
            headers = {k.lower(): v for k, v in self.headers.items()}
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
                self._send_sse(_openai_events(canned, str(body.get("model", ""))))
            elif self.path.endswith("/messages"):
                self._send_sse(_anthropic_events(canned, str(body.get("model", ""))))
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


def _openai_events(reply: Reply, model: str) -> Iterator[str]:
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
    if reply.usage is not None:
        u = reply.usage
        usage = {
            "prompt_tokens": u.input_tokens,
            "completion_tokens": u.output_tokens,
            "total_tokens": u.input_tokens + u.output_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
        }
        yield chunk(None, usage=usage)
    yield "data: [DONE]\n\n"


# -- Anthropic Messages SSE -----------------------------------------------------------


def _anthropic_events(reply: Reply, model: str) -> Iterator[str]:
    def event(name: str, data: dict[str, Any]) -> str:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"

    u = reply.usage or CannedUsage()
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
