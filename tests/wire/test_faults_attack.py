"""Hostile fault injection: what an unattended operator meets when the server misbehaves in ways the happy-path
fault suite (test_faults.py) does not try.

Every run goes through the real SDKs against a loopback server (the strict one of tests/wire/loopback.py, or, for
timing faults it cannot serve, the small trickling server below). The run's clock is a FakeClock unless a test
says otherwise, so retry waits cost nothing; real-time stalls use a short idle limit.

Each test states what must hold. A test that fails here exposes a bug; nothing is skipped or marked xfail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.job import JobPaths
from console.engine.job_config import load_job_config
from console.engine.messages import Message, ModelRequest
from console.engine.model import CallHandle, ProviderError, set_current_call
from console.engine.supervisor import RunResult, Supervisor
from console.providers.anthropic_provider import AnthropicProvider
from console.providers.openai_provider import OpenAIProvider
from console.settings import load_settings, resolve_run_settings
from tests.compat.runner import Call, Outcome, Scenario, answering, make_job, read_events, run, turn
from tests.conftest import time_limit
from tests.wire.loopback import (
    AnthropicStreamError,
    CannedToolCall,
    Cut,
    EndEarly,
    HttpError,
    KeepAlive,
    Loopback,
    OpenAIStreamError,
    Raw,
    Reply,
    ServedInThread,
    Stall,
    anthropic_auth_error,
    anthropic_events,
    anthropic_overloaded,
    anthropic_prompt_too_long,
    anthropic_rate_limit,
    openai_auth_error,
    openai_context_length,
    openai_events,
    openai_rate_limit,
    openai_server_error,
)

PROVIDERS = ("openai", "anthropic")
MODELS = {"openai": "gpt-test", "anthropic": "claude-test"}
SECRET = "sk-attack-Zq9secretKEY0123456789"  # the key the runs in this file use (drive, the subprocess)
KEYLIKE = re.compile(r"sk-[A-Za-z0-9][\w\-]{5,}")  # any unmasked key-shaped text
# For a script whose replies stall or never end (a stall, keep-alives): its idle limit tells it in half a second.
# Not for replies that end (garbage, an error, a refusal, a stream cut or ended early): beside a CPU hog a reply
# slower than that was an extra "stalled" retry, which took the next scripted reply (the run then ended "script has
# ended", or retried turn 1 twice).
FAST = {"idle_timeout": 0.5}
NO_CHECK = '[guardrails.completion]\ntype = "none"\n'
# What the runner serves after a script: a 400, never retried, so a run ends as soon as its script does.
END = HttpError(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "the script has ended"}})
DONE = Call("job_complete", {"summary": "done", "deliverables": ["out.md"], "confidence": 0.9})

# Three turns that finish the job: a read, a write, job_complete.
SCENARIO = Scenario(
    "read_write_complete",
    files={"notes.md": "- the build uses make\n"},
    job_toml=NO_CHECK,
    turns=[
        turn("Reading.", Call("read_file", {"path": "notes.md"})),
        turn("Writing.", Call("write_file", {"path": "out.md", "content": "done\n"})),
        turn("Done.", DONE),
    ],
    reason="job_complete",
)


def const(canned: Any) -> Callable[[Reply], Any]:
    return lambda _reply: canned


def one_line(text: str) -> bool:
    return bool(text) and "\n" not in text and len(text) < 1000


def secrets_in(root: Path) -> list[str]:
    """Key-shaped text anywhere in the job folder (the log, the journal, the state files)."""
    found = []
    for p in root.rglob("*"):
        if p.is_file():
            text = p.read_text(encoding="utf-8", errors="replace")
            if SECRET in text or "sk-compat" in text or KEYLIKE.search(text):
                found.append(str(p.relative_to(root)))
    return found


def assert_clean(out: Outcome | Path, capfd: pytest.CaptureFixture[str] | None = None) -> None:
    """No key in anything the run wrote, no traceback anywhere, no internal error."""
    root = out if isinstance(out, Path) else None
    if isinstance(out, Outcome):
        assert not [e for e in out.of("error") if "internal error" in e.get("message", "")], out.of("error")
        for e in out.events:
            assert not KEYLIKE.search(json.dumps(e)) and "sk-compat" not in json.dumps(e), e
    if root is not None:
        assert not secrets_in(root)
    if capfd is not None:
        captured = capfd.readouterr()
        for stream in (captured.out, captured.err):
            assert "Traceback" not in stream and "Exception ignored" not in stream, stream[-3000:]
            assert SECRET not in stream and "sk-compat" not in stream


def replies(out: Outcome) -> list[int]:
    return [e["turn"] for e in out.of("assistant_message")]


# -- driving a Supervisor directly (resumes, operator commands, other servers) ---------------------------------


def settings_for(paths: JobPaths, provider: str, **over: Any):
    return resolve_run_settings(
        load_settings(),
        load_job_config(paths),
        provider=provider,
        model=MODELS[provider],
        speed=0.0,
        **{**FAST, **over},
    )


def adapter(provider: str, url: str, timeout: float = 20, *, trust: ssl.SSLContext | None = None
            ) -> OpenAIProvider | AnthropicProvider:
    """The provider's adapter, as a run makes it; for an https server, ``trust`` verifies its certificate."""
    if trust is not None:  # the SDK's own client, given an HTTP client that trusts the loopback's certificate
        http = httpx2.Client(verify=trust, timeout=timeout)
        if provider == "openai":
            return OpenAIProvider(MODELS[provider], client=openai.OpenAI(
                api_key=SECRET, base_url=f"{url}/v1", max_retries=0, timeout=timeout, http_client=http))
        return AnthropicProvider(MODELS[provider], client=anthropic.Anthropic(
            api_key=SECRET, base_url=url, max_retries=0, timeout=timeout, http_client=http))
    if provider == "openai":
        return OpenAIProvider(MODELS[provider], api_key=SECRET, base_url=f"{url}/v1", max_retries=0, timeout=timeout)
    return AnthropicProvider(MODELS[provider], api_key=SECRET, base_url=url, max_retries=0, timeout=timeout)


