"""The events of the agent's tool calls: what it asked for, what was refused, what came back, and the
sandbox the job's commands run in."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from console.engine.events.base import BoundedInt, Cut, EventBase


class ToolCallRecord(BaseModel):
    id: str
    name: str
    arguments: str
    arguments_cut: Cut | None = None


class AssistantMessage(EventBase):
    type: Literal["assistant_message"] = "assistant_message"
    turn: BoundedInt
    text: str
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    stop_reason: str = ""
    text_cut: Cut | None = None
    # The model's reasoning for this reply (capped), for the operator; never sent back to the model.
    reasoning: str = ""


class ToolCalled(EventBase):
    type: Literal["tool_called"] = "tool_called"
    turn: BoundedInt
    call_id: str
    tool: str
    arguments: str
    arguments_cut: Cut | None = None


class ToolDenied(EventBase):
    """A tool policy refused a call (seed 002): the agent got ``reason`` as the call's error result."""

    type: Literal["tool_denied"] = "tool_denied"
    turn: BoundedInt
    call_id: str
    tool: str
    policy: str
    reason: str
    # The policy itself failed (raised): fail-closed, so the call was denied; what it raised.
    error: str | None = None


class ToolResult(EventBase):
    type: Literal["tool_result"] = "tool_result"
    turn: BoundedInt
    call_id: str
    tool: str
    ok: bool
    content: str
    duration_ms: float = 0.0
    content_cut: Cut | None = None


class CommandSandbox(EventBase):
    """What the job's declared commands see and the bounds they run within: the run's header, at every start."""

    type: Literal["command_sandbox"] = "command_sandbox"
    # "confined": by bubblewrap; "unconfined": the operator's run --unconfined; "refused": no sandbox works here
    # (every call is refused until one does).
    mode: Literal["confined", "unconfined", "refused"]
    # The bubblewrap used ("bubblewrap 0.11.0 (bundled with agent-console)"), or why none works.
    tool: str = ""
    # "cgroup v1" / "cgroup v2" (the whole tree's memory and processes), or "rlimits" (per process).
    bounds_by: str = ""
    network: bool = False
    read_only: list[str] = Field(default_factory=list)
    limits: dict[str, float] = Field(default_factory=dict)
    commands: list[str] = Field(default_factory=list)
    # The paragraph every view shows (under the summary, where it has room).
    text: str = ""
    # Its first line (about 200 characters): confined or not, the network, extra paths, the bounds. Empty in
    # logs of versions before it (then the paragraph is the line).
    summary: str = ""


class McpServerEvent(EventBase):
    """An MCP server of the run and its state: at the start (``ready``, or ``unavailable`` for an optional one that
    did not start), and at each change (``restarted`` once after a crash, ``unavailable`` for the rest of the run
    after a second one). The views rebuild each server's line from these (and its calls from ``tool_result``)."""

    type: Literal["mcp_server"] = "mcp_server"
    server: str
    state: Literal["starting", "ready", "restarted", "unavailable"]
    # The tools the agent is offered of it (their full names, mcp__SERVER__TOOL) that work now; ``known``: whether
    # that list is known (an optional server that did not start and whose job.toml names no ``tools``: not known).
    tools: list[str] = Field(default_factory=list)
    known: bool = True
    # The bubblewrap that confines it, or "UNCONFINED (run --unconfined)"; "" when it is not running.
    confined: str = ""
    required: bool = False
    # Why the state changed (its last words on stderr, escaped), one line; "" for a plain start.
    why: str = ""
    # Its calls and the calls that failed, so far in this process (the views count tool_result events instead).
    calls: BoundedInt = 0
    errors: BoundedInt = 0
    # What the operator's config lets it ask of the run: "sampling" (the run's model), "elicitation" (the operator).
    may: list[str] = Field(default_factory=list)


class McpElicited(EventBase):
    """An MCP server asked the operator a question (elicitation) during one of its tool calls: ``refused`` (not
    enabled by the operator, a form that is not flat, a URL to open, a cap), or how it ended: ``action`` "accept"
    (the names of the fields answered, never their values: the operator's words for the server alone), "decline",
    "cancel" (``by``: the operator, their stop, no answer within the question's time, the call's end)."""

    type: Literal["mcp_elicited"] = "mcp_elicited"
    server: str
    tool: str = ""
    call_id: str = ""
    question: str = ""
    refused: str = ""
    action: str = ""
    fields: list[str] = Field(default_factory=list)
    by: str = ""
    waited_s: float = 0.0


class McpSampled(EventBase):
    """An MCP server asked the run's model for a completion (sampling), during one of its tool calls: answered (its
    tokens and cost, also in a ``token_usage`` event of ``source`` "mcp_sampling", counted in the run's spend and
    budget) or refused (``refused`` says why: not enabled by the operator, a cap, a spent budget, content that is
    not text). The server's own words are not kept here: they are the server's, untrusted."""

    type: Literal["mcp_sampled"] = "mcp_sampled"
    server: str
    tool: str = ""
    call_id: str = ""
    refused: str = ""
    max_tokens: BoundedInt = 0
    input_tokens: BoundedInt = 0
    output_tokens: BoundedInt = 0
    cost_usd: float | None = None
    # What of the request was not honoured (includeContext other than "none"), one line; "" when all was.
    note: str = ""
