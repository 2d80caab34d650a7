"""Feedback providers (seed 002, "Feedback Providers"): soft guidance injected after tool calls.

Providers never block anything: each has a trigger (every N calls, every N seconds, once when a file
appears; OR'd) and a ``should_run`` filter. The loop runs them after each tool call (seed 002's flow: "tool
call completes" -> providers), and what they produce is rendered as ``<feedback>`` blocks that it places
after the turn's tool results (a message between the results of one reply would break the wire's pairing of
calls and results). All providers whose trigger fires run (not the first match),
and each keeps its own cadence. The runner's state (:class:`FeedbackState`) is plain, bounded data, so the
run can record it in its checkpoint and a resume continues the same cadences.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_serializer

# Defined with job.toml's checks (the feedback entries' bounds and severities), offered here too.
from console.engine.guardrails.bounds import RECENT_CALLS as RECENT_CALLS
from console.engine.guardrails.bounds import Severity as Severity
from console.engine.guardrails.budgets import Deadline
from console.engine.guardrails.policies import World
from console.engine.job_files import one_line

if TYPE_CHECKING:
    from console.engine.messages import ModelRequest


# Recent feedback kept for the last_feedback* queries (the full texts are in the event log): the state is
# recorded with every turn, so its size is paid on every turn (benchmarks/overhead.py).
FEEDBACK_HISTORY = 4
# What a stored record keeps of each text (the whole text is in the feedback event of the log).
STORED_CHARS = 500
MAX_PROVIDERS = 256
MAX_FEEDBACK_CHARS = 20_000  # a stored summary or observation; a provider's text beyond it is cut in the record
ARG_PREFIX_CHARS = 80
ERROR_CHARS = 200
# Arguments larger than this are hashed as they are, without parsing them to canonical JSON first.
MAX_CANONICAL_ARG_BYTES = 1 << 20


@dataclass(frozen=True)
class Observation:
    category: str
    description: str


def _tag_name(name: str) -> str:
    # The provider name goes inside an attribute: keep only characters that cannot close the quote or the tag
    # or break the line, so a name from job.toml can never change the block's shape.
    safe = "".join([ch if ch.isalnum() or ch in " _.:-" else "_" for ch in name[:64]])
    return safe or "feedback"


@dataclass(frozen=True, kw_only=True)
class Feedback:
    provider_name: str
    summary: str
    observations: tuple[Observation, ...] = ()
    suggestions: tuple[str, ...] = ()
    severity: Severity = "info"
    timestamp: datetime
    call_index: int
    prompt_name: str = "job"
    # For the operator, should this feedback lead to asking them (the stuck detector: the failing calls' errors);
    # never rendered to the agent, which has the results themselves. Not kept in the feedback history.
    evidence: tuple[str, ...] = ()

    def render(self) -> str:
        """The seed's XML-style block: the summary, then ``- observation`` lines, then ``-> suggestion`` lines,
        each group separated by a blank line. Only the tag's attribute is sanitized; the text is the agent's to
        read as is."""
        groups = [self.summary.strip("\n").rstrip()]
        if self.observations:
            groups.append("\n".join([f"- {o.description}" for o in self.observations]))
        if self.suggestions:
            groups.append("\n".join([f"-> {s}" for s in self.suggestions]))
        body = "\n\n".join([g for g in groups if g])
        return f"<feedback provider='{_tag_name(self.provider_name)}'>\n{body}\n</feedback>"


def render_feedback(items: Sequence[Feedback]) -> str:
    """Several blocks, joined by one blank line (seed: "separate <feedback> blocks, joined by blank lines")."""
    return join_blocks([item.render() for item in items])


def join_blocks(blocks: Sequence[str]) -> str:
    """Rendered blocks as render_feedback joins them."""
    return "\n\n".join(blocks)


@dataclass(frozen=True)
class FileCreatedTrigger:
    filename: str


@dataclass(frozen=True)
class FeedbackTrigger:
    """When a provider is considered; the conditions are OR'd. At least one must be set."""

    every_n_calls: int | None = None
    every_n_seconds: float | None = None
    on_file_created: FileCreatedTrigger | None = None

    def __post_init__(self) -> None:
        if self.every_n_calls is None and self.every_n_seconds is None and self.on_file_created is None:
            raise ValueError("a feedback trigger needs every_n_calls, every_n_seconds or on_file_created")
        if self.every_n_calls is not None and self.every_n_calls < 1:
            raise ValueError("every_n_calls must be at least 1")
        if self.every_n_seconds is not None and not self.every_n_seconds > 0:
            raise ValueError("every_n_seconds must be more than 0")

    def describe(self) -> str:
        parts = []
        if self.every_n_calls is not None:
            parts.append("after every call" if self.every_n_calls == 1 else f"every {self.every_n_calls} calls")
        if self.every_n_seconds is not None:
            parts.append(f"every {self.every_n_seconds:g}s")
        if self.on_file_created is not None:
            parts.append(f"once when {one_line(self.on_file_created.filename, 80)} appears")
        return " or ".join(parts)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