def drive(
    paths: JobPaths,
    provider: str,
    url: str,
    *,
    clock: Any = None,
    hook: Callable[[Supervisor], None] | None = None,
    **over: Any,
) -> RunResult:
    sup = Supervisor(
        paths,
        settings_for(paths, provider, **over),
        adapter(provider, url),
        clock=clock if clock is not None else FakeClock(step=0.001),
        seed=7,
    )
    if hook is not None:
        hook(sup)
    return answering(sup).run()  # a run that asks its operator (the model down past its bound) is stopped


def new_job(tmp_path: Path, name: str = "job") -> JobPaths:
    return make_job(
        tmp_path / name, Scenario(name, [], files={"notes.md": "- the build uses make\n"}, job_toml=NO_CHECK)
    )


def tool(i: int, name: str, args: dict[str, Any] | str = "{}") -> CannedToolCall:
    return CannedToolCall.of(f"call_{i:03d}", name, args)


def reading(i: int = 1) -> Reply:
    return Reply.of("Reading.", tool(i, "read_file", {"path": "notes.md"}))


def writing(i: int = 2) -> Reply:
    return Reply.of("Writing.", tool(i, "write_file", {"path": "out.md", "content": "done\n"}))


def finishing(i: int = 3) -> Reply:
    return Reply.of(
        "Done.", tool(i, "job_complete", {"summary": "done", "deliverables": ["out.md"], "confidence": 0.9})
    )


def logged(paths: JobPaths, *types: str) -> list[dict[str, Any]]:
    return [e for e in read_events(paths) if e.get("type") in types]


# -- a server that trickles: bytes spaced in real time, keep-alives until the client hangs up ---------------------


class Trickle(ServedInThread):
    """A minimal SSE server for timing faults the loopback cannot serve. Each request pops one plan:
    ``("events", [(delay_before, bytes), ...])`` sends each event after its delay, then ends the body;
    ``("keepalive", every)`` sends ``: keep-alive`` comments until the client goes away (the moment is recorded in
    ``closed``). With the queue empty it answers a 400 (never retried)."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.plans: deque[tuple[str, Any]] = deque()
        self.bodies: list[dict[str, Any]] = []
        self.closed: list[float] = []  # time.monotonic() when a keep-alive client hung up
        self.stopping = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def write(self, data: bytes) -> bool:
                try:
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                    return True
                except OSError:
                    return False

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                owner.bodies.append(body)
                plan = owner.plans.popleft() if owner.plans else None
                if plan is None:
                    payload = json.dumps(
                        {"type": "error", "error": {"type": "invalid_request_error", "message": "the script has ended"}}
                    ).encode()
                    self.send_response(400)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_response(200)
                self.send_header("content-type", "text/event-stream; charset=utf-8")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                kind, arg = plan
                if kind == "keepalive":
                    while not owner.stopping.wait(arg):
                        if not self.write(b": keep-alive\n\n"):
                            owner.closed.append(time.monotonic())
                            break
                    self.close_connection = True
                    return
                for delay, data in arg(body):
                    if delay and owner.stopping.wait(delay):
                        self.close_connection = True
                        return
                    if not self.write(data):
                        return
                self.wfile.write(b"0\r\n\r\n")

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass

        server = Server(("127.0.0.1", 0), Handler)
        if tls is not None:  # https: each connection's handshake is made as it is accepted
            server.socket = tls.wrap_socket(server.socket, server_side=True)
            self.scheme = "https"
        self.serve(server)

    def reply(self, provider: str, reply: Reply, *, first: int = 10**6, gap: float = 0.0) -> None:
        """``reply`` as that provider's stream: the first ``first`` events at once, then one every ``gap`` s."""

        def steps(body: dict[str, Any]) -> Iterator[tuple[float, bytes]]:
            events = openai_events(reply, body) if provider == "openai" else anthropic_events(reply, body)
            for n, e in enumerate(events):
                yield (0.0 if n < first else gap), e.encode()

        self.plans.append(("events", steps))

    def keepalive(self, every: float = 0.05) -> None:
        self.plans.append(("keepalive", every))


# == the server's retry-after: whatever it says, the wait is finite, capped, and the run goes on ==================

RETRY_AFTER = [
    # (header value, the least and the most the wait may be)
    ("99999999", 300, 300),
    ("1e400", 300, 300),
    ("inf", 300, 300),
    ("-5", 0, 10),
    ("NaN", 0, 10),
    ("soon", 0, 10),
    ("", 0, 10),
    ("0x10", 0, 10),
    ("Wed, 21 Oct 2015 07:28:00 GMT", 0, 10),
    ("Wed, 21 Oct 2099 07:28:00 GMT", 300, 300),
    (" 12 ", 12, 12),
]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_any_retry_after_header_gives_a_finite_capped_wait(provider: str, tmp_path: Path, capfd) -> None:
    body = (openai_rate_limit() if provider == "openai" else anthropic_rate_limit()).body
    for n, (value, low, high) in enumerate(RETRY_AFTER):
        out = run(
            SCENARIO,
            provider,
            tmp_path / f"ra{n}",
            {0: [const(HttpError(429, body, {"retry-after": value}))]},
            retry_after_cap=300,  # the default idle limit, not FAST's 0.5 s: nothing here stalls, and on a loaded
        )                         # machine a reply slower than that was a second, "stalled" retry
        assert out.result.reason.value == "job_complete", (value, out.result.detail)
        (retry,) = out.of("model_retry")
        assert low <= retry["delay_s"] <= high, (value, retry["delay_s"])
        assert replies(out) == [1, 2, 3]
        assert_clean(out)
    assert_clean(tmp_path, capfd)


# == answers that are not an event stream ==========================================================================


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    "body,ctype",
    [
        (b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html"),
        (json.dumps({"id": "x", "object": "chat.completion", "choices": []}).encode(), "application/json"),
    ],
)
def test_a_200_that_is_not_an_event_stream_ends_with_one_clear_line(
    provider: str, body: bytes, ctype: str, tmp_path: Path, capfd
) -> None:
    out = run(SCENARIO, provider, tmp_path / "j", {1: [const(Raw(body, content_type=ctype))]})
    assert out.result.reason.value == "error"
    assert one_line(out.result.detail) and "base_url" in out.result.detail, out.result.detail
    assert not out.of("model_retry") and replies(out) == [1]
    assert_clean(out)
    assert_clean(tmp_path, capfd)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_empty_200_event_stream_is_a_cut_not_a_wrong_endpoint(provider: str, tmp_path: Path, capfd) -> None:
    # Headers (200, text/event-stream), then the body ends before the first event: what a server or proxy that
    # restarts mid-request sends. The same stream one event later is a transient cut (retried); this one must
    # not end an unattended run as "failed" with advice to check base_url.
    out = run(SCENARIO, provider, tmp_path / "j", {1: [lambda r: EndEarly(r, after=0)]})
    assert out.result.reason.value == "job_complete", out.result.detail
    assert [r["turn"] for r in out.of("model_retry")] == [2]
    assert replies(out) == [1, 2, 3]
    assert_clean(tmp_path, capfd)


