"""benchmarks/suite_waits.py, so the script cannot rot: its hook, wrapped around two tests' protocols as pytest
wraps it, records each test once with its figures (a child reaped within the test counted as the test's), and its
report ranks both and their module. How long anything took is the benchmark's to report, never asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.benchmarks import load


def test_the_hook_records_each_test_and_the_report_ranks_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "recorded"
    monkeypatch.setenv("SUITE_WAITS_OUT", str(out))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    bench = load("suite_waits")
    try:
        for nodeid, body in (("tests/unit/test_tiny.py::test_quiet", lambda: None),
                             ("tests/unit/test_tiny.py::test_a_child",
                              lambda: subprocess.run([sys.executable, "-c", "pass"], check=True))):
            protocol = bench.pytest_runtest_protocol(SimpleNamespace(nodeid=nodeid), None)
            next(protocol)  # the test's setup, call and teardown run here
            body()
            with pytest.raises(StopIteration):
                next(protocol)
    finally:
        bench._file.close()
    rows = [json.loads(line) for path in out.glob("gw7-*.jsonl") for line in path.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["tests/unit/test_tiny.py::test_quiet", "tests/unit/test_tiny.py::test_a_child"]
    assert all(r["worker"] == "gw7" and r["wall"] >= 0 and r["own"] >= 0 for r in rows)
    assert rows[1]["children"] > 0  # the child it reaped

    loaded = bench.load(out)
    assert [r["idle"] for r in loaded] == [r["wall"] - r["own"] - r["children"] for r in rows]
    lines = bench.report(loaded, top=10)
    assert lines[0].startswith("2 tests")
    assert sum(line.endswith(("::test_quiet", "::test_a_child")) for line in lines) == 2
    assert any(line.endswith("2 tests  tests/unit/test_tiny.py") for line in lines)  # the module's line
    assert bench.summary(loaded)["tests"] == 2


def test_nothing_recorded_is_said_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert load("suite_waits").main(["--out", str(tmp_path)]) == 1
    assert "nothing recorded in" in capsys.readouterr().err
