"""Fixtures for the console's tests: supervisors on sample jobs, a gate to freeze a run, a Pilot driver."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from console.engine.clock import FakeClock
from console.engine.job import JobPaths
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedProvider
from console.tui.app import ConsoleApp
from tests.conftest import run_settings

# Elapsed time and clock times in the snapshots must not depend on when or where the tests run.
FROZEN_NOW = datetime(2026, 1, 15, 14, 12, 34, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


# A run in this process (the engine on a thread, at speed 0) holds the GIL for Python's switch interval (5 ms) at a
# time; Textual's loop, which gives it up at every await, then waits up to that long to get it back at each one,
# and on a loaded machine a pilot's wait for the widgets passed its fixed 30 s (WaitForScreenTimeout). A shorter
# interval lets the loop back in sooner; what a test checks does not change, only how the two threads take turns.
SWITCH_INTERVAL = 0.0005


@contextlib.contextmanager
def loop_gets_the_gil() -> Iterator[None]:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


@pytest.fixture(autouse=True)
def _loop_gets_the_gil() -> Iterator[None]:
    with loop_gets_the_gil():
        yield


GATE_CEILING = 150.0  # real seconds a gate may stay shut with no command: far past any test's own waits
GATED: list[GatedProvider] = []


@pytest.fixture(autouse=True)
def _no_gate_held_too_long() -> Iterator[None]:
    GATED.clear()
    yield
    stuck = [g for g in GATED if g.held_too_long]
    GATED.clear()
    assert not stuck, "a gated model waited past its ceiling: the console left its run without stopping it"


class GatedProvider(ScriptedProvider):
    """The scripted model, holding still before turn ``gate_at`` until released or a command arrives.

    Any operator command (the channel's wake flag) opens the gate, as a streaming model would let the
    engine look at its commands between chunks.

    A console frozen at a known turn renders the same screen every time: that is what snapshots need.
    """

    def __init__(self, *args: Any, gate_at: int | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.gate_at = gate_at
        self.gate = threading.Event()
        self.supervisor: Supervisor | None = None
        self.waiting = threading.Event()
        self.held_too_long = False
        GATED.append(self)

    def stream(self, request):  # type: ignore[override]
        if self.gate_at is not None and self.turns + 1 >= self.gate_at:
            self.waiting.set()
            held = time.monotonic()
            while not self.gate.wait(0.02):
                op = self.supervisor.operator if self.supervisor is not None else None
                if op is not None and (op.stop_requested or op.channel.wake.is_set()):
                    break
                if time.monotonic() - held > GATE_CEILING:
                    # Nothing opened the gate (the console closed without stopping its run?): the test fails
                    # (see _no_gate_held_too_long) instead of hanging the suite on the engine thread.
                    self.held_too_long = True
                    break
            self.waiting.clear()
        yield from super().stream(request)


def make_supervisor(paths: JobPaths, *, gate_at: int | None = None, **settings: Any) -> Supervisor:
    clock = FakeClock(step=0.001)
    provider = GatedProvider(clock=clock, gate_at=gate_at)
    sup = Supervisor(paths, run_settings(**settings), provider, clock=clock)
    provider.supervisor = sup
    return sup


def run_app(supervisor: Supervisor, **kw: Any) -> ConsoleApp:
    """The console over a run in this process (the harness: tests/tui/inprocess.py)."""
    from tests.tui.inprocess import in_process_app

    kw.setdefault("watch", False)
    kw.setdefault("now", lambda: FROZEN_NOW)
    kw.setdefault("animations", False)
    kw.setdefault("keymap", {})
    kw.setdefault("dialog_delay", 0)  # dialogs take keys at once (their first moment is tested apart)
    return in_process_app(supervisor, job_title=supervisor.paths.root.name, **kw)


def attach_app(paths: JobPaths, **kw: Any) -> ConsoleApp:
    kw.setdefault("watch", False)
    kw.setdefault("now", lambda: FROZEN_NOW)
    kw.setdefault("animations", False)
    kw.setdefault("keymap", {})
    kw.setdefault("dialog_delay", 0)
    return ConsoleApp.for_attach(paths, job_title=paths.root.name, **kw)


async def wait_for(pilot: Any, predicate: Callable[[], bool], timeout: float = 60.0, what: str = "") -> None:
    # A ceiling, not a pace: the wait ends as soon as the predicate holds. 15 s was not enough for a whole run
    # of the quickstart job on a 2-core machine shared by several test sessions.
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        # Not pilot.pause(): it waits for every widget's queue, and widgets removed meanwhile never answer.
        await asyncio.sleep(0.02)


def record_notices(app: Any) -> list[tuple[str, str]]:
    """Every notification ``app`` raises from now on, as (title, message), kept. The app's own list drops one
    once its few seconds are up, so a wait that looks there can miss it on a loaded machine (the loop busy for
    those seconds): wait on this list instead."""
    seen: list[tuple[str, str]] = []
    real = app.notify

    def notify(message: Any, *, title: str = "", **kw: Any) -> None:
        seen.append((title, str(message)))
        real(message, title=title, **kw)

    app.notify = notify  # screens and widgets notify through their app: all of them come here
    return seen


async def drained(app: Any, ceiling: float = 120.0) -> None:
    """Every message queued so far to the app and its screen's widgets is handled: what pilot.pause() waits for,
    without its fixed 30 s limit (a loaded machine's whole-run backlog took longer: WaitForScreenTimeout) and without
    waiting on a widget removed meanwhile, which never answers. Each round asks every node still there to answer
    after its queue; a node that has not answered within a second is asked again if it is still there.

    Seen twice under heavy load with pytest -n 2 (never in a serial run): a child of the plan pane's Markdown
    (#plan-md) never handled its messages again, and the app's shutdown then waited on it too. The plan pane reloads
    in an exclusive worker, which cancels a reload in the middle of Markdown.update(); that is the suspect."""
    deadline = time.monotonic() + ceiling
    while True:
        pending: dict[int, Any] = {}
        done = asyncio.Event()

        def answered(key: int, pending: dict[int, Any] = pending, done: asyncio.Event = done) -> None:
            pending.pop(key, None)
            if not pending:
                done.set()

        for node in [app, *app.screen.walk_children(with_self=True)]:
            if node.call_later(answered, id(node)):
                pending[id(node)] = node
        if not pending:
            return
        try:
            await asyncio.wait_for(done.wait(), timeout=1.0)
            return
        except TimeoutError:
            if time.monotonic() > deadline:
                stuck = ", ".join(sorted({repr(n) for n in pending.values()}))[:2000]
                raise AssertionError(f"these did not handle their messages in {ceiling:g} s: {stuck}") from None


async def pause(pilot: Any, delay: float | None = None) -> None:
    """pilot.pause(delay), waiting with :func:`drained`."""
    if delay is not None:
        await asyncio.sleep(delay)
    await drained(pilot.app)


async def settle(pilot: Any, app: ConsoleApp) -> None:
    """Everything queued is drained and drawn."""
    await wait_for(pilot, lambda: app.bridge.pending == 0, what="the bridge to drain")
    await pause(pilot, 0.05)
    app.run_screen.drain_events(everything=True)
    await pause(pilot, 0.15)  # throttled renders and repaints (at most every 0.1 s) catch up
    from console.tui.widgets.lines import ItemView

    for view in app.main.query(ItemView):
        if view.region.height:
            view.flush()
    await pause(pilot)
    await pause(pilot)
    await pilot.wait_for_scheduled_animations()
    await pause(pilot)


def drive(app: ConsoleApp, body: Callable[[Any], Awaitable[None]], size: tuple[int, int] = (120, 40)) -> None:
    async def main() -> None:
        async with app.run_test(size=size, notifications=True) as pilot:
            await body(pilot)

    with loop_gets_the_gil():  # also for the tests elsewhere that drive a console (tests/integration)
        asyncio.run(main())


def events_of(app: ConsoleApp, kind: type) -> list[Any]:
    from console.engine import events as ev

    return [e for e in ev.read_events(app.run_screen.paths.events) if isinstance(e, kind)]