# == event streams whose data is JSON, but not the protocol's ======================================================


def _sse(*items: object) -> bytes:
    return b"".join(b"data: " + (i if isinstance(i, bytes) else json.dumps(i).encode()) + b"\n\n" for i in items)


_CHUNK = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test"}


def _chunk(choices: Any) -> dict[str, Any]:
    return {**_CHUNK, "choices": choices}


OPENAI_GARBAGE = {
    "data_is_a_number": _sse(b"42", b"[DONE]"),
    "data_is_null": _sse(b"null", b"[DONE]"),
    "data_is_a_list": _sse(b"[1, 2]", b"[DONE]"),
    "choice_is_null": _sse(_chunk([None]), b"[DONE]"),
    "choices_is_a_string": _sse(_chunk("oops"), b"[DONE]"),
    "delta_is_a_string": _sse(_chunk([{"index": 0, "delta": "oops", "finish_reason": None}]), b"[DONE]"),
    "content_is_a_number": _sse(_chunk([{"index": 0, "delta": {"content": 5}, "finish_reason": None}]), b"[DONE]"),
    "tool_calls_is_a_string": _sse(
        _chunk([{"index": 0, "delta": {"tool_calls": "x"}, "finish_reason": None}]), b"[DONE]"
    ),
    # The chunks are read as the server's JSON (console.providers.openai_provider._RawStream), not the SDK's models:
    # each field of the wrong kind, where a reply would otherwise end well.
    "function_is_a_string": _sse(
        _chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c", "function": "x"}]},
                 "finish_reason": "tool_calls"}]), b"[DONE]"
    ),
    "arguments_are_a_number": _sse(
        _chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "todo_complete",
                                                                                           "arguments": 5}}]},
                 "finish_reason": "tool_calls"}]), b"[DONE]"
    ),
    "usage_is_a_number": _sse(
        _chunk([{"index": 0, "delta": {"content": "Done."}, "finish_reason": "stop"}]), {**_CHUNK, "choices": [],
                                                                                         "usage": 5}, b"[DONE]"
    ),
    "usage_details_are_a_list": _sse(
        _chunk([{"index": 0, "delta": {"content": "Done."}, "finish_reason": "stop"}]),
        {**_CHUNK, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1, "prompt_tokens_details": [1]}},
        b"[DONE]"
    ),
}


def _event(name: str, data: object) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


_START = {
    "type": "message_start",
    "message": {
        "id": "msg_x",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    },
}
_STOP = _event("message_stop", {"type": "message_stop"})

ANTHROPIC_GARBAGE = {
    "data_is_a_number": _event("message_start", 42),
    "message_start_without_message": _event("message_start", {"type": "message_start"}) + _STOP,
    "usage_is_null": _event("message_start", {**_START, "message": {**_START["message"], "usage": None}}) + _STOP,
    "message_delta_without_usage": (
        _event("message_start", _START)
        + _event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}})
        + _STOP
    ),
    "content_block_is_null": (
        _event("message_start", _START)
        + _event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": None})
        + _STOP
    ),
}


@pytest.mark.parametrize(
    "provider,case", [*(("openai", c) for c in OPENAI_GARBAGE), *(("anthropic", c) for c in ANTHROPIC_GARBAGE)]
)
def test_protocol_garbage_inside_the_stream_is_a_malformed_stream_not_an_internal_error(
    provider: str, case: str, tmp_path: Path, capfd
) -> None:
    # Valid JSON of the wrong shape (a proxy's bug, a half-compatible server): like data that is not JSON at all,
    # it is a malformed stream, retried; it must not crash the run as an "internal error".
    garbage = (OPENAI_GARBAGE if provider == "openai" else ANTHROPIC_GARBAGE)[case]
    out = run(SCENARIO, provider, tmp_path / "j", {1: [const(Raw(garbage))]})
    errors = [e["message"] for e in out.of("error")]
    assert not [m for m in errors if "internal error" in m], errors
    assert out.result.reason.value == "job_complete", out.result.detail
    assert [r["turn"] for r in out.of("model_retry")] == [2]
    assert replies(out) == [1, 2, 3]
    assert_clean(tmp_path, capfd)


@pytest.mark.parametrize(
    "body",
    [
        _sse(b"hello, not json"),
        _sse(
            _chunk([{"index": 0, "delta": {"role": "assistant", "content": "Half"}, "finish_reason": None}]), b"[DONE]"
        ),
        _sse(
            _chunk([{"index": 0, "delta": {"role": "assistant", "content": "Half"}, "finish_reason": None}]),
            {**_CHUNK, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}},
            b"[DONE]",
        ),
    ],
    ids=["not_json", "done_without_finish_reason", "usage_but_no_finish_reason"],
)
def test_openai_streams_without_their_end_are_retried_and_never_recorded(body: bytes, tmp_path: Path, capfd) -> None:
    out = run(SCENARIO, "openai", tmp_path / "j", {1: [const(Raw(body))]})
    assert out.result.reason.value == "job_complete", out.result.detail
    (retry,) = out.of("model_retry")
    assert retry["turn"] == 2 and retry["cause"] in ("malformed stream", "stream cut")
    assert replies(out) == [1, 2, 3] and not any(e["text"] == "Half" for e in out.of("assistant_message"))
    assert_clean(out)
    assert_clean(tmp_path, capfd)


