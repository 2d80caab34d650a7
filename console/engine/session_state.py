"""What the parts of one session share (:class:`SessionState`): the run's deps, the conversation and the checkpoint
its steps move, the context's figures, the turn in flight; and what every part does with them: commit a step, end
the session (as a stop ends it, too).

:class:`console.engine.session.Session` makes one and hands it to each of its parts (asking the model, asking the
operator, a turn's steps, what comes between turns); no part knows the session that owns it.
"""

from __future__ import annotations

from typing import Protocol

from console.engine.context.pressure import ContextManager
from console.engine.enforcement import Ask
from console.engine.journal import Checkpoint, Conversation
from console.engine.messages import Message, ModelRequest
from console.engine.runtime import Runtime
from console.engine.shutdown import SessionResult, ShutdownReason
from console.engine.turn import SessionDeps


def progress_mark(rt: Runtime) -> list[int]:
    """What says the agent made progress since the last mark: memory's next id and the todo list's generation."""
    return [rt.memory.state.next_id, rt.todos.state.generation]


class AskOperator(Protocol):
    """How a part that is not the operator's asks them (:meth:`console.engine.operator_asking.OperatorAsking.need`):
    recorded with the step (``commit``: now, else the caller's commit carries it), the run holds after it."""

    def __call__(self, ask: Ask, *, commit: bool = True) -> None: ...


class SessionState:
    """One session's shared state: what its parts read and move, and the three things each does with it."""

    def __init__(self, deps: SessionDeps, number: int, conversation: Conversation, cp: Checkpoint, system: str,
                 cm: ContextManager, *, fresh_system: bool) -> None:
        self.deps = deps
        self.rt = deps.runtime
        self.number = number
        self.conversation = conversation
        self.cp = cp
        self.system = system
        self.fresh_system = fresh_system  # the system prompt is recorded with the session's first commit
        self.cm = cm
        self.turns_here = 0  # turns asked in this process (max_turns counts them)
        self.request: ModelRequest | None = None  # the turn in flight's request (None: not asked here)

    def commit(self, durable: bool = False) -> None:
        """End a step: the checkpoint says where the session is, and the journal records it with the conversation."""
        cp, rt = self.cp, self.rt
        # A pydantic assignment is four calls, twice a turn: the two that seldom change are made when they do.
        if cp.session != self.number:
            cp.session = self.number
        if cp.job_done != rt.job_done:
            cp.job_done = rt.job_done
        cp.stamp(self.cm.snapshot(), rt.clock.now())  # one call, not pydantic's assignment (four calls) twice
        if self.fresh_system:
            assert rt.journal is not None
            rt.journal.session(self.number, self.system)
            self.fresh_system = False
        rt.commit(cp, self.conversation, system=self.system, durable=durable or rt.job_done)

    def end(self, reason: ShutdownReason, detail: str, carry: list[Message] | None = None) -> SessionResult:
        cm = self.cm
        return SessionResult(reason, self.turns_here, self.number, carry or [], detail, cm.used, cm.budget,
                             session_turns=cm.turns)

    def stop_end(self, detail: str) -> SessionResult:
        """The end a stop gives: the operator's (``detail`` says when), or a signal's (interrupted, whenever)."""
        by = self.deps.operator.interrupted_by
        if by is not None:
            return self.end(ShutdownReason.INTERRUPTED, f"interrupted by {by}")
        return self.end(ShutdownReason.USER_SHUTDOWN, detail)

    def unask(self) -> None:
        """The turn that was being asked did not happen: its number is used again."""
        self.cp.turn -= 1
        self.turns_here -= 1
