"""Runs a compatibility scenario with one provider: the scripted model, or an SDK adapter on the strict loopback.

Every provider gets the same job folder, the same settings (job.toml through the operator's settings path, then
the scenario's overrides, as ``agent-console run`` does), a fresh FakeClock like the ``clock`` fixture's (moved
on by ``advance_seconds_per_turn`` before each request, the same way for every provider), and reports the same
usage: the loopback answers each request with the prompt size the scripted provider would
report for it (``estimate_request``), so context pressure (masking, wind-down, restart) moves alike in all three
runs. Text and tool arguments are streamed in pieces, as a real API does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.engine.clock import FakeClock
from console.engine.context.tokens import estimate_request, estimate_text
from console.engine.job import JobPaths
from console.engine.job_config import load_job_config
from console.engine.messages import ModelRequest
from console.engine.model import Provider, StreamEvent
from console.engine.supervisor import RunResult, Supervisor
from console.providers.anthropic_provider import AnthropicProvider
from console.providers.openai_provider import OpenAIProvider
from console.providers.scripted import ScriptedCall, ScriptedProvider, ScriptedTurn
from console.settings import load_settings, resolve_run_settings
from tests.wire.loopback import CannedToolCall, CannedUsage, HttpError, Loopback, Recorded, Reply

PROVIDERS = ("scripted", "openai", "anthropic")
MODELS = {"scripted": "scripted-agent", "openai": "gpt-test", "anthropic": "claude-test"}
# The events whose (type, tool, ok) sequence must be the same for every provider.
COMPARED = ("session_started", "tool_called", "tool_result", "tool_denied", "feedback", "completion_blocked",
            "completion_bypassed", "budget_exhausted", "job_completed", "context_masked")
# Files whose text holds wall-clock times (workspace_summary.md lists modification times): compared by existence.
VOLATILE_FILES = frozenset({"workspace_summary.md"})
DEFAULT_INSTRUCTIONS = "# Compatibility job\n\nDo the tasks with the tools.\n"


# -- what a scenario is made of ---------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One tool call of a model turn. ``args`` as a string is sent verbatim (malformed JSON on purpose)."""

    tool: str
    args: dict[str, Any] | str = field(default_factory=dict)

    @property
    def arguments(self) -> str:
        return self.args if isinstance(self.args, str) else json.dumps(self.args)


@dataclass(frozen=True)
class Turn:
    text: str = ""
    calls: tuple[Call, ...] = ()


def turn(text: str = "", *calls: Call) -> Turn:
    return Turn(text, calls)


@dataclass(frozen=True)
class Ev:
    """An expected event; ``tool`` / ``ok`` left None match anything."""

    type: str
    tool: str | None = None
    ok: bool | None = None

    def matches(self, event: dict[str, Any]) -> bool:
        return (event.get("type") == self.type and (self.tool is None or event.get("tool") == self.tool)
                and (self.ok is None or event.get("ok") == self.ok))


@dataclass(frozen=True)
class Scenario:
    name: str
    turns: Sequence[Turn]
    # The job folder: instructions.md, an optional job.toml, any other files (path -> text).
    instructions: str = DEFAULT_INSTRUCTIONS
    job_toml: str | None = None
    files: Mapping[str, str] = field(default_factory=dict)
    # RunSettings overrides, applied after job.toml like command-line flags (context_window, auto_restart...).
    settings: Mapping[str, Any] = field(default_factory=dict)
    # Seconds the run's FakeClock moves on before each model request (a deadline that passes), for every provider:
    # one figure for every request, or one per request (the last repeats).
    advance_seconds_per_turn: float | tuple[float, ...] = 0.0
    # Expectations, checked for every provider.
    expect: Sequence[Ev] = ()  # appear in this order (other events may come between)
    counts: Mapping[str, int] = field(default_factory=dict)  # at least this many events of each type
    absent: Sequence[str] = ()  # event types that must not occur
    expect_files: Mapping[str, str | None] = field(default_factory=dict)  # text it contains; None: no such file
    reason: str | None = "error"  # how the run ends (RunResult.reason); "error" = the turns ran out
    # The operator's answers to the run's needs (needs_operator events), in order; past them, "stop". A run that
    # asks is never left waiting: the suite ends as an operator who stops it would.
    answers: Sequence[str] = ()
    check: Callable[[Outcome], None] | None = None  # anything else

    def __str__(self) -> str:
        return self.name


