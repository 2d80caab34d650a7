"""Seed 002's feedback flow in a real run: the providers run after EACH tool call, and their context carries
the session number and the prompt the model was sent. A kill between two calls of one turn neither loses nor
repeats the feedback of the calls already run."""

from __future__ import annotations

import pytest

from console.engine import events as ev
from console.engine.enforcement import FEEDBACK_KIND
from console.engine.guardrails.feedback import (
    Feedback,
    FeedbackContext,
    FeedbackProviderConfig,
    FeedbackRunner,
    FeedbackTrigger,
)
from console.engine.journal import Journal
from console.engine.loop import ShutdownReason
from console.engine.messages import ModelRequest
from console.engine.supervisor import Supervisor
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedProvider
from console.providers.scripted import ScriptedTurn as T
from tests.conftest import run_settings


class Interrupted(BaseException):
    """A kill in the middle of a step (a BaseException: the engine's `except Exception` must not eat it)."""


class Watching:
    """Feedback after every call, saying which call, which session, and what it read of the prompt."""

    kind = "watching"
    name = "Watch"

    def __init__(self, die_at_call: int | None = None) -> None:
        self.seen: list[tuple[int, int, int, ModelRequest | None]] = []
        self.die_at_call = die_at_call

    def should_run(self, context: FeedbackContext) -> bool:
        return True

    def provide(self, context: FeedbackContext) -> Feedback:
        if context.tool_call_count == self.die_at_call:
            raise Interrupted
        self.seen.append((context.tool_call_count, context.turn, context.session, context.prompt))
        return Feedback(provider_name=self.name, summary=f"after call {context.tool_call_count}",
                        timestamp=context.now, call_index=context.tool_call_count)


class Recording(ScriptedProvider):
    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.requests: list[ModelRequest] = []

    def stream(self, request):
        self.requests.append(request)
        return super().stream(request)


def three_reads() -> T:
    return T(calls=[C(name="read_file", arguments={"path": "instructions.md"}),
                    C(name="list_files", arguments={}),
                    C(name="read_file", arguments={"path": "notes.md"})])


def supervise(paths, clock, watcher: Watching, script: list[T]) -> tuple[Supervisor, Recording]:
    provider = Recording(clock=clock, script=script)
    sup = Supervisor(paths, run_settings(max_turns=len(script)), provider, clock=clock)
    # A provider the job cannot declare (job.toml names only the built-in kinds): put in as the run's own.
    sup.guardrails.feedback = FeedbackRunner([FeedbackProviderConfig(watcher, FeedbackTrigger(every_n_calls=1))])
    return sup, provider


def test_feedback_runs_after_each_tool_call_with_the_session_and_the_prompt(make_job, clock) -> None:
    paths = make_job(files={"notes.md": "some notes\n"})
    watcher = Watching()
    sup, provider = supervise(paths, clock, watcher, [three_reads(), three_reads()])
    result = sup.run()
    assert result.reason is ShutdownReason.MAX_TURNS, result.detail
    # Once per call, not once per turn: six calls, six feedback events, in order.
    fed = [e for e in ev.read_events(paths.events) if isinstance(e, ev.Feedback)]
    assert [e.message for e in fed] == [f"after call {n}" for n in range(1, 7)]
    assert [e.turn for e in fed] == [1, 1, 1, 2, 2, 2]
    # The context carries the session and the very request the model answered with those calls.
    assert [(call, turn, session) for call, turn, session, _ in watcher.seen] == [
        (1, 1, 1), (2, 1, 1), (3, 1, 1), (4, 2, 1), (5, 2, 1), (6, 2, 1)]
    assert all(seen[3] is provider.requests[seen[1] - 1] for seen in watcher.seen)
    # The agent got all three blocks of a turn after that turn's tool results: one message, in call order,
    # and no message between the results of one reply (the wire's pairing of calls and results).
    second = provider.requests[1].messages
    reply = max(i for i, m in enumerate(second) if m.role == "assistant")
    after = second[reply + 1:]
    assert [m.role for m in after[:3]] == ["tool", "tool", "tool"]
    blocks = [m for m in after if m.meta.get("kind") == FEEDBACK_KIND]
    assert len(blocks) == 1 and blocks[0].content.count("<feedback provider='Watch'>") == 3
    assert blocks[0].content.index("after call 1") < blocks[0].content.index("after call 3")


def test_a_kill_between_two_calls_keeps_the_first_calls_feedback_once(make_job, clock) -> None:
    paths = make_job(files={"notes.md": "some notes\n"})
    dying = Watching(die_at_call=2)
    sup, _ = supervise(paths, clock, dying, [three_reads(), three_reads()])
    with pytest.raises(Interrupted):
        sup.run()
    # The first call's step (its result and its feedback) was recorded; the second's was not.
    loaded = Journal(paths).load(clock.now(), logged_seq=0)
    assert loaded.cp is not None and (loaded.cp.stage, loaded.cp.next_call) == ("tools", 1)
    assert [m.content for m in loaded.cp.notices if m.meta.get("kind") == FEEDBACK_KIND] == [
        "<feedback provider='Watch'>\nafter call 1\n</feedback>"]
    # Resumed: the turn goes on from call 2 (the model is not asked again for turn 1).
    watcher = Watching()
    sup, provider = supervise(paths, clock, watcher, [three_reads()])
    result = sup.run()
    assert result.reason is ShutdownReason.MAX_TURNS, result.detail
    fed = [e.message for e in ev.read_events(paths.events) if isinstance(e, ev.Feedback)]
    assert fed == [f"after call {n}" for n in range(1, 7)]  # none lost, none twice
    # The resumed turn's prompt is rebuilt from the recorded conversation: the same turn's request.
    assert [(c, t, s) for c, t, s, _ in watcher.seen[:2]] == [(2, 1, 1), (3, 1, 1)]
    rebuilt = watcher.seen[0][3]
    assert rebuilt is not None and rebuilt.messages[-1].role != "assistant"
    block = next(m for m in provider.requests[0].messages if m.meta.get("kind") == FEEDBACK_KIND)
    assert [block.content.count(f"after call {n}") for n in (1, 2, 3)] == [1, 1, 1]
