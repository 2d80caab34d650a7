"""Parts, not stacks (issue 34, DESIGN.md): the scan of tests/architecture/parts_scan.py, as a test.

The five central classes (the sandbox, the enforcer, the session, the run screen, the console app) were once
chains of classes, each extending the last, whose lower layers reached up to names only a higher layer set
(257 such references). Each is now one class that owns named parts over one shared object. The scan keeps it so
for the whole package: no upward reference, no stub of another half, no private class imported across modules;
and each facade's parts stay small and never get their owner.
"""

from __future__ import annotations

import inspect

import pytest

from console.engine.enforcement import Enforcer
from console.engine.sandbox import Sandbox
from console.engine.session import Session
from console.tui.app import ConsoleApp
from console.tui.screens.run import RunScreen
from tests.architecture import parts_scan

FACADES = [Sandbox, Enforcer, Session, RunScreen, ConsoleApp]
PART_LIMIT = 300  # lines of one part


def test_no_class_reaches_up_no_stub_no_private_class_crosses_a_module() -> None:
    found = [str(f) for cls in parts_scan.package_classes()
             for f in parts_scan.upward_references(cls) + parts_scan.stubs(cls)]
    found += [str(f) for f in parts_scan.private_class_imports()]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("facade", FACADES, ids=lambda c: c.__name__)
def test_a_facade_owns_its_parts_and_they_stay_small(facade: type) -> None:
    stacked = [k.__qualname__ for k in parts_scan.bases_of_ours(facade)]
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
