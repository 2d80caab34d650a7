"""Observation masking (seed 004): replace old tool results with short placeholders.

Only tool-result messages of layer 5 are ever touched; the message list keeps
its length, roles and tool-call ids, so no tool call loses its result. The
newest few are never masked; the ContextManager masks every other one in one
batch: each batch rewrites the conversation from the first masked message on
(a prompt-cache miss), so fewer, larger batches keep the cacheable prefix long.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from console.engine.context.tokens import estimate_message
from console.engine.messages import Message

# Results shorter than this are not worth a placeholder of about the same size.
MIN_MASKABLE_TOKENS = 60
# Tools whose result the agent gets back by calling them again.
REREADABLE = frozenset({"read_file", "list_files", "search_files", "find_files"})
PLACEHOLDER_TOKENS = 20  # about, with a path argument


@dataclass(frozen=True)
class MaskPlan:
    indices: list[int]
    tokens_freed: int


def call_for(conversation: list[Message], tool_msg: Message) -> tuple[str, dict[str, Any]]:
    for m in conversation:
        if m.role == "assistant":
            for c in m.tool_calls:
                if c.id == tool_msg.tool_call_id:
                    try:
                        args = json.loads(c.arguments or "{}")
                    except json.JSONDecodeError:
                        args = {}
                    return c.name, args if isinstance(args, dict) else {}
    return tool_msg.name or "tool", {}


def placeholder(name: str, args: dict[str, Any], tokens: int) -> str:
    """What stands for a masked result: the call that made it, its size, and how to get it back.

    Short on purpose: a placeholder stays in every later prompt of the session (peers use 3-10 tokens)."""
    shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)[:80]}" for k, v in args.items()
                      if k not in ("content", "new_text", "old_text"))
    how = "call it again to see it" if name in REREADABLE else "the files it changed hold its effect"
    return f"[masked: {name}({shown}), ~{tokens} tokens; {how}]"


def stale_tokens(conversation: list[Message], keep_recent: int) -> int:
    """What masking every maskable result would free, about."""
    return sum(estimate_message(conversation[i]) - PLACEHOLDER_TOKENS for i in maskable(conversation, keep_recent))


def maskable(conversation: list[Message], keep_recent: int, sizes: Sequence[int] | None = None) -> list[int]:
    """Indices of tool results that may be masked, oldest first. ``sizes``: each message's estimate, if known
    (the ContextManager keeps them: estimating the whole conversation again every turn is not free)."""
    tool_idx = [i for i, m in enumerate(conversation) if m.role == "tool"]
    candidates = [i for i in tool_idx if worth_masking(conversation[i], sizes[i] if sizes is not None else None)]
    return unprotected(candidates, tool_idx, keep_recent)


def worth_masking(result: Message, size: int | None = None) -> bool:
    """A tool result that masking would free (not masked yet, and bigger than its placeholder would be)."""
    return (not result.meta.get("masked")
            and (size if size is not None else estimate_message(result)) >= MIN_MASKABLE_TOKENS)


def unprotected(candidates: list[int], tool_idx: list[int], keep_recent: int) -> list[int]:
    """``candidates`` (indices of tool results, ascending) less the newest ``keep_recent`` of all the results
    (``tool_idx``, ascending), which are never masked."""
    if keep_recent <= 0:
        return candidates
    if len(tool_idx) <= keep_recent:
        return []
    return candidates[:bisect.bisect_left(candidates, tool_idx[-keep_recent])]


def plan_masking(conversation: list[Message], need_tokens: int, keep_recent: int,
                 sizes: Sequence[int] | None = None) -> MaskPlan:
    """The oldest maskable results that together free at least ``need_tokens`` (or all there are)."""
    if sizes is None:
        sizes = [estimate_message(m) for m in conversation]
    return plan_of(maskable(conversation, keep_recent, sizes), need_tokens, sizes)


def plan_of(indices: list[int], need_tokens: int, sizes: Sequence[int]) -> MaskPlan:
    """The first of ``indices`` (maskable results, oldest first) that together free at least ``need_tokens``."""
    chosen: list[int] = []
    freed = 0
    for i in indices:
        if freed >= need_tokens:
            break
        chosen.append(i)
        freed += sizes[i] - PLACEHOLDER_TOKENS
    return MaskPlan(chosen, max(0, freed))


def masked_copy(m: Message, name: str, args: dict[str, Any]) -> Message:
    tokens = estimate_message(m)
    return m.model_copy(update={
        "content": placeholder(name, args, tokens),
        "meta": {**m.meta, "masked": True, "original_tokens": tokens},
    })


def apply_masking(conversation: list[Message], plan: MaskPlan) -> int:
    """Mask in place; returns the tokens actually freed."""
    before = sum(estimate_message(conversation[i]) for i in plan.indices)
    for i in plan.indices:
        name, args = call_for(conversation, conversation[i])
        conversation[i] = masked_copy(conversation[i], name, args)
    after = sum(estimate_message(conversation[i]) for i in plan.indices)
    return before - after


def mask_notice(count: int, freed: int, window_pct: float) -> str:
    """What the agent reads after a masking; ``window_pct`` is the share of the whole window still used, the
    same basis as the wind-down message (seed 004)."""
    return (f"[Context window {window_pct:.0%} full: {count} older tool result{'s' if count != 1 else ''} "
            f"(~{freed} tokens) {'were' if count != 1 else 'was'} masked. Each placeholder says how to get "
            "the content back. Your todo list and plan are unchanged.]")
