"""A reply a server streams a token at a time is read from the socket in gathers (console/engine/model.py's
``CallHandle.gather``, console/providers/hang_up.py's tracked streams): once a read of the reply had to wait for the
server, a read that finds the socket empty waits a gather first and then takes everything that came, so the model
call's thread wakes once for a gather's chunks, never blocking on the socket for the next one. A reply sent whole
is never held a gather, and a call abandoned during one is hung up all the same. Through both SDKs, against the
127.0.0.1 loopback server."""

from __future__ import annotations

import select
import threading
from typing import Any

import httpcore2._backends.sync as sync_backend
import pytest

from console.engine import model_call
from console.engine.messages import Message, ModelRequest
from console.engine.model import CallHandle, Stop, TextDelta
from console.engine.model_call import CallLimits, stream_abandonably
from console.providers.anthropic_provider import AnthropicProvider
from console.providers.openai_provider import OpenAIProvider
from tests.conftest import time_limit
from tests.wire.loopback import Loopback, Paced, Reply, Whole, tokens

PROVIDERS = ("openai", "anthropic")
REQUEST = ModelRequest(system="s", messages=[Message.user("hi")], tools=[])
TEXT = " ".join(f"word{i}" for i in range(150))  # 150 tokens, a chunk each


def provider_for(name: str, server: Loopback) -> OpenAIProvider | AnthropicProvider:
    if name == "openai":
        return OpenAIProvider("gpt-test", api_key="sk-test", base_url=server.openai_url, max_retries=0)
    return AnthropicProvider("claude-test", api_key="sk-test", base_url=server.base_url, max_retries=0)


class Reads:
    """Every read of a socket by the SDKs' transport (httpcore's sync stream): whether the socket had anything to
    read when it was asked (asked with select, before the read: a read that found nothing waited for the server),
    and whether a gather was waited just before it; and every gather waited."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads: list[tuple[bool, bool]] = []  # (the socket had something at once, a gather came before)
        self.gathers: list[float] = []
        self._gathered = False
        read, wait = sync_backend.SyncStream.read, CallHandle.wait_gathering
        me = self

        def counted_read(stream: Any, max_bytes: int, timeout: float | None = None) -> bytes:
            sock = stream.get_extra_info("socket")
            ready = bool(select.select([sock], [], [], 0)[0]) or bool(
                (tls := stream.get_extra_info("ssl_object")) is not None and tls.pending())
            me.reads.append((ready, me._gathered))
            me._gathered = False
            return read(stream, max_bytes, timeout)

        def counted_wait(handle: CallHandle) -> None:
            me.gathers.append(handle.gather)
            wait(handle)
            me._gathered = True

        monkeypatch.setattr(sync_backend.SyncStream, "read", counted_read)
        monkeypatch.setattr(CallHandle, "wait_gathering", counted_wait)

    @property
    def waited(self) -> int:
        """The reads that found the socket empty with no gather before them: each one a wait on the socket (a gather
        on a loaded machine may find nothing come yet: that read waits, once, and is not counted)."""
        return sum(1 for ready, gathered in self.reads if not ready and not gathered)


def text_of(items: list[Any]) -> str:
    return "".join(i.text for i in items if isinstance(i, TextDelta))


@pytest.mark.parametrize("shown", [False, True])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_reply_streamed_a_token_a_chunk_is_read_in_gathers(provider: str, shown: bool,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # 150 chunks 4 ms apart (~0.6 s); a gather of 0.1 s (shown: PACE; nobody shown: UNSEEN_GATHER, made 0.1 s here).
    monkeypatch.setattr(model_call, "UNSEEN_GATHER", 0.1)
    reads = Reads(monkeypatch)
    with Loopback() as server, time_limit(60):
        server.push(Paced(Reply(text=tokens(TEXT)), gap=0.004))
        items = list(stream_abandonably(provider_for(provider, server), REQUEST, CallLimits(), lambda: None,
                                        shown=shown))
    assert text_of(items) == TEXT and isinstance(items[-1], Stop)
    # Gathered: a handful of reads of the socket for 150 chunks, each after a gather of the call's own, and none of
    # them waiting on the socket after the reply's start: the headers', the first chunk's (OpenAI's carries no text:
    # the reply has not begun for the engine), the next one's, and the one that said the reply streams. Before,
    # every gather's last read waited for the next chunk (one wake-up more per gather).
    assert len(reads.gathers) >= 2 and set(reads.gathers) == {0.1}
    assert len(reads.reads) < 150 / 3, reads.reads
    assert reads.waited <= 4, reads.reads


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_reply_sent_whole_is_never_held_a_gather(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its chunks come together (a local server, a short answer: one write of the server's): no read of it waits for
    # the server past its start, so none is made to wait a gather (30 s here: a gather would hold the call that long).
    monkeypatch.setattr(model_call, "UNSEEN_GATHER", 30.0)
    monkeypatch.setattr(model_call, "PACE", 30.0)
    reads = Reads(monkeypatch)
    with Loopback() as server, time_limit(60):
        for shown in (False, True):
            server.push(Whole(Reply(text=tokens(TEXT))))
            items = list(stream_abandonably(provider_for(provider, server), REQUEST, CallLimits(), lambda: None,
                                            shown=shown))
            assert text_of(items) == TEXT and isinstance(items[-1], Stop)
    assert reads.gathers == []


class Abandon(Exception):
    pass


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_call_abandoned_during_a_gather_is_hung_up_and_its_thread_ends(provider: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # A reply of 150 chunks 50 ms apart (7.5 s), gathers of 0.2 s: the operator's stop comes while the call's thread
    # waits a gather. The server sees the client gone at once (it stops streaming: the hang-up), and the thread
    # ends within a gather, its stream closed (no chunk read after it).
    monkeypatch.setattr(model_call, "UNSEEN_GATHER", 0.2)
    reads = Reads(monkeypatch)
    gathering = threading.Event()
    wait = CallHandle.wait_gathering
    handles: list[CallHandle] = []

    def waits(handle: CallHandle) -> None:
        handles.append(handle)
        gathering.set()
        wait(handle)

    monkeypatch.setattr(CallHandle, "wait_gathering", waits)
    ticks = iter(range(10**6))

    def tick() -> None:
        next(ticks)
        if gathering.is_set():
            raise Abandon

    with Loopback() as server, time_limit(60):
        server.push(Paced(Reply(text=tokens(TEXT)), gap=0.05))
        got: list[Any] = []
        with pytest.raises(Abandon):
            for item in stream_abandonably(provider_for(provider, server), REQUEST, CallLimits(), tick,
                                           shown=False):
                got.append(item)
        assert handles and handles[-1].cancelled
        assert TEXT.startswith(text_of(got)) and text_of(got) != TEXT
        # The server's next write finds the connection shut down: it stops, its handler done (Loopback's exit
        # waits for its handlers and would fail on a stream still going after the time limit).
    assert reads.reads  # the reply was read from the socket, not from a buffer of the test's
