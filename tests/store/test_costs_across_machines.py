"""`agent-console costs` over a shared store: two "machines" (each its own data dir, config and host name, on one
real PostgreSQL server) each run the quickstart at a price; either machine's ledger has both, by machine, each
equal to that run's own token_usage events (the other machine's read from the store's events)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.store.machines import QUICKSTART, Machine

PRICES = '[prices."scripted-agent"]\ninput = 3.0\noutput = 15.0\n'


@pytest.fixture
def machines(pg_url: str, tmp_path: Path) -> tuple[Machine, Machine]:
    pair = Machine("machine-a", tmp_path, pg_url), Machine("machine-b", tmp_path, pg_url)
    for m in pair:
        (m.base / "cfg" / "config.toml").write_text(PRICES)
    return pair


def spent(folder: Path) -> float:
    """The run's own total: its last token_usage's job_cost_usd (what jobs, the fleet and the console show)."""
    lines = (folder / ".console" / "events.jsonl").read_text().splitlines()
    usages = [e for e in map(json.loads, lines) if e["type"] == "token_usage"]
    assert usages and all(e["cost_usd"] is not None for e in usages)
    return float(usages[-1]["job_cost_usd"])


def test_each_machines_ledger_has_every_machines_runs_equal_to_their_events(machines: tuple[Machine, Machine]
                                                                           ) -> None:
    a, b = machines
    folders = {}
    for m in machines:
        runner = m.start(str(QUICKSTART), "--speed", "0")
        assert runner.wait() == 0
        folders[m.name] = runner.folder()
    for viewer in (a, b):
        done = viewer.cli("costs", "--by", "machine", "--json")
        assert done.returncode == 0, done.stderr
        got = json.loads(done.stdout)
        rows = {r["key"]: r for r in got["rows"]}
        assert set(rows) == {"machine-a", "machine-b"} and not got["unreadable"]
        for name, folder in folders.items():
            assert rows[name]["cost_usd"] == spent(folder) and rows[name]["runs"] == 1
        assert got["total"]["cost_usd"] == pytest.approx(sum(spent(f) for f in folders.values()), rel=1e-12)