# -- what a run leaves behind -----------------------------------------------------------------------


@dataclass
class Outcome:
    provider: str
    result: RunResult
    events: list[dict[str, Any]]
    files: dict[str, str]  # the job folder without .console/
    requests: list[Recorded]  # what went over the wire (none for the scripted provider)
    prompts: list[ModelRequest]  # what the engine asked the provider to send, one per request (every provider)

    def of(self, *types: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") in types]

    @property
    def stable_files(self) -> dict[str, str | None]:
        return {k: None if k in VOLATILE_FILES else v for k, v in self.files.items()}

    @property
    def trace(self) -> list[tuple[str, str | None, bool | None]]:
        return [(e["type"], e.get("tool"), e.get("ok")) for e in self.of(*COMPARED)]


class WireRejection(AssertionError):
    """The strict loopback refused a request our adapter sent: a real API would have refused it too."""


# -- running ---------------------------------------------------------------------------------------


def make_job(root: Path, scenario: Scenario) -> JobPaths:
    root.mkdir(parents=True)
    (root / "instructions.md").write_text(scenario.instructions, encoding="utf-8")
    if scenario.job_toml is not None:
        (root / "job.toml").write_text(scenario.job_toml, encoding="utf-8")
    for rel, text in scenario.files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return JobPaths(root)


# Faults to serve before a turn's reply: turn index -> makers of canned responses, each given the turn's reply
# (a cut or stalled stream sends part of it first).
Faults = Mapping[int, Sequence[Callable[[Reply], Any]]]


def run(scenario: Scenario, provider: str, root: Path, faults: Faults | None = None,
        dialect: str = "openai", **settings: Any) -> Outcome:
    paths = make_job(root, scenario)
    clock = FakeClock(step=0.001)  # what the `clock` fixture gives, one per run: runs never share time
    run_settings = resolve_run_settings(load_settings(), load_job_config(paths), provider=provider,
                                        model=MODELS[provider], speed=0.0, **{**scenario.settings, **settings})
    requests: list[Recorded] = []
    if provider == "scripted":
        model = ScriptedProvider(clock=clock, script=[scripted_turn(t) for t in scenario.turns])
        metered = Metered(model, clock, scenario.advance_seconds_per_turn)
        result = answering(Supervisor(paths, run_settings, metered, clock=clock), scenario.answers).run()
    else:
        with Loopback(openai_dialect=dialect) as server:  # type: ignore[arg-type]
            adapter: Provider
            if provider == "openai":
                # A Mistral template serves a Mistral-family model, whose name says so (the adapter alternates the
                # turns from the first request; tests/wire/test_empty_replies.py covers a name that does not say).
                name = "devstral-compat" if dialect == "mistral_template" else MODELS[provider]
                adapter = OpenAIProvider(name, api_key="sk-compat", base_url=server.openai_url,
                                         max_retries=0, timeout=20)
            else:
                adapter = AnthropicProvider(MODELS[provider], api_key="sk-compat", base_url=server.base_url,
                                            max_retries=0, timeout=20)
            metered = Metered(adapter, clock, scenario.advance_seconds_per_turn)
            for i, t in enumerate(scenario.turns):
                canned = reply(t, i, provider, metered)
                server.push(*(make(canned) for make in (faults or {}).get(i, ())), canned)
            # The script's end is a request the server refuses (a 400 is never retried), as the scripted
            # replay's end is an error: the three providers end the same way.
            server.push(HttpError(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                                    "message": "the scenario's script has ended"}}))
            result = answering(Supervisor(paths, run_settings, metered, clock=clock, seed=7), scenario.answers).run()
            requests = list(server.requests)
        if rejected := [r for r in requests if r.rejected is not None]:
            first = rejected[0]
            raise WireRejection(f"{provider}: request {requests.index(first) + 1} of {len(requests)} refused by the "
                                f"strict loopback: {first.rejected}\n{describe(first.body)}")
    return Outcome(provider, result, read_events(paths), job_files(paths), requests, metered.prompts)


