from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.engine.guardrails import (
    PolicyContext,
    PolicyDecision,
    PolicyGate,
    PolicyState,
    ReadBeforeWritePolicy,
    SequentialDependencyPolicy,
    ToolPolicy,
    find_cycle,
)
from console.engine.guardrails.policies import MAX_POLICY_KEYS
from tests.sweeps import examples
from tests.unit.test_guardrails_world import FakeWorld


def run(gate: PolicyGate, world: FakeWorld, tool: str, params: Mapping[str, Any], ok: bool = True) -> bool:
    """Check then (if allowed) 'run' the call with outcome ``ok``; True if it was allowed."""
    verdict = gate.check(tool, params, world)
    if verdict.allowed:
        assert gate.on_result(tool, params, ok, world) == []
    return verdict.allowed


def test_read_before_write_follows_the_seed() -> None:
    world = FakeWorld("config.yaml")
    gate = PolicyGate([ReadBeforeWritePolicy()])
    assert gate.check("write_file", {"path": "new.txt"}, world).allowed  # doesn't exist
    denied = gate.check("write_file", {"path": "config.yaml"}, world)
    assert not denied.allowed
    assert denied.policy == "read_before_write"
    assert denied.reason == ("config.yaml already exists and has not been read: call read_file('config.yaml') "
                             "first, then write_file it")
    assert run(gate, world, "read_file", {"path": "config.yaml"})
    assert gate.check("write_file", {"path": "config.yaml"}, world).allowed
    assert gate.check("edit_file", {"path": "./config.yaml"}, world).allowed


def test_read_keys_are_normalized_paths() -> None:
    world = FakeWorld("a/b.txt")
    gate = PolicyGate([ReadBeforeWritePolicy()])
    assert run(gate, world, "read_file", {"path": "./a//b.txt"})
    assert gate.snapshot()["read_before_write"].invoked_keys == {("read_file", "a/b.txt")}
    assert gate.check("write_file", {"path": "a/b.txt"}, world).allowed


def test_a_failed_read_records_nothing() -> None:
    world = FakeWorld("x.md")
    gate = PolicyGate([ReadBeforeWritePolicy()])
    assert run(gate, world, "read_file", {"path": "x.md"}, ok=False)
    assert not gate.check("write_file", {"path": "x.md"}, world).allowed


def test_a_written_file_is_known_without_a_read() -> None:
    world = FakeWorld()
    gate = PolicyGate([ReadBeforeWritePolicy()])
    assert run(gate, world, "write_file", {"path": "notes.md"})
    world.add("notes.md")
    assert gate.check("edit_file", {"path": "notes.md"}, world).allowed


def test_refused_paths_are_left_to_the_tool_and_bad_params_are_denied() -> None:
    world = FakeWorld("a.txt")
    gate = PolicyGate([ReadBeforeWritePolicy()])
    assert gate.check("write_file", {"path": "../../etc/passwd"}, world).allowed
    for params in ({}, {"path": 3}, {"path": ""}, {"path": None}, ["a.txt"], "a.txt", None):
        verdict = gate.check("write_file", params, world)  # type: ignore[arg-type]
        assert not verdict.allowed and verdict.error is None
        assert verdict.reason.startswith("write_file needs a 'path' string argument")
    assert gate.on_result("read_file", ["a.txt"], True, world) == []  # type: ignore[arg-type]


def test_sequential_dependencies_from_the_issue() -> None:
    world = FakeWorld()
    gate = PolicyGate([SequentialDependencyPolicy({"publish": ["test", "build"], "build": ["lint"]})])
    verdict = gate.check("publish", {}, world)
    assert not verdict.allowed
    assert verdict.reason == "publish requires test and build to succeed first (not yet: test, build)"
    assert gate.check("build", {}, world).reason == "build requires lint to succeed first (not yet: lint)"
    assert run(gate, world, "test", {})
    assert run(gate, world, "lint", {}, ok=False)  # a failure does not count
    assert not gate.check("build", {}, world).allowed
    assert run(gate, world, "lint", {})
    assert run(gate, world, "build", {})
    assert gate.check("publish", {}, world).allowed
    assert gate.check("unrelated", {}, world).allowed
    assert gate.snapshot()["sequential"].invoked_tools == {"test", "lint", "build"}


