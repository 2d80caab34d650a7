"""A jobs store with a run in every state the fleet view shows, built by hand (events and store rows as the engine
writes them), for the fleet's tests and snapshots. Which runs are alive is the test's say (``holder``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from console.engine import events as ev
from console.engine.job import JobPaths
from console.engine.store import JobStore
from console.view.fleet import RunSeat
from tests.tui.conftest import FROZEN_NOW
from tests.tui.guardrail_events import Log


@dataclass(frozen=True)
class FleetFixture:
    store_path: Path
    runs: dict[str, Path]  # state -> run folder
    live: dict[Path, int]  # run folder -> pid of its (pretend) process

    def holder(self, fold: RunSeat) -> int | None:
        return self.live.get(fold.paths.root)


def _run(log: Log, *, phase: int = 2, of: int = 4, name: str = "Draft the report", turns: int = 6,
         cost: float = 0.12, used: int = 14_000) -> None:
    log.add(ev.SessionStarted, reason="new", provider="openai", model="gpt-6.2-sol", context_window=32_000,
            context_window_source="registry: gpt-6.2-sol", priced=True)
    seq = len(log.events) + 1  # built here: the event's own "kind" field shadows Log.add's first argument
    log.events.append(ev.TodosChanged(
        ts=log.start + timedelta(seconds=seq), seq=seq, session=1, kind="phase", phase_name=name,
        phase_number=phase, total_phases=of, items=[ev.TodoItemRecord(text="Read the notes", done=True),
                                                    ev.TodoItemRecord(text="Write the summary", done=False)]))
    for turn in range(1, turns + 1):
        log.add(ev.TurnStarted, turn=turn, prompt_tokens_est=used)
        args = json.dumps({"path": f"notes/part-{turn}.md"})
        log.add(ev.ToolCalled, turn=turn, call_id=f"c{turn}", tool="read_file", arguments=args)
        log.add(ev.TokenUsage, turn=turn, input_tokens=used, output_tokens=300, context_tokens=used,
                context_window=32_000, prompt_budget=28_000, job_cost_usd=round(cost * turn / turns, 4))


def make_fleet(root: Path) -> FleetFixture:
    """Seven runs: waiting for approval, running, paused, completed, failed, interrupted, stopped."""
    store_path = root / "data" / "jobs.db"
    store = JobStore(store_path)
    runs: dict[str, Path] = {}
    live: dict[Path, int] = {}
    specs = [
        ("interrupted", "nightly-etl", 0),
        ("completed", "quickstart", 1),
        ("failed", "api-migration", 2),
        ("stopped", "docs-refresh", 3),
        ("paused", "release-notes", 4),
        ("running", "requirements-extraction", 5),
        ("waiting", "security-audit", 6),
    ]
    for state, job, n in specs:
        started = FROZEN_NOW - timedelta(minutes=40 - n * 5)
        folder = root / "runs" / f"{job}-{started.strftime('%Y%m%d-%H%M%S')}"
        folder.mkdir(parents=True)
        (folder / "instructions.md").write_text(f"# {job}\n", encoding="utf-8")
        log = Log(start=started)
        store.started(folder, job, "openai", "gpt-6.2-sol", started)
        if state == "waiting":
            _run(log, phase=3, of=5, name="Check the findings", used=27_500, cost=1.37)
            log.add(ev.RestartPending, usage_pct=0.98, used_tokens=27_500, context_window=32_000,
                    prompt_budget=28_000, carryover_messages=6, carryover_tokens=2_400, next_session=2)
            store.ended(folder, "awaiting approval", started + timedelta(minutes=3), "restart pending")
            live[folder] = 4242
        elif state == "running":
            _run(log, phase=2, of=4, name="Extract requirements", cost=0.48)
            live[folder] = 4243
        elif state == "paused":
            _run(log, phase=1, of=3, name="Collect the changes", cost=0.05)
            log.add(ev.OperatorCommand, command="pause", source="cli", status="applied", detail="paused")
            live[folder] = 4244
        elif state == "completed":
            _run(log, phase=4, of=4, name="Write the digest", cost=0.31)
            log.add(ev.JobCompleted, summary="Produced action_items.md and digest.md.", confidence=0.9)
            log.add(ev.SessionEnded, reason="job_complete", detail="")
            store.completed(folder, started + timedelta(minutes=4), 0.9, "Produced action_items.md and digest.md.")
        elif state == "failed":
            _run(log, phase=2, of=6, name="Port the endpoints", cost=2.4)
            log.add(ev.SessionEnded, reason="max_turns", detail="50 turns without finishing the phase")
            store.ended(folder, "failed", started + timedelta(minutes=4), "max_turns: 50 turns")
        elif state == "interrupted":
            _run(log, phase=1, of=2, name="Load the data", cost=0.02)  # killed: its row still says running
        elif state == "stopped":
            _run(log, phase=2, of=3, name="Rewrite the guides", cost=0.09)
            log.add(ev.SessionEnded, reason="user_shutdown", detail="stopped by the operator")
            store.ended(folder, "stopped", started + timedelta(minutes=4), "stopped by the operator")
        log.write(JobPaths(folder).events)
        runs[state] = folder
    return FleetFixture(store_path, runs, live)


def listed(app: Any, n: int) -> bool:
    """The fleet shows ``n`` runs, every run's log folded (not the first paint: the store's rows alone), and the
    list drawn (``shown``: rows can arrive before the list is composed; a test that looked one up raised)."""
    view = app.fleet_view
    return view is not None and view.rows.folded and len(view.rows) == n and len(view.shown) == n
