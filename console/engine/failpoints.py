"""Named crash points, for the tests that kill the engine at every step.

Every durable write in the engine (a journal line, an atomic file replace, an
append to an agent's file, an event-log line) calls :func:`hit` first. In a
normal run nothing is installed and ``hit`` is one global lookup. The kill-point
tests install a hook that counts the points and ends the process with
``os._exit`` at the n-th one (a real kill: no ``finally`` runs, nothing is
flushed), and ``tear`` lets them leave half a record behind, as a kill in the
middle of a ``write`` would.
"""

from __future__ import annotations

from collections.abc import Callable

# What a tear returns (bytes written, a write's result...) is thrown away: it only has to leave bytes behind.
Tear = Callable[[], object]
Hook = Callable[[str, Tear | None], None]

_hook: Hook | None = None


def hit(name: str, tear: Tear | None = None) -> None:
    """A point where a crash may happen; ``tear`` writes part of what is about to be written."""
    if _hook is not None:
        _hook(name, tear)


def install(hook: Hook | None) -> None:
    global _hook
    _hook = hook


def installed() -> bool:
    """Whether a hook counts the points (then writes that could move to a thread stay on the caller's)."""
    return _hook is not None
