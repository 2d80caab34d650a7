"""Following a run of another machine from the shared store (an attached console): the same job as
:func:`console.tui.follow.follow_log`, with the store's ``events`` table for the log and its lease for the lock.

History first, newest first for a long one (as the local attach does for a long log): the newest messages and
the last event of each state-bearing kind fill the panes, then the whole history is folded here and handed over.
Then live: a connection of its own LISTENs on the events channel and the store is read when the run's link says
it shipped events (a NOTIFY), or every :data:`SAFETY_LOOK` seconds should one be lost. The lease is read every
:data:`RUNNER_INTERVAL` (a row, not the events).

A store that cannot be reached is said (the controller's ``problem``, shown in the status line) and tried again
every :data:`RETRY` seconds; the view goes on from where it was once it is back. Runs on a worker thread.

:class:`StoreController` is the run's controller (keys through the store's command queue) and its source: the
RunScreen's follower hands it the following (``follow_events``), so the screen stays the one for every run.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from console.engine import events as ev
from console.engine.commands import AnyCommand, CommandError
from console.tui.bridge import EventBridge
from console.tui.follow import DRAW_FIRST, QUICK_KEEP, SEED_TYPES, Cancellable, Folded, split_history, worker_sleep

PAGE = 5000  # events read at a time
# A history longer than this (events) is shown newest first: its newest TAIL events are read and drawn before
# the whole of it is folded.
QUICK_EVENTS = 5000
TAIL = 3000
WAIT_STEP = 0.25  # the longest a wait for a NOTIFY lasts (closing never waits longer)
SAFETY_LOOK = 5.0  # seconds: the events are read at least this often, even without a NOTIFY
RUNNER_INTERVAL = 1.0  # how often the lease is read
RETRY = 1.0  # seconds between two tries of a store that cannot be reached
STALL = 3.0  # seconds a call may take before the store is said not to answer (it goes on waiting for it)
SEND_WAIT = 2.0  # seconds a key waits for the store to take its command before it says it has not yet
# The words for a connection that broke (the driver's own may quote the server's address; the next try's
# StoreError, which never shows a password, says more).
LOST = "the store's connection was lost"
HOST_SHOWN = 255  # characters of a row's host shown (a host name has at most 253)


class StoreController:
    """A run of another machine sharing the store: commands are rows of the store's queue, which the run's link
    delivers to its inbox there (what ``agent-console pause ID`` does from here); a lease stands in for the run
    lock. The follower (:mod:`console.tui.store_follow`) keeps :attr:`owner` and :attr:`problem` current, so the
    view never waits on the store to ask them."""

    attached = True
    local = startable = False  # its folder is on its machine: resumed there

    def __init__(self, url: str, key: str, host: str, run_id: str, source: str = "console",
                 screenshots: Path | None = None) -> None:
        """``screenshots``: where this console's screenshots of the run go (its folder is on the other machine)."""
        from console.engine.text import safe_text

        self.screenshots = screenshots
        self.url = url
        self.key = key
        # The machine whose folder (plan, files) it is, as it is shown: the store's row says it, and any machine
        # sharing the store writes rows (a host of escape sequences wrote the clipboard, retitled and cleared the
        # screen from the status line). It is only ever shown: the run is reached by its key.
        self.host = safe_text(host, one_line=True, limit=HOST_SHOWN)
        self.run_id = run_id
        self.source = source
        self.owner: str | None = None  # the current lease's owner ("host:pid:run"); None: no runner holds it
        self.problem: str | None = None  # the store cannot be read now (one line, no password; shown made safe)
        self.plan: Any = None  # the run's last plan_changed event (its plan file is on its machine)
        self._store: Any = None
        self._lock = threading.Lock()
        self.calls = _Caller()  # every call to the store (the follower's, the keys'): see _Caller
        self.follower: Callable[..., None] | None = self.follow_events  # followed from the store, not a log
        self.plan_source: Callable[[], str] | None = self.plan_text  # the plan file is on its machine

    @property
    def resume_hint(self) -> str:
        """How a run of another machine is resumed: there, where its folder is."""
        return f"agent-console resume {self.run_id} on {self.host} (where its folder is)"

    def store(self) -> Any:
        """The store (opened at the first use, on the caller's thread); StoreError when it cannot be reached."""
        with self._lock:
            if self._store is None:
                from console.engine.store.postgres import PgStore

                self._store = PgStore(self.url)
            return self._store

    def runner_pid(self) -> int | None:
        """The pid of the runner holding the lease (on its machine); None: no runner holds it now."""
        if self.owner is None:
            return None
        parts = self.owner.split(":")
        return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() and int(parts[1]) > 0 else 1

    def send(self, command: AnyCommand) -> str | None:
        import uuid

        from console.engine.control import make_command
        from console.engine.store import StoreError

        name = command.kind
        if self.problem is not None:
            return f"{name} could not be sent: {self.problem}"
        store = self._store
        if store is None:  # the follower is still reaching the store: never waited on from the view
            return f"{name} could not be sent: the store is not reached yet; try again in a moment"
        if self.owner is None:
            return (f"no runner holds {self.run_id} on {self.host} now (review only); resume it there "
                    f"(agent-console resume {self.run_id}) or queue commands from the CLI")
        try:
            cmd = make_command(command, source=self.source, id=uuid.uuid4().hex)
        except CommandError as exc:
            return str(exc)
        body = cmd.model_dump(mode="json", include={"id", "command", "args", "source"})
        try:
            self.calls.submit(lambda: store.send_command(self.key, body)).result(timeout=SEND_WAIT)
        except FutureTimeout:
            return (f"{name} not confirmed: the store has not answered within {SEND_WAIT:g} s; it goes once it "
                    "does (the run's answer then shows in the Feedback pane)")
        except StoreError as exc:
            return f"{name} could not be sent: {exc}"
        return None

    def plan_text(self) -> str:
        """What the plan pane shows: main_plan.md is in the run's folder, on its machine, and the store carries
        events, not files; what the events say of the plan (its last ``plan_changed``) is shown."""
        from console.engine.text import safe_text

        said = (f"*main_plan.md is not shown: this run's folder is on {safe_text(self.host, one_line=True)}, and "
                "the shared store carries its events, not its files. Read it there, or `agent-console logs "
                f"{self.run_id}` for the plan's changes.*")
        plan = self.plan
        if plan is None:
            return said + "\n\nNo plan_changed event yet: the agent writes its plan during bootstrap."
        lines = [said, "", "## What the run's events say of its plan", ""]
        if plan.error:
            lines.append(f"- the plan does not parse: {safe_text(plan.error, one_line=True)}")
        lines.append(f"- {plan.complete} of {plan.phases} phases complete")
        if plan.current:
            lines.append(f"- current: {safe_text(plan.current, one_line=True)}")
        lines.append(f"- as of event {plan.seq} ({plan.ts:%Y-%m-%d %H:%M:%S})")
        return "\n".join(lines)

    def follow_events(self, bridge: EventBridge, worker: Cancellable, on_runner: Callable[[int | None], None],
                      on_history: Callable[[list[ev.EventBase]], None] | None = None, keep: int = 0,
                      make_state: Callable[[], Any] | None = None, on_folded: Callable[[Folded], None] | None = None
                      ) -> None:
        """What :func:`console.tui.follow.follow_log` does for a run of this machine: :func:`follow_store`."""
        follow_store(self, bridge, worker, on_runner, on_history, keep, make_state, on_folded)

    def close(self) -> None:
        self.calls.close()
        with self._lock:
            store, self._store = self._store, None
        if store is not None:
            store.close()