# == a reply cut by the output limit (finish_reason "length" / stop_reason "max_tokens") ===========================


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_tool_call_cut_by_max_tokens_before_its_arguments_is_not_run(provider: str, tmp_path: Path, capfd) -> None:
    # The output limit struck right after the call's name: its arguments never came. The adapters make "" into
    # "{}", and a call that takes no arguments (todo_complete marks the current task done) would run as if the
    # model had finished it. A call cut by the limit must never run.
    paths = new_job(tmp_path)
    limit = "length" if provider == "openai" else "max_tokens"
    with Loopback() as server:
        server.push(
            Reply(
                text=["Marking the task done."],
                tool_calls=[CannedToolCall("call_001", "todo_complete", [""])],
                finish=limit,
            ),
            END,
        )
        drive(paths, provider, server.base_url)
    (reply,) = logged(paths, "assistant_message")
    assert reply["stop_reason"] == "max_tokens"
    results = logged(paths, "tool_result")
    assert not [r for r in results if r["tool"] == "todo_complete" and r["ok"]], results
    assert_clean(paths.root, capfd)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_tool_call_cut_by_max_tokens_mid_json_is_refused_and_nothing_is_written(
    provider: str, tmp_path: Path, capfd
) -> None:
    paths = new_job(tmp_path)
    limit = "length" if provider == "openai" else "max_tokens"
    with Loopback() as server:
        server.push(
            Reply(
                text=["Writing."],
                tool_calls=[CannedToolCall("call_001", "write_file", ['{"path": "out.md", "con', 'tent": "ab'])],
                finish=limit,
            ),
            END,
        )
        result = drive(paths, provider, server.base_url)
        # The next request carries the refused call as a valid object: the strict server accepted it.
        assert not server.rejected, server.rejected[0].rejected
    assert result.reason.value == "error"  # the script's end (a 400), after the refusal was sent
    (res,) = logged(paths, "tool_result")
    assert res["tool"] == "write_file" and not res["ok"] and "output limit (max_tokens)" in res["content"]
    assert not (paths.root / "out.md").exists()
    assert_clean(paths.root, capfd)


# == errors a wait cannot fix: one clear line, no retry, no key =====================================================


@pytest.mark.parametrize("provider", PROVIDERS)
def test_401_in_the_middle_of_a_run_ends_it_at_once_with_the_variable_to_check(
    provider: str, tmp_path: Path, capfd
) -> None:
    bad_key = openai_auth_error("sk-proj-Abcdefghijklmnop1234") if provider == "openai" else anthropic_auth_error()
    out = run(SCENARIO, provider, tmp_path / "j", {1: [const(bad_key)] * 5})
    assert out.result.reason.value == "error" and one_line(out.result.detail)
    assert ("OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY") in out.result.detail
    assert not out.of("model_retry") and replies(out) == [1]
    assert len(out.requests) == 2  # asked once: no retry of a refused key
    assert_clean(out)
    assert_clean(tmp_path, capfd)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_404_unknown_model_ends_at_once_naming_the_model(provider: str, tmp_path: Path, capfd) -> None:
    body = (
        {
            "error": {
                "message": "The model `gpt-test` does not exist or you do not have access to it.",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_found",
            }
        }
        if provider == "openai"
        else {"type": "error", "error": {"type": "not_found_error", "message": "model: claude-test"}}
    )
    out = run(SCENARIO, provider, tmp_path / "j", {0: [const(HttpError(404, body))] * 5})
    assert out.result.reason.value == "error" and one_line(out.result.detail)
    assert "404" in out.result.detail and "model" in out.result.detail
    assert not out.of("model_retry") and len(out.requests) == 1
    assert_clean(out)
    assert_clean(tmp_path, capfd)


def test_insufficient_quota_is_not_retried_for_ten_minutes(tmp_path: Path, capfd) -> None:
    # 429 insufficient_quota ("check your plan and billing details"): no wait fixes it. Retrying it as a rate
    # limit ends the run as "interrupted" (model_unavailable, "resume with run --in-place") after the whole
    # retry budget, and every resume does the same; the operator must be told to fix billing, at once.
    out = run(SCENARIO, "openai", tmp_path / "j", {1: [const(openai_rate_limit(quota=True))] * 60})
    assert not out.of("model_retry"), [r["message"] for r in out.of("model_retry")][:1]
    assert out.result.reason.value == "error" and "quota" in out.result.detail, out.result.detail
    assert len(out.requests) == 2
    assert_clean(tmp_path, capfd)


# == outages that never end: the run ends resumably within retry_total_wait, and does not hang =====================


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_server_that_resets_every_connection_ends_resumably(provider: str, tmp_path: Path, capfd) -> None:
    started = time.monotonic()
    with time_limit(60):
        out = run(
            SCENARIO, provider, tmp_path / "j", {1: [lambda r: Cut(r, after=0)] * 200}, retry_total_wait=300
        )
    assert time.monotonic() - started < 30
    assert out.result.reason.value == "model_unavailable" and one_line(out.result.detail)
    assert "limit 300 s" in out.result.detail
    retries = out.of("model_retry")
    assert retries and retries[-1]["waited_s"] <= 300 and {r["turn"] for r in retries} == {2}
    assert replies(out) == [1]
    assert_clean(out)
    assert_clean(tmp_path, capfd)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refused_connection_ends_resumably_then_resumes(provider: str, tmp_path: Path, capfd) -> None:
    paths = new_job(tmp_path)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    with time_limit(60):
        result = drive(paths, provider, dead, retry_total_wait=120)
    assert result.reason.value == "model_unavailable" and one_line(result.detail)
    assert "connection refused" in result.detail, result.detail
    with Loopback() as server:
        server.push(reading(), writing(), finishing())
        # The resume is what this part tests, not a stall: a loaded machine (CI's busy loops beside the suite) may
        # take more than FAST's half second to serve a reply, and a reply abandoned there is one of the three the
        # server had, so the run would then find the server's script spent (seen in CI: "queue empty" 18 times).
        again = drive(paths, provider, server.base_url, idle_timeout=60)
    assert again.reason.value == "job_complete", again.detail
    assert [e["turn"] for e in logged(paths, "assistant_message")] == [1, 2, 3]
    assert_clean(paths.root, capfd)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stall_before_the_headers_is_retried_after_the_idle_limit(provider: str, tmp_path: Path, capfd) -> None:
    started = time.monotonic()
    # A stall of a minute (the server ends it when the test does): abandoned at 0.5 s, not waited out. The bound
    # tells the two apart with room for a loaded machine, as in every real-time test of this file.
    out = run(SCENARIO, provider, tmp_path / "j", {1: [const(Stall(60))]}, **FAST)
    assert out.result.reason.value == "job_complete", out.result.detail
    (retry,) = out.of("model_retry")
    assert retry["cause"].startswith("stalled") and retry["turn"] == 2
    assert time.monotonic() - started < 30
    assert replies(out) == [1, 2, 3]
    assert_clean(tmp_path, capfd)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_keep_alives_forever_end_the_run_resumably(provider: str, tmp_path: Path, capfd) -> None:
    started = time.monotonic()
    with time_limit(60):
        out = run(
            SCENARIO,
            provider,
            tmp_path / "j",
            {1: [lambda r: KeepAlive(r, after=1, every=0.05, total=60)] * 40},
            retry_total_wait=20,
            **FAST,
        )
    assert out.result.reason.value == "model_unavailable", out.result.detail
    assert "no model output for 0.5 s" in out.result.detail and one_line(out.result.detail)
    assert time.monotonic() - started < 30
    assert replies(out) == [1]
    assert_clean(tmp_path, capfd)


