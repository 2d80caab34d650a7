"""Fault injection: whole runs through the real SDKs against a strict loopback server that fails them.

Each run is a compatibility scenario (tests/compat) with faults served before some of its replies: a 429
with retry-after, a 500, Anthropic's 529 and its overloaded error inside a stream, a reset mid-stream, a
stream that ends without its end marker, a stall, keep-alive comments without progress, bytes that are not
UTF-8, a context-length error. Every run must end as the same scenario ends without faults (same tool calls,
same files), with one retry event per fault, no duplicated or half turn, and no traceback; an outage longer
than the retries allow ends resumably with a one-line reason.

The run's clock is a FakeClock: the retry waits cost no real time. The stall watchdog measures the real
socket, so the stall cases use a short idle limit.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.compat.runner import Outcome, run
from tests.compat.scenarios import SCENARIOS
from tests.wire.loopback import (
    AnthropicStreamError,
    Cut,
    EndEarly,
    KeepAlive,
    NotUtf8,
    OpenAIStreamError,
    Reply,
    StallAfter,
    anthropic_api_error,
    anthropic_overloaded,
    anthropic_prompt_too_long,
    anthropic_rate_limit,
    openai_context_length,
    openai_overloaded,
    openai_rate_limit,
    openai_server_error,
)

SCENARIO = next(s for s in SCENARIOS if s.name == "bad_arguments_then_corrected")  # 5 turns, malformed JSON too
FAST = {"idle_timeout": 0.5}  # a stall is noticed in half a second (real time)


def const(canned: Any) -> Callable[[Reply], Any]:
    return lambda _reply: canned


FAULTS: dict[str, dict[int, list[Callable[[Reply], Any]]]] = {
    "openai": {
        0: [const(openai_rate_limit(retry_after=30))],
        1: [const(openai_server_error(500)), lambda r: Cut(r, after=2)],
        2: [lambda r: EndEarly(r, after=3), const(openai_overloaded())],
        3: [lambda r: StallAfter(r, after=1, seconds=3), lambda r: KeepAlive(r, after=1, every=0.1, total=3)],
        4: [lambda r: NotUtf8(reply=Reply.of("déjà vu, en latin-1")), lambda r: OpenAIStreamError(after=1, reply=r)],
    },
    "anthropic": {
        0: [const(anthropic_rate_limit(retry_after=30)), const(anthropic_overloaded())],
        1: [lambda r: AnthropicStreamError(after=2, reply=r), lambda r: Cut(r, after=3)],
        2: [lambda r: EndEarly(r, after=3), const(anthropic_api_error())],
        3: [lambda r: StallAfter(r, after=1, seconds=3), lambda r: KeepAlive(r, after=1, every=0.1, total=3)],
        4: [lambda r: NotUtf8(reply=Reply.of("déjà vu, en latin-1"))],
    },
}


def faulted(provider: str, tmp_path: Path) -> tuple[Outcome, Outcome]:
    clean = run(SCENARIO, provider, tmp_path / "clean", **FAST)
    noisy = run(SCENARIO, provider, tmp_path / "faulted", FAULTS[provider], **FAST)
    return clean, noisy


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_every_fault_is_retried_and_the_run_ends_as_without_faults(provider: str, tmp_path: Path) -> None:
    clean, noisy = faulted(provider, tmp_path)
    assert noisy.result.reason == clean.result.reason == SCENARIO.reason, noisy.result.detail
    # The same work, once: tool calls, results and files are those of the run without faults.
    assert noisy.trace == clean.trace
    assert noisy.stable_files == clean.stable_files
    # One retry per fault, each naming its cause; the waits honoured the server's retry-after.
    retries = noisy.of("model_retry")
    served = sum(len(v) for v in FAULTS[provider].values())
    assert len(retries) == served, [r["cause"] for r in retries]
    assert retries[0]["cause"] == "rate limited" and retries[0]["delay_s"] >= 30
    causes = {r["cause"] for r in retries}
    assert "stream cut" in causes and any(c.startswith("stalled") for c in causes)
    # No duplicated and no half turn: one reply per turn number, in order, none from a failed attempt.
    replies = noisy.of("assistant_message")
    assert [e["turn"] for e in replies] == list(range(1, len(SCENARIO.turns) + 1))
    assert [e["text"] for e in replies] == [e["text"] for e in clean.of("assistant_message")]
    # Every request the engine sent, failed attempts included, passed the strict server's rules.
    assert not [r for r in noisy.requests if r.rejected]
    assert not any("internal error" in str(e.get("message", "")) for e in noisy.of("error"))


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_outage_longer_than_the_retries_ends_resumably(provider: str, tmp_path: Path) -> None:
    down = openai_server_error(503) if provider == "openai" else anthropic_overloaded()
    outage = {1: [const(down)] * 40}
    out = run(SCENARIO, provider, tmp_path / "down", outage, retry_total_wait=120, **FAST)
    assert out.result.reason.value == "model_unavailable"
    detail = out.result.detail
    assert "\n" not in detail and "could not be reached" in detail and "limit 120 s" in detail
    retries = out.of("model_retry")
    assert retries and retries[-1]["waited_s"] <= 120 and all(r["turn"] == 2 for r in retries)
    assert [e["turn"] for e in out.of("assistant_message")] == [1]  # turn 2 never half-recorded


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_context_length_error_is_a_full_context(provider: str, tmp_path: Path) -> None:
    too_long = openai_context_length() if provider == "openai" else anthropic_prompt_too_long()
    out = run(SCENARIO, provider, tmp_path / "full", {2: [const(too_long)]}, **FAST)
    assert out.result.reason.value == SCENARIO.reason, out.result.detail
    errors = [e for e in out.of("error") if "treated as full" in e.get("message", "")]
    assert len(errors) == 1 and errors[0]["recoverable"] is True
    # The engine made room (a restart: nothing here is old enough to mask) and asked again.
    assert len(out.of("session_started")) == 2
    assert not out.of("model_retry")
    assert [e["turn"] for e in out.of("assistant_message")] == list(range(1, len(SCENARIO.turns) + 1))