def answering(sup: Supervisor, answers: Sequence[str] = ()) -> Supervisor:
    """``sup`` with an operator who answers each ``needs_operator`` with the next of ``answers`` (then "stop"), through
    the control channel as the console or the inbox would."""
    left = list(answers)

    def answer(event: Any) -> None:
        if getattr(event, "type", "") == "needs_operator":
            sup.command(left.pop(0) if left else "stop", source="cli")

    sup.subscribe(answer)
    return sup


def describe(body: dict[str, Any]) -> str:
    """The refused body in brief: its top-level fields, then each message's role and content shape."""
    head = {k: (v if len(json.dumps(v)) < 200 else f"<{len(v)} items>" if isinstance(v, list) else "...")
            for k, v in body.items() if k != "messages"}
    lines = [f"body: {json.dumps(head)}"]
    for i, m in enumerate(body.get("messages") or []):
        content = m.get("content")
        shape = ([b.get("type") for b in content] if isinstance(content, list) else type(content).__name__)
        extra = f" tool_calls={[c.get('id') for c in m['tool_calls']]}" if m.get("tool_calls") else ""
        extra += f" tool_call_id={m['tool_call_id']}" if m.get("tool_call_id") else ""
        lines.append(f"  messages.{i}: {m.get('role')} {shape}{extra}")
    return "\n".join(lines)


def read_events(paths: JobPaths) -> list[dict[str, Any]]:
    # Raw JSON, not the engine's models: the suite reads the log as an operator's jq would.
    return [json.loads(line) for line in paths.events.read_text(encoding="utf-8").splitlines() if line.strip()]


def job_files(paths: JobPaths) -> dict[str, str]:
    out = {}
    for p in sorted(paths.root.rglob("*")):
        rel = p.relative_to(paths.root)
        if p.is_file() and rel.parts[0] != ".console":
            out[rel.as_posix()] = p.read_text(encoding="utf-8", errors="replace")
    return out


# -- the same turn for each provider -----------------------------------------------------------------


def scripted_turn(t: Turn) -> ScriptedTurn:
    return ScriptedTurn(text=t.text, calls=[ScriptedCall(name=c.tool, arguments=c.args) for c in t.calls])


class Metered:
    """The provider, untouched, behind the same wrapper for all three runs: it keeps each request it is asked to
    send, moves the run's clock on by ``advance`` seconds first (time the turn takes), and notes the prompt's size
    for the loopback to report as its usage (what the scripted provider reports for the same request)."""

    def __init__(self, inner: Provider, clock: FakeClock, advance: float | tuple[float, ...] = 0.0) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.clock = clock
        self.advance = advance
        self.prompt_tokens = 0
        self.prompts: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        self.prompts.append(request)
        steps = self.advance if isinstance(self.advance, tuple) else (self.advance,)
        if step := steps[min(len(self.prompts), len(steps)) - 1]:
            self.clock.advance(step)
        self.prompt_tokens = estimate_request(request)
        return self.inner.stream(request)


def reply(t: Turn, index: int, provider: str, meter: Metered) -> Reply:
    # Output tokens as the scripted provider counts them; input tokens asked of the meter when the reply is sent.
    output = estimate_text(t.text) + sum(estimate_text(c.tool) + estimate_text(c.arguments) for c in t.calls)
    prefix = "call" if provider == "openai" else "toolu"
    calls = [CannedToolCall(f"{prefix}_{index:03d}_{k}", c.tool, pieces(c.arguments)) for k, c in enumerate(t.calls)]

    def usage(body: dict[str, Any]) -> CannedUsage:
        return CannedUsage(input_tokens=meter.prompt_tokens, output_tokens=output)

    return Reply(text=text_pieces(t.text), tool_calls=calls, usage=usage)


def text_pieces(text: str, size: int = 3) -> list[str]:
    """Three words a delta, like the scripted provider streams."""
    words = text.split(" ") if text else []
    return [" ".join(words[i:i + size]) + ("" if i + size >= len(words) else " ") for i in range(0, len(words), size)]


def pieces(arguments: str, n: int = 3) -> list[str]:
    """Tool arguments cut in ``n`` deltas: the adapters must reassemble them."""
    step = max(1, -(-len(arguments) // n))
    return [arguments[i:i + step] for i in range(0, len(arguments), step)] or [""]
