"""The sweeps' sample (tests/sweeps.py): deterministic, and never without an end or a kind of write."""

from __future__ import annotations

from tests.sweeps import kind, points, sample

NAMES = ([("journal intent", True), ("write todos.json", False), ("rename todos.json", False)]
         + [("events", True), ("journal commit", True)] * 200
         + [("agent append log.md", True), ("write phase-3-x.json", False), ("write phase-4-y.json", False)]
         + [("events", True)] * 50 + [("rename outcome.json", False)])


def test_the_same_seed_draws_the_same_points_and_another_seed_others() -> None:
    cases = points(NAMES)
    assert sample(cases, 30, "20:t") == sample(list(cases), 30, "20:t")
    assert sample(cases, 30, "20:t") != sample(cases, 30, "21:t")


def test_the_sample_keeps_the_ends_and_every_kind_clean_and_torn() -> None:
    cases = points(NAMES)
    for seed in range(20):
        chosen = sample(cases, 30, str(seed))
        assert len(chosen) == 30 and len(set(chosen)) == 30
        clean = [c for c in cases if not c.tear]
        torn = [c for c in cases if c.tear]
        assert {clean[0], clean[-1], torn[0], torn[-1]} <= set(chosen)
        assert {(kind(c.name), c.tear) for c in chosen} == {(kind(c.name), c.tear) for c in cases}
    assert kind("write phase-3-x.json") == kind("write phase-4-x.json")


def test_a_sample_larger_than_the_sweep_is_the_sweep() -> None:
    cases = points(NAMES[:5])
    assert sample(cases, 100, "20") == sorted(cases)


def test_a_subset_is_the_same_draw_every_time_in_order_and_whole_with_full_sweeps() -> None:
    from tests.sweeps import Sweep

    items = [f"input {i}" for i in range(1000)]
    sampled = Sweep(full=False, seed=20, test="t", reports=[])
    chosen = sampled.subset(items, 30, "p")
    assert len(chosen) == 30 and chosen == sampled.subset(list(items), 30, "p")
    assert chosen == sorted(chosen, key=items.index)  # the family's order kept
    assert chosen != sampled.subset(items, 30, "another pattern")
    assert Sweep(full=True, seed=20, test="t", reports=[]).subset(items, 30, "p") == items
    assert sampled.subset(items[:10], 30, "p") == items[:10]


def test_the_environment_variables_reach_the_sweeps_in_an_xdist_worker(tmp_path) -> None:
    """AGENT_CONSOLE_FULL_SWEEPS=1 and AGENT_CONSOLE_SWEEP_SEED=N, as the docstring of tests/sweeps.py offers them:
    the suite's walls remove every AGENT_CONSOLE_* variable at its start, and both were silently ignored."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests import hermetic
    from tests.sweeps import FULL_ENV, SEED_ENV

    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != hermetic.MARK} | {FULL_ENV: "1", SEED_ENV: "7"}
    child = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "1",
                            "--basetemp", str(tmp_path / "child"), str(repo / "tests" / "sweeps_probe.py")],
                           cwd=repo, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert child.returncode == 0 and "2 passed" in child.stdout, child.stdout[-3000:] + child.stderr[-3000:]