# json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr), its encoder made once (dumps
# makes one per call when given options: after every tool call).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
# The C encoder _CANONICAL.encode makes at each call, made once, for what json.loads gave: such a value cannot hold
# itself, so it is not checked for cycles (the markers), and ``encode``'s own Python layers are skipped (0.4 against
# 1.0 us a call, after every tool call). The same C function with the same options: the same text (a test).
_make_c = getattr(json.encoder, "c_make_encoder", None)
_PARSED: Callable[[Any, int], Any] | None = None if _make_c is None else _make_c(
    None, repr, json.encoder.encode_basestring, None, ":", ",", True, False, True)


def _canonical_arguments(arguments: str | Mapping[str, Any]) -> str:
    # {"a":1,"b":2} and {"b": 2, "a": 1} are the same call: compare calls on canonical JSON when it parses.
    try:
        if isinstance(arguments, str):
            if len(arguments) > MAX_CANONICAL_ARG_BYTES:
                return arguments
            arguments = json.loads(arguments)
            if _PARSED is not None:
                return "".join(_PARSED(arguments, 0))
        return _CANONICAL.encode(arguments)
    except (ValueError, TypeError, RecursionError):
        return arguments if isinstance(arguments, str) else repr(arguments)


class ToolCallSummary(BaseModel):
    """One finished tool call as the feedback providers see it: digests, not megabytes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(max_length=200)
    arguments: str = Field(default="", max_length=ARG_PREFIX_CHARS)  # a one-line prefix, for messages
    arguments_digest: str = Field(default="", max_length=64)
    ok: bool = True
    result_digest: str = Field(default="", max_length=64)
    error: str = Field(default="", max_length=ERROR_CHARS)  # the result's start when not ok
    turn: int = Field(default=0, ge=0)

    @classmethod
    def of(cls, name: str, arguments: str | Mapping[str, Any], ok: bool, result: str, turn: int = 0
           ) -> ToolCallSummary:
        canonical = _canonical_arguments(arguments)
        return cls(name=one_line(name, 200), arguments=one_line(canonical, ARG_PREFIX_CHARS),
                   arguments_digest=_digest(canonical), ok=ok, result_digest=_digest(result),
                   error="" if ok else one_line(result, ERROR_CHARS), turn=max(0, turn))

    def same_call(self, other: ToolCallSummary) -> bool:
        return self.name == other.name and self.arguments_digest == other.arguments_digest

    def same_outcome(self, other: ToolCallSummary) -> bool:
        """The same call with the same result."""
        return self.same_call(other) and self.ok == other.ok and self.result_digest == other.result_digest


class FeedbackRecord(BaseModel):
    """A delivered :class:`Feedback`, as stored in the run's state."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider_name: str = Field(max_length=200)
    summary: str = Field(max_length=MAX_FEEDBACK_CHARS)
    observations: tuple[tuple[str, str], ...] = Field(default=(), max_length=50)
    suggestions: tuple[str, ...] = Field(default=(), max_length=50)
    severity: Severity = "info"
    timestamp: datetime
    call_index: int = Field(ge=0)
    prompt_name: str = Field(default="job", max_length=200)

    @classmethod
    def of(cls, fb: Feedback) -> FeedbackRecord:
        cut = STORED_CHARS
        return cls(provider_name=fb.provider_name[:200], summary=fb.summary[:cut],
                   observations=tuple((o.category[:cut], o.description[:cut]) for o in fb.observations[:50]),
                   suggestions=tuple(s[:cut] for s in fb.suggestions[:50]), severity=fb.severity,
                   timestamp=fb.timestamp, call_index=max(0, fb.call_index), prompt_name=fb.prompt_name[:200])

    def to_feedback(self) -> Feedback:
        return Feedback(provider_name=self.provider_name, summary=self.summary,
                        observations=tuple([Observation(c, d) for c, d in self.observations]),
                        suggestions=self.suggestions, severity=self.severity, timestamp=self.timestamp,
                        call_index=self.call_index, prompt_name=self.prompt_name)


