"""The whole-turn retry policy and the abandonable model call, alone."""

from __future__ import annotations

import random
import threading
import time

import pytest

from console.engine.model import ProviderError, Stop, TextDelta
from console.engine.model_call import CallLimits, retrying, stream_abandonably


class Flaky:
    def __init__(self, failures: list[ProviderError]) -> None:
        self.failures = list(failures)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "reply"


def transient(after: float | None = None) -> ProviderError:
    return ProviderError("x", kind="transient", cause="rate limited", retry_after=after)


def test_backoff_grows_with_jitter_and_honours_retry_after_up_to_the_cap() -> None:
    slept: list[float] = []
    policy = retrying(CallLimits(retry_total_wait=10_000, retry_after_cap=60), slept.append, lambda s: None,
                      random.Random(5))
    fn = Flaky([transient(), transient(), transient(), transient(after=45), transient(after=3600)])
    assert policy(fn) == "reply" and fn.calls == 6
    assert 0 <= slept[0] <= 2 and 0 <= slept[1] <= 4 and 0 <= slept[2] <= 8  # full jitter, doubling
    assert slept[3] >= 45 and slept[4] == 60  # retry-after honoured, capped


def test_retries_stop_before_the_total_wait_is_passed_and_reraise_the_last_failure() -> None:
    slept: list[float] = []
    policy = retrying(CallLimits(retry_total_wait=100, retry_after_cap=300), slept.append, lambda s: None,
                      random.Random(1))
    fn = Flaky([transient(after=40)] * 10)
    with pytest.raises(ProviderError):
        policy(fn)
    assert sum(slept) <= 100 and slept == [40, 40]


def test_fatal_errors_are_not_retried() -> None:
    fn = Flaky([ProviderError("401", kind="fatal")])
    with pytest.raises(ProviderError):
        retrying(CallLimits(), lambda s: None, lambda s: None)(fn)
    assert fn.calls == 1


class Blocked:
    name, model = "blocked", "m"

    def __init__(self, first: bool) -> None:
        self.first = first
        self.release = threading.Event()

    def stream(self, request):
        if self.first:
            yield TextDelta("hi")
        self.release.wait(20)
        yield Stop("end_turn")


def test_a_silent_stream_fails_after_the_idle_limit_and_the_tick_keeps_running() -> None:
    provider = Blocked(first=True)
    ticks = []
    started = time.monotonic()
    with pytest.raises(ProviderError) as err:
        list(stream_abandonably(provider, None, CallLimits(idle_timeout=0.6), lambda: ticks.append(1)))
    provider.release.set()
    assert err.value.kind == "transient" and err.value.cause == "stalled 0.6 s"
    assert 0.5 < time.monotonic() - started < 3 and len(ticks) >= 3


def test_the_tick_abandons_a_call_at_once() -> None:
    provider = Blocked(first=False)

    class Stop_(Exception):
        pass

    def tick() -> None:
        raise Stop_

    started = time.monotonic()
    with pytest.raises(Stop_):
        list(stream_abandonably(provider, None, CallLimits(), tick))
    provider.release.set()
    assert time.monotonic() - started < 1
