"""How a run's events reach its screen's panes: :class:`EventIntake`, a part of
:class:`console.tui.screens.run.RunScreen`.

A source (an :class:`EventSource`; the console's is :class:`LogFollower`, the run's log or its shared store
followed) pushes events into an :class:`console.tui.bridge.EventBridge` from a worker thread of the screen; the
intake drains the bridge in batches (at most ~30 times a second, for at most ``DRAIN_BUDGET`` seconds each, so a
key pressed meanwhile acts at once), folds each batch into the run's state, hands it to the conversation pane and
says which aspects of the state changed. A long log's older part arrives apart (folded, not drawn), and its exact
fold may replace the state the newest events filled the panes with.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from textual.message import Message
from textual.message_pump import MessagePump

from console.engine import events as ev
from console.engine.job_files import JobPaths
from console.outcome import EXIT_OK
from console.tui.bridge import EventBridge
from console.tui.commands import Controller
from console.tui.follow import Cancellable, Folded, follow_log
from console.tui.messages import HistoryFolded, HistoryReady, RunnerState
from console.tui.screens.run_context import RunContext
from console.view.state import EXPERIENCES, FEEDBACK, GAUGE, GUARDS, PLAN, RESTART, STATUS, TODOS, ConsoleState

DRAIN_INTERVAL = 1 / 30  # the UI absorbs events in batches at most this often
DRAIN_BUDGET = 0.008  # seconds of folding per batch; a backlog is absorbed in slices, keys act in between
DRAIN_CHUNK = 400
KEY_FIRST = 0.05  # seconds after a key acts during which the events waiting and the conversation's repaints wait

# Everything a long log's exact fold may have changed.
ALL_ASPECTS = frozenset({TODOS, GAUGE, STATUS, RESTART, FEEDBACK, GUARDS, PLAN, EXPERIENCES})


@dataclass
class Feed:
    """What a source is given on its worker thread: the bridge to push events into, a way to post a message to
    the screen (dropped once it is taken down), its worker (to stop when cancelled), how many messages the
    conversation keeps (the older part goes apart: HistoryReady) and a fresh state to fold a long log into."""

    bridge: EventBridge
    post: Callable[[Message], object]
    worker: Cancellable
    keep: int
    blank_state: Callable[[], ConsoleState]


class EventSource(Protocol):
    """Where a run's events come from."""

    name: str  # its worker's name and group

    def open(self, bridge: EventBridge) -> None:
        """Once, when the screen is built, before anything runs (a source that calls back may subscribe here)."""
        ...

    def feed(self, feed: Feed) -> None:
        """On a worker thread of the screen (cancelled with it): push the run's events into ``feed.bridge``."""
        ...

    def ended(self) -> None:
        """The run's end reached the screen (a RunFinished message)."""
        ...

    def close(self) -> None:
        """The screen lets go of its run (it may be told more than once)."""
        ...


class LogFollower:
    """The console's source: the run's log replayed from its first line, then followed (its runner's pid with it);
    a run of another machine is followed from the shared store by its controller (console.tui.follow.follow_log)."""

    name = "follow"

    def __init__(self, events: Path, controller: Controller) -> None:
        """``events``: the run's events.jsonl."""
        self.events = events
        self.controller = controller

    def open(self, bridge: EventBridge) -> None:
        pass

    def feed(self, feed: Feed) -> None:
        def on_runner(pid: int | None) -> None:
            feed.post(RunnerState(pid))

        def on_history(older: list[ev.EventBase]) -> None:
            feed.post(HistoryReady(older))

        def on_folded(folded: Folded) -> None:
            feed.post(HistoryFolded(folded))

        from console.view.state.kept import Kept

        # The run's fold kept on disk (console.view.state.kept): a long log's attach folds only its tail.
        kept = Kept.of_operator(JobPaths(self.events.parent.parent)) if self.controller.follower is None else None
        follow_log(self.events, feed.bridge, self.controller, feed.worker, on_runner, on_history, keep=feed.keep,
                   make_state=feed.blank_state, on_folded=on_folded, kept=kept)

    def ended(self) -> None:
        pass

    def close(self) -> None:
        pass


class Conversation(Protocol):
    """What the intake needs of the conversation pane (console.tui.widgets.conversation.ConversationPane)."""

    trimmed: int

    def ingest(self, events: list[ev.EventBase]) -> None: ...

    def add_not_shown(self, count: int) -> None: ...


# Run a function on a worker thread of the screen (cancelled with it), named as given; the function is given its
# worker (to stop when it is cancelled).
StartWorker = Callable[[Callable[[Cancellable], None], str], object]
# Call a function once, after some seconds (console.tui.pacing.one_shot on the screen); returns its timer.
Later = Callable[[float, Callable[[], None]], object]


