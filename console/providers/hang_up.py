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
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any, Protocol


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
