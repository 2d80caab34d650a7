"""Hanging up a streamed reply from another thread, so that the server sees it at once.

The engine reads a provider's stream on a worker thread and, when it abandons the call (a stall, a stop, a reply
over turn_timeout), closes the stream from its own thread (:class:`console.engine.model.CallHandle`). The SDKs'
``Stream.close()`` closes the HTTP response, which closes the connection's socket: ``close(fd)``. That is not a
hang-up while the worker is blocked reading the socket. CPython waits for a socket with a timeout in ``poll()``,
and a thread in ``poll()`` holds a reference to the socket (Linux): the last reference is dropped, and the FIN
sent, only when that ``poll()`` returns. It returns when the fd it watches, looked up by number at each wake-up,
has something to read or is no longer open. Meanwhile the freed fd number is given to the next socket the process
opens, typically the retry's own connection a few milliseconds later: from then on ``poll()`` watches that
socket, the keep-alives on the abandoned one no longer end it, and the server streams (and bills) into a socket
nobody reads until the SDK's read timeout. (Measured with the Anthropic SDK in tests/wire: the retry's
connection on the abandoned one's fd number, the abandoned socket never closed, 1.2 KB of keep-alives unread
in its receive queue 3 s later. The OpenAI SDK passed that test only because it closed the retry's connection
(a 400) at once, which freed the number again; with the number kept taken, both fail alike.)

``shutdown(SHUT_RDWR)`` acts on the socket itself, not on the fd: it sends the FIN at once and wakes the reader,
whose read then ends (EOF: a cut stream, which the abandoned call's thread drops) and which closes the stream
itself, in its own thread, as the SDK does when a stream fails. The fd is not closed from here: closed under the
reader, its number would be taken by the next socket before the reader looks again, and the reader would wait
on that one until the read timeout. The socket comes from the response's ``network_stream`` extension
(httpcore's public API for the raw connection: ``get_extra_info("socket")``); where there is none to shut down,
the stream is closed from here as before.

Before the response's headers there is no response to take the socket from: a call abandoned then (a server that
queues the request, a proxy that holds it) kept its worker thread until the SDK's read timeout (a minute), and the
server its request. So the clients' connections are made through a network backend of this module's
(:func:`track_connections`, httpcore's ``NetworkBackend`` interface around the pool's own), whose streams tell the
call being opened (:func:`before_headers`) which socket its request goes on, a kept connection as a new one; the
call's hang-up shuts that socket down, or the next one it writes to if it has none yet. Once the headers are in,
the response's own closer (:func:`hang_up`) takes over and this one is disarmed: a connection the pool keeps
afterwards is never shut down for a call that is over.

The same streams read a streamed reply in gathers (the call's ``CallHandle.gather``, set by the engine once the
reply has begun): once a read of the reply had to wait for the server (its chunks come over time, a token a
chunk), a read that finds the socket empty (``poll``, and the TLS layer's buffer) sleeps a gather first and then
takes everything that came. The call's thread wakes once for a gather's chunks, where a read that waited on the
socket for the next chunk woke it once more each gather (issue 37: a thread's wake-up, and the caches it finds
cold, is most of what a streamed reply costs the harness on a 2-core VM; 15.3 against 17.5 ms of CPU a 3-second
reply of 57 chunks: docs/benchmarks.md, fleet_scale.py). A reply sent whole comes at once and is read so.

HTTP/2 is left alone here too (a stream negotiated ``h2`` is never shut down): the SDKs' clients speak HTTP/1.1
(httpx's ``http2=False`` by default, and the ``h2`` package is not installed).
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

try:  # the SDKs' httpx2 brings httpcore2; an older SDK's httpx, httpcore
    from httpcore2 import NetworkBackend, NetworkStream
except ImportError:  # pragma: no cover - older SDKs
    from httpcore import NetworkBackend, NetworkStream  # type: ignore[no-redef, import-not-found, unused-ignore]

from console.engine.model import current_call
from console.engine.model_call import READ_WAITED


class Streamed(Protocol):
    """An SDK's stream (``anthropic.Stream``, ``openai.Stream``): its httpx response, and ``close()``."""

    @property
    def response(self) -> Any: ...

    def close(self) -> None: ...


def hang_up(stream: Streamed) -> Callable[[], None]:
    """The closer to register with the call's handle: shut the socket down (the reader then closes the stream),
    or close the stream where there is no socket of this response's own to shut down."""

    def close() -> None:
        if not _shut_down(stream.response):
            stream.close()

    return close


def _shut_down(response: Any) -> bool:
    """Whether the response's socket was shut down."""
    # A response already closed has given its connection back to the pool (read to the end): left alone, as it
    # may serve the next request. The engine asks the next request only after the closer returns, and a pooled
    # connection that was shut down in the gap is readable at EOF, which httpcore takes for one the server
    # closed: it opens a new one. HTTP/2 (not what the SDKs' default clients speak) multiplexes other requests
    # on the socket, so it is never shut down for one of them.
    if getattr(response, "is_closed", True) or getattr(response, "http_version", "") == "HTTP/2":
        return False
    network = (getattr(response, "extensions", None) or {}).get("network_stream")
    sock = network.get_extra_info("socket") if network is not None else None
    if not isinstance(sock, socket.socket):
        return False
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed (the reader got there first), or never connected: close as before
        return False
    return True


