"""Which crash points a sweep runs: all of them, or a fixed-seed sample that keeps every class of point.

A sweep kills a run at each of its durable writes (tests/integration/test_kill_points.py): several hundred
forked runs each, about half of the suite's time on a 2-core machine. By default a sweep runs a sample:

- the first and the last point, and the first and the last torn one;
- one point of each kind of write (its failpoint name with the numbers taken out: ``journal commit``,
  ``write todos.json``, ``agent append log.md``...), killed clean and, where it can tear, torn;
- then points drawn at random up to ``SAMPLE_SIZE``.

The draw is seeded by the seed and the test's id, so the same seed picks the same points on every machine and
in every run (a failure is reproducible: its message names the seed). ``--full-sweeps`` or
``AGENT_CONSOLE_FULL_SWEEPS=1`` runs every point (.ci/run does); ``--sweep-seed N`` or
``AGENT_CONSOLE_SWEEP_SEED=N`` draws another sample. Each sweep says how many of how many points it ran, in the
summary at the end of the run.

Other grids too large for the README command's 5 minutes are sweeps as well (``@pytest.mark.sweep`` and
:meth:`Sweep.subset`): the adversarial inputs of every pattern (tests/unit/test_regex_safety.py) run a fixed-seed
sample, and all of them with ``--full-sweeps``; the property tests (hypothesis) run a quarter of their examples
(:func:`examples`), and all of them with ``--full-sweeps``.
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass, field
from typing import TypeVar

import pytest

FULL_OPTION = "--full-sweeps"
FULL_ENV = "AGENT_CONSOLE_FULL_SWEEPS"
SEED_ENV = "AGENT_CONSOLE_SWEEP_SEED"
DEFAULT_SEED = 20
SAMPLE_SIZE = 45

T = TypeVar("T")


@dataclass(frozen=True, order=True)
class Point:
    """The n-th failpoint of a run (1-based), killed clean or with half its write on disk."""

    n: int
    tear: bool
    name: str = field(compare=False)


def kind(name: str) -> str:
    """A failpoint's kind: its name without the numbers (phase-3-x.json and phase-4-y.json are one kind)."""
    return re.sub(r"\d+", "#", name)


def points(names: list[tuple[str, bool]]) -> list[Point]:
    """Every case of a run whose failpoints were ``names`` (name, can tear): each killed clean, then the
    tearable ones torn."""
    return ([Point(n, False, name) for n, (name, _) in enumerate(names, 1)]
            + [Point(n, True, name) for n, (name, tears) in enumerate(names, 1) if tears])


def sample(cases: list[Point], size: int, seed: str) -> list[Point]:
    """A deterministic subset of ``cases``: the ends, one of each (kind, torn) class, then a seeded draw."""
    rng = random.Random(seed)  # a str seed is hashed with SHA-512: the same on every machine and run
    clean = [c for c in cases if not c.tear]
    torn = [c for c in cases if c.tear]
    chosen = {c for group in (clean, torn) if group for c in (group[0], group[-1])}
    classes: dict[tuple[str, bool], list[Point]] = {}
    for c in cases:
        classes.setdefault((kind(c.name), c.tear), []).append(c)
    for members in classes.values():
        chosen.add(rng.choice(members))
    rest = [c for c in cases if c not in chosen]
    chosen.update(rng.sample(rest, min(len(rest), max(0, size - len(chosen)))))
    return sorted(chosen)


@dataclass
class Sweep:
    """What the running session asks of a sweep: every point, or a sample drawn with ``seed``."""

    full: bool
    seed: int
    test: str
    reports: list[str]
    size: int = SAMPLE_SIZE

    def select(self, cases: list[Point]) -> list[Point]:
        chosen = cases if self.full else sample(cases, self.size, f"{self.seed}:{self.test}")
        classes = len({(kind(c.name), c.tear) for c in cases})
        how = ("all" if self.full else
               f"a sample (seed {self.seed}; every one with {FULL_OPTION} or {FULL_ENV}=1)")
        line = (f"{self.test}: {len(chosen)} of {len(cases)} crash points ran, {how}, "
                f"covering {len({(kind(c.name), c.tear) for c in chosen})} of {classes} kinds")
        self.reports.append(line)
        print(line)
        return chosen

    def subset(self, items: list[T], size: int, what: str) -> list[T]:
        """Every one of ``items`` (in their order) with ``--full-sweeps``, else ``size`` of them drawn with the seed
        and ``what`` (the same ones on every machine and run): a grid other than crash points, such as a pattern's
        adversarial inputs (tests/unit/test_regex_safety.py)."""
        if self.full or len(items) <= size:
            return list(items)
        rng = random.Random(f"{self.seed}:{self.test}:{what}")
        return [items[i] for i in sorted(rng.sample(range(len(items)), size))]

    def describe(self) -> str:
        return "every point" if self.full else f"sample seed {self.seed} ({SEED_ENV}={self.seed} to repeat it)"


# Whether this session runs every point (configure() sets it before the test modules are imported: examples()
# is read by their decorators).
FULL = False
WORKER_KEY = "agent_console_sweeps"


def configure(config: pytest.Config, env: dict[str, str] | os._Environ[str]) -> None:
    """Turn FULL_ENV and SEED_ENV into the session's options, read from ``env`` before the suite's walls remove
    every AGENT_CONSOLE_* variable (tests/hermetic.py: they were silently ignored). An xdist worker parses the
    command line again (not the variables, gone by then): it takes both from the controller's ``workerinput``
    (conftest's pytest_configure_node)."""
    global FULL
    given = getattr(config, "workerinput", {}).get(WORKER_KEY)
    if given is not None:
        config.option.full_sweeps, config.option.sweep_seed = given
    if env.get(FULL_ENV, "") not in ("", "0"):
        config.option.full_sweeps = True
    if env.get(SEED_ENV) and config.option.sweep_seed is None:
        config.option.sweep_seed = int(env[SEED_ENV])
    FULL = bool(config.option.full_sweeps)


def full_requested(config: pytest.Config) -> bool:
    return bool(config.getoption("full_sweeps"))


def seed(config: pytest.Config) -> int:
    value = config.getoption("sweep_seed")
    return DEFAULT_SEED if value is None else int(value)


def examples(n: int) -> int:
    """A property test's max_examples: ``n`` with --full-sweeps, else a quarter of it (at least 10); the test is
    marked ``sweep`` so that .ci/run's last step runs it with all ``n``."""
    return n if FULL else max(10, n // 4)
