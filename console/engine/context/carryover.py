"""Carryover (seed 004): the last N whole turns, taken into the next session.

A turn is one assistant message with all its tool results and any harness
messages after them, up to the next assistant message. Cutting only at turn
starts means a tool call is never separated from its result, and all the
calls of one response stay together.
"""

from __future__ import annotations

import itertools

from console.engine.context.masking import call_for, masked_copy
from console.engine.context.tokens import estimate_message
from console.engine.messages import Message
from console.engine.run_setting_specs import DEFAULT_CARRYOVER_TURNS as DEFAULT_CARRYOVER

# How many whole turns a restart carries into the next session by default: defined with the setting's bounds in
# console.engine.job (the settings read it without loading this module).
DEFAULT_CARRYOVER_TURNS = DEFAULT_CARRYOVER

# Harness messages that belong to the session they were sent in, not to the next one.
SESSION_NOTICES = frozenset({"summary", "restart_marker", "kickoff", "wind_down", "mask_notice", "stuck_notice"})


def turn_starts(conversation: list[Message]) -> list[int]:
    return [i for i, m in enumerate(conversation) if m.role == "assistant"]


def split_turns(conversation: list[Message]) -> tuple[list[Message], list[list[Message]]]:
    """(messages before the first turn, the turns)."""
    starts = turn_starts(conversation)
    if not starts:
        return list(conversation), []
    head = list(conversation[: starts[0]])
    bounds = [*starts, len(conversation)]
    return head, [list(conversation[a:b]) for a, b in itertools.pairwise(bounds)]


def _shrink(turn: list[Message]) -> list[Message]:
    """A turn with its tool results replaced by placeholders (pairs kept intact)."""
    return [masked_copy(m, *call_for(turn, m)) if m.role == "tool" and not m.meta.get("masked") else m
            for m in turn]


def extract_carryover(conversation: list[Message], n_turns: int, budget_tokens: int) -> list[Message]:
    """The last ``n_turns`` whole turns that fit in ``budget_tokens``.

    Turns are taken newest first; a turn too big for what is left of the budget
    is carried with its tool results masked, and once even that does not fit,
    older turns are dropped. Harness notices inside a turn (a wind-down message)
    travel with it.
    """
    if n_turns <= 0:
        return []
    _, turns = split_turns(conversation)
    picked: list[list[Message]] = []
    used = 0
    for turn in reversed(turns[-n_turns:]):
        # A restart marker or summary from an older session is not carried again.
        turn = [m for m in turn if m.meta.get("kind") not in SESSION_NOTICES]
        cost = sum(map(estimate_message, turn))
        if used + cost > budget_tokens:
            turn = _shrink(turn)
            cost = sum(map(estimate_message, turn))
            if used + cost > budget_tokens:
                break
        picked.append(turn)
        used += cost
    return [m for turn in reversed(picked) for m in turn]


def split_pairs(conversation: list[Message]) -> int:
    """How many tool calls lack a result or results lack a call (0 for a well-formed conversation)."""
    calls: set[str] = set()
    results: set[str] = set()
    for m in conversation:
        if m.role == "assistant":
            calls.update(c.id for c in m.tool_calls)
        elif m.role == "tool" and m.tool_call_id:
            results.add(m.tool_call_id)
    return len(calls ^ results)