def _parse(rows: list[tuple[int, str | None]]) -> list[ev.EventBase]:
    """The store's event bodies as events, each read with bounds (:func:`console.engine.events.parse_event`); a
    body that is no event (a damaged or hostile row: not JSON, too deep, too large) is passed over, alone."""
    out: list[ev.EventBase] = []
    for _seq, text in rows:
        if text is None:  # larger than a body may be: the store did not send it
            continue
        try:
            out.append(ev.parse_event(text))
        except ValueError:
            continue
    return out


class _Pump:
    """Reads a run's events from the store into the bridge (and notes its plan's last change)."""

    def __init__(self, controller: StoreController, bridge: EventBridge, worker: Cancellable) -> None:
        self.controller = controller
        self.bridge = bridge
        self.worker = worker
        self.seq = 0

    def read(self, store: Any, upto: int | None = None) -> list[ev.EventBase]:
        """Every event after :attr:`seq` (up to seq ``upto``), page by page; :attr:`seq` moves past them."""
        out: list[ev.EventBase] = []
        while not self.worker.is_cancelled:
            rows = store.event_lines_after(self.controller.key, self.seq, PAGE)
            if upto is not None:
                rows = [r for r in rows if r[0] < upto]
            if rows:
                self.seq = rows[-1][0]
            out.extend(_parse(rows))
            if len(rows) < PAGE:
                break
        self.note(out)
        return out

    def note(self, events: list[ev.EventBase]) -> None:
        for e in reversed(events):
            if isinstance(e, ev.PlanChanged):
                self.controller.plan = e
                return


def first_read(store: Any, pump: _Pump, keep: int, on_history: Callable[[list[ev.EventBase]], None],
               make_state: Callable[[], Any], on_folded: Callable[[Folded], None]) -> None:
    """The history: all of it for a short one (its older part to ``on_history``); newest first for a long one."""
    controller, bridge, worker = pump.controller, pump.bridge, pump.worker
    _owner, last = store.runner_of(controller.key)
    if last <= QUICK_EVENTS:
        events = pump.read(store)
        older, newer = split_history(events, keep)
        if older and not worker.is_cancelled:
            on_history(older)
        bridge.push_many(newer)
        return
    tail = _parse(store.event_lines_after(controller.key, max(0, last - TAIL), TAIL))
    _, newer = split_history(tail, min(keep, QUICK_KEEP))
    if not newer:
        pump.read(store)
        return
    split = newer[0].seq
    seed = _parse(store.last_of_types(controller.key, split, [t.decode() for t in SEED_TYPES]))
    pump.note(seed)
    on_history(seed)
    bridge.push_many(newer)
    drawn_by = time.monotonic() + 2.0  # the view draws the newest events first, with the processor to itself
    while bridge.pending and time.monotonic() < drawn_by and not worker.is_cancelled:
        time.sleep(0.01)
    worker_sleep(worker, DRAW_FIRST)
    if worker.is_cancelled:
        return
    state = make_state()
    older = pump.read(store, upto=split)
    state.apply_all(older)
    state.apply_all(newer)
    pump.note(newer)
    pump.seq = max(pump.seq, newer[-1].seq)
    messages = sum(1 for e in older if isinstance(e, ev.AssistantMessage))
    if not worker.is_cancelled:
        on_folded(Folded(state, newer[-1].seq, len(older), messages, len(seed)))