# == the watchdog watches the model, not the kind of output =========================================================


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_slowly_streamed_tool_call_is_progress_not_a_stall(provider: str, tmp_path: Path, capfd) -> None:
    # A model writing a file streams the call's arguments for minutes (a local model at 20 tokens/s writes 10 KB
    # in about two). Every delta is model output, well within the idle limit; the watchdog must not call that
    # a stall (retrying it gets the same slow stream, so the turn can never succeed).
    paths = new_job(tmp_path)
    content = "line of the report\n" * 12
    arguments = json.dumps({"path": "out.md", "content": content})
    call = CannedToolCall("call_001", "write_file", [arguments[i : i + 16] for i in range(0, len(arguments), 16)])
    with Trickle() as server, time_limit(60):
        server.reply(provider, Reply(text=["Writing."], tool_calls=[call]), first=4, gap=0.15)  # ~2.5 s in all
        drive(paths, provider, server.url, idle_timeout=0.6)
    assert not logged(paths, "model_retry"), [e["message"] for e in logged(paths, "model_retry")]
    assert (paths.root / "out.md").read_text() == content
    assert_clean(paths.root, capfd)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_reply_longer_than_turn_timeout_is_retried(provider: str, tmp_path: Path, capfd) -> None:
    paths = new_job(tmp_path)
    with Trickle() as server, time_limit(60):
        # A model in a repetition loop: a token every 0.1 s for a minute, never silent long enough to look idle.
        server.reply(provider, Reply(text=[f"word{i} " for i in range(600)]), first=2, gap=0.1)
        server.reply(provider, reading())
        drive(paths, provider, server.url, turn_timeout=1.0)
    retries = logged(paths, "model_retry")
    # Cut at 1 s, not let run its minute: the reply was retried for its length (and the minute is past the
    # time_limit above, which fails the test).
    assert [r["cause"] for r in retries] == ["reply over 1 s"] and retries[0]["discarded_chars"] > 0
    assert next(e["text"] for e in logged(paths, "assistant_message")) == "Reading."
    assert_clean(paths.root, capfd)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_abandoned_keep_alive_stream_is_hung_up(provider: str, tmp_path: Path, capfd) -> None:
    # The watchdog gives up on a stream that only sends keep-alives; the retry opens a new request. The old
    # request must be closed (a vLLM or OpenRouter keeps generating, and billing, for an open connection), not left
    # to a thread that only looks at its cancel flag when an item arrives, which never happens. In process, after
    # whatever ran before: the retry's connection then often takes the fd number the abandoned one had, which is
    # what kept a close() (without a shutdown) from reaching the server (console/providers/hang_up.py).
    paths = new_job(tmp_path)
    with Trickle() as server, time_limit(60):
        server.keepalive(0.05)
        server.reply(provider, reading())
        result = drive(paths, provider, server.url)
        ended = time.monotonic()
        deadline = ended + 3
        while not server.closed and time.monotonic() < deadline:
            time.sleep(0.05)
        closed = list(server.closed)
    assert result.reason.value == "error"  # the trickle server's 400 after the script
    # Stalled at least once (the keep-alives); on a machine busy enough to hold the reply's events apart for 0.5 s,
    # the retry may stall too (CI, beside busy processes): each retry is a stall, never anything else.
    causes = [r["cause"] for r in logged(paths, "model_retry")]
    assert causes and set(causes) == {"stalled 0.5 s"}, causes
    assert closed, "the abandoned request was still open 3 s after the run had moved on (and ended)"
    assert_clean(paths.root, capfd)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A certificate for 127.0.0.1, made for this module: the server's context and the client's that trusts it."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("making a certificate for 127.0.0.1 needs the openssl command")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    return server, ssl.create_default_context(cafile=str(cert))


