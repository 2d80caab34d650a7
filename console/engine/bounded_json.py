"""JSON from outside, parsed with bounds: :func:`loads`. Every reader of a body another process wrote (a shared
store's event and command rows, a log line read back for its shape) comes here, so that one hostile body is one
refused body: never a traceback, never a whole page (a fleet, a log) lost with it.

Why not :func:`json.loads`: Python's parser recurses once per level of nesting and has no depth option; a body of
5,000 nested arrays (a few kilobytes, which PostgreSQL's jsonb takes) raised RecursionError out of the store's
reads (psycopg parses jsonb with it), and `logs ID`, `wait ID` and every machine's fleet ended there. Whatever a
caller then does with a deep value (dump it again, validate it, walk it) recurses as deep.

How: pydantic-core's parser (jiter, the one pydantic's ``validate_json`` already uses for every event) refuses
nesting past :data:`MAX_DEPTH` levels without using the Python stack, and takes about half the CPU of
``json.loads`` (5.5 against 11.2 us for a real run's average event of 450 bytes; refusing the 5,000-level body:
14 us; benchmarks/bounded_json.py). No pre-scan of brackets is needed: one in Python cost 1.2 us an event on top of
json.loads, and 15 ms to refuse that body (a pass per level). A size bound (:data:`MAX_BYTES`)
comes first; the store also refuses a larger body in its query, so that one never crosses the network.

What differs from ``json.loads``: ``NaN`` and ``Infinity`` are no JSON (refused, as PostgreSQL does); a lone UTF-16
surrogate's escape (``"\\udc80"``, which Python's json writes for a string it cannot encode, and reads back)
reads as U+FFFD, the character every decoder puts for one (jiter refuses the text whole).
"""

from __future__ import annotations

import re
from typing import Any

import pydantic_core

__all__ = ["MAX_BYTES", "MAX_DEPTH", "BoundsError", "loads"]

MAX_BYTES = 16 << 20  # far beyond any event the engine writes (a tool result, a reply are capped well below)
MAX_DEPTH = 200  # jiter's nesting limit (arrays and objects); deeper is refused (tests/unit/test_bounded_json.py)

# A UTF-16 surrogate's escape that is not one half of a pair, preceded by an even number of backslashes (so it is
# an escape, not the text "\u..." after an escaped backslash).
_LONE = re.compile(r"(?<!\\)((?:\\\\)*)(\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                   r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2})")


class BoundsError(ValueError):
    """A body that is no JSON this parser takes: too large, nested too deep, or not JSON at all (one line)."""


def loads(data: str | bytes | bytearray | memoryview, *, max_bytes: int = MAX_BYTES) -> Any:
    """``data`` parsed as JSON, within :data:`MAX_BYTES` (or ``max_bytes``) and :data:`MAX_DEPTH` levels of
    nesting; :class:`BoundsError` otherwise. Never RecursionError, whatever the text."""
    if isinstance(data, memoryview):
        data = bytes(data)
    if len(data) > max_bytes:
        raise BoundsError(f"{len(data)} bytes, more than the {max_bytes} a body may have")
    try:
        return pydantic_core.from_json(data, allow_inf_nan=False)
    except ValueError as exc:
        message = str(exc)
    if "surrogate" in message:  # a lone surrogate's escape: U+FFFD, then parsed again (the rest is unchanged)
        text = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
        try:
            return pydantic_core.from_json(_LONE.sub(r"\1\\ufffd", text), allow_inf_nan=False)
        except ValueError as exc:
            message = str(exc)
    if "recursion limit" in message:
        message = f"nested more than {MAX_DEPTH} levels deep"
    raise BoundsError(message.splitlines()[0][:200] if message else "not JSON")
