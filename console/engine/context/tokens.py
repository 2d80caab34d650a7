"""Token estimates, used only when a provider does not report usage.

Four characters per token is the usual rule of thumb for English text and
JSON with current tokenizers; it errs slightly high on code, which is the safe
side for a context budget.
"""

from __future__ import annotations

import json
import operator

from console.engine.messages import Message, ModelRequest, ToolSpec

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4  # role and separators, per message


def estimate_text(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def estimate_message(m: Message) -> int:
    n = MESSAGE_OVERHEAD + estimate_text(m.content)
    for c in m.tool_calls:
        n += estimate_text(c.name) + estimate_text(c.arguments) + MESSAGE_OVERHEAD
    return n


_tools_estimate: tuple[list[ToolSpec], int] | None = None


def estimate_tools(request: ModelRequest) -> int:
    # The registry hands out the same specs for a whole run: estimate them once, not at every compaction. By the
    # specs themselves: each request's list is a new one (the request's validation builds it), its items are not.
    global _tools_estimate
    if (_tools_estimate is not None and len(_tools_estimate[0]) == len(request.tools)
            and all(map(operator.is_, _tools_estimate[0], request.tools))):
        return _tools_estimate[1]
    n = estimate_text(json.dumps([t.model_dump() for t in request.tools], separators=(",", ":")))
    _tools_estimate = (list(request.tools), n)  # held: their ids cannot be reused meanwhile
    return n


def estimate_request(request: ModelRequest) -> int:
    return (
        estimate_text(request.system)
        + estimate_tools(request)
        + sum(map(estimate_message, request.messages))
        + estimate_text(request.protected)
    )