def test_sequential_reason_names_what_is_missing() -> None:
    world = FakeWorld()
    gate = PolicyGate([SequentialDependencyPolicy({"publish": ["test", "build"]})])
    assert run(gate, world, "test", {})
    assert gate.check("publish", {}, world).reason == (
        "publish requires test and build to succeed first (not yet: build)")


def test_sequential_sets_are_ordered_deterministically() -> None:
    policy = SequentialDependencyPolicy({"deploy": frozenset({"test", "build", "lint"})})
    assert policy.describe() == "deploy <- build, lint, test"
    reason = policy.check("deploy", {}, context=PolicyContext(PolicyState(policy_name="sequential"), FakeWorld()))
    assert reason.reason == "deploy requires build, lint and test to succeed first (not yet: build, lint, test)"


def test_sequential_refuses_self_dependencies_and_cycles() -> None:
    with pytest.raises(ValueError, match="cannot depend on itself"):
        SequentialDependencyPolicy({"a": ["a"]})
    with pytest.raises(ValueError, match="dependency cycle: a -> b -> c -> a"):
        SequentialDependencyPolicy({"a": ["b"], "b": ["c"], "c": ["a"]})
    assert find_cycle({"a": ["b", "c"], "b": ["c"], "c": []}) is None
    assert find_cycle({"x": ["y"], "y": ["z"], "z": ["y"]}) == ["y", "z", "y"]


def test_composed_policies_all_must_allow_and_the_denier_is_named() -> None:
    world = FakeWorld("report.md")
    gate = PolicyGate([ReadBeforeWritePolicy(), SequentialDependencyPolicy({"write_file": ["lint"]})])
    verdict = gate.check("write_file", {"path": "new.md"}, world)
    assert (verdict.allowed, verdict.policy) == (False, "sequential")
    assert run(gate, world, "lint", {})
    assert gate.check("write_file", {"path": "new.md"}, world).allowed
    verdict = gate.check("write_file", {"path": "report.md"}, world)
    assert (verdict.allowed, verdict.policy) == (False, "read_before_write")


class Raising:
    kind = "raising"

    def __init__(self, name: str = "raising", where: str = "check") -> None:
        self.name = name
        self.where = where

    def governs(self, tool: str) -> bool:
        if self.where == "governs":
            raise RuntimeError("governs broke")
        return True

    def check(self, tool: str, params: Mapping[str, Any], *, context: PolicyContext) -> PolicyDecision:
        if self.where == "check":
            raise KeyError("boom\nsecond line")
        if self.where == "wrong":
            return True  # type: ignore[return-value]
        return PolicyDecision.allow()

    def on_result(self, tool: str, params: Mapping[str, Any], ok: bool, *, context: PolicyContext) -> PolicyState:
        if self.where == "on_result":
            raise ValueError("on_result broke")
        return context.state.with_tool(tool)


def test_a_raising_policy_denies_fail_closed() -> None:
    world = FakeWorld()
    for where, error in (("check", "KeyError('boom\\nsecond line')"), ("governs", "RuntimeError('governs broke')"),
                         ("wrong", "TypeError('check() returned bool, not a PolicyDecision')")):
        gate = PolicyGate([SequentialDependencyPolicy({"x": ["y"]}), Raising(where=where)])
        verdict = gate.check("read_file", {"path": "a"}, world)
        assert not verdict.allowed
        assert verdict.policy == "raising"
        assert verdict.error == error
        assert "\n" not in verdict.error
        assert verdict.reason == "the raising policy failed while checking read_file; the call is denied (fail-closed)"


def test_a_raising_on_result_keeps_the_state_and_reports() -> None:
    world = FakeWorld()
    broken = Raising(where="on_result")
    gate = PolicyGate([broken, SequentialDependencyPolicy({"b": ["a"]})])
    assert gate.on_result("a", {}, True, world) == ["raising: ValueError('on_result broke')"]
    assert gate.snapshot()["raising"].invoked_tools == frozenset()
    assert gate.snapshot()["sequential"].invoked_tools == {"a"}  # the others still record
    broken.where = "none"
    assert gate.on_result("a", {}, True, world) == []
    assert gate.snapshot()["raising"].invoked_tools == {"a"}