class FeedbackState(BaseModel):
    """The runner's recorded state: call count, recent calls, each provider's last feedback (its cadence),
    fired file triggers (by provider name: once per session) and a short history. Every part is bounded."""

    model_config = ConfigDict(extra="forbid")

    started_at: datetime | None = None  # when the runner first saw the run: the every_n_seconds origin
    tool_call_count: int = Field(default=0, ge=0, le=10**12)
    recent_calls: list[ToolCallSummary] = Field(default_factory=list, max_length=RECENT_CALLS)
    provider_last: dict[str, FeedbackRecord] = Field(default_factory=dict, max_length=MAX_PROVIDERS)
    fired_file_triggers: set[str] = Field(default_factory=set, max_length=MAX_PROVIDERS)
    # The session those triggers fired in (seed 002: "Fires exactly once per session"); a new session clears them
    # (session_started). None in a record written before they were per session: they belong to the session the
    # record was taken in, the one it resumes.
    fired_session: int | None = Field(default=None, ge=0)
    history: list[FeedbackRecord] = Field(default_factory=list, max_length=FEEDBACK_HISTORY)

    @field_serializer("fired_file_triggers")
    def _fired_sorted(self, fired: set[str]) -> list[str]:
        return sorted(fired)

    @property
    def last_feedback_call(self) -> int | None:
        return self.history[-1].call_index if self.history else None


class FeedbackContext:
    """What a provider may ask (the seed's queries), over the runner's state at this collect.

    ``session``: the run's session number (seed 004's sessions; 0 when not run by a session). ``prompt``: what
    the model was sent for the turn whose tool call just ran (the engine's ModelRequest: system prompt,
    protected layers, tools, conversation), None outside a run. The loop hands a function that builds it
    only if a provider asks, so providers that never look cost nothing."""

    def __init__(self, state: FeedbackState, *, now: datetime, world: World, deadline: Deadline | None = None,
                 turn: int = 0, turns_without_progress: int = 0, session: int = 0,
                 prompt: ModelRequest | Callable[[], ModelRequest] | None = None) -> None:
        self._state = state
        self.now = now
        self.world = world
        self.deadline = deadline
        self.turn = turn
        self.session = session
        self._prompt = prompt
        # Turns in a row without a completed todo, counted by the loop.
        self.turns_without_progress = turns_without_progress

    @property
    def prompt(self) -> ModelRequest | None:
        """The request the model was sent for this turn (built on first use, then kept)."""
        if callable(self._prompt):
            self._prompt = self._prompt()
        return self._prompt

    @property
    def tool_call_count(self) -> int:
        return self._state.tool_call_count

    def tool_calls_since_last_feedback(self) -> int:
        return self._state.tool_call_count - (self._state.last_feedback_call or 0)

    def tool_calls_since_last_feedback_for_provider(self, name: str) -> int:
        last = self._state.provider_last.get(name)
        return self._state.tool_call_count - (last.call_index if last else 0)

    def recent_tool_calls(self, n: int) -> tuple[ToolCallSummary, ...]:
        """The last ``n`` calls, oldest first (at most RECENT_CALLS are kept)."""
        return tuple(self._state.recent_calls[-n:]) if n > 0 else ()

    @property
    def last_feedback(self) -> Feedback | None:
        return self._state.history[-1].to_feedback() if self._state.history else None

    def last_feedback_for_provider(self, name: str) -> Feedback | None:
        last = self._state.provider_last.get(name)
        return last.to_feedback() if last else None

    def observed_by(self, name: str) -> list[str]:
        """The descriptions of the observations of provider ``name``'s feedback in the short history, then of its
        last feedback (which may be older than the history): what ``recent_feedback(provider=name)`` and
        ``last_feedback_for_provider(name)`` hold, in that order, read from the records without converting them."""
        st = self._state
        out = [d for r in st.history[-FEEDBACK_HISTORY:] if r.provider_name == name for _, d in r.observations]
        if (last := st.provider_last.get(name)) is not None:
            out.extend([d for _, d in last.observations])
        return out

    def recent_feedback(self, n: int = FEEDBACK_HISTORY, *, provider: str | None = None) -> tuple[Feedback, ...]:
        """The last ``n`` delivered feedback items of any provider, oldest first (at most FEEDBACK_HISTORY); with
        ``provider``, only that provider's among them (the others are not converted: asked after every call)."""
        if n <= 0:
            return ()
        return tuple([r.to_feedback() for r in self._state.history[-n:]
                      if provider is None or r.provider_name == provider])


