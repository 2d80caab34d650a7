"""The run's console when the fleet's daily budget holds its run and a raise from another shell lets it go on: the
header says the run works again (not "paused · p resumes"), and p pauses it (issue 37 point 4, a trial found the
header stuck on "paused" and p refused: "not paused")."""

from __future__ import annotations

from pathlib import Path

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.cost import Prices
from console.engine.guardrails.fleet import FLEET, local_day
from console.engine.store import JobStore
from console.engine.store.fleet import FleetLimits, SqliteFleet, StoreFleetBudget
from console.engine.supervisor import Supervisor
from console.tui.widgets.status import StatusLine
from tests.conftest import run_settings
from tests.tui.conftest import GatedProvider, drive, events_of, run_app, settle, wait_for


def test_a_raise_from_another_shell_shows_the_run_working_and_p_pauses_it(make_job, tmp_path: Path) -> None:
    paths = make_job("quickstart")
    db = tmp_path / "jobs.db"
    clock = FakeClock(step=0.001)
    ledger = SqliteFleet(db)
    # A limit the first turn's cost passes: the run is held at its first turn boundary.
    fleet = StoreFleetBudget(ledger, paths.root, paths.root.name, lambda: FleetLimits(daily_usd=0.0001),
                             f"test:{paths.run_id}", recheck_seconds=0.0)
    provider = GatedProvider(clock=clock, gate_at=3)  # once going on, it holds still (working) at its third turn
    sup = Supervisor(paths, run_settings(prices=Prices(input=3.0, output=15.0)), provider, clock=clock,
                     store=JobStore(db), fleet=fleet)
    provider.supervisor = sup
    app = run_app(sup)

    async def body(pilot) -> None:
        await wait_for(pilot, lambda: app.state.needs is not None and app.state.needs.reason == "fleet_budget",
                       what="the fleet budget's hold")
        await settle(pilot, app)
        status = app.main.query_one(StatusLine).last_plain
        assert "NEEDS YOU: fleet budget reached" in status and "p resumes" in status, status
        # `agent-console budget --raise` from another shell: recorded in the store, the run sees it by itself.
        ledger.raise_limit(local_day(clock.now()), FLEET, 100.0, "cli")
        await wait_for(pilot, provider.waiting.is_set, what="the run to go on to its gate")
        await wait_for(pilot, lambda: app.state.needs is None, what="the hold's end in the view")
        await settle(pilot, app)
        status = app.main.query_one(StatusLine).last_plain
        assert not app.state.paused and "paused" not in status and "p resumes" not in status, status
        assert app.run_screen.check_action("pause", ()) is True and app.run_screen.check_action("resume", ()) is False
        await pilot.press("p")  # a pause, not a resume the engine refuses as "not paused"
        await wait_for(pilot, lambda: app.state.paused, what="the pause to apply")
        await settle(pilot, app)
        assert "p resumes" in app.main.query_one(StatusLine).last_plain
        sup.stop()
        await wait_for(pilot, lambda: app.state.ended, what="the run's end")

    drive(app, body)
    commands = [(e.command, e.status) for e in events_of(app, ev.OperatorCommand) if e.status != "received"]
    assert commands[0] == ("pause", "applied"), commands
    assert ("resume", "rejected") not in commands


def test_the_guardrails_screen_names_the_fleet_budget_that_holds_the_run() -> None:
    """Found by a new operator's trial: a run held by the fleet's daily budget (or its job's) showed "Budgets ...
    Cost none" on its guardrails screen: its own cost budget, none, as if nothing limited it."""
    from datetime import UTC, datetime

    from console.tui.screens.guardrails import section_lines
    from console.view.state import ConsoleState
    from console.view.state.parts import Need

    now = datetime(2026, 12, 1, 23, 0, tzinfo=UTC)
    st = ConsoleState("job")
    plain = "\n".join(line.plain for line in section_lines(st, now)["g-budgets"])
    assert "Fleet" not in plain
    st.needs = Need("fleet_budget", "the fleet spent $4.66 today, over its daily budget of $4.00\x1b[31m", (), now,
                    True, 7)
    held = "\n".join(line.plain for line in section_lines(st, now)["g-budgets"])
    assert "Fleet" in held and "HELD the fleet spent $4.66 today, over its daily budget of $4.00" in held, held
    assert "\x1b" not in held
