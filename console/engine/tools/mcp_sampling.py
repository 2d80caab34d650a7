"""A server's sampling request (``sampling/createMessage``), answered by the run's own model when the operator enabled
it for that server (``sampling = true`` in its ``[[mcp.servers]]`` entry; a job's ``[[mcp]]`` cannot).

The engine owns this port, as it owns the provider protocol: ``console.mcp`` turns the SDK's request into a
:class:`SamplingAsk` and is lent an :data:`Ask` for the length of one tool call (the only time a server's request is
answered: between calls there is no call to charge it to, and it is refused). The ask runs on the engine's thread
(the one waiting for the call's answer), so its events and budget counts are the call's step's, as every effect of
a tool call is: a kill -9 before the call's result is recorded loses them with the step, and the usage is journaled
with the call's intent as it is had, so the resume (which never sends the call again) counts it once.

What the model is asked: the server's messages, text only (an image or audio block refuses the request), with a
system prompt of the harness's saying it answers a tool server, then the server's own system prompt (bounded);
never the run's context (``includeContext`` other than "none" is not honoured, and said), never a tool. Its answer
is at most ``sampling_max_tokens`` output tokens; at most ``sampling_per_call`` requests are answered during one
tool call (a flood is refused past it); a spent budget or a passed deadline refuses it before the model is asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from console.engine import events as ev
from console.engine.cost import Prices
from console.engine.messages import Message, ModelRequest
from console.engine.model import Provider, ProviderError, Stop, TextDelta, Usage
from console.engine.model_call import CallLimits, stream_abandonably
from console.engine.text import safe_text
from console.engine.tools.mcp_config import McpServerConfig

if TYPE_CHECKING:
    from console.engine.runtime import Runtime

# The most text of a request's messages and of its system prompt (characters): past them it is refused, never cut
# (a cut prompt asks another question).
MAX_MESSAGES_CHARS = 64_000
MAX_SYSTEM_CHARS = 8_000
MAX_MESSAGES = 64
HARNESS_SYSTEM = ("You answer a request of a tool server (MCP sampling) on behalf of an automated agent's harness. "
                  "You have no tools and no other context than the messages given. Answer the last message.")
# The intent's key under which the usage of the call's sampling so far is journaled (see the module's text).
JOURNAL_KEY = "sampled"


@dataclass(frozen=True)
class SamplingAsk:
    """A server's sampling request, as the engine takes it: ``messages`` as (role, text); ``refused``: why the MCP
    layer could not make text of it (an image, audio, a tool result), "" when it could."""

    messages: tuple[tuple[str, str], ...]
    max_tokens: int
    system_prompt: str = ""
    include_context: str = ""
    refused: str = ""


@dataclass(frozen=True)
class SamplingAnswer:
    text: str
    model: str
    stop_reason: str  # "endTurn" or "maxTokens" (the MCP words)


class AskRefused(Exception):
    """The request is not answered: the message (one line, the harness's own words) goes back to the server as the
    error of its request."""


# What console.mcp is lent for one tool call: the engine's answer to one of the server's requests, or AskRefused.
Ask = Callable[[SamplingAsk], SamplingAnswer]


@dataclass(frozen=True)
class Sampler:
    """The run's model, bound to the run's prices and call limits: made once by the supervisor, lent to each call
    of a server the operator enabled sampling for (:meth:`for_call`)."""

    provider: Provider
    prices: Prices | None
    limits: CallLimits

    def for_call(self, rt: Runtime, config: McpServerConfig, tool: str, call_id: str,
                 journal: Callable[[list[Any]], None], timeout: float) -> Ask:
        """The ask for one call of ``tool``, which may take ``timeout`` seconds in all (its samplings in it: the
        model is hung up on when they are up); ``journal`` records the call's sampling usage so far (a list of
        [input, output, cached, cost]) with the call's intent."""
        asked = [0]
        # Real time, as the call's own timeout is (the server's loop measures it so): not the run's clock.
        ends = time.monotonic() + timeout
        had: list[list[Any]] = []

        def ask(request: SamplingAsk) -> SamplingAnswer:
            asked[0] += 1
            try:
                if asked[0] > config.sampling_per_call:
                    raise AskRefused(f"at most {config.sampling_per_call} sampling requests are answered during one "
                                     "tool call (sampling_per_call in the operator's config)")
                answer, usage, note = self._answer(rt, config, request, ends)
            except AskRefused as exc:
                # Past the cap, the refusal is logged once (a server asking in a loop wrote an event each).
                if asked[0] <= config.sampling_per_call + 1:
                    rt.events.emit(ev.McpSampled, server=config.name, tool=tool, call_id=call_id,
                                   refused=safe_text(str(exc), one_line=True, limit=300),
                                   max_tokens=min(max(request.max_tokens, 0), config.sampling_max_tokens))
                raise
            cost = None if self.prices is None else self.prices.cost(usage)
            had.append([usage.input_tokens, usage.output_tokens, usage.cached_input_tokens, cost])
            journal(had)
            count(rt, config.name, call_id, usage, cost)
            rt.events.emit(ev.McpSampled, server=config.name, tool=tool, call_id=call_id,
                           max_tokens=min(request.max_tokens, config.sampling_max_tokens),
                           input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost_usd=cost,
                           note=note)
            return answer

        return ask

    def _answer(self, rt: Runtime, config: McpServerConfig, request: SamplingAsk, ends: float
                ) -> tuple[SamplingAnswer, Usage, str]:
        if request.refused:
            raise AskRefused(request.refused)
        guards = rt.guards
        if (spent := guards.g.exhausted(rt.clock.now())) is not None:
            raise AskRefused(f"the run's budget is spent ({guards.why(spent)}): no sampling")
        left = guards.seconds_to_cut()
        if left is not None and left <= 0:
            raise AskRefused("the run's time is up (its deadline passed): no sampling")
        if request.max_tokens < 1:
            raise AskRefused("maxTokens must be at least 1")
        if not request.messages or len(request.messages) > MAX_MESSAGES:
            raise AskRefused(f"a sampling request holds 1 to {MAX_MESSAGES} messages")
        if sum(len(text) for _, text in request.messages) > MAX_MESSAGES_CHARS:
            raise AskRefused(f"its messages are longer than {MAX_MESSAGES_CHARS:,} characters")
        if len(request.system_prompt) > MAX_SYSTEM_CHARS:
            raise AskRefused(f"its systemPrompt is longer than {MAX_SYSTEM_CHARS:,} characters")
        note = ""
        if request.include_context not in ("", "none"):
            note = (f"includeContext '{safe_text(request.include_context, one_line=True, limit=20)}' not honoured: "
                    "none of the run's context is ever included")
        system = HARNESS_SYSTEM + (f"\n\nThe server's system prompt:\n{request.system_prompt}"
                                   if request.system_prompt else "")
        messages = [Message.assistant(text) if role == "assistant" else Message.user(text)
                    for role, text in request.messages]
        max_tokens = min(request.max_tokens, config.sampling_max_tokens)
        model_request = ModelRequest(system=system, messages=messages, tools=[], max_output_tokens=max_tokens)

        def tick() -> None:
            if rt.should_stop():
                raise AskRefused("the run is stopping: no sampling")
            if time.monotonic() >= ends:
                raise AskRefused(f"the tool call's time is up (timeout {config.timeout:g} s, or the run's deadline)")

        tick()
        parts: list[str] = []
        usage: Usage | None = None
        stop: Stop | None = None
        try:
            for item in stream_abandonably(self.provider, model_request, self.limits, tick):
                if isinstance(item, TextDelta):
                    parts.append(item.text)
                elif isinstance(item, Usage):
                    usage = item
                elif isinstance(item, Stop):
                    stop = item
        except ProviderError as exc:
            raise AskRefused(f"the run's model did not answer ({safe_text(str(exc), one_line=True, limit=200)})"
                             ) from None
        text = "".join(parts)
        if usage is None:  # a model that reports none: estimated, as a turn's is (4 characters a token)
            chars = len(system) + sum(len(t) for _, t in request.messages)
            usage = Usage(chars // 4 + 1, len(text) // 4 + 1, reported=False)
        reason = "maxTokens" if stop is not None and stop.reason == "max_tokens" else "endTurn"
        return SamplingAnswer(text, self.provider.model, reason), usage, note


def count(rt: Runtime, server: str, call_id: str, usage: Usage, cost: float | None, *, log: bool = True) -> None:
    """A sampling's tokens and cost in the run's budget and spend: a ``token_usage`` event of source
    "mcp_sampling" (the ledger, ``costs`` and telemetry count it), the budget's count and the fleet's day.
    ``log`` False: its event is in the log already (a resume's count of what a question of the call logged)."""
    job_cost = rt.guards.count_tokens(usage.input_tokens + usage.output_tokens, cost)
    rt.fleet_spent(usage, cost)  # the fleet's day counts it too, as a turn's: it is the run's spend
    if not log:
        return
    rt.events.emit(ev.TokenUsage, turn=0, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                   cached_input_tokens=usage.cached_input_tokens, cost_usd=cost, job_cost_usd=job_cost,
                   reported=usage.reported, source="mcp_sampling", mcp_server=server, call_id=call_id)


def count_journaled(rt: Runtime, server: str, call_id: str, had: Any, *, logged: int = 0) -> int:
    """On the resume of a call a kill interrupted: the sampling usage its intent recorded, counted now (the step
    that had it never committed, so nothing of it was counted). The first ``logged`` are in the log already (a
    question of the call wrote them: console.engine.tools.mcp_elicitation): counted, not logged again. How many
    samplings it counted."""
    if not isinstance(had, list):
        return 0
    n = 0
    for row in had[:64]:
        if not (isinstance(row, list) and len(row) == 4 and all(isinstance(x, int) and x >= 0 for x in row[:3])):
            continue
        cost = row[3] if isinstance(row[3], int | float) and row[3] >= 0 else None
        count(rt, server, call_id, Usage(row[0], row[1], row[2]), None if cost is None else float(cost),
              log=n >= logged)
        n += 1
    return n
