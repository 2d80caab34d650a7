"""What the parts of enforcement share: the job's guardrails and their recorded state, the run's event stream
and clock, the job folder as the guardrails see it, the todo list they judge, and how a part says the state
changed (the run records it with the step)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from console.engine import events as ev
from console.engine.clock import Clock
from console.engine.enforcement.world import SandboxWorld
from console.engine.guardrails import Guardrails
from console.engine.todos import TodoState


@dataclass(frozen=True)
class EnforcementContext:
    """Handed to each part of :class:`~console.engine.enforcement.Enforcer` (a narrow context, not the Runtime).
    Frozen: the parts share these objects and may change their state (the guardrails' counters), never swap them."""

    guardrails: Guardrails
    events: ev.EventStream
    clock: Clock
    world: SandboxWorld
    # The guardrails' state changed: the run records it with the step being committed.
    changed: Callable[[], None]
    # The active todo list as the run holds it now.
    todos: Callable[[], TodoState]
