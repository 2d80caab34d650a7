"""The events of a session and its turns: the model's streaming, retries and the tokens it used."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from console.engine.events.base import BoundedInt, EventBase


class SessionStarted(EventBase):
    type: Literal["session_started"] = "session_started"
    reason: Literal["new", "resume", "restart"] = "new"
    provider: str = ""
    model: str = ""
    carryover_messages: BoundedInt = 0
    # On a resume: where the run continues (e.g. "turn 12, tool call 2 of 3").
    detail: str = ""
    # The context window this session works in, and where that figure came from ("job.toml",
    # "--context-window", "registry: gpt-4.1", "default").
    context_window: BoundedInt = 0
    context_window_source: str = ""
    # The model's prices are known (costs are shown) or not (said once, here).
    priced: bool = False
    # Not priced while the operator's config sets a fleet daily budget ([budgets]): that budget neither counts this
    # run nor holds it (said with the price, once: a notice, not an error).
    fleet_uncounted: bool = False
    # What the prompts carry beyond the todo list and the plan (seed 003; job.toml [context]): working memory
    # (requires_context), the file catalogue's find_files tool (file_index).
    working_memory: bool = True
    file_index: bool = False
    # A context restart's new session: its first prompt's estimated size and the most a prompt may take (as
    # token_usage's context_tokens and prompt_budget), known before its first turn; 0 when not said (a new run,
    # a resume, a log written before this was).
    prompt_tokens_est: BoundedInt = 0
    prompt_budget: BoundedInt = 0


class SessionEnded(EventBase):
    type: Literal["session_ended"] = "session_ended"
    reason: str
    turns: BoundedInt = 0
    detail: str = ""


class TurnStarted(EventBase):
    type: Literal["turn_started"] = "turn_started"
    turn: BoundedInt
    # Which layers the prompt of this turn carries (the protected ones must always be there).
    layers: list[str] = Field(default_factory=list)
    prompt_tokens_est: BoundedInt = 0


class TextDelta(EventBase):
    """Published in-process only: the log keeps the whole assistant_message."""

    type: Literal["text_delta"] = "text_delta"
    turn: BoundedInt
    text: str
    # The model's reasoning (reasoning_content, thinking), shown dimmed, never part of the answer.
    reasoning: bool = False


class ModelRetry(EventBase):
    """A model call failed in a way worth retrying; the half-streamed turn (if any) is dropped.

    The console discards the turn's streamed text on this event; the agent never sees the partial reply.
    """

    type: Literal["model_retry"] = "model_retry"
    turn: BoundedInt
    attempt: BoundedInt  # the attempt that is coming next (2 = the first retry)
    delay_s: float  # how long the engine waits before it
    cause: str  # short: "rate limited", "server error 503", "stream cut", "stalled 120 s"
    message: str = ""  # the provider's one line
    waited_s: float = 0.0  # time since the turn's first failure, this wait included
    max_wait_s: float = 0.0  # the most it may be (retry_total_wait, or unreachable_wait for a server not reached)
    discarded_chars: BoundedInt = 0  # streamed text thrown away with the failed attempt


class TokenUsage(EventBase):
    type: Literal["token_usage"] = "token_usage"
    turn: BoundedInt
    input_tokens: BoundedInt
    output_tokens: BoundedInt
    cached_input_tokens: BoundedInt = 0
    reported: bool = True
    # Tokens written to the prompt cache (part of input_tokens, priced apart).
    cache_write_tokens: BoundedInt = 0
    # This turn's cost and the whole job's so far, in US dollars; None when the model's price is unknown.
    cost_usd: float | None = None
    job_cost_usd: float | None = None
    context_window: BoundedInt = 0
    # The next prompt's size after this turn's results are appended (what pressure acts on).
    context_tokens: BoundedInt = 0
    # The most a prompt may take (window less the reply's reserve and a margin); thresholds are shares of it.
    prompt_budget: BoundedInt = 0
    soft_threshold: float = 0.0
    hard_threshold: float = 0.0
    # The share of the whole context window the next prompt takes (context_tokens / context_window, a fraction like
    # wind_down's usage_pct): seed 004's context_used_pct. None in logs written before it was recorded.
    context_used_pct: float | None = None
    # "mcp_sampling": the tokens of an MCP server's sampling request (console.engine.tools.mcp_sampling), answered
    # by the run's model during the tool call ``call_id`` of server ``mcp_server``: counted in the spend and budget
    # like a turn's, but not a turn (no context gauge, no turn line). "": a turn of the agent.
    source: Literal["", "mcp_sampling"] = ""
    mcp_server: str = ""
    call_id: str = ""
