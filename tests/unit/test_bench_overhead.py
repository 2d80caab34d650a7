"""benchmarks/overhead.py's floor: the knocked-out records are really not written while it measures (the journal
and the event log stay empty, no state file is refreshed, no status or feedback event), everything else of the turn
runs (the turns, their events built), and every knocked-out piece is back afterwards. The figures are the
benchmark's to report, not asserted here."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from console.engine import events as ev
from console.engine import runtime as runtime_module
from console.engine.enforcement import status as status_module
from console.engine.events import stream as stream_module
from console.engine.journal import Journal
from console.engine.turn_steps import TurnSteps
from tests.benchmarks import load


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load("overhead")


def _originals() -> list[object]:
    return [Journal._write, stream_module.EventStream._write, runtime_module.PROJECTION_INTERVAL,
            status_module.StatusReport.emit, TurnSteps.feedback]


def test_the_floor_records_nothing_and_puts_everything_back(bench: ModuleType, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_TMP", str(tmp_path))
    before = _originals()
    seen: list[type] = []
    written: list[Path] = []
    build = bench.build_state

    def spying(root: Path, *a: object, **k: object) -> object:
        rt, conv = build(root, *a, **k)
        rt.events.subscribe(lambda e: seen.append(type(e)), text=False)
        written.extend([rt.journal.path, rt.paths.events])
        return rt, conv

    monkeypatch.setattr(bench, "build_state", spying)
    with bench.records_knocked_out():
        turns, info = bench.measure(12, 40, None, 3.0, 0.0)
    assert _originals() == before
    assert info["session_turns"] == 12 and len(turns.harness) == 12 - 5  # the first 5 warm up
    # The turns ran and built their events...
    assert seen.count(ev.TurnStarted) == 12 and ev.ToolResult in seen and ev.TokenUsage in seen
    # ...and recorded none of them, nor the status or the feedback.
    assert ev.GuardrailsStatus not in seen and ev.Feedback not in seen
    journal, events = written
    assert not journal.exists() or journal.stat().st_size == 0
    assert not events.exists() or events.stat().st_size == 0


def test_without_the_floor_the_same_turns_record_everything(bench: ModuleType, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: the same measure, nothing knocked out, writes its journal and its event log."""
    monkeypatch.setenv("BENCH_TMP", str(tmp_path))
    sizes: list[int] = []
    build = bench.build_state

    def spying(root: Path, *a: object, **k: object) -> object:
        rt, conv = build(root, *a, **k)
        rt.events.subscribe(lambda e: sizes.append(rt.journal.path.stat().st_size if rt.journal.path.exists()
                                                   else 0) if isinstance(e, ev.TurnStarted) else None, text=False)
        return rt, conv

    monkeypatch.setattr(bench, "build_state", spying)
    bench.measure(12, 40, None, 3.0, 0.0)
    assert sizes[-1] > sizes[1] > 0
