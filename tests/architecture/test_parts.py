"""Parts, not stacks (issue 34, DESIGN.md): the scan of tests/architecture/parts_scan.py, as a test.

The five central classes were once chains of classes, each extending the last, whose lower layers reached up to
names only a higher layer set. Each is now being made one class that owns named parts. ``STILL_STACKED`` lists
the modules not yet converted, with what the scan finds in each today: a module may only leave the list (its
findings at 0), never grow, and no module outside it may have a finding. When the list is empty, the rule holds
for the whole package.
"""

from __future__ import annotations

import inspect
from collections import Counter

import pytest

from console.engine.enforcement import Enforcer
from console.engine.sandbox import Sandbox
from console.engine.session import Session
from console.tui.app import ConsoleApp
from console.tui.screens.run import RunScreen
from tests.architecture import parts_scan

# module -> findings the scan reports in it today (upward references, stubs of another half, private class imports)
STILL_STACKED: dict[str, int] = {
    "console.tui.fleet_actions": 4,
    "console.tui.screens.run_keys": 37,
}

FACADES = [Sandbox, Enforcer, Session, RunScreen, ConsoleApp]
# Facades still a stack of classes of ours (issue 34): one leaves the list when it owns its parts instead.
STILL_STACKED_FACADES = {"RunScreen", "ConsoleApp"}
PART_LIMIT = 300  # lines of one part


def _findings() -> Counter[str]:
    found: Counter[str] = Counter()
    for cls in parts_scan.package_classes():
        for finding in parts_scan.upward_references(cls) + parts_scan.stubs(cls):
            found[cls.__module__] += 1
            del finding
    for finding in parts_scan.private_class_imports():
        found[finding.where] += 1
    return found


@pytest.fixture(scope="module")
def findings() -> Counter[str]:
    return _findings()


def test_no_module_outside_the_list_stacks(findings: Counter[str]) -> None:
    outside = {m: n for m, n in findings.items() if m not in STILL_STACKED}
    detail = [str(f) for cls in parts_scan.package_classes() if cls.__module__ in outside
              for f in parts_scan.upward_references(cls) + parts_scan.stubs(cls)]
    detail += [str(f) for f in parts_scan.private_class_imports() if f.where in outside]
    assert not outside, "\n".join(detail)


def test_the_list_of_stacked_modules_is_true(findings: Counter[str]) -> None:
    """A module that was converted leaves the list; one that got worse is a failure, as is a stale count."""
    stale = {m: (n, findings.get(m, 0)) for m, n in STILL_STACKED.items() if findings.get(m, 0) != n}
    assert not stale, f"module: (listed, found now): {stale}; update STILL_STACKED (downwards only)"


@pytest.mark.parametrize("facade", FACADES, ids=lambda c: c.__name__)
def test_a_facade_owns_its_parts_and_they_stay_small(facade: type) -> None:
    stacked = [k.__qualname__ for k in parts_scan.bases_of_ours(facade)]
    if facade.__name__ in STILL_STACKED_FACADES:
        assert stacked, f"{facade.__name__} is no longer a stack: take it out of STILL_STACKED_FACADES"
        return
    assert not stacked, f"{facade.__name__} extends {stacked}: own them as parts"
    parts = parts_scan.parts_of(facade)
    assert parts, f"{facade.__name__} builds no part in its __init__"
    for attr, part, back in parts:
        assert not back, f"{facade.__name__}.{attr} = {part.__name__}(self ...): a part must not get its owner"
        assert not parts_scan.bases_of_ours(part), f"{part.__name__} extends {parts_scan.bases_of_ours(part)}"
        lines = len(inspect.getsourcelines(part)[0])
        assert lines <= PART_LIMIT, f"{part.__name__} is {lines} lines (at most {PART_LIMIT})"


def test_the_scan_finds_a_stack_it_is_shown() -> None:
    """The scan itself: a two-class stack whose base reaches up to a name only its subclass sets is found, and
    the same behaviour as an owner with a part is clean."""
    from tests.architecture import stack_sample

    up = [str(f) for f in parts_scan.upward_references(stack_sample.Lower)]
    assert up == ["tests.architecture.stack_sample:Lower.total: self.items is defined by no class it extends"]
    assert [str(f) for f in parts_scan.stubs(stack_sample.Lower)] == [
        "tests.architecture.stack_sample:Lower.flush: a stub (only raises NotImplementedError) in a concrete class"]
    assert parts_scan.upward_references(stack_sample.Owner) == []
    assert parts_scan.upward_references(stack_sample.Counting) == []
    assert parts_scan.parts_of(stack_sample.Owner) == [("counting", stack_sample.Counting, False)]
    assert parts_scan.parts_of(stack_sample.BadOwner) == [("counting", stack_sample.Counting, True)]