class EventIntake:
    """The bridge, its source and the batches drained from it (see the module's docstring)."""

    def __init__(self, ctx: RunContext, source: EventSource | None, *, keep: int, later: Later,
                 alive: Callable[[], bool], conversation: Callable[[], Conversation],
                 changed: Callable[[set[str]], None], said: Callable[[list[ev.EventBase]], None],
                 close: Callable[[int], None]) -> None:
        """``keep``: the conversation's bound; ``alive``: the panes exist; ``changed``: the panes whose aspects
        changed are refreshed; ``said``: a batch, before it is folded (refused commands are said at once);
        ``close``: the console closes with an exit code (an attached console's stop asked on leaving has landed)."""
        self.ctx = ctx
        self.source = source
        self.keep = keep
        self.later = later
        self.alive = alive
        self.conversation = conversation
        self.changed = changed
        self.said = said
        self.close_console = close
        self.bridge = EventBridge()
        self.timer: object | None = None  # a drain is due
        self.last_drain = 0.0
        self.key_first_until = 0.0
        self.drains = 0
        self.events_seen = 0
        self.folded_upto = 0  # a long log's exact fold covers the events up to this seq
        if source is not None:
            # Before the run starts (its worker starts once the panes exist), so not one event is missed.
            source.open(self.bridge)

    def start(self, screen: MessagePump, worker: StartWorker) -> None:
        """The panes exist: the bridge wakes ``screen`` (EventsReady) and the source starts on a worker."""
        self.bridge.attach(screen)
        source = self.source
        if source is None:
            return

        def run(worker: Cancellable) -> None:
            source.feed(Feed(self.bridge, screen.post_message, worker, self.keep, self.blank_state))

        worker(run, source.name)

    def blank_state(self) -> ConsoleState:
        st = self.ctx.state
        return ConsoleState(st.job_title, provider=st.provider, model=st.model, window=st.gauge.window,
                            soft=st.gauge.soft, hard=st.gauge.hard)

    def key_first(self) -> float:
        """A key has acted: the events waiting wait ``KEY_FIRST`` seconds (its frames are drawn first), returned
        (the conversation's repaints wait as long)."""
        self.key_first_until = time.monotonic() + KEY_FIRST
        return KEY_FIRST

    def ended(self) -> None:
        if self.source is not None:
            self.source.ended()

    def close(self) -> None:
        if self.source is not None:
            self.source.close()
        self.bridge.close()

    # -- events in -------------------------------------------------------------------------------
    def ready(self) -> None:
        """The bridge has events: drained now, or once the batch's interval (or a key's frames) has passed."""
        now = time.monotonic()
        wait = max(DRAIN_INTERVAL - (now - self.last_drain), self.key_first_until - now)
        if wait > 0:
            if self.timer is None:
                self.timer = self.later(wait, self.drain)
            return
        self.drain()

    def history(self, events: list[ev.EventBase]) -> None:
        """The older part of a long history: the state folds it (it needs all of it); the conversation only
        counts its messages as not shown (it keeps the newest ones, which come next through the bridge)."""
        self.events_seen += len(events)
        changed = self.ctx.state.apply_all(events)
        if self.alive():
            self.conversation().trimmed += sum(1 for e in events if isinstance(e, ev.AssistantMessage))
            self.changed(changed)

    def folded(self, folded: Folded) -> None:
        """A long log's exact fold replaces the state the newest events filled the panes with; events up to
        the seq it covers are not folded again (the conversation has them already)."""
        state = self.ctx.state
        for name, value in vars(folded.state).items():
            if name != "_handlers":  # its handlers are bound to the other object: keep this one's
                setattr(state, name, value)
        self.folded_upto = folded.upto_seq
        self.events_seen += folded.older_events - folded.seed
        if self.alive():
            self.conversation().add_not_shown(folded.older_messages)
            self.changed(set(ALL_ASPECTS))

    def drain(self, *, everything: bool = False) -> None:
        """Fold what the bridge holds into the view, for at most ``DRAIN_BUDGET`` seconds.

        A backlog (a long log replayed, a burst of deltas) is absorbed in slices: the rest is
        scheduled behind whatever else is queued, so a key pressed meanwhile still acts at once.
        """
        self.timer = None
        if not self.alive():
            return
        held = self.key_first_until - time.monotonic()
        if held > 0 and not everything:
            self.timer = self.later(held, self.drain)
            return
        started = time.perf_counter()
        self.last_drain = time.monotonic()
        changed: set[str] = set()
        ctx = self.ctx
        while True:
            events = self.bridge.drain(DRAIN_CHUNK)
            if not events:
                break
            self.drains += 1
            self.events_seen += len(events)
            self.said(events)
            fold = events if not self.folded_upto else [e for e in events if e.seq > self.folded_upto]
            changed |= ctx.state.apply_all(fold)
            self.conversation().ingest(events)
            if not everything and time.perf_counter() - started > DRAIN_BUDGET:
                break
        if changed:
            self.changed(changed)
        if ctx.quit_requested and ctx.controller.attached and ctx.state.ended:
            self.close_console(EXIT_OK)  # the stop asked for on leaving has landed
            return
        if self.bridge.pending and self.timer is None:
            self.timer = self.later(0.001, self.drain)