class FeedbackProvider(Protocol):
    name: str

    def should_run(self, context: FeedbackContext) -> bool: ...

    def provide(self, context: FeedbackContext) -> Feedback: ...


@dataclass(frozen=True)
class FeedbackProviderConfig:
    provider: FeedbackProvider
    trigger: FeedbackTrigger


@dataclass
class _Due:
    config: FeedbackProviderConfig
    file_hit: bool = False
    feedback: Feedback | None = field(default=None)


def _error_text(exc: BaseException) -> str:
    return one_line(repr(exc), 300)


class FeedbackRunner:
    """Runs the configured providers after each tool call (the seed's ``collect_feedback``).

    A provider whose ``should_run``/``provide`` raises is skipped and its error is put in ``errors`` (reset by
    every ``collect``) for the loop to report: guidance is advisory, so a broken provider must not stop a run.
    Its cadence is unchanged, so it is tried again at the next collect."""

    def __init__(self, configs: Sequence[FeedbackProviderConfig]) -> None:
        names = [c.provider.name for c in configs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"feedback provider names must be unique; duplicated: {', '.join(dupes)}")
        if len(configs) > MAX_PROVIDERS:
            raise ValueError(f"at most {MAX_PROVIDERS} feedback providers")
        self.configs: tuple[FeedbackProviderConfig, ...] = tuple(configs)
        self.state = FeedbackState()
        self.errors: list[str] = []

    # -- recording -------------------------------------------------------------------------------------------
    def record_call(self, summary: ToolCallSummary, *, now: datetime | None = None) -> None:
        """Count a finished tool call (after each call). ``now``, if given, starts the seconds cadence."""
        st = self.state
        if st.started_at is None and now is not None:
            st.started_at = now
        st.tool_call_count += 1
        st.recent_calls.append(summary)
        if len(st.recent_calls) > RECENT_CALLS:
            del st.recent_calls[0]

    # -- collecting ------------------------------------------------------------------------------------------
    def _due(self, config: FeedbackProviderConfig, now: datetime, world: World) -> _Due | None:
        # The hot path: called for every provider after every tool call. Plain arithmetic; the world is asked only
        # while a file trigger is still pending.
        st = self.state
        trigger = config.trigger
        name = config.provider.name
        last = st.provider_last.get(name)
        due = False
        if trigger.every_n_calls is not None:
            due = st.tool_call_count - (last.call_index if last else 0) >= trigger.every_n_calls
        if not due and trigger.every_n_seconds is not None:
            origin = last.timestamp if last else st.started_at
            due = origin is not None and (now - origin).total_seconds() >= trigger.every_n_seconds
        file_hit = False
        if trigger.on_file_created is not None and name not in st.fired_file_triggers:
            file_hit = bool(world.file_exists(trigger.on_file_created.filename))
        return _Due(config, file_hit) if due or file_hit else None

    def collect(self, *, now: datetime, world: World, deadline: Deadline | None = None, turn: int = 0,
                turns_without_progress: int = 0, session: int = 0,
                prompt: ModelRequest | Callable[[], ModelRequest] | None = None
                ) -> list[tuple[FeedbackProviderConfig, Feedback]]:
        """The seed's flow: check every provider's trigger (its own cadence) and ``should_run``, then call
        ``provide`` for each, then store all the feedback and mark the file triggers that fired. All providers
        see the same state, so the order of the providers does not change what each one decides."""
        self.errors = []
        st = self.state
        if st.started_at is None:
            st.started_at = now
        context: FeedbackContext | None = None
        chosen: list[_Due] = []
        for config in self.configs:
            name = config.provider.name
            try:
                due = self._due(config, now, world)
                if due is None:
                    continue
                if context is None:
                    context = FeedbackContext(st, now=now, world=world, deadline=deadline, turn=turn,
                                              turns_without_progress=turns_without_progress, session=session,
                                              prompt=prompt)
                if config.provider.should_run(context):
                    chosen.append(due)
            except Exception as exc:
                self.errors.append(f"{name}: {_error_text(exc)}")
        delivered: list[_Due] = []
        for due in chosen:
            name = due.config.provider.name
            assert context is not None
            try:
                fb = due.config.provider.provide(context)
                if not isinstance(fb, Feedback):
                    raise TypeError(f"provide() returned {type(fb).__name__}, not a Feedback")
            except Exception as exc:
                self.errors.append(f"{name}: {_error_text(exc)}")
                continue
            # The runner is the authority on who, when and at which call: a provider cannot misstate them.
            due.feedback = replace(fb, provider_name=name, timestamp=now, call_index=st.tool_call_count)
            delivered.append(due)
        for due in delivered:
            assert due.feedback is not None
            name = due.config.provider.name
            record = FeedbackRecord.of(due.feedback)
            st.provider_last[name] = record
            st.history.append(record)
            if len(st.history) > FEEDBACK_HISTORY:
                del st.history[0]
            if due.file_hit:
                st.fired_file_triggers.add(name)
        return [(due.config, due.feedback) for due in delivered if due.feedback is not None]

    # -- state -----------------------------------------------------------------------------------------------
    def snapshot(self) -> FeedbackState:
        """The state itself, not a copy: the journal serializes a step's state at once, and a deep copy of the
        recent calls and history at every commit cost more than the rest of a turn (benchmarks/overhead.py)."""
        return self.state

    def restore(self, state: FeedbackState) -> None:
        """Take a recorded state. Cadences and fired file triggers of providers no longer configured (job.toml
        changed between runs) are dropped; the call count, recent calls and history are kept (they are facts)."""
        names = {c.provider.name for c in self.configs}
        copy = state.model_copy(deep=True)
        copy.provider_last = {n: r for n, r in copy.provider_last.items() if n in names}
        copy.fired_file_triggers = {n for n in copy.fired_file_triggers if n in names}
        self.state = copy

    def reset(self) -> None:
        self.state = FeedbackState()

    def session_started(self, session: int) -> bool:
        """A session starts: a new one (a context restart) may see each file trigger fire again, once (seed 002:
        "Fires exactly once per session"); a resumed one keeps what fired in it, so a kill never fires one twice.
        True when the state changed (it is to be recorded)."""
        st = self.state
        if st.fired_session == session:
            return False
        if st.fired_session is not None:
            st.fired_file_triggers.clear()
        st.fired_session = session
        return True

    def describe(self, now: datetime) -> list[tuple[str, str, str, str]]:
        """(name, kind, trigger, next) per provider, e.g. ("Deadline", "deadline", "every 30s", "at 12:31:05")."""
        st = self.state
        rows = []
        for config in self.configs:
            provider, trigger = config.provider, config.trigger
            name = provider.name
            last = st.provider_last.get(name)
            upcoming: list[str] = []
            if trigger.every_n_calls is not None:
                # An absolute call number, not "after N more calls": it stays the same until the provider fires,
                # so the run's status changes (and is recorded) only when something happened.
                due = (last.call_index if last else 0) + trigger.every_n_calls
                upcoming.append(f"at call {due}" if due > st.tool_call_count else "at the next check")
            if trigger.every_n_seconds is not None:
                origin = last.timestamp if last else st.started_at
                if origin is None:
                    upcoming.append(f"{trigger.every_n_seconds:g}s after the run starts")
                else:
                    at = origin.timestamp() + trigger.every_n_seconds
                    upcoming.append("at the next check" if at <= now.timestamp()
                                    else f"at {datetime.fromtimestamp(at, UTC):%H:%M:%S}")
            if trigger.on_file_created is not None:
                if name not in st.fired_file_triggers:
                    upcoming.append(f"when {one_line(trigger.on_file_created.filename, 80)} appears")
                elif not upcoming:
                    upcoming.append("fired (once per session)")
            kind = str(getattr(provider, "kind", type(provider).__name__))
            rows.append((name, kind, trigger.describe(), " or ".join(upcoming)))
        return rows
