"""A model call abandoned before its response's headers arrived is hung up at once (console/providers/hang_up.py):
its worker thread is free and the server sees the connection closed, long before the SDK's read timeout. Against
a 127.0.0.1 server that takes the request whole and never answers, with both SDKs' providers as a run makes them,
on a new connection and on one the pool kept from the call before (the one a hang-up must find without a
response to take it from)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest

from console.engine.messages import Message, ModelRequest
from console.engine.model import CallHandle, ProviderError, set_current_call
from console.providers.anthropic_provider import AnthropicProvider
from console.providers.openai_provider import OpenAIProvider
from tests.conftest import time_limit
from tests.wire.loopback import Reply, ServedInThread, anthropic_events, openai_events

PROVIDERS = ("openai", "anthropic")
MODELS = {"openai": "gpt-test", "anthropic": "claude-test"}
SECRET = "sk-hangup-Zq9secretKEY0123456789"
READ_TIMEOUT = 120.0  # the SDK's: what an abandoned call waited for before
# Far below the read timeout, far above what a hang-up takes (a few milliseconds): a loaded machine passes, a
# call left to its read timeout does not.
DEADLINE = 10.0
REQUEST = ModelRequest(system="s", messages=[Message.user("hi")], tools=[])


class Silent(ServedInThread):
    """Takes each request whole; answers it from ``replies`` (a whole stream, the connection kept open), or, with
    none left, never: no status line, no headers. Records which connection (the client's port) each request came
    on, and when a connection left without its answer is closed by the client."""

    def __init__(self, provider: str) -> None:
        self.replies: list[Reply] = []
        self.ports: list[int] = []
        self.waiting = threading.Event()  # a request taken and left without an answer
        self.closed = threading.Event()  # ... and its connection closed by the client
        self.stopping = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # the OpenAI SDK's models.list(): a whole answer, the connection kept
                owner.ports.append(self.client_address[1])
                data = b'{"object": "list", "data": []}'
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                owner.ports.append(self.client_address[1])
                if owner.replies:
                    reply = owner.replies.pop(0)
                    events = openai_events(reply, body) if provider == "openai" else anthropic_events(reply, body)
                    data = "".join(events).encode()
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream; charset=utf-8")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                    return
                owner.waiting.set()
                self.connection.settimeout(0.1)
                while not owner.stopping.is_set():
                    try:
                        if not self.connection.recv(1024):
                            break  # the client's FIN
                    except TimeoutError:
                        continue
                    except OSError:
                        break  # reset
                else:
                    return
                owner.closed.set()
                self.close_connection = True

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass

        self.serve(Server(("127.0.0.1", 0), Handler))


def provider_for(name: str, url: str) -> OpenAIProvider | AnthropicProvider:
    if name == "openai":
        return OpenAIProvider(MODELS[name], api_key=SECRET, base_url=f"{url}/v1", max_retries=0, timeout=READ_TIMEOUT)
    return AnthropicProvider(MODELS[name], api_key=SECRET, base_url=url, max_retries=0, timeout=READ_TIMEOUT)


def kept_connection(name: str, server: Silent) -> OpenAIProvider | AnthropicProvider:
    """A provider whose pool keeps a connection to ``server`` from a request answered whole. The Anthropic SDK
    keeps a streamed reply's (read to its end); the OpenAI SDK closes one at [DONE], before the body's end, so
    there a request of the SDK's own that is read whole (models.list) leaves one, on a client the provider is
    given (its connections made through the tracking backend all the same)."""
    if name == "openai":
        client = openai.OpenAI(api_key=SECRET, base_url=f"{server.url}/v1", max_retries=0, timeout=READ_TIMEOUT)
        model: OpenAIProvider | AnthropicProvider = OpenAIProvider(MODELS[name], client=client)
        assert list(client.models.list()) == []
    else:
        model = provider_for(name, server.url)
        server.replies.append(Reply.of("Hello."))
        first = Call(model)
        assert first.ended.wait(DEADLINE) and not any(isinstance(o, BaseException) for o in first.outcome), \
            first.outcome
    assert len(server.ports) == 1
    return model


class Call:
    """One model call on a thread of its own, as the engine's worker makes it (its handle current there)."""

    def __init__(self, model: OpenAIProvider | AnthropicProvider, handle: CallHandle | None = None) -> None:
        self.handle = handle or CallHandle()
        self.ended = threading.Event()
        self.outcome: list[object] = []
        threading.Thread(target=self._work, args=(model,), daemon=True).start()

    def _work(self, model: OpenAIProvider | AnthropicProvider) -> None:
        set_current_call(self.handle)
        try:
            self.outcome.extend(model.stream(REQUEST))
        except ProviderError as exc:
            self.outcome.append(exc)
        except BaseException as exc:  # said by the test's assertion, not lost in a thread
            self.outcome.append(exc)
        finally:
            set_current_call(None)
            self.ended.set()


@pytest.fixture
def quiet(capfd: pytest.CaptureFixture[str]) -> Iterator[None]:
    yield
    captured = capfd.readouterr()
    assert "Traceback" not in captured.out + captured.err and "Exception ignored" not in captured.err


def hang_up_and_measure(call: Call, server: Silent) -> tuple[float, float]:
    """Cancel the call (the server holds its request); seconds until its thread is free, and until the server saw
    the connection closed (each at most DEADLINE: past it, the assertion says which)."""
    assert server.waiting.wait(DEADLINE), "the request never reached the server"
    cancelled = time.monotonic()
    call.handle.cancel()
    assert call.ended.wait(DEADLINE), (f"the abandoned call's thread still waited {DEADLINE:g} s after the hang-up "
                                       f"(its read timeout is {READ_TIMEOUT:g} s)")
    freed = time.monotonic() - cancelled
    assert server.closed.wait(DEADLINE), f"the server still held the abandoned request {DEADLINE:g} s after it"
    closed = time.monotonic() - cancelled
    (outcome,) = call.outcome
    assert isinstance(outcome, ProviderError) and outcome.kind == "transient", outcome  # a cut: dropped by the engine
    assert SECRET not in str(outcome)
    return freed, closed


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_call_abandoned_before_its_headers_is_hung_up_at_once(provider: str, quiet: None) -> None:
    with Silent(provider) as server, time_limit(60):
        hang_up_and_measure(Call(provider_for(provider, server.url)), server)
    assert len(server.ports) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_call_on_a_kept_connection_abandoned_before_its_headers_is_hung_up_at_once(provider: str,
                                                                                     quiet: None) -> None:
    with Silent(provider) as server, time_limit(60):
        model = kept_connection(provider, server)
        hang_up_and_measure(Call(model), server)
        # The request came on the kept connection (no response gave its socket): it is the one hung up.
        assert len(server.ports) == 2 and server.ports[0] == server.ports[1], server.ports
        # The pool is not left with the dead connection: the next call is answered, on a new one.
        server.replies.append(Reply.of("Again."))
        again = Call(model)
        assert again.ended.wait(DEADLINE) and not any(isinstance(o, BaseException) for o in again.outcome), \
            again.outcome
        assert len(server.ports) == 3 and server.ports[2] != server.ports[0]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_call_whose_handle_was_cancelled_first_sends_nothing(provider: str, quiet: None) -> None:
    with Silent(provider) as server, time_limit(60):
        handle = CallHandle()
        handle.cancel()  # abandoned before its thread got to it
        call = Call(provider_for(provider, server.url), handle)
        assert call.ended.wait(DEADLINE), "a call abandoned before it began still went on"
        (outcome,) = call.outcome
        assert isinstance(outcome, ProviderError), outcome
    assert server.ports == []  # no request reached the server


def test_a_call_that_was_answered_leaves_its_kept_connection_alone_when_cancelled_late(quiet: None) -> None:
    # The engine cancels a call it gave up on just as the call ended: the connection the pool kept serves the next.
    # (Anthropic's: the OpenAI SDK keeps no connection after a stream, see kept_connection.)
    with Silent("anthropic") as server, time_limit(60):
        model = provider_for("anthropic", server.url)
        server.replies += [Reply.of("Hello."), Reply.of("Again.")]
        first = Call(model)
        assert first.ended.wait(DEADLINE)
        first.handle.cancel()
        second = Call(model)
        assert second.ended.wait(DEADLINE) and not any(isinstance(o, BaseException) for o in second.outcome), \
            second.outcome
    assert len(server.ports) == 2 and server.ports[0] == server.ports[1], server.ports
