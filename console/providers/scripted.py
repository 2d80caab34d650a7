"""The scripted provider: the offline demo model (deterministic, no AI), in two modes.

- agent mode (default): :class:`ScriptedAgent` decides each turn from the
  request, so any sample job runs end to end with no network and no key. On a
  job it has never seen it does what its fixed recipes can (copying action
  items, requirement statements, headings, first sentences, change lists) and
  says plainly what it could not do; its confidence reflects that.
- replay mode: exact scripted turns, for tests that need a precise sequence
  (invalid arguments, a rewind at a given moment, a model that stops early).

Either way it streams like a real model (text in small deltas) and reports
usage like one: input tokens of the whole prompt, output tokens, and cached
input tokens for the prefix shared with the previous request, as a provider
with prompt caching would.

``speed`` paces it; higher is faster: a turn pauses TURN_DELAY / speed seconds
and each streamed chunk CHUNK_DELAY / speed, so 1 (the default of a run) looks alive
(about 0.2 s a turn), 2 is twice as fast, 0.5 half as fast, and 0 is instant
(no pauses at all). What it decides never depends on ``speed`` or the clock.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from console.engine.clock import Clock, SystemClock
from console.engine.context.tokens import estimate_message, estimate_request, estimate_text, estimate_tools
from console.engine.messages import Message, ModelRequest, ToolCall
from console.engine.model import ProviderError, Stop, StreamEvent, TextDelta, ToolCallEvent, Usage
from console.providers.scripted_agent import ScriptedAgent
from console.providers.scripted_view import DEMO_LABEL

__all__ = ["CHUNK_DELAY", "DEMO_LABEL", "TURN_DELAY", "ScriptedCall", "ScriptedProvider", "ScriptedTurn",
           "load_script"]

# Seconds per streamed chunk and per turn at speed 1.0: a demo turn takes ~0.2 s.
CHUNK_DELAY = 0.02
TURN_DELAY = 0.08


class ScriptedCall(BaseModel):
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class ScriptedTurn(BaseModel):
    """One exact model turn for replay mode. ``arguments`` may be a raw string to test bad JSON."""

    text: str = ""
    calls: list[ScriptedCall] = Field(default_factory=list)
    stop: str | None = None
    error: str | None = None


def load_script(path: Path) -> list[ScriptedTurn]:
    """A replay script: a JSON list of turns, or JSON Lines with one turn per line.

    Any problem (a named pipe, a huge or deeply nested file, the wrong shape) is a ValueError.
    """
    from console.engine.state import StateFileError, read_state_file

    try:
        data = read_state_file(path, max_bytes=64 * 2**20)
    except StateFileError as exc:
        raise ValueError(str(exc)) from None
    if data is None:
        raise ValueError("no such file")
    text = data.decode("utf-8")
    try:
        try:
            parsed = json.loads(text)
            items = parsed if isinstance(parsed, list) else [parsed]
        except json.JSONDecodeError:
            items = [json.loads(ln) for ln in text.splitlines() if ln.strip()]
        return [ScriptedTurn.model_validate(i) for i in items]
    except RecursionError:
        raise ValueError("nested too deeply") from None


class ScriptedProvider:
    name = "scripted"
    runs_inline = True  # in-process, never blocks on a socket: the loop reads it without a worker thread

    def __init__(
        self,
        model: str = "scripted-agent",
        *,
        speed: float = 0.0,
        clock: Clock | None = None,
        script: list[ScriptedTurn] | None = None,
        seed: int = 0,
    ) -> None:
        self.model = model
        self.speed = speed
        self.clock = clock or SystemClock()
        self.script = list(script) if script is not None else None
        self.agent = ScriptedAgent()
        self.rng = random.Random(seed)
        self.turns = 0
        self._prev: tuple[str, list[Message]] | None = None

    # -- the protocol ----------------------------------------------------------------
    def check_ready(self) -> None:
        """In-process: always there."""

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        self.turns += 1
        if self.script is not None:
            if not self.script:
                raise ProviderError("scripted: the replay script has no turn left")
            turn = self.script.pop(0)
            if turn.error:
                raise ProviderError(f"scripted: {turn.error}")
            text = turn.text
            calls = [ToolCall(id=self._id(request, i), name=c.name,
                              arguments=c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments))
                     for i, c in enumerate(turn.calls)]
            stop = turn.stop
        else:
            decision = self.agent.decide(request)
            text = decision.text
            calls = [ToolCall(id=self._id(request, i), name=c.name, arguments=json.dumps(c.args, ensure_ascii=False))
                     for i, c in enumerate(decision.calls)]
            stop = None
        self._pause(TURN_DELAY)
        for chunk in _chunks(text):
            self._pause(CHUNK_DELAY)
            yield TextDelta(chunk)
        for call in calls:
            yield ToolCallEvent(call)
        yield self._usage(request, text, calls)
        # A replayed turn stops with whatever its script says, unchecked (ScriptedTurn.stop is any str): a test may
        # replay a stop reason no real provider sends.
        yield Stop(stop or ("tool_use" if calls else "end_turn"))  # type: ignore[arg-type]

    # -- helpers -----------------------------------------------------------------------
    @staticmethod
    def _id(request: ModelRequest, index: int) -> str:
        """A call id that depends only on the request: a resumed run (a new process) asked the same
        question gets the same ids, and ids never repeat within a conversation (its first message and
        length differ from one turn to the next)."""
        first = request.messages[0].content if request.messages else ""
        last = request.messages[-1].content if request.messages else ""
        key = f"{len(request.messages)}\x00{first}\x00{last}\x00{index}".encode("utf-8", "replace")
        return "call_" + hashlib.sha256(key).hexdigest()[:12]

    def _pause(self, seconds: float) -> None:
        """Pace the stream: ``seconds`` at speed 1, shorter as speed grows; speed 0 (or less) never waits."""
        if self.speed > 0:
            self.clock.sleep(seconds / self.speed)

    def _usage(self, request: ModelRequest, text: str, calls: list[ToolCall]) -> Usage:
        total = estimate_request(request)
        cached = 0
        if self._prev is not None and self._prev[0] == request.system:
            # What a caching provider would serve from cache: the system prompt, the
            # tools, then every leading message identical to the previous request's.
            cached = estimate_text(request.system) + estimate_tools(request)
            for old, new in zip(self._prev[1], request.messages, strict=False):
                if old != new:
                    break
                cached += estimate_message(new)
        self._prev = (request.system, list(request.messages))
        out = estimate_text(text) + sum(estimate_text(c.name) + estimate_text(c.arguments) for c in calls)
        return Usage(input_tokens=total, output_tokens=out, cached_input_tokens=min(cached, total))


def _chunks(text: str, size: int = 3) -> Iterator[str]:
    words = text.split(" ")
    for i in range(0, len(words), size):
        piece = " ".join(words[i : i + size])
        yield piece if i + size >= len(words) else piece + " "