def follow_store(controller: StoreController, bridge: EventBridge, worker: Cancellable,
                 on_runner: Callable[[int | None], None],
                 on_history: Callable[[list[ev.EventBase]], None] | None = None, keep: int = 0,
                 make_state: Callable[[], Any] | None = None, on_folded: Callable[[Folded], None] | None = None
                 ) -> None:
    """Push the run's events into ``bridge`` (history, then each new one), until cancelled; call ``on_runner``
    with the lease holder's pid (None: none) whenever it, or whether the store can be reached, changes."""
    from console.engine.store import StoreError
    from console.engine.store.postgres import EVENTS_CHANNEL

    pump = _Pump(controller, bridge, worker)
    listen: Any = None
    first = True
    woken = True
    looked = checked = 0.0
    shown: tuple[int | None, str | None] = (-1, None)

    def step() -> None:
        """What this turn asks of the store (on the controller's caller thread: see :class:`_Caller`)."""
        nonlocal listen, first, woken, looked, checked
        store = controller.store()
        if listen is None:  # listening before reading: nothing shipped in between is missed
            listen = store.listener(EVENTS_CHANNEL)
            woken = True
        now = time.monotonic()
        if now - checked >= RUNNER_INTERVAL or first:
            checked = now
            controller.owner = store.runner_of(controller.key)[0]
        if first:
            if on_history is not None and make_state is not None and on_folded is not None and keep > 0:
                first_read(store, pump, keep, on_history, make_state, on_folded)
            else:
                bridge.push_many(pump.read(store))
            first, woken, looked = False, False, now
        if woken or now - looked >= SAFETY_LOOK:
            looked = now
            events = pump.read(store)
            if events and not worker.is_cancelled:
                bridge.push_many(events)

    def report() -> None:
        nonlocal shown
        if (controller.runner_pid(), controller.problem) != shown and not worker.is_cancelled:
            shown = (controller.runner_pid(), controller.problem)
            on_runner(shown[0])

    try:
        while not worker.is_cancelled:
            call = controller.calls.submit(step)
            asked = time.monotonic()
            try:
                while True:
                    try:
                        call.result(timeout=WAIT_STEP)
                        break
                    except FutureTimeout:
                        if worker.is_cancelled:
                            return
                        if time.monotonic() - asked >= STALL and controller.problem is None:
                            controller.problem = f"the store has not answered for {STALL:g} s"
                            report()
                controller.problem = None
            except StoreError as exc:
                controller.problem = str(exc)
            except Exception:  # the listening connection dropped (the server went away)
                controller.problem = LOST
            if controller.problem is not None:
                _close(listen)
                listen = None
                woken = True
            report()
            if controller.problem is not None:
                worker_sleep(worker, RETRY)
                continue
            woken = False
            try:  # a wait on the socket, bounded: a server that does not answer only sends nothing
                for note in listen.notifies(timeout=WAIT_STEP, stop_after=1):
                    if note.payload == controller.key:
                        woken = True
            except Exception:  # the server went away: said now, and tried again
                controller.problem = LOST
                _close(listen)
                listen = None
                woken = True
                report()
    finally:
        # On a thread of its own: a pool whose connection is stuck in a call waits for it before it closes.
        threading.Thread(target=_close_all, args=(listen, controller), daemon=True).start()


def _close_all(listen: Any, controller: StoreController) -> None:
    _close(listen)
    controller.close()


class _Caller:
    """The store's calls, made one at a time on a daemon thread of their own. A query on an open connection has
    no time limit (a server stopped, a network cut: nothing refuses it), so whoever waits for one (the follower,
    a key) can give up and say so, and the process never waits for it when it leaves."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name="store-calls")
                self._thread.start()
        done: Future[Any] = Future()
        self._jobs.put((fn, done))
        return done

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, done = job
            if done.set_running_or_notify_cancel():
                try:
                    done.set_result(fn())
                except BaseException as exc:  # handed to whoever waits for it
                    done.set_exception(exc)

    def close(self) -> None:
        with self._lock:
            if self._thread is not None:
                self._jobs.put(None)
                self._thread = None


def _close(conn: Any) -> None:
    if conn is not None:
        with contextlib.suppress(Exception):  # a connection already broken: nothing to close
            conn.close()
    return None