# -- before the headers -------------------------------------------------------------------------------------------

_local = threading.local()  # .opening: the _Opening of the call this thread is opening, if any


@contextlib.contextmanager
def before_headers() -> Iterator[None]:
    """Around the SDK's ``create()`` of a streamed call: until it returns (the headers are in) or fails, the call's
    hang-up shuts down the socket its request goes on (the clients' connections made by :func:`track_connections`)."""
    handle = current_call()
    if handle is None:
        yield
        return
    opening = _Opening()
    _local.opening = opening
    handle.on_cancel(opening.hang_up)  # run at once if the call was abandoned already
    try:
        yield
    finally:
        _local.opening = None
        opening.disarm()


class _Opening:
    """One call being opened: the streams its request went on, and whether it was hung up."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: list[_Tracked] = []
        self._armed = True
        self._hung_up = False

    def uses(self, stream: _Tracked) -> None:
        """The call's thread is about to read or write ``stream``: shut down at once if the call was hung up."""
        with self._lock:
            if not self._armed:
                return
            if stream not in self._streams:
                self._streams.append(stream)
            hung_up = self._hung_up
        if hung_up:
            stream.shut_down()

    def hang_up(self) -> None:
        """The engine's thread: the socket the request is on is shut down (its reader wakes up at EOF)."""
        with self._lock:
            if not self._armed:
                return
            self._hung_up = True
            streams = list(self._streams)
        for stream in streams:
            stream.shut_down()

    def disarm(self) -> None:
        with self._lock:
            self._armed = False


class _Tracked(NetworkStream):
    """A connection's stream, as httpcore's backend made it: each read and write tells the call being opened on
    this thread (if any) that its request goes on this socket."""

    def __init__(self, inner: NetworkStream) -> None:
        self._inner = inner

    def _used(self) -> None:
        opening = getattr(_local, "opening", None)
        if opening is not None:
            opening.uses(self)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._used()
        handle = current_call()
        if handle is None or not handle.gather:  # not a model call's, or its reply has not begun
            if handle is not None:
                handle.gathers_at_socket = self._poll is not None or self._pollable()
            return self._inner.read(max_bytes, timeout)
        if self._waited is handle and not self._ready():
            # The reply streams a chunk at a time and nothing has come since the last read: let the chunks gather,
            # then read them all at once (see CallHandle.gather), instead of waking for each as it comes.
            handle.wait_gathering()
            return self._inner.read(max_bytes, timeout)
        asked = time.monotonic()
        data = self._inner.read(max_bytes, timeout)
        if time.monotonic() - asked >= READ_WAITED:
            # This read had to wait for the server: its reply comes in pieces over time, not sent whole (a reply
            # sent whole comes at once, its segments microseconds apart, and is read without a gather).
            self._waited = handle
        return data

    _poll: select.poll | None = None
    _waited: object = None  # the call whose read of this socket had to wait (its reply streams)

    def _pollable(self) -> bool:
        """Whether this stream's socket can be asked if it has anything to read (made ready to ask, once)."""
        sock = self._inner.get_extra_info("socket")
        if not isinstance(sock, socket.socket):
            return False
        try:
            poll = select.poll()
            poll.register(sock, select.POLLIN)
        except (OSError, ValueError):  # closed meanwhile
            return False
        self._poll = poll
        return True

    def _ready(self) -> bool:
        """Whether a read would find something at once: in the TLS layer's buffer, or on the socket."""
        if self._poll is None:
            return True  # cannot tell: read (and wait) as before
        tls = self._inner.get_extra_info("ssl_object")
        if tls is not None and tls.pending():
            return True
        try:
            return bool(self._poll.poll(0))
        except (OSError, ValueError):
            return True

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._used()
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> NetworkStream:
        return _Tracked(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)

    def shut_down(self) -> None:
        tls = self._inner.get_extra_info("ssl_object")
        if tls is not None and tls.selected_alpn_protocol() == "h2":
            return  # multiplexed: other requests share the socket
        sock = self._inner.get_extra_info("socket")
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):  # closed meanwhile (the reader got there first)
                sock.shutdown(socket.SHUT_RDWR)


class _TrackingBackend(NetworkBackend):
    """The pool's own backend, its streams :class:`_Tracked`."""

    def __init__(self, inner: NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> NetworkStream:
        return _Tracked(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> NetworkStream:
        return _Tracked(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def track_connections(client: Any) -> bool:
    """Have the SDK client's connection pools (its default transport's and its proxies') make their connections
    through :class:`_TrackingBackend`: whether any was found. httpx takes no network backend (httpcore's pool
    does, as a constructor argument); the pools the SDK made are reached through their attributes, and a client
    laid out otherwise (another SDK or httpx version) is left as it is: a call abandoned before its headers then
    waits for its read timeout, as before (tests/wire/test_hang_up_before_headers.py says so)."""
    http = getattr(client, "_client", None)
    mounts = getattr(http, "_mounts", None)
    transports = [getattr(http, "_transport", None), *(mounts.values() if isinstance(mounts, dict) else ())]
    found = False
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if isinstance(backend, _TrackingBackend):
            found = True
        elif isinstance(backend, NetworkBackend):
            pool._network_backend = _TrackingBackend(backend)  # type: ignore[union-attr]
            found = True
    return found
