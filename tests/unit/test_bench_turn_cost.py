"""benchmarks/turn_cost.py: each turn counted apart (from one model call to the next), the first turns left out,
and callgrind's per-turn dumps read in their order (part 10 after part 9). The figures are the benchmark's to
report, not asserted here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from tests.benchmarks import load


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load("turn_cost")


def test_figures_leave_the_first_turns_out(bench: ModuleType) -> None:
    per_turn = [10**6] * bench.SKIPPED + [5, 1, 3, 2, 4]
    assert bench.figures(per_turn) == {"p50": 3, "p90": 4, "mean": 3, "turns": 5}


def test_calls_are_counted_per_turn_of_a_real_session(bench: ModuleType) -> None:
    out = bench.calls_per_turn(bench.SKIPPED + 4, 40)
    # One count per turn between model calls: the last turn's end (no next call) is not a whole turn.
    assert out["turns"] == 3
    assert 100 < out["p50"] <= out["p90"]
    # The hook is undone: a later session's model is the benchmark's own again.
    assert bench.overhead.InstantModel.stream.__name__ == "stream"


def test_callgrinds_dumps_are_read_one_turn_each_in_their_order(bench: ModuleType, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_valgrind(args: list[str], **_: object) -> subprocess.CompletedProcess[bytes]:
        out = Path(next(a for a in args if a.startswith("--callgrind-out-file=")).split("=", 1)[1])
        out.write_text("summary: 999\n")  # the process's exit: no turn
        (out.parent / "callgrind.out.1").write_text("summary: 77\n")  # the start, up to the first model call
        for part in range(2, 13):
            (out.parent / f"callgrind.out.{part}").write_text(f"events: Ir\nsummary: {part * 100}\n")
        return subprocess.CompletedProcess(args, 0, b"", b"")

    monkeypatch.setattr(bench.subprocess, "run", fake_valgrind)
    assert bench.instructions(12, 40, tmp_path) == [part * 100 for part in range(2, 13)]
    with pytest.raises(SystemExit, match="11 turns dumped of 20"):
        bench.instructions(20, 40, tmp_path)


# A turn's dump as callgrind writes it with --dump-before: ``start`` (the thread's start, still on the stack) called
# ``run`` in an earlier part (calls=0: the call is in progress) and ``run`` ran 900 instructions of its own in this
# part and called ``work`` twice (300): 900 in all. A relative position (+2) follows the call in progress.
DUMP = """# callgrind format
version: 1
positions: line
events: Ir
summary: 900

fl=a.c
fn=work
10 300

fn=run
20 600
cfn=work
calls=2 10
+1 300

fn=start
cfn=run
calls=0 20
5 900
+2 0
"""


def test_a_kept_dump_reads_right_in_callgrind_annotate(bench: ModuleType, tmp_path: Path) -> None:
    dump = tmp_path / "callgrind.out.7"
    dump.write_text(DUMP)
    bench.readable(dump)
    text = dump.read_text()
    # The call in progress is its position alone, with no cost; a finished call (a count above 0) stays.
    assert "calls=0" not in text and "\n5 0\n+2 0\n" in text and "calls=2 10\n+1 300\n" in text
    if shutil.which("callgrind_annotate") is None:
        return
    out = subprocess.run(["callgrind_annotate", "--threshold=100", str(dump)], capture_output=True, text=True,
                         check=True).stdout
    own = {line.split()[-1]: int(line.split()[0].replace(",", "")) for line in out.splitlines()
           if line.strip().endswith((":work", ":run", ":start"))}
    # What each function ran itself, summing to the part's total (before: start "ran" the whole 900 again).
    assert own == {"a.c:work": 300, "a.c:run": 600, "a.c:start": 0}