CUT_WAIT, CUT_SEEN = 120, 60


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("transport", ["tcp", "tls"])
def test_a_hang_up_reaches_the_server_though_the_fd_number_is_taken_at_once(
    provider: str, transport: str, request: pytest.FixtureRequest, capfd
) -> None:
    # The test above without its race. The worker is blocked reading a stream of keep-alives when the engine
    # hangs up from its own thread; the freed fd numbers are taken at once by sockets that never become readable
    # (what the retry's connection does, a few milliseconds later). A close() alone left the abandoned socket
    # open, held by the worker's poll(), which then watched the new socket: no FIN until the read timeout (20 s).
    # Over TLS too, as every hosted endpoint is (the TLS socket's shutdown drops its TLS state under the reader).
    server_tls, trust = request.getfixturevalue("tls") if transport == "tls" else (None, None)
    registered = threading.Event()

    class Handle(CallHandle):
        def on_cancel(self, close: Callable[[], object]) -> None:
            super().on_cancel(close)
            registered.set()

    handle = Handle()
    ended = threading.Event()

    def work(model: OpenAIProvider | AnthropicProvider) -> None:
        set_current_call(handle)
        try:
            for _ in model.stream(ModelRequest(system="s", messages=[Message.user("hi")], tools=[])):
                pass
        except ProviderError:
            pass  # the hang-up, seen by the reader as a cut stream
        finally:
            set_current_call(None)
            ended.set()

    # A read timeout of 120 s, the wait the hang-up must cut, and a ceiling of 60 s on seeing it cut: far from both
    # the prompt FIN (milliseconds) and the timeout (with 20 s and 3 s, a CPU hog's scheduling failed it).
    with Trickle(server_tls) as server, time_limit(150):
        server.keepalive(0.05)
        model = adapter(provider, server.url, timeout=CUT_WAIT, trust=trust)
        threading.Thread(target=work, args=(model,), daemon=True).start()
        assert registered.wait(10), "the adapter registered no closer"
        time.sleep(0.2)  # keep-alives flowing: the worker waits in poll() (were it not there yet, all the same)
        handle.cancel()
        taken = [socket.socketpair() for _ in range(8)]  # the lowest free numbers: the freed one among them
        try:
            deadline = time.monotonic() + CUT_SEEN
            while not server.closed and time.monotonic() < deadline:
                time.sleep(0.05)
            closed = list(server.closed)
            reader_ended = ended.wait(max(0.0, deadline - time.monotonic()))  # both within CUT_SEEN of the hang-up
        finally:
            for a, b in taken:
                a.close()
                b.close()
    assert closed, f"the server still streamed to the abandoned request {CUT_SEEN} s after the hang-up"
    assert reader_ended, f"the abandoned call's thread still waited on its socket {CUT_SEEN} s after the hang-up"
    captured = capfd.readouterr()
    assert "Traceback" not in captured.out + captured.err and "Exception ignored" not in captured.err


# == the operator, while the model is asked ========================================================================


@pytest.mark.parametrize("provider", PROVIDERS)
def test_stop_during_a_keep_alive_stream_ends_within_a_second(provider: str, tmp_path: Path, capfd) -> None:
    paths = new_job(tmp_path)
    stopped: list[float] = []

    def hook(sup: Supervisor) -> None:
        def later() -> None:
            time.sleep(0.4)
            stopped.append(time.monotonic())
            sup.stop()

        sup.subscribe(
            lambda e: (
                threading.Thread(target=later, daemon=True).start()
                if isinstance(e, ev.TurnStarted) and e.turn == 2
                else None
            )
        )

    with Loopback() as server, time_limit(90):
        server.push(reading(), KeepAlive(writing(), after=1, every=0.05, total=60))
        result = drive(paths, provider, server.base_url, idle_timeout=120, hook=hook)
        ended = time.monotonic()
    assert result.reason.value == "user_shutdown", result.detail
    # The stop acts at the call's next tick (0.2 s; counted on an injected clock in tests/unit/test_model_call):
    # what a wall clock can tell on a loaded machine is a stop that does not wait for the stream (a minute).
    assert ended - stopped[0] < 20, ended - stopped[0]
    assert [e["turn"] for e in logged(paths, "assistant_message")] == [1]
    assert_clean(paths.root, capfd)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_two_stops_while_the_model_is_asked_each_get_an_answer(provider: str, tmp_path: Path, capfd) -> None:
    paths = new_job(tmp_path)

    def hook(sup: Supervisor) -> None:
        def later() -> None:
            time.sleep(0.3)
            sup.stop()
            sup.stop()

        sup.subscribe(
            lambda e: threading.Thread(target=later, daemon=True).start() if isinstance(e, ev.TurnStarted) else None
        )

    with Loopback() as server, time_limit(90):
        server.push(KeepAlive(reading(), after=1, every=0.05, total=60))
        started = time.monotonic()
        result = drive(paths, provider, server.base_url, idle_timeout=120, hook=hook)
        assert time.monotonic() - started < 20  # not the stream's minute
    assert result.reason.value == "user_shutdown"
    stops = [e for e in logged(paths, "operator_command") if e["command"] == "stop"]
    by_id: dict[str, list[str]] = {}
    for e in stops:
        by_id.setdefault(e["command_id"], []).append(e["status"])
    assert len(by_id) == 2 and all(s[0] == "received" and s[-1] in ("applied", "rejected") for s in by_id.values())
    assert not logged(paths, "assistant_message")
    assert_clean(paths.root, capfd)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_pause_during_a_retry_wait_then_resume_asks_the_turn_again_once(provider: str, tmp_path: Path, capfd) -> None:
    paths = new_job(tmp_path)
    busy = openai_server_error(503) if provider == "openai" else anthropic_overloaded()

    def hook(sup: Supervisor) -> None:
        def on(e: ev.EventBase) -> None:
            if isinstance(e, ev.ModelRetry):
                sup.pause()
            elif isinstance(e, ev.OperatorCommand) and e.command == "pause" and e.status == "applied":
                sup.resume()

        sup.subscribe(on)

    with Loopback() as server, time_limit(30):
        server.push(reading(), HttpError(busy.status, busy.body, {"retry-after": "200"}), writing(), finishing())
        result = drive(paths, provider, server.base_url, hook=hook)
        asked = len(server.requests)
    assert result.reason.value == "job_complete", result.detail
    assert asked == 4
    commands = [(e["command"], e["status"]) for e in logged(paths, "operator_command")]
    assert ("pause", "applied") in commands and ("resume", "applied") in commands
    assert [e["turn"] for e in logged(paths, "assistant_message")] == [1, 2, 3]
    assert [e["tool"] for e in logged(paths, "tool_called")] == ["read_file", "write_file", "job_complete"]
    assert_clean(paths.root, capfd)


# == errors inside a 200 stream ====================================================================================


def test_anthropic_overloaded_event_mid_stream_is_retried(tmp_path: Path, capfd) -> None:
    out = run(
        SCENARIO,
        "anthropic",
        tmp_path / "j",
        {1: [lambda r: AnthropicStreamError(after=3, reply=r)], 2: [lambda r: AnthropicStreamError(after=0)]},
        **FAST,
    )
    assert out.result.reason.value == "job_complete", out.result.detail
    assert [r["cause"] for r in out.of("model_retry")] == ["stream error (overloaded_error)"] * 2
    assert replies(out) == [1, 2, 3]
    assert_clean(out)
    assert_clean(tmp_path, capfd)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_prompt_too_long_inside_the_stream_is_a_full_context(provider: str, tmp_path: Path, capfd) -> None:
    fault = (
        AnthropicStreamError(
            after=1, type="invalid_request_error", message="prompt is too long: 210000 tokens > 200000 maximum"
        )
        if provider == "anthropic"
        else OpenAIStreamError(
            after=1,
            type="invalid_request_error",
            message="This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9000 tokens.",
        )
    )
    out = run(SCENARIO, provider, tmp_path / "j", {1: [const(fault)]}, **FAST)
    assert out.result.reason.value == "job_complete", out.result.detail
    assert not out.of("model_retry")
    assert len([e for e in out.of("error") if "treated as full" in e["message"]]) == 1
    assert len(out.of("session_started")) == 2  # made room by a restart
    assert replies(out) == [1, 2, 3]
    assert_clean(tmp_path, capfd)


