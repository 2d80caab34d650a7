"""ContextManager decisions, masking and carryover, with hypothesis properties."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.engine.context.carryover import extract_carryover, split_pairs, split_turns
from console.engine.context.masking import (
    MIN_MASKABLE_TOKENS,
    PLACEHOLDER_TOKENS,
    MaskPlan,
    apply_masking,
    plan_masking,
    plan_of,
    unprotected,
)
from console.engine.context.pressure import (
    COMPACT_AT,
    COMPACT_SHARE,
    KEEP_RECENT_RESULTS,
    MASK_BATCH,
    MASK_BATCH_MIN,
    ContextAction,
    ContextManager,
)
from console.engine.context.tokens import estimate_message
from console.engine.messages import Message, ToolCall
from tests.sweeps import examples


def turn(i: int, calls: int = 1, size: int = 800, notice: bool = False) -> list[Message]:
    cs = [ToolCall(id=f"c{i}_{k}", name="read_file", arguments=json.dumps({"path": f"f{i}.md"})) for k in range(calls)]
    out = [Message.assistant(f"turn {i}", cs)]
    out += [Message.tool(c, "x" * size) for c in cs]
    if notice:
        out.append(Message.user("a harness notice", kind="transition_prompt"))
    return out


def conversation(spec: list[tuple[int, int, bool]]) -> list[Message]:
    conv = [Message.user("PREVIOUS SUMMARY", kind="summary")]
    for i, (calls, size, notice) in enumerate(spec):
        conv += turn(i, calls, size, notice)
    return conv


turn_specs = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4000), st.booleans()), min_size=0, max_size=25)


# -- ContextManager --------------------------------------------------------------------------------
def test_continue_below_soft() -> None:
    cm = ContextManager(window=10_000)
    cm.record_usage(5_000, 100)
    assert cm.evaluate(conversation([(1, 800, False)])).action is ContextAction.CONTINUE


def test_mask_at_soft_when_it_frees_enough() -> None:
    conv = conversation([(1, 4000, False)] * 8)
    cm = ContextManager(window=10_000)
    cm.record_usage(7_500, 100)
    e = cm.evaluate(conv)
    assert e.action is ContextAction.MASK
    # One batch: every stale result, so the prefix stays stable until the next one; the newest 3 are kept.
    tool_idx = [i for i, m in enumerate(conv) if m.role == "tool"]
    assert e.plan.indices == tool_idx[:-3] and KEEP_RECENT_RESULTS == 3


def test_below_soft_stale_results_are_masked_in_one_batch_once_they_outweigh_the_rest() -> None:
    """Masking breaks the prompt cache from the first masked result on: it waits for a batch worth it."""
    cm = ContextManager(window=1_000_000)
    conv = conversation([(1, 400, False)] * 3)
    for i in range(3, 60):
        rest = sum(estimate_message(m) for m in conv)
        cm.used = 2_000 + rest  # the head (system, tools, protected) and the conversation
        e = cm.evaluate(conv)
        stale = [j for j, m in enumerate(conv) if m.role == "tool" and not m.meta.get("masked")][:-3]
        freed = sum(estimate_message(conv[j]) - 20 for j in stale)
        if freed >= max(MASK_BATCH_MIN, MASK_BATCH * (cm.used - freed)):
            assert e.action is ContextAction.MASK and e.plan.indices == stale
            apply_masking(conv, e.plan)
        else:
            assert e.action is ContextAction.CONTINUE
        conv += turn(i, 1, 400)
    notices = sum(1 for m in conv if m.role == "tool" and m.meta.get("masked"))
    assert 0 < notices < 57 and split_pairs(conv) == 0
    assert all(not m.meta.get("masked") for m in [m for m in conv if m.role == "tool"][-3:])


def test_the_conversation_compacts_once_what_masking_cannot_free_outgrows_compact_at() -> None:
    cm = ContextManager(window=1_000_000, carry_turns=3)
    assert cm.compact_at == COMPACT_AT
    chatty = [Message.assistant("reasoning " * 40)]  # ~100 tokens a turn that no masking frees
    conv = conversation([(1, 100, False)])
    while sum(estimate_message(m) for m in conv) - cm.carried_tokens(conv) < COMPACT_AT:
        cm.used = 2_000 + sum(estimate_message(m) for m in conv)
        assert cm.evaluate(conv).action is ContextAction.CONTINUE
        conv += chatty
    cm.used = 2_000 + sum(estimate_message(m) for m in conv)
    assert cm.evaluate(conv).action is ContextAction.COMPACT
    # What a compaction keeps never triggers another: three huge turns alone are not compacted.
    big = conversation([(1, 3_000, False)] * 3)[1:]
    cm.used = 2_000 + sum(estimate_message(m) for m in big)
    assert cm.evaluate(big).action is not ContextAction.COMPACT
    # A small window compacts at a share of its budget instead.
    small = ContextManager(window=6_000, reserve=750)
    assert small.compact_at == int(small.budget * COMPACT_SHARE) < COMPACT_AT


def test_compact_at_is_the_runs_setting_and_zero_never_compacts_in_place() -> None:
    chatty = conversation([(1, 100, False)]) + [Message.assistant("reasoning " * 40)] * 200  # ~20k unfreeable
    never = ContextManager(window=1_000_000, carry_turns=3, compact_tokens=0)
    never.used = 2_000 + sum(estimate_message(m) for m in chatty)
    assert never.evaluate(chatty).action is ContextAction.CONTINUE
    late = ContextManager(window=1_000_000, carry_turns=3, compact_tokens=50_000)
    late.used = never.used
    assert late.compact_at == 50_000 and late.evaluate(chatty).action is ContextAction.CONTINUE
    late.compact_tokens = 10_000
    assert late.evaluate(chatty).action is ContextAction.COMPACT


def test_no_masking_that_frees_too_little_then_wind_down_then_restart() -> None:
    conv = conversation([(1, 100, False)] * 3)  # nothing worth masking
    cm = ContextManager(window=10_000)
    cm.record_usage(7_500, 100)
    assert cm.evaluate(conv).action is ContextAction.CONTINUE  # soft, but masking would free ~nothing
    cm.record_usage(8_600, 100)
    assert cm.evaluate(conv).action is ContextAction.WIND_DOWN
    cm.mark_wind_down()
    assert cm.evaluate(conv).action is ContextAction.CONTINUE  # the agent gets its one turn
    cm.record_usage(8_800, 100)
    assert cm.evaluate(conv).action is ContextAction.RESTART


def test_restart_when_the_next_prompt_cannot_fit() -> None:
    cm = ContextManager(window=10_000)
    cm.record_usage(10_500, 100)
    assert cm.evaluate(conversation([(1, 100, False)])).action is ContextAction.RESTART


# -- masking ---------------------------------------------------------------------------------------
def test_placeholder_says_what_and_how_to_get_it_back() -> None:
    conv = conversation([(1, 4000, False)] * 4)
    plan = plan_masking(conv, 10, keep_recent=2)
    apply_masking(conv, plan)
    masked = conv[plan.indices[0]]
    assert masked.meta["masked"] and masked.tool_call_id == "c0_0"
    assert masked.content == '[masked: read_file(path="f0.md"), ~1004 tokens; call it again to see it]'
    # Short: it stays in every later prompt of the session.
    assert estimate_message(masked) <= 25
    write = Message.assistant("w", [ToolCall(id="w1", name="write_file",
                                             arguments=json.dumps({"path": "out.md", "content": "x" * 900}))])
    conv = [write, Message.tool(write.tool_calls[0], "y" * 2000), *turn(9), *turn(10), *turn(11)]
    apply_masking(conv, plan_masking(conv, 10**6, keep_recent=3))
    assert conv[1].content == '[masked: write_file(path="out.md"), ~504 tokens; the files it changed hold its effect]'


@pytest.mark.sweep
@settings(max_examples=examples(200), deadline=None)
@given(turn_specs, st.integers(0, 20_000), st.integers(0, 5))
def test_masking_only_touches_old_tool_results(spec, need, keep) -> None:
    conv = conversation(spec)
    before = [m.model_copy(deep=True) for m in conv]
    plan = plan_masking(conv, need, keep_recent=keep)
    freed = apply_masking(conv, plan)
    assert len(conv) == len(before)
    assert freed >= 0
    tool_idx = [i for i, m in enumerate(before) if m.role == "tool"]
    newest = set(tool_idx[-keep:]) if keep else set()
    for i, (old, new) in enumerate(zip(before, conv, strict=True)):
        assert (old.role, old.tool_call_id, old.tool_calls) == (new.role, new.tool_call_id, new.tool_calls)
        if old.role != "tool" or i in newest:
            assert old == new  # summaries, notices, assistant turns and the newest results are untouched
    assert split_pairs(conv) == 0
    # oldest first: every masked result is older than every unmasked maskable one
    masked = [i for i in tool_idx if conv[i].meta.get("masked")]
    if masked:
        assert all(i in masked or estimate_message(before[i]) < 60 for i in tool_idx if i < max(masked))


@pytest.mark.sweep
@settings(max_examples=examples(200), deadline=None)
@given(turn_specs)
def test_masking_is_idempotent_on_already_masked(spec) -> None:
    conv = conversation(spec)
    apply_masking(conv, plan_masking(conv, 10**9, keep_recent=0))
    again = plan_masking(conv, 10**9, keep_recent=0)
    assert again.indices == []


# -- carryover -------------------------------------------------------------------------------------
@pytest.mark.sweep
@settings(max_examples=examples(300), deadline=None)
@given(turn_specs, st.integers(0, 6), st.integers(0, 20_000))
def test_carryover_never_splits_a_tool_pair(spec, n, budget) -> None:
    conv = conversation(spec)
    carry = extract_carryover(conv, n, budget)
    assert split_pairs(carry) == 0
    # whole turns only: it starts with an assistant message (or is empty)
    assert not carry or carry[0].role == "assistant"
    # all calls of one response are kept together with their results
    for m in carry:
        if m.role == "assistant":
            ids = {c.id for c in m.tool_calls}
            assert ids <= {x.tool_call_id for x in carry if x.role == "tool"}
    assert sum(1 for m in carry if m.role == "assistant") <= n
    assert sum(estimate_message(m) for m in carry) <= max(budget, 0) or not carry


def test_carryover_takes_the_newest_turns_and_shrinks_big_ones() -> None:
    conv = conversation([(1, 400, False), (2, 400, True), (1, 40_000, False)])
    carry = extract_carryover(conv, 2, budget_tokens=2_000)
    assistants = [m.content for m in carry if m.role == "assistant"]
    assert assistants == ["turn 1", "turn 2"]
    big = next(m for m in carry if m.role == "tool" and m.tool_call_id == "c2_0")
    assert big.meta["masked"]  # too big for the budget: carried as a placeholder, pair intact
    assert all(m.meta.get("kind") != "summary" for m in carry)


def test_split_turns() -> None:
    conv = conversation([(1, 10, True), (0, 0, False)])
    head, turns = split_turns(conv)
    assert [m.meta.get("kind") for m in head] == ["summary"]
    assert [len(t) for t in turns] == [3, 1]


def test_a_window_too_small_for_the_newest_results_masks_one_of_them_before_a_restart() -> None:
    conv = conversation([(1, 8_000, False)] * 3)  # three results of ~2,000 tokens, none stale
    cm = ContextManager(window=7_000)
    cm.used = cm.budget + 100  # the next prompt would not fit
    e = cm.evaluate(conv)
    tools = [i for i, m in enumerate(conv) if m.role == "tool"]
    assert e.action is ContextAction.MASK and e.plan.indices == tools[:1]  # the two newest stay
    cm.used = int(cm.budget * 0.75)  # above soft, under hard: no need to give up one of the newest yet
    assert cm.evaluate(conv).action is ContextAction.CONTINUE
    one = conversation([(1, 30_000, False)])  # the newest result alone: restart, never masked
    cm.used = cm.budget + 100
    assert cm.evaluate(one).action is ContextAction.RESTART


# -- the estimates the ContextManager remembers ------------------------------------------------------
@pytest.mark.sweep
@settings(max_examples=examples(60), deadline=None)
@given(turn_specs, turn_specs, st.integers(0, 10**6), st.booleans())
def test_remembered_sizes_are_the_estimates_as_the_conversation_grows_is_masked_and_is_replaced(
        first: list[tuple[int, int, bool]], more: list[tuple[int, int, bool]], used: int, mask: bool) -> None:
    cm = ContextManager(window=50_000)
    cm.record_usage(used, 0)
    conv = conversation(first)
    fresh = ContextManager(window=50_000)
    fresh.record_usage(used, 0)
    for step in range(4):
        assert cm.sizes(conv) == [estimate_message(m) for m in conv]
        got, want = cm.evaluate(conv), fresh.evaluate(conv)
        assert (got.action, got.plan) == (want.action, want.plan)
        fresh = ContextManager(window=50_000)  # no memory: what the remembered sizes must agree with
        fresh.record_usage(used, 0)
        if step == 0:
            conv = conv + turn(100, 2, 3000)  # grown at its end
        elif step == 1 and mask:
            apply_masking(conv, plan_masking(conv, 10**9, keep_recent=1))  # messages replaced in place
        elif step == 2:
            conv = conversation(more)  # replaced whole (a compaction): nothing of the old one is kept
    assert len(cm._sizes) <= 2 * len(conv) + 64 + len(conv)


def _plan_by_definition(conv: list[Message], need: int, keep: int) -> tuple[list[int], int]:
    """The masking plan as the spec words it, with nothing remembered: the oldest tool results, not masked yet, not
    among the newest ``keep``, worth a placeholder, until ``need`` tokens are freed."""
    results = [i for i, m in enumerate(conv) if m.role == "tool"]
    protected = set(results[-keep:]) if keep > 0 else set()
    chosen, freed = [], 0
    for i in results:
        if i in protected or conv[i].meta.get("masked") or estimate_message(conv[i]) < MIN_MASKABLE_TOKENS:
            continue
        if freed >= need:
            break
        chosen.append(i)
        freed += estimate_message(conv[i]) - PLACEHOLDER_TOKENS
    return chosen, max(0, freed)


@pytest.mark.sweep
@settings(max_examples=examples(60), deadline=None)
@given(turn_specs, turn_specs, st.integers(0, 5), st.integers(0, 20_000), st.booleans())
def test_what_the_manager_remembers_of_a_growing_conversation_gives_the_plans_and_carryover_of_a_fresh_look(
        first: list[tuple[int, int, bool]], more: list[tuple[int, int, bool]], keep: int, need: int,
        mask: bool) -> None:
    cm = ContextManager(window=50_000, keep_recent=keep)
    conv = conversation(first)
    for step in range(3):
        index = cm._index(conv)
        assert (plan_of(unprotected(index.candidates, index.results, keep), need, index.sizes)
                == MaskPlan(*_plan_by_definition(conv, need, keep)))
        assert plan_masking(conv, need, keep) == MaskPlan(*_plan_by_definition(conv, need, keep))
        starts = [i for i, m in enumerate(conv) if m.role == "assistant"]
        n = cm.compact_turns
        first_kept = starts[-n] if len(starts) >= n else (starts[0] if starts else 0)
        assert cm.carried_tokens(conv) == sum(estimate_message(m) for m in conv[first_kept:])
        assert index.total == sum(estimate_message(m) for m in conv)
        if step == 0:
            conv = conv + [m for i, spec in enumerate(more) for m in turn(100 + i, *spec)]  # grown at its end
        elif mask:
            apply_masking(conv, plan_masking(conv, 10**9, keep_recent=1))  # messages replaced in place


def test_the_tools_estimate_is_remembered_for_the_same_specs_in_a_new_request_and_made_anew_for_others() -> None:
    from console.engine.context import tokens
    from console.engine.messages import ModelRequest, ToolSpec
    from console.engine.tools import default_registry

    specs = default_registry().specs()

    def by_definition(tools: list[ToolSpec]) -> int:
        return tokens.estimate_text(json.dumps([t.model_dump() for t in tools], separators=(",", ":")))

    first = ModelRequest(system="s", messages=[], tools=specs, protected="p")
    again = ModelRequest(system="s", messages=[], tools=specs, protected="p")
    assert first.tools is not again.tools  # each request's own list, of the same specs
    assert tokens.estimate_tools(first) == by_definition(specs)
    assert tokens._tools_estimate is not None and tokens._tools_estimate[0][0] is specs[0]
    remembered = tokens._tools_estimate
    assert tokens.estimate_tools(again) == by_definition(specs) and tokens._tools_estimate is remembered
    fewer = ModelRequest(system="s", messages=[], tools=specs[:-1], protected="p")
    assert tokens.estimate_tools(fewer) == by_definition(specs[:-1]) < by_definition(specs)
    other = ModelRequest(system="s", messages=[], tools=[specs[0].model_copy(update={"description": "x" * 4000})],
                         protected="p")
    assert tokens.estimate_tools(other) == by_definition(other.tools)
