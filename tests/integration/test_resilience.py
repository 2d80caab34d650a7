"""Resilient turns in the engine: transient failures retried for the whole turn, waits that a stop cuts
short, the half-streamed reply dropped, a full context from the server, stale commands from an earlier run.

The model here is the scripted agent behind a fault injector, on a FakeClock: a retry's wait costs no real
time, so the figures (attempts, delays, the total wait) are exact. The same faults through the real SDKs
against a loopback server are in tests/wire/test_faults.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from console.engine import events as ev
from console.engine.control import write_inbox
from console.engine.loop import ShutdownReason
from console.engine.model import IncompleteStream, ProviderError, Stop, StreamEvent, TextDelta, ToolCallEvent
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedProvider
from tests.conftest import answer_needs, run_settings


class Faulty(ScriptedProvider):
    """The scripted agent, with faults injected before given requests (1-based request numbers).

    A fault is an exception raised after ``text`` was streamed, or "cut": the stream ends without its Stop.
    """

    def __init__(self, faults: dict[int, object], **kw) -> None:
        super().__init__(**kw)
        self.faults = dict(faults)
        self.requests = 0

    def stream(self, request) -> Iterator[StreamEvent]:
        self.requests += 1
        fault = self.faults.pop(self.requests, None)
        if fault is None:
            yield from super().stream(request)
            return
        yield TextDelta("half a thought that must not survive")
        if fault == "cut":
            # A reply whose tool call arrived but whose end marker never did: never executed.
            yield ToolCallEvent(next(e for e in super().stream(request) if isinstance(e, ToolCallEvent)).call)
            return
        raise fault  # type: ignore[misc]


def rate_limited(after: float | None = None) -> ProviderError:
    return ProviderError("openai: rate limited (429)", kind="transient", cause="rate limited", retry_after=after)


def events(paths) -> list[ev.EventBase]:
    return list(ev.read_events(paths.events))


def test_transient_failures_are_retried_and_the_turn_is_whole(make_job, clock) -> None:
    paths = make_job("quickstart")
    faults = {3: rate_limited(after=7), 4: ProviderError("x: server error (503)", kind="transient",
                                                          cause="server error 503"), 9: "cut"}
    provider = Faulty(faults, clock=clock)
    sup = Supervisor(paths, run_settings(), provider, clock=clock, seed=1)
    result = sup.run()
    assert result.ok, result.detail
    evs = events(paths)
    retries = [e for e in evs if isinstance(e, ev.ModelRetry)]
    assert [(r.attempt, r.cause) for r in retries] == [(2, "rate limited"), (3, "server error 503"),
                                                       (2, "stream cut")]
    assert retries[0].delay_s >= 7  # the server's retry-after is honoured
    # The time since the turn's first failure, the coming wait included (the fake clock's steps aside).
    assert retries[1].waited_s == pytest.approx(retries[0].delay_s + retries[1].delay_s, abs=0.05)
    assert all(r.discarded_chars == len("half a thought that must not survive") for r in retries)
    # One reply per turn, none of them the half one; the retried turns kept their numbers.
    replies = [e for e in evs if isinstance(e, ev.AssistantMessage)]
    assert [r.turn for r in replies] == list(range(1, len(replies) + 1))
    assert not any("half a thought" in r.text for r in replies)
    # The clock moved by the waits (FakeClock): nothing slept for real.
    assert [r.turn for r in retries] == [3, 3, 7]


def test_a_cut_stream_is_never_executed(make_job, clock) -> None:
    paths = make_job("quickstart")
    provider = Faulty({2: "cut"}, clock=clock)
    sup = Supervisor(paths, run_settings(), provider, clock=clock, seed=1)
    assert sup.run().ok
    evs = events(paths)
    called = [e for e in evs if isinstance(e, ev.ToolCalled) and e.turn == 2]
    assert len(called) == len({e.call_id for e in called})  # turn 2's calls ran once, from the whole reply
    assert [e.cause for e in evs if isinstance(e, ev.ModelRetry)] == ["stream cut"]


def test_outage_longer_than_the_total_wait_asks_then_a_stop_ends_resumably_then_goes_on(make_job, clock) -> None:
    paths = make_job("quickstart")
    outage = {n: rate_limited() for n in range(4, 30)}
    provider = Faulty(outage, clock=clock)
    sup = Supervisor(paths, run_settings(retry_total_wait=60), provider, clock=clock, seed=3)
    asked = answer_needs(sup)  # the operator, asked, stops the run
    result = sup.run()
    assert result.reason is ShutdownReason.MODEL_UNAVAILABLE and not result.ok
    assert "could not be reached" in result.detail and "rate limited (429)" in result.detail
    assert [a.reason for a in asked] == ["provider_down"]
    retries = [e for e in events(paths) if isinstance(e, ev.ModelRetry)]
    assert retries and retries[-1].waited_s <= 60 and all(r.max_wait_s == 60 for r in retries)
    assert all(r.turn == 4 for r in retries)
    # The model is back: run --in-place finishes the job, from turn 4, with nothing done twice.
    back = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock).run()
    assert back.ok, back.detail
    replies = [e.turn for e in events(paths) if isinstance(e, ev.AssistantMessage)]
    assert replies == list(range(1, len(replies) + 1))


def test_a_fatal_error_is_not_retried(make_job, clock) -> None:
    paths = make_job("quickstart")
    provider = Faulty({2: ProviderError("openai: authentication failed (401) - check OPENAI_API_KEY")}, clock=clock)
    result = Supervisor(paths, run_settings(), provider, clock=clock).run()
    assert result.reason is ShutdownReason.ERROR and "OPENAI_API_KEY" in result.detail
    assert provider.requests == 2 and not [e for e in events(paths) if isinstance(e, ev.ModelRetry)]


def test_prompt_too_long_from_the_server_is_a_full_context(make_job, clock) -> None:
    # The server's count beats our estimate: the context is treated as full (mask or restart), the turn is
    # asked again, and the run goes on.
    paths = make_job("requirements-extraction")
    too_long = ProviderError("openai: request rejected (400): This model's maximum context length is 8192 tokens",
                             kind="context")
    provider = Faulty({12: too_long}, clock=clock)
    result = Supervisor(paths, run_settings(max_restarts=10), provider, clock=clock).run()
    assert result.ok, result.detail
    evs = events(paths)
    at = next(i for i, e in enumerate(evs) if isinstance(e, ev.ErrorEvent) and "treated as full" in e.message)
    after = [e.type for e in evs[at:at + 40]]
    assert "context_masked" in after or "session_ended" in after  # masked, or restarted


def test_prompt_too_long_every_time_ends_the_run_with_the_reason(make_job, clock) -> None:
    paths = make_job("quickstart")
    too_long = {n: ProviderError("anthropic: request rejected (400): prompt is too long: 9000 tokens > 8000",
                                 kind="context") for n in range(1, 40)}
    result = Supervisor(paths, run_settings(max_restarts=10), Faulty(too_long, clock=clock), clock=clock).run()
    assert result.reason is ShutdownReason.ERROR and "lower context_window" in result.detail


class Silent:
    """A provider whose server never answers (a stall before the first byte), on a worker thread."""

    name, model = "silent", "m"

    def __init__(self) -> None:
        self.release = threading.Event()

    def stream(self, request) -> Iterator[StreamEvent]:
        self.release.wait(30)
        yield Stop("end_turn")


def test_a_stall_is_a_transient_failure_after_the_idle_limit(make_job) -> None:
    paths = make_job("quickstart")
    provider = Silent()
    sup = Supervisor(paths, run_settings(idle_timeout=0.5, retry_total_wait=0), provider)
    answer_needs(sup)
    result = sup.run()
    provider.release.set()
    # Given up, not waited out: a server that answered (after 30 s) would have let the run go on, not end it so.
    assert result.reason is ShutdownReason.MODEL_UNAVAILABLE and "no model output for 0.5 s" in result.detail


def test_stop_during_a_stall_acts_within_a_second(make_job) -> None:
    paths = make_job("quickstart")
    provider = Silent()
    sup = Supervisor(paths, run_settings(), provider)
    asked = threading.Event()
    sup.subscribe(lambda e: asked.set() if isinstance(e, ev.TurnStarted) else None)
    stopped_at: list[float] = []

    def stop_when_asked() -> None:
        asked.wait(10)
        time.sleep(0.3)
        stopped_at.append(time.monotonic())
        sup.stop()

    threading.Thread(target=stop_when_asked, daemon=True).start()
    result = sup.run()
    ended = time.monotonic()
    provider.release.set()
    assert result.reason is ShutdownReason.USER_SHUTDOWN
    # The stop is seen at the call's next tick (every TICK = 0.2 s of real time, counted with an injected clock
    # in test_model_call); what this tells apart is a stop that waits for the server (30 s) from one that does
    # not, with room for a loaded machine's scheduler: a test must not pass only on a fast machine.
    assert ended - stopped_at[0] < 10


def test_stop_during_a_retry_wait_acts_at_once(make_job) -> None:
    # A real clock and a retry-after of an hour: the stop must cut the wait, not the hour.
    paths = make_job("quickstart")
    provider = Faulty({2: rate_limited(after=3600)})
    sup = Supervisor(paths, run_settings(retry_after_cap=3600, retry_total_wait=7200), provider, seed=1)
    waiting = threading.Event()
    sup.subscribe(lambda e: waiting.set() if isinstance(e, ev.ModelRetry) else None)

    def stop_while_waiting() -> None:
        waiting.wait(10)
        sup.stop()

    threading.Thread(target=stop_while_waiting, daemon=True).start()
    started = time.monotonic()
    result = sup.run()
    assert result.reason is ShutdownReason.USER_SHUTDOWN and time.monotonic() - started < 30  # not the hour
    retry = next(e for e in events(paths) if isinstance(e, ev.ModelRetry))
    assert retry.delay_s == 3600 and retry.cause == "rate limited"


def test_a_stop_left_for_an_ended_run_is_discarded_by_the_next(make_job, clock) -> None:
    paths = make_job("quickstart")
    # A stop sent to a run (it carries that run's id) that ended before reading it...
    write_inbox(paths, "stop", source="cli", run="0123456789ab")
    # ...and a checkpoint queued on purpose while no run was active.
    write_inbox(paths, "pause", source="cli")
    write_inbox(paths, "resume", source="cli")
    result = Supervisor(paths, run_settings(), ScriptedProvider(clock=clock), clock=clock).run()
    assert result.ok, result.detail  # the stale stop did not stop this run
    commands = [(e.command, e.status) for e in events(paths) if isinstance(e, ev.OperatorCommand)]
    assert ("stop", "discarded") in commands and ("stop", "applied") not in commands
    assert ("pause", "applied") in commands and ("resume", "applied") in commands
    assert not list(paths.inbox.iterdir())


def test_incomplete_stream_is_transient() -> None:
    exc = IncompleteStream("x: the stream ended without its end marker")
    assert exc.kind == "transient" and exc.cause == "stream cut"
