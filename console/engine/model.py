"""The one streaming protocol every model adapter implements.

A provider turns a :class:`ModelRequest` into an iterator of stream events:
text deltas as they arrive, complete tool calls, one usage report and one stop
event, in that order. The engine consumes nothing else, so the scripted model,
OpenAI, Anthropic and any OpenAI-compatible server are interchangeable.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from console.engine.messages import ModelRequest, ToolCall

StopReason = Literal["end_turn", "tool_use", "max_tokens", "error"]


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    call: ToolCall


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = 0
    # False when the provider did not report usage and the engine estimated it.
    reported: bool = True


@dataclass(frozen=True, slots=True)
class Stop:
    reason: StopReason
    detail: str = ""


StreamEvent = TextDelta | ToolCallEvent | Usage | Stop


class ProviderError(Exception):
    """A provider failed in a way the operator should read (auth, network, bad model).

    Messages must never contain secrets: adapters build them from status codes
    and error types, not from request headers.
    """


@runtime_checkable
class Provider(Protocol):
    name: str
    model: str

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]: ...