# == a context the server says is full =============================================================================


@pytest.mark.parametrize("provider", PROVIDERS)
def test_context_length_on_the_first_request_of_a_job_ends_with_one_line(provider: str, tmp_path: Path, capfd) -> None:
    too_long = openai_context_length() if provider == "openai" else anthropic_prompt_too_long()
    with time_limit(30):
        out = run(SCENARIO, provider, tmp_path / "j", {0: [const(too_long)] * 20}, **FAST)
    assert out.result.reason.value == "error"
    assert one_line(out.result.detail) and "context_window" in out.result.detail
    assert len(out.requests) == 1 and not out.of("model_retry") and not replies(out)
    assert_clean(out)
    assert_clean(tmp_path, capfd)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_context_length_on_the_first_request_after_a_resume_makes_room(provider: str, tmp_path: Path, capfd) -> None:
    # A run that ended resumably (the model was down) has a session with history behind it. When the resumed
    # run's first request is refused as too long, there IS something to take out (a restart to a summary): it
    # must not end the job as an error "with nothing left to mask or restart".
    paths = new_job(tmp_path)
    down = openai_server_error(503) if provider == "openai" else anthropic_overloaded()
    with Loopback() as server:
        server.push(reading(), *[down] * 30)
        first = drive(paths, provider, server.base_url, retry_total_wait=10)
    assert first.reason.value == "model_unavailable"
    too_long = openai_context_length() if provider == "openai" else anthropic_prompt_too_long()
    with Loopback() as server:
        server.push(too_long, writing(), finishing())
        again = drive(paths, provider, server.base_url)
    assert again.reason.value == "job_complete", again.detail
    assert [e["turn"] for e in logged(paths, "assistant_message")] == [1, 2, 3]
    assert_clean(paths.root, capfd)


# == kill -9 during a retry wait, then run --in-place ==============================================================


def _child_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(
        NO_PROXY="*",
        no_proxy="*",
        OPENAI_API_KEY=SECRET,
        PYTHONUNBUFFERED="1",
        AGENT_CONSOLE_DATA_DIR=str(home / "data"),
        AGENT_CONSOLE_CONFIG=str(home / "config.toml"),
        AGENT_CONSOLE_IDLE_TIMEOUT="20",
    )
    env.pop("ANTHROPIC_API_KEY", None)
    (home / "config.toml").write_text("")
    return env


def _cli(job: Path, url: str) -> list[str]:
    # `timeout` bounds the child even if this test dies before it can kill it.
    return [
        "timeout",
        "-s",
        "KILL",
        "90",
        sys.executable,
        "-m",
        "console.cli",
        "run",
        str(job),
        "--headless",
        "--in-place",
        "--provider",
        "openai",
        "--model",
        "gpt-test",
        "--base-url",
        url,
    ]


def test_kill_9_during_a_retry_wait_then_run_in_place_finishes_without_a_duplicated_turn(tmp_path: Path) -> None:
    paths = new_job(tmp_path)
    env = _child_env(tmp_path)
    with Loopback() as server:
        busy = openai_server_error(503)
        server.push(reading(), HttpError(503, busy.body, {"retry-after": "250"}))
        child = subprocess.Popen(
            _cli(paths.root, server.openai_url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (paths.events.exists() and logged(paths, "model_retry")):
                assert child.poll() is None, child.communicate()
                time.sleep(0.1)
            assert logged(paths, "model_retry"), "the child never got to its retry wait"
            time.sleep(0.3)
            # The engine's own process (the child is `timeout`): its pid is in the job's run lock.
            engine = json.loads((paths.state / "run.lock").read_text())["pid"]
            assert engine != child.pid
            os.kill(engine, signal.SIGKILL)
        finally:
            if child.poll() is None:
                child.kill()
            out1, err1 = child.communicate(timeout=30)
        assert child.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL)
        assert len(server.requests) == 2
    with Loopback() as server:
        server.push(writing(), finishing())
        done = subprocess.run(
            _cli(paths.root, server.openai_url), capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
        )
        asked = len(server.requests)
    # The job's free stop (type = "none") after one write: the run finishes, honestly incomplete (exit 1).
    assert done.returncode == 1, (done.stdout[-2000:], done.stderr[-2000:])
    assert asked == 2  # turn 2 asked again, then turn 3: nothing asked twice
    assert [e["turn"] for e in logged(paths, "assistant_message")] == [1, 2, 3]
    assert [e["tool"] for e in logged(paths, "tool_called")] == ["read_file", "write_file", "job_complete"]
    assert (paths.root / "out.md").read_text() == "done\n"
    for text in (out1, err1, done.stdout, done.stderr):
        assert "Traceback" not in text and SECRET not in text, text[-2000:]
    assert not secrets_in(paths.root)
    # The retry the killed run announced is in the log, with its cause.
    (retry,) = logged(paths, "model_retry")
    assert retry["turn"] == 2 and retry["cause"] == "server error 503" and retry["delay_s"] == 250


# == the model-written summary at a phase boundary is a model call too ============================================


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stop_during_the_llm_summary_acts_at_once(provider: str, tmp_path: Path, monkeypatch, capfd) -> None:
    # [context] summary = "llm": the phase transition asks the model for a summary. That request is read like
    # every other: a server that sends only keep-alives is given up after idle_timeout, and a stop acts within a
    # second. (Here the keep-alives last a minute; on a real proxy they can last forever.)
    import tests.compat.runner as runner
    from tests.compat.scenarios import SCENARIOS

    scenario = next(s for s in SCENARIOS if s.name == "phase_transition_with_llm_summary")
    summary_turn = next(i for i, t in enumerate(scenario.turns) if t.text.startswith("The bootstrap:"))
    stopped: list[float] = []

    class Stopping(Supervisor):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)

            def later() -> None:
                time.sleep(0.5)
                stopped.append(time.monotonic())
                self.stop()

            self.subscribe(
                lambda e: (
                    threading.Thread(target=later, daemon=True).start() if isinstance(e, ev.PhaseTransition) else None
                )
            )

    monkeypatch.setattr(runner, "Supervisor", Stopping)
    with time_limit(60):
        out = run(
            scenario,
            provider,
            tmp_path / "j",
            {summary_turn: [lambda r: KeepAlive(r, after=1, every=0.05, total=60)]},
            **FAST,
        )
        ended = time.monotonic()
    assert stopped, "no phase transition"
    assert out.result.reason.value == "user_shutdown", out.result.detail
    # Not the keep-alives' minute (nor FAST's idle limit, which would end the call as a stall, not a stop).
    assert ended - stopped[0] < 20, f"the stop took {ended - stopped[0]:.1f} s to act during the LLM summary"
    assert_clean(tmp_path, capfd)