def test_consulted_world_says_whether_the_folder_was_asked() -> None:
    world = FakeWorld("a.txt")
    gate = PolicyGate([SequentialDependencyPolicy({"publish": ["test"]}), ReadBeforeWritePolicy()])
    assert not gate.check("publish", {}, world).consulted_world
    assert not gate.check("read_file", {"path": "a.txt"}, world).consulted_world
    assert gate.check("write_file", {"path": "a.txt"}, world).consulted_world
    assert gate.check("write_file", {"path": "b.txt"}, world).consulted_world
    assert not gate.check("write_file", {}, world).consulted_world


def test_state_round_trips_through_json_and_restore() -> None:
    world = FakeWorld("b.txt", "a.txt")
    gate = PolicyGate([ReadBeforeWritePolicy(), SequentialDependencyPolicy({"publish": ["test"]})])
    for tool, params in (("read_file", {"path": "b.txt"}), ("read_file", {"path": "a.txt"}), ("test", {})):
        assert run(gate, world, tool, params)
    snap = gate.snapshot()
    text = json.dumps({k: v.model_dump(mode="json") for k, v in snap.items()}, sort_keys=True)
    assert '"invoked_keys": [["read_file", "a.txt"], ["read_file", "b.txt"]]' in text
    back = {k: PolicyState.model_validate(v) for k, v in json.loads(text).items()}
    assert back == snap
    fresh = PolicyGate([ReadBeforeWritePolicy(), SequentialDependencyPolicy({"publish": ["test"]})])
    fresh.restore(back)
    assert fresh.snapshot() == snap
    assert fresh.check("write_file", {"path": "a.txt"}, world).allowed
    assert fresh.check("publish", {}, world).allowed
    fresh.reset()
    assert not fresh.check("publish", {}, world).allowed


def test_restore_keeps_matching_names_and_drops_the_rest() -> None:
    gate = PolicyGate([SequentialDependencyPolicy({"b": ["a"]}, name="seq2")])
    gate.restore({"seq2": PolicyState(policy_name="seq2", invoked_tools=frozenset({"a"})),
                  "gone": PolicyState(policy_name="gone", invoked_tools=frozenset({"z"}))})
    assert set(gate.snapshot()) == {"seq2"}
    assert gate.check("b", {}, FakeWorld()).allowed


def test_keys_are_capped_fail_closed() -> None:
    full = PolicyState(policy_name="p", invoked_keys=frozenset(("read_file", str(i)) for i in range(MAX_POLICY_KEYS)))
    assert full.with_key("read_file", "one-more") is full
    with pytest.raises(ValueError):
        PolicyState.model_validate({"policy_name": "p", "invoked_keys": [["r", str(i)] for i in
                                                                          range(MAX_POLICY_KEYS + 1)]})


def test_names_are_unique_and_described() -> None:
    with pytest.raises(ValueError, match="duplicated: sequential"):
        PolicyGate([SequentialDependencyPolicy({"b": ["a"]}), SequentialDependencyPolicy({"c": ["a"]})])
    gate = PolicyGate([SequentialDependencyPolicy({"publish": ["test", "build"], "build": ["lint"]}),
                       ReadBeforeWritePolicy(), Raising()])
    assert gate.describe() == [
        ("sequential", "sequential", "publish <- test, build; build <- lint"),
        ("read_before_write", "read_before_write",
         "write_file, append_file, edit_file of an existing file need a prior read_file of it"),
        ("raising", "raising", ""),
    ]
    assert isinstance(ReadBeforeWritePolicy(), ToolPolicy)
    assert isinstance(SequentialDependencyPolicy({}), ToolPolicy)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@pytest.mark.sweep
@settings(max_examples=examples(300), deadline=None)
@given(tool=st.sampled_from(["read_file", "write_file", "edit_file", "publish", "test", "other", ""]),
       params=json_values | st.dictionaries(st.sampled_from(["path", "content", "x"]), json_values, max_size=3),
       ok=st.booleans())
def test_random_params_never_make_the_gate_raise(tool: str, params: Any, ok: bool) -> None:
    world = FakeWorld("a.txt", "dir/b.txt")
    gate = PolicyGate([ReadBeforeWritePolicy(), SequentialDependencyPolicy({"publish": ["test"]})])
    verdict = gate.check(tool, params, world)
    assert verdict.error is None  # the built-in policies deny cleanly, they never raise
    assert isinstance(verdict.reason, str)
    assert gate.on_result(tool, params, ok, world) == []
