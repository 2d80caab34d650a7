"""The run's events folded into spans and metrics, following the OpenTelemetry GenAI semantic conventions.

One span per process of the run (``invoke_agent JOB``), per session, per turn, per model call (``chat MODEL``) and
per tool call (``execute_tool TOOL``), each starting and ending at its events' timestamps: the trace is the event
stream's shape, not this subscriber's timing (it is fed off the run's thread, a little later). The GenAI names
(gen_ai.*) are those of the semantic conventions (opentelemetry-semantic-conventions 0.66b2's
``gen_ai_attributes``, checked against the conventions' repository), our own under ``agent_console.``.

No text of the prompts or results unless the plan says ``content`` (the operator's ``[telemetry] content = true``);
every string attribute is scrubbed of secrets whatever (:mod:`.scrub`). Token and cost figures are the events' own:
``token_usage``'s ``cost_usd`` is what the engine's price arithmetic (console.engine.cost.Prices.cost) gave the turn,
and the run's cost is its ``job_cost_usd``: nothing is summed here that the engine has not.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from opentelemetry import trace
from opentelemetry.metrics import Meter
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, SpanKind, Status, StatusCode

from console.engine import events as ev
from console.telemetry.scrub import Scrubber

# A tool's name as a metric attribute: a model may call a tool by any name (refused, but logged), and each name
# would be a time series of its own.
_METRIC_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
P = "agent_console."


def ns(ts: datetime) -> int:
    return int(ts.timestamp() * 1_000_000_000)


@dataclass
class _Chat:
    span: Span
    start: int
    end: int | None = None


@dataclass
class _Turn:
    span: Span
    number: int
    last: int
    chat: _Chat | None = None
    tools: dict[str, Span] = field(default_factory=dict)


class Instruments:
    """The run's metrics: GenAI's client metrics where they exist, ours beside them."""

    def __init__(self, meter: Meter) -> None:
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens used per model call (input, output)",
            explicit_bucket_boundaries_advisory=[1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576,
                                                 4194304, 16777216, 67108864])
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="Model call duration",
            explicit_bucket_boundaries_advisory=[0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24,
                                                 20.48, 40.96, 81.92])
        self.tokens = meter.create_counter(P + "tokens", unit="{token}",
                                           description="Tokens by type (input, output, cached input, cache write)")
        self.cost = meter.create_counter(P + "cost", unit="USD", description="What the model calls cost")
        self.turns = meter.create_counter(P + "turns", unit="{turn}", description="Turns taken")
        self.tool_calls = meter.create_counter(P + "tool.calls", unit="{call}", description="Tool calls made")
        self.tool_errors = meter.create_counter(P + "tool.errors", unit="{call}",
                                                description="Tool calls that failed")
        self.denials = meter.create_counter(P + "tool.denials", unit="{call}",
                                            description="Tool calls a policy refused")
        self.needs_you = meter.create_counter(P + "needs_you", unit="{need}",
                                              description="Times the run needed its operator")
        self.restarts = meter.create_counter(P + "restarts", unit="{restart}",
                                             description="Context restarts (a new session)")
        self.runs = meter.create_counter(P + "runs", unit="{run}", description="Runs (processes of them) ended")


class TraceFold:
    """Spans and metrics from events (one process's). ``parent``: the run's first run span, when this process
    resumes it (its trace id, from the run's record); ``on_start``: told the run span's context once it exists (the
    record is written then)."""

    def __init__(self, tracer: trace.Tracer, instruments: Instruments, scrub: Scrubber, *, content: bool,
                 run_id: str, job: str, parent: SpanContext | None = None) -> None:
        self.tracer = tracer
        self.m = instruments
        self.scrub = scrub
        self.content = content
        self.parent = parent
        self.run: Span | None = None
        self.session: Span | None = None
        self.turn: _Turn | None = None
        self.provider = ""
        self.model = ""
        self.job_cost: float | None = None
        self.run_attrs = {P + "run.id": run_id, P + "job": job, "gen_ai.agent.name": job,
                          "gen_ai.conversation.id": run_id}
        self.finished = False
        self.root_ended = False  # this process ended the run's root span (it is the run's first: parent None)
        self.counts = {"turns": 0, "tool_calls": 0, "denials": 0, "tool_errors": 0, "needs_you": 0, "restarts": 0}

    # -- helpers -------------------------------------------------------------------------------------------------
    def _attrs(self, values: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in values.items():
            if v is None:
                continue
            if isinstance(v, str):
                v = self.scrub.text(v)
            elif isinstance(v, list | tuple):
                v = [self.scrub.text(x) if isinstance(x, str) else x for x in v]
            out[k] = v
        return out

    def _metric_attrs(self, **extra: Any) -> dict[str, Any]:
        base = {P + "job": self.run_attrs[P + "job"], "gen_ai.provider.name": self.provider,
                "gen_ai.request.model": self.model}
        return self._attrs({**base, **extra})

    def _start(self, name: str, parent: Span | None, ts: datetime, attrs: dict[str, Any],
               kind: SpanKind = SpanKind.INTERNAL, links: list[Link] | None = None) -> Span:
        ctx = trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(self.scrub.text(name, 200), context=ctx, kind=kind,
                                      attributes=self._attrs(attrs), links=links, start_time=ns(ts))

    def run_context(self) -> SpanContext | None:
        return self.run.get_span_context() if self.run is not None else None

    # -- the fold ------------------------------------------------------------------------------------------------
    def __call__(self, e: ev.EventBase) -> None:
        if self.finished:
            return  # after run_ended (a channel's failure said as the process closes): no second run span
        if self.run is None:
            self._start_run(e.ts)
        if self.turn is not None and not isinstance(e, ev.TurnStarted | ev.SessionStarted | ev.SessionEnded
                                                     | ev.RunEnded):
            self.turn.last = ns(e.ts)
        handler = _HANDLERS.get(type(e))
        if handler is not None:
            handler(self, e)

    def _start_run(self, ts: datetime) -> None:
        links: list[Link] = []
        parent: Span | None = None
        if self.parent is not None:
            parent = NonRecordingSpan(self.parent)
            links = [Link(self.parent, {P + "link": "the run's first process"})]
        self.run = self._start(f"invoke_agent {self.run_attrs[P + 'job']}", parent, ts,
                               {"gen_ai.operation.name": "invoke_agent", **self.run_attrs,
                                P + "resumed": self.parent is not None}, links=links)

    def stand_in(self, started: datetime, now: datetime) -> None:
        """The run span of the run's first process, which was killed before it ended it (so it never left): sent by
        the process that resumes the run, with the ids the run's record gave it (the tracer's id generator gives them
        to the first root span), from the run's start until now. Every later run span names it as its parent."""
        span = self.tracer.start_span(self.scrub.text(f"invoke_agent {self.run_attrs[P + 'job']}", 200),
                                      context=trace.set_span_in_context(trace.INVALID_SPAN),
                                      attributes=self._attrs({"gen_ai.operation.name": "invoke_agent",
                                                              **self.run_attrs, P + "resumed": False,
                                                              P + "stand_in": True}),
                                      start_time=ns(started))
        span.end(end_time=max(ns(now), ns(started)))

    def _session_started(self, e: ev.SessionStarted) -> None:
        self._end_session(e.ts)
        self.provider, self.model = e.provider, e.model
        self.session = self._start(f"session {e.session}", self.run, e.ts, {
            P + "session": e.session, P + "session.reason": e.reason, "gen_ai.provider.name": e.provider,
            "gen_ai.request.model": e.model, P + "context_window": e.context_window})
        if self.run is not None:
            self.run.set_attributes(self._attrs({"gen_ai.provider.name": e.provider, "gen_ai.request.model": e.model}))
        if e.reason == "restart":
            self.counts["restarts"] += 1
            self.m.restarts.add(1, self._metric_attrs())

    def _session_ended(self, e: ev.SessionEnded) -> None:
        if self.session is not None:
            self.session.set_attributes(self._attrs({P + "session.end_reason": e.reason, P + "turns": e.turns}))
        self._end_session(e.ts)

    def _end_session(self, ts: datetime) -> None:
        self._end_turn()
        if self.session is not None:
            self.session.end(end_time=ns(ts))
            self.session = None

    def _turn_started(self, e: ev.TurnStarted) -> None:
        self._end_turn()
        span = self._start(f"turn {e.turn}", self.session or self.run, e.ts, {
            P + "turn": e.turn, P + "session": e.session, P + "prompt_tokens_est": e.prompt_tokens_est})
        turn = _Turn(span=span, number=e.turn, last=ns(e.ts))
        turn.chat = _Chat(self._start(f"chat {self.model}", span, e.ts, {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.model, P + "turn": e.turn}, kind=SpanKind.CLIENT), start=ns(e.ts))
        self.turn = turn
        self.counts["turns"] += 1
        self.m.turns.add(1, self._metric_attrs())

    def _end_turn(self) -> None:
        turn, self.turn = self.turn, None
        if turn is None:
            return
        if turn.chat is not None:
            self._end_chat(turn, None)
        for call_id, span in list(turn.tools.items()):
            span.set_attributes({"error.type": "no_result"})  # the turn ended (a stop, a kill) before its result
            span.set_status(Status(StatusCode.ERROR))
            span.end(end_time=turn.last)
            turn.tools.pop(call_id)
        turn.span.end(end_time=turn.last)

    def _end_chat(self, turn: _Turn, usage: ev.TokenUsage | None) -> None:
        chat, turn.chat = turn.chat, None
        if chat is None:
            return
        if chat.end is None:
            chat.span.set_attributes({"error.type": "no_reply"})  # the model gave no whole reply (retries spent...)
            chat.span.set_status(Status(StatusCode.ERROR))
        end = chat.end or (ns(usage.ts) if usage is not None else turn.last)
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": self.provider,
                 "gen_ai.request.model": self.model}
        if chat.end is not None:
            self.m.duration.record(max(0, end - chat.start) / 1e9, self._attrs(attrs))
        chat.span.end(end_time=end)

    def _model_retry(self, e: ev.ModelRetry) -> None:
        if self.turn is not None and self.turn.chat is not None:
            self.turn.chat.span.add_event("model_retry", self._attrs({
                P + "attempt": e.attempt, P + "cause": e.cause, P + "delay_s": e.delay_s}), timestamp=ns(e.ts))

    def _assistant_message(self, e: ev.AssistantMessage) -> None:
        if self.turn is None or self.turn.chat is None:
            return
        chat = self.turn.chat
        chat.end = ns(e.ts)
        attrs: dict[str, Any] = {"gen_ai.response.finish_reasons": [e.stop_reason or "unknown"],
                                 P + "tool_calls": len(e.tool_calls)}
        if self.content:
            parts: list[dict[str, Any]] = [{"type": "text", "content": e.text}] if e.text else []
            parts += [{"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
                      for c in e.tool_calls]
            attrs["gen_ai.output.messages"] = json.dumps(
                [{"role": "assistant", "parts": parts, "finish_reason": e.stop_reason}], ensure_ascii=False)
        chat.span.set_attributes(self._attrs(attrs))

    def _token_usage(self, e: ev.TokenUsage) -> None:
        attrs = {"gen_ai.usage.input_tokens": e.input_tokens, "gen_ai.usage.output_tokens": e.output_tokens,
                 "gen_ai.usage.cache_read.input_tokens": e.cached_input_tokens,
                 "gen_ai.usage.cache_creation.input_tokens": e.cache_write_tokens,
                 P + "usage.reported": e.reported, P + "cost_usd": e.cost_usd,
                 P + "context_tokens": e.context_tokens}
        if self.turn is not None and not e.source:  # an MCP server's sampling is no chat of the turn's
            self.turn.span.set_attributes(self._attrs(attrs))
            if self.turn.chat is not None:
                self.turn.chat.span.set_attributes(self._attrs(attrs))
                self._end_chat(self.turn, e)
        chat = {"gen_ai.operation.name": "chat"}
        if e.source:
            chat[P + "source"] = e.source
        self.m.token_usage.record(e.input_tokens, self._metric_attrs(**chat, **{"gen_ai.token.type": "input"}))
        self.m.token_usage.record(e.output_tokens, self._metric_attrs(**chat, **{"gen_ai.token.type": "output"}))
        for kind, n in (("input", e.input_tokens), ("output", e.output_tokens), ("cached_input", e.cached_input_tokens),
                        ("cache_write", e.cache_write_tokens)):
            self.m.tokens.add(n, self._metric_attrs(**{P + "token.type": kind}))
        if e.cost_usd is not None:
            self.m.cost.add(e.cost_usd, self._metric_attrs())
        if e.job_cost_usd is not None:
            self.job_cost = e.job_cost_usd

    def _tool_attrs(self, tool: str, call_id: str) -> dict[str, Any]:
        return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.type": "function"}

    def _tool_metric(self, tool: str) -> dict[str, Any]:
        return self._metric_attrs(**{"gen_ai.tool.name": tool if _METRIC_NAME.match(tool) else "other"})

    def _tool_called(self, e: ev.ToolCalled) -> None:
        parent = self.turn.span if self.turn is not None else (self.session or self.run)
        attrs = self._tool_attrs(e.tool, e.call_id)
        if self.content:
            attrs["gen_ai.tool.call.arguments"] = e.arguments
        span = self._start(f"execute_tool {e.tool}", parent, e.ts, attrs)
        if self.turn is not None:
            self.turn.tools[e.call_id] = span
        else:
            span.end(end_time=ns(e.ts))
        self.counts["tool_calls"] += 1
        self.m.tool_calls.add(1, self._tool_metric(e.tool))

    def _tool_span(self, call_id: str, tool: str, ts: datetime) -> Span:
        """The call's open span (taken), or one made now for a call this process did not see start."""
        if self.turn is not None and call_id in self.turn.tools:
            return self.turn.tools.pop(call_id)
        parent = self.turn.span if self.turn is not None else (self.session or self.run)
        return self._start(f"execute_tool {tool}", parent, ts, self._tool_attrs(tool, call_id))

    def _tool_result(self, e: ev.ToolResult) -> None:
        span = self._tool_span(e.call_id, e.tool, e.ts)
        attrs: dict[str, Any] = {P + "tool.ok": e.ok, P + "tool.duration_ms": e.duration_ms}
        if self.content:
            attrs["gen_ai.tool.call.result"] = e.content
        span.set_attributes(self._attrs(attrs))
        if not e.ok:
            span.set_attributes({"error.type": "tool_error"})
            span.set_status(Status(StatusCode.ERROR))
            self.counts["tool_errors"] += 1
            self.m.tool_errors.add(1, self._tool_metric(e.tool))
        span.end(end_time=ns(e.ts))

    def _tool_denied(self, e: ev.ToolDenied) -> None:
        span = self._tool_span(e.call_id, e.tool, e.ts)
        attrs: dict[str, Any] = {P + "tool.denied": True, P + "policy": e.policy, "error.type": "denied"}
        if self.content:
            attrs[P + "denial.reason"] = e.reason
        span.set_attributes(self._attrs(attrs))
        span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=ns(e.ts))
        self.counts["denials"] += 1
        self.m.denials.add(1, self._tool_metric(e.tool))

    def _needs_operator(self, e: ev.NeedsOperator) -> None:
        self.counts["needs_you"] += 1
        self.m.needs_you.add(1, self._metric_attrs(**{P + "need": e.reason}))
        if self.run is not None:
            attrs: dict[str, Any] = {P + "need": e.reason, P + "paused": e.paused}
            if self.content:
                attrs[P + "message"] = e.message
            self.run.add_event("needs_operator", self._attrs(attrs), timestamp=ns(e.ts))

    def _needs_cleared(self, e: ev.NeedsOperatorCleared) -> None:
        if self.run is not None:
            self.run.add_event("needs_operator_cleared", self._attrs({P + "need": e.reason, P + "by": e.by}),
                               timestamp=ns(e.ts))

    def _error(self, e: ev.ErrorEvent) -> None:
        if self.run is not None:
            attrs: dict[str, Any] = {P + "where": e.where, P + "recoverable": e.recoverable}
            if self.content:
                attrs[P + "message"] = e.message
            self.run.add_event("error", self._attrs(attrs), timestamp=ns(e.ts))

    def _run_ended(self, e: ev.RunEnded) -> None:
        self._end_session(e.ts)
        self.end_run(e.ts, e)

    def end_run(self, ts: datetime | None, e: ev.RunEnded | None = None) -> None:
        """The run span's end: at ``run_ended``, or when the process closes without one (its time then: now)."""
        run, self.run = self.run, None
        self.finished = True
        if run is None:
            return
        if ts is None:
            self._end_session_now()
        attrs: dict[str, Any] = {P + "cost_usd": self.job_cost, **{P + k: v for k, v in self.counts.items()}}
        if e is not None:
            attrs.update({P + "outcome": e.outcome or "", P + "end_reason": e.reason, P + "sessions": e.sessions})
            self.m.runs.add(1, self._metric_attrs(**{P + "outcome": e.outcome or "unknown"}))
            if e.outcome == "failed":
                run.set_status(Status(StatusCode.ERROR))
                attrs["error.type"] = "failed"
        run.set_attributes(self._attrs(attrs))
        run.end(end_time=ns(ts) if ts is not None else None)
        self.run = None
        self.root_ended = self.parent is None

    def _end_session_now(self) -> None:
        if self.turn is not None:
            self._end_turn()
        if self.session is not None:
            self.session.end()
            self.session = None


_HANDLERS: dict[type[ev.EventBase], Any] = {
    ev.SessionStarted: TraceFold._session_started,
    ev.SessionEnded: TraceFold._session_ended,
    ev.TurnStarted: TraceFold._turn_started,
    ev.ModelRetry: TraceFold._model_retry,
    ev.AssistantMessage: TraceFold._assistant_message,
    ev.TokenUsage: TraceFold._token_usage,
    ev.ToolCalled: TraceFold._tool_called,
    ev.ToolResult: TraceFold._tool_result,
    ev.ToolDenied: TraceFold._tool_denied,
    ev.NeedsOperator: TraceFold._needs_operator,
    ev.NeedsOperatorCleared: TraceFold._needs_cleared,
    ev.ErrorEvent: TraceFold._error,
    ev.RunEnded: TraceFold._run_ended,
}
