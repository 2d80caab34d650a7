"""Provider-neutral conversation messages.

The engine speaks this one format; each provider adapter translates it to its
wire protocol. Keeping it small (four roles, tool calls attached to assistant
messages, one result message per call) is what lets carryover and masking
reason about tool pairs without knowing any SDK.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    """A tool invocation requested by the model.

    ``arguments`` is the raw JSON text the model produced: validation happens in
    the tool registry so that malformed JSON becomes a readable tool error
    instead of a crash in the adapter.
    """

    id: str
    name: str
    arguments: str = "{}"


class Message(BaseModel):
    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    # Set on role="tool": which call this message answers.
    tool_call_id: str | None = None
    name: str | None = None
    # Harness bookkeeping that never goes to the model: e.g. kind="transition_prompt",
    # "restart_marker", "summary", "masked".
    meta: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def system(cls, content: str, **meta: Any) -> Message:
        return cls(role="system", content=content, meta=meta)

    @classmethod
    def user(cls, content: str, **meta: Any) -> Message:
        return cls(role="user", content=content, meta=meta)

    @classmethod
    def assistant(cls, content: str = "", tool_calls: list[ToolCall] | None = None) -> Message:
        return cls(role="assistant", content=content, tool_calls=tool_calls or [])

    @classmethod
    def tool(cls, call: ToolCall, content: str, **meta: Any) -> Message:
        return cls(role="tool", content=content, tool_call_id=call.id, name=call.name, meta=meta)


class ToolSpec(BaseModel):
    """What the model is told about a tool (layer 3)."""

    name: str
    description: str
    parameters: dict[str, Any]


class ModelRequest(BaseModel):
    """Everything a provider needs for one turn.

    ``system`` is layer 1 (+ the short tool guide), ``tools`` is layer 3,
    ``messages`` holds layers 4-5 and ``protected`` is layer 2 (todo display,
    plan, working memory). Adapters must send ``protected`` *after* the
    conversation: it changes every turn, and putting it last keeps everything
    before it byte-identical between turns, which is what prompt caching needs.
    """

    system: str
    messages: list[Message]
    tools: list[ToolSpec]
    protected: str = ""
    max_output_tokens: int = 4096
