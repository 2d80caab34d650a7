"""What both SDK adapters need to turn a failure into one line and a decision.

The decision (:class:`~console.engine.model.ProviderError` ``kind``) is what makes a run survive an
outage: a 429, a 5xx, Anthropic's 529, a reset or a cut stream are *transient* and the engine retries the
whole turn; a "prompt is too long" answer is a full *context*; everything else (401/403, a bad model
name, a request the server rejects) is *fatal*, because asking again gets the same answer. A server that
cannot be reached at all (connection refused, a name that does not resolve, no route, no answer to the
connection) is transient too, but *unreachable* (:func:`unreachable_reason`,
:class:`~console.engine.model_call.ProviderUnreachable`): the engine gives it a short bound, then asks
the operator, instead of the long backoff an overloaded server gets.

Nothing here reads request headers: the SDKs' exceptions carry the request (and its key), so messages
are built from status codes, error types and the server's own message, scrubbed of anything key-shaped.
"""

from __future__ import annotations

import email.utils
import errno
import re
import socket
import time
from collections.abc import Mapping
from typing import Any

from console.engine.model import ErrorKind, ProviderError

_KEYLIKE = re.compile(r"\b(sk|key)-[\w\-.*]{4,}", re.IGNORECASE)
# Statuses worth asking again: timeout, conflict/lock, too many requests, server errors, overloaded.
TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
# How servers say the prompt does not fit: OpenAI's code, vLLM/llama.cpp/LM Studio's messages, Anthropic's.
_CONTEXT = re.compile(
    r"context_length_exceeded|maximum context length|context length|context window|prompt is too long|"
    r"too many tokens|exceeds? the (?:maximum|model's|available) (?:context|number of tokens)|"
    r"input is too long|reduce the length of the (?:messages|prompt)",
    re.IGNORECASE,
)
RETRY_AFTER_MAX = 24 * 3600.0  # a wait beyond a day is a broken header, not advice


def retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """The server's requested wait in seconds: ``retry-after-ms``, ``retry-after`` as seconds or as an
    HTTP date; None when absent or unreadable. The engine caps it (``retry_after_cap``)."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    value: float | None = None
    if (ms := lower.get("retry-after-ms")) is not None:
        try:
            value = float(ms) / 1000
        except ValueError:
            value = None
    if value is None and (ra := lower.get("retry-after")) is not None:
        try:
            value = float(ra)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(ra)
            except (TypeError, ValueError, IndexError):
                return None
            value = when.timestamp() - (time.time() if now is None else now)
    if value is None or value != value or value < 0:  # NaN or negative: unreadable
        return None
    return min(value, RETRY_AFTER_MAX)


def is_context_overflow(status: int | None, message: str) -> bool:
    return status in (400, 413, 422, None) and bool(_CONTEXT.search(message or ""))


def classify(status: int | None, message: str) -> ErrorKind:
    if is_context_overflow(status, message):
        return "context"
    if status is None or status in TRANSIENT_STATUS:
        return "transient"
    return "fatal"


def error(message: str, *, kind: ErrorKind, cause: str, headers: Mapping[str, str] | None = None) -> ProviderError:
    return ProviderError(message, kind=kind, cause=cause, retry_after=retry_after(headers))


def response_headers(err: Any) -> Mapping[str, str] | None:
    response = getattr(err, "response", None)
    headers = getattr(response, "headers", None)
    try:
        return dict(headers.items()) if headers is not None else None
    except Exception:  # an odd stand-in response: no headers is the safe answer
        return None


def not_a_stream(provider: str, stream: Any, what: str) -> None:
    """A 200 whose body is a web page or plain JSON is not a model's stream: a wrong base_url (a proxy's
    page, a non-streaming endpoint). Asking again gets the same page, so it is fatal, with the advice."""
    try:
        ctype = str(stream.response.headers.get("content-type", "")).lower()
    except Exception:  # a stand-in stream without a response: nothing to judge by
        return
    if ctype.startswith(("text/html", "application/json", "text/plain")):
        raise ProviderError(f"{provider}: the server answered with {ctype.split(';')[0]}, not an event stream - "
                            f"is base_url {what}?", kind="fatal")


def server_detail(body: object) -> str:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            msg = inner.get("message") or inner.get("code") or inner.get("type")
            return str(msg) if msg else ""
        return str(inner) if isinstance(inner, str) else ""
    return body if isinstance(body, str) else ""


def scrub(text: str, secret: str | None) -> str:
    # Servers echo (masked) keys in 4xx messages; strip anything key-shaped and cap the length.
    if secret and len(secret) >= 6:
        text = text.replace(secret, "***")
    text = _KEYLIKE.sub("***", text)
    line = " ".join(text.split())
    return line if len(line) <= 200 else line[:197] + "..."


def with_detail(prefix: str, err: Any, secret: str | None) -> str:
    detail = server_detail(getattr(err, "body", None)) or server_detail(getattr(err, "message", None))
    return f"{prefix}: {scrub(detail, secret)}" if detail else prefix


def origin(err: Any) -> str:
    # scheme://host:port only: a path or query string could carry a key (e.g. Azure ?api-key=).
    try:
        url = err.request.url
    except Exception:  # a transport error raised before the request was built
        return "the server"
    port = f":{url.port}" if url.port else ""
    return f"{url.scheme}://{url.host}{port}"


def _chain(err: BaseException, include_self: bool) -> list[BaseException]:
    chain: list[BaseException] = [err] if include_self else []
    cause = err.__cause__ or err.__context__
    while cause is not None and len(chain) < 8:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    return chain


_NO_HOST = ("name or service not known", "nodename nor servname", "temporary failure in name resolution",
            "no address associated with hostname", "getaddrinfo failed")
# httpx's (and httpcore's) "the connection was never made" timeout, by name: the SDKs wrap it as their own
# timeout error, and this module imports neither HTTP library.
_CONNECT_TIMEOUTS = frozenset({"ConnectTimeout"})


def unreachable_reason(err: BaseException, *, include_self: bool = False) -> str | None:
    """Why the server cannot be reached at all ("connection refused", "host not found", "no route to host",
    "network unreachable", "no answer to the connection"), or None when it was reached (or the failure is
    something else: a reset, a cut stream, a slow reply). The engine retries these for a short while only."""
    chain = _chain(err, include_self)
    text = " ".join(str(c) for c in chain).lower()
    if any(isinstance(c, ConnectionRefusedError) for c in chain) or "connection refused" in text:
        return "connection refused"
    if any(isinstance(c, socket.gaierror) for c in chain) or any(t in text for t in _NO_HOST):
        return "host not found"
    codes = {getattr(c, "errno", None) for c in chain}
    if errno.EHOSTUNREACH in codes or "no route to host" in text:
        return "no route to host"
    if errno.ENETUNREACH in codes or "network is unreachable" in text:
        return "network unreachable"
    if any(type(c).__name__ in _CONNECT_TIMEOUTS for c in chain):
        return "no answer to the connection"
    return None


def network_reason(err: BaseException, *, include_self: bool = False) -> str:
    chain = _chain(err, include_self)
    text = " ".join(str(c) for c in chain).lower()
    if (unreachable := unreachable_reason(err, include_self=include_self)) is not None:
        return unreachable
    if any(isinstance(c, ConnectionResetError) for c in chain) or "connection reset" in text:
        return "connection reset"
    if "ssl" in text or "certificate" in text:
        return "TLS error"
    if "peer closed connection" in text or "incomplete chunked read" in text:
        return "the server closed the stream mid-way"
    if chain:
        first = re.sub(r"\[Errno -?\d+\]\s*", "", str(chain[0])).strip()
        return scrub(first, None).lower() or type(chain[0]).__name__
    return "network error"