def test_protocol_garbage_in_the_llm_summary_falls_back_to_the_deterministic_one(tmp_path: Path, capfd) -> None:
    from tests.compat.scenarios import SCENARIOS

    scenario = next(s for s in SCENARIOS if s.name == "phase_transition_with_llm_summary")
    summary_turn = next(i for i, t in enumerate(scenario.turns) if t.text.startswith("The bootstrap:"))
    out = run(scenario, "openai", tmp_path / "j", {summary_turn: [const(Raw(_sse(b"42", b"[DONE]")))]}, **FAST)
    errors = [e["message"] for e in out.of("error")]
    assert not [m for m in errors if "internal error" in m], errors
    assert [m for m in errors if "LLM summary failed" in m], errors
    assert out.of("context_compacted")
    assert_clean(tmp_path, capfd)


def test_agent_console_stop_during_a_retry_wait_ends_the_run_at_once(tmp_path: Path) -> None:
    # The operator's `agent-console stop JOB` from another shell, while a headless run waits 250 s before a retry:
    # the stop is confirmed and the run ends within seconds, resumably (exit 3, the operator's stop; the resume
    # command printed).
    paths = new_job(tmp_path)
    env = _child_env(tmp_path)
    with Loopback() as server:
        server.push(reading(), HttpError(503, openai_server_error(503).body, {"retry-after": "250"}))
        child = subprocess.Popen(
            _cli(paths.root, server.openai_url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (paths.events.exists() and logged(paths, "model_retry")):
                assert child.poll() is None, child.communicate()
                time.sleep(0.1)
            assert logged(paths, "model_retry"), "the child never got to its retry wait"
            stop = subprocess.run(
                [
                    "timeout",
                    "-s",
                    "KILL",
                    "60",
                    sys.executable,
                    "-m",
                    "console.cli",
                    "stop",
                    str(paths.root),
                    "--wait",
                    "10",
                ],
                capture_output=True,
                text=True,
                env=env,
                cwd=tmp_path,
                timeout=90,
            )
            # `timeout` kills the child at 90 s: if the stop had not cut the 250 s wait, it would end killed (not 3).
            out, err = child.communicate(timeout=120)
        finally:
            if child.poll() is None:
                child.kill()
                child.communicate(timeout=30)
    assert stop.returncode == 0, (stop.stdout, stop.stderr)
    assert child.returncode == 3, (out[-2000:], err[-2000:])  # the operator's stop, not the 250 s wait
    assert "agent-console resume " in err and "Traceback" not in err + out + stop.stderr
    assert [e["turn"] for e in logged(paths, "assistant_message")] == [1]
    assert not secrets_in(paths.root)


# == a server that echoes the key ==================================================================================


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_key_echoed_by_the_server_never_reaches_the_log(provider: str, tmp_path: Path, capfd) -> None:
    # A misconfigured proxy that echoes the request's auth header in its errors: in a 5xx body (retried, so its
    # message is in a model_retry event), in an error inside the stream, and in a fatal 403 at the end.
    paths = new_job(tmp_path)
    echo = f"upstream refused Authorization: Bearer {SECRET} (x-api-key: {SECRET})"
    body = (
        {"error": {"message": echo, "type": "server_error", "param": None, "code": None}}
        if provider == "openai"
        else {"type": "error", "error": {"type": "api_error", "message": echo}}
    )
    in_stream = (
        OpenAIStreamError(after=1, message=echo)
        if provider == "openai"
        else AnthropicStreamError(after=1, type="api_error", message=echo)
    )
    denied = (
        {"error": {"message": echo, "type": "invalid_request_error", "param": None, "code": None}}
        if provider == "openai"
        else {"type": "error", "error": {"type": "permission_error", "message": echo}}
    )
    with Loopback() as server:
        server.push(HttpError(502, body), in_stream, reading(), HttpError(403, denied))
        # The default idle limit, not FAST's 0.5 s: nothing here stalls, and beside a CPU hog a reply slower than
        # that was an extra "stalled" retry, which took the next scripted reply (4 retries, not 2).
        result = drive(paths, provider, server.base_url, idle_timeout=120)
    assert result.reason.value == "error" and SECRET not in result.detail
    retries = logged(paths, "model_retry")
    assert len(retries) == 2 and all("***" in r["message"] or "Bearer" not in r["message"] for r in retries)
    assert_clean(paths.root, capfd)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_retry_after_beyond_the_total_wait_ends_at_once_saying_so(provider: str, tmp_path: Path, capfd) -> None:
    limited = openai_rate_limit(retry_after=3600) if provider == "openai" else anthropic_rate_limit(retry_after=3600)
    out = run(
        SCENARIO,
        provider,
        tmp_path / "j",
        {1: [const(limited)] * 5},
        retry_total_wait=120,
        retry_after_cap=3600,
        **FAST,
    )
    assert out.result.reason.value == "model_unavailable" and one_line(out.result.detail)
    assert "asked to wait 3600 s" in out.result.detail, out.result.detail
    assert len(out.requests) == 2 and replies(out) == [1]
    assert_clean(tmp_path, capfd)
