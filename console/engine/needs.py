"""A run that needs its operator: the one way the engine asks for a human.

A restart waiting for approval, a stuck agent past its nudges, a spend limit, a provider down past its
limit, completion refused too often, a crash: :func:`ask_operator` records a ``needs_operator`` event (the
views show it first, the runner's notifier sends it to the operator's channels) and, when the run should
hold, pauses it. The operator's answer (``resume``, ``approve``, ``stop``...) clears it with a
``needs_operator_cleared`` event. The engine never waits in a loop nudging the agent for hours instead.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from console.engine import events as ev


class OperatorState(Protocol):
    """What asking needs of the operator's state (console.engine.operator.OperatorState)."""

    needs: ev.NeedReason | None
    paused: bool

EVIDENCE_LINES = 8

# Needs that are each a new request, answered once and done: a restart the context calls for (with auto-restart off,
# every restart asks, and the operator's approval of one is no failed fix when the next comes), a question an MCP
# server asks during a call. Any other need that
# comes back after the operator's answer (stuck, a budget, the provider or the store down, completion refused, a
# give-up, a crash) is the same need unresolved: the operator's channels hear it as "again", and urgent.
NEW_EACH_TIME: frozenset[str] = frozenset({"restart_approval", "mcp_question"})
# What the operator did to the earlier ones of such a need (the notifications' words: "2 approved before").
ANSWERED_AS: dict[str, str] = {"restart_approval": "approved", "mcp_question": "answered"}
EVIDENCE_CHARS = 300


def ask_operator(events: ev.EventStream, op: OperatorState, reason: ev.NeedReason, message: str,
                 evidence: Sequence[str] = (), *, pause: bool = True, notify: bool = True,
                 lines: int = EVIDENCE_LINES, chars: int = EVIDENCE_CHARS) -> None:
    """Say the run needs its operator, and (``pause``) hold it after the current turn until they answer.

    Asking again for the same reason while unanswered records nothing new (one event per need: the runner's
    notifier, not the engine, reminds the operator while it stays unanswered). ``lines`` and ``chars``: the
    evidence kept, for a need whose evidence is what the operator answers (a question's fields: all, each whole)."""
    if op.needs == reason:
        if pause:
            op.paused = True
        return
    op.needs = reason
    if pause:
        op.paused = True
    kept = [str(x)[:chars] for x in list(evidence)[:lines]]
    events.emit(ev.NeedsOperator, reason=reason, message=message, evidence=kept, paused=pause, notify=notify)


# The lines that say whether a run's log ends waiting on its operator: a need, its answer, a process's start.
_NEED_LINES = (b'"type":"needs_operator', b'"type":"session_started"')
_BACK_STEP = 65536


def open_need(path: Path) -> ev.NeedReason | None:
    """The need a run's log ends waiting on (its last process died holding it), read from the log's end back to the
    last need, answer or process start: the line found parsed as the event it is, never the whole log (a resume of
    a long run must not read it all). None when the log ends with none open (or there is no log)."""
    from console.engine.log_file import open_log

    fh = open_log(path)
    if fh is None:
        return None
    with fh:
        end = fh.seek(0, os.SEEK_END)
        tail = b""
        while end > 0:
            start = max(0, end - _BACK_STEP)
            fh.seek(start)
            block = fh.read(end - start) + tail
            lines = block.split(b"\n")
            tail = lines.pop(0) if start > 0 else b""  # a line cut by the step: read whole with the next one
            for line in reversed(lines):
                if any(mark in line for mark in _NEED_LINES):
                    try:
                        e = ev.parse_event(line)
                    except ValueError:
                        continue  # a damaged line says nothing
                    return e.reason if isinstance(e, ev.NeedsOperator) else None
            end = start
    return None


def answered(events: ev.EventStream, op: OperatorState, by: str) -> None:
    """The operator answered the run's need (if it had one): recorded once."""
    if op.needs is None:
        return
    reason, op.needs = op.needs, None
    events.emit(ev.NeedsOperatorCleared, reason=reason, by=by)


def restart_message(used_tokens: int, next_session: int) -> str:
    """What a restart waiting for approval asks (its need's message; a view that sees the restart_pending event
    before the need says the same)."""
    return (f"the context is full ({used_tokens:,} tokens): approve the restart into session {next_session}, or "
            "deny it to end the run")


# Each reason in the operator's words (the views and the notifications say these).
LABELS: dict[str, str] = {"restart_approval": "restart approval", "stuck": "stuck", "budget": "budget reached",
                          "completion_refused": "completion refused", "provider_down": "provider down",
                          "crashed": "crashed", "gave_up": "gave up", "store_down": "store down",
                          "fleet_budget": "fleet budget reached", "mcp_question": "question from an MCP server"}


def label(reason: str) -> str:
    """``restart_approval`` as ``restart approval`` (a reason a newer version adds: its name, in words)."""
    return LABELS.get(reason) or reason.replace("_", " ")
