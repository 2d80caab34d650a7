"""Run by tests/unit/test_sweeps.py in a child pytest with AGENT_CONSOLE_FULL_SWEEPS=1 and
AGENT_CONSOLE_SWEEP_SEED=7 set: the session must see both (the suite's walls remove every AGENT_CONSOLE_* variable)."""

from __future__ import annotations

from tests.sweeps import Sweep, examples


def test_the_sweep_runs_every_point_with_the_seed_given(sweep: Sweep) -> None:
    assert sweep.full and sweep.seed == 7


def test_a_property_test_runs_all_its_examples() -> None:
    assert examples(300) == 300
