"""`agent-console budget`: today's spend of the fleet and of each job with a limit, the holds, and the operator's
answers (--raise, --resume) recorded in the store; refused where no budget is set or for a bad amount."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from console.cli import main
from console.engine.guardrails.fleet import FLEET, local_day
from console.engine.store.fleet import FleetLimits, SqliteFleet, StoreFleetBudget
from console.settings import load_settings
from tests.conftest import SAMPLES
from tests.processes import cli


def config(text: str) -> None:
    Path(os.environ["AGENT_CONSOLE_CONFIG"]).write_text(text)


def spend(usd: float, job: str = "quickstart", run: str = "r1") -> StoreFleetBudget:
    settings = load_settings()
    settings.open_store().close()  # the jobs table, as a run's start makes it
    b = settings.budgets
    limits = FleetLimits(b.daily_usd, dict(b.jobs))
    budget = StoreFleetBudget(SqliteFleet(settings.store_path), settings.runs_dir / run, job, lambda: limits, run)
    budget.spent(datetime.now().astimezone(), usd)
    return budget


def test_budget_shows_todays_spend_the_limits_and_the_hold_then_a_raise_lifts_it(capsys) -> None:
    config("[budgets]\ndaily_usd = 1.0\n\n[budgets.jobs]\ntriage = 0.5\n")
    budget = spend(1.25)
    spend(0.1, "triage", "r2")
    assert budget.check(datetime.now().astimezone()) is not None  # the hold, as a run's check makes it
    assert main(["budget", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    fleet, triage = out["scopes"]
    assert fleet == {"scope": FLEET, "spent_usd": 1.35, "daily_usd": 1.0, "raised_usd": 0.0, "limit_usd": 1.0,
                     "held": True, "held_since": fleet["held_since"], "held_runs": []} and fleet["held_since"]
    assert (triage["scope"], triage["spent_usd"], triage["held"]) == ("job:triage", 0.1, False)
    assert out["jobs"] == {"quickstart": 1.25, "triage": 0.1}
    assert main(["budget"]) == 0
    text = capsys.readouterr().out
    assert "the fleet: $1.35 of $1.00  HELD since" in text and "job triage: $0.10 of $0.50" in text
    assert "priced turns only: a run whose model has no [prices] is not counted" in text
    # The hold's time as the operator reads it (local HH:MM), and both answers named.
    assert re.search(r"HELD since \d\d:\d\d: its runs wait for `agent-console budget --raise USD` or "
                     r"`agent-console budget --resume`", text), text
    assert main(["budget", "--raise", "2"]) == 0
    assert "today's budget is now $3.00 ($1.00 a day, raised by $2.00 today)" in capsys.readouterr().out
    assert budget.check(datetime.now().astimezone()) is None
    assert main(["budget", "--resume"]) == 0  # one more day's amount
    assert "now $4.00" in capsys.readouterr().out
    assert main(["budget", "--job", "triage", "--resume"]) == 0
    assert "job triage: today's budget is now $1.00" in capsys.readouterr().out
    raised = SqliteFleet(load_settings().store_path).raises(local_day(datetime.now().astimezone()))
    assert raised[FLEET] == (3.0, f"agent-console budget --resume on {raised[FLEET][1].rsplit(' ', 1)[-1]}")


def test_budget_lists_the_runs_a_hold_pauses_by_their_ids(capsys) -> None:
    # The notification says "agent-console budget --job quickstart (today's spend, the limits, the runs held)":
    # the runs held are listed (as `jobs` names them), not only "its runs wait".
    from console.engine.control import RunLock
    from console.engine.job_files import JobPaths
    from console.engine.runs import run_id

    config("[budgets.jobs]\nquickstart = 1.0\n")
    settings = load_settings()
    teller = spend(1.25, run="held")
    spend(0.01, run="killed")
    now = datetime.now().astimezone()
    hold = teller.check(now)
    assert hold is not None
    store = settings.open_store()
    folders = {}
    for run in ("held", "killed", "working"):  # killed: its process died held; working: not held
        folder = folders[run] = settings.runs_dir / run
        (folder / ".console").mkdir(parents=True)
        store.started(folder, "quickstart", "scripted", "scripted-agent", now)
    for run in ("held", "killed"):
        store.needs(folders[run], "fleet_budget", f"[not told: a channel refused] {hold.message()}"
                    if run == "killed" else hold.message(), now)
    store.close()
    spend(0.01, run="working")
    locks = [RunLock(JobPaths(folders[run])) for run in ("held", "working")]
    assert all(lock.acquire() for lock in locks)
    try:
        assert main(["budget", "--job", "quickstart", "--json"]) == 0
        [scope] = json.loads(capsys.readouterr().out)["scopes"]
        assert scope["held"] and scope["held_runs"] == [run_id(folders["held"])]
        assert main(["budget", "--job", "quickstart"]) == 0
        text = capsys.readouterr().out
        assert f"\n    runs held: {run_id(folders['held'])}\n" in text, text
    finally:
        for lock in locks:
            lock.release()
    assert main(["budget", "--job", "quickstart"]) == 0  # nobody runs them now
    assert "    runs held: none now" in capsys.readouterr().out


@pytest.mark.parametrize("args", [["--raise", "5"], ["--resume"], ["--job", "nope", "--raise", "1"]])
def test_an_answer_where_no_budget_is_set_is_refused(capsys, args: list[str]) -> None:
    config("")
    assert main(["budget", *args]) == 2
    assert "no daily budget is set for" in capsys.readouterr().err


@pytest.mark.parametrize("amount", ["0", "-1", "nan", "inf", "1e12"])
def test_a_raise_that_is_no_amount_is_refused(capsys, amount: str) -> None:
    config("[budgets]\ndaily_usd = 1.0\n")
    assert main(["budget", "--raise", amount]) == 2
    assert "--raise" in capsys.readouterr().err


def test_no_budget_set_says_so(capsys) -> None:
    config("")
    assert main(["budget"]) == 0
    out = capsys.readouterr().out
    assert "no [budgets] is set in the operator's config" in out
    # Where to set one: the config file this command read.
    assert f"daily_usd = USD under [budgets] in {os.environ['AGENT_CONSOLE_CONFIG']}" in out


def test_a_job_toml_cannot_set_the_fleets_budget(tmp_path: Path) -> None:
    """[budgets] is the operator's config only: a job folder is not trusted to lift the fleet's limits."""
    from console.engine.job import JobError, JobPaths
    from console.engine.job_config import load_job_config

    job = tmp_path / "job"
    job.mkdir()
    (job / "instructions.md").write_text("x")
    (job / "job.toml").write_text("[budgets]\ndaily_usd = 1000000.0\n")
    with pytest.raises(JobError):
        load_job_config(JobPaths(job))


def test_the_largest_raise_allowed_counts_and_raises_past_the_top_are_kept_at_it(capsys) -> None:
    # --raise takes up to 1e9: that raise counted nothing (a raise of 1e9 or more read back as no amount), and two
    # raises summing past the top dropped the scope's raise back to nothing, re-holding every run it had let go.
    config("[budgets]\ndaily_usd = 1.0\n")
    budget = spend(1.5)
    assert budget.check(datetime.now().astimezone()) is not None
    assert main(["budget", "--raise", "1e9"]) == 0
    assert "raised by $0.00" not in capsys.readouterr().out
    assert budget.check(datetime.now().astimezone()) is None
    assert main(["budget", "--raise", "1e9"]) == 0
    capsys.readouterr()
    assert budget.check(datetime.now().astimezone()) is None
    raised = SqliteFleet(load_settings().store_path).raises(local_day(datetime.now().astimezone()))
    assert raised[FLEET][0] == 1e9


def test_a_raise_too_small_to_lift_the_hold_says_so(capsys) -> None:
    config("[budgets]\ndaily_usd = 1.0\n")
    budget = spend(3.0)
    assert budget.check(datetime.now().astimezone()) is not None
    assert main(["budget", "--raise", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "goes on" not in out and "still held" in out and "$3.00" in out, out
    assert budget.check(datetime.now().astimezone()) is not None
    assert main(["budget", "--raise", "5"]) == 0
    assert "goes on" in capsys.readouterr().out


def test_job_shows_that_jobs_scope_alone_even_without_a_limit(capsys) -> None:
    # --job was taken and passed over when showing: every scope was shown, and a job without a limit not at all.
    config("[budgets]\ndaily_usd = 5.0\n\n[budgets.jobs]\ntriage = 0.5\n")
    spend(0.25, "nightly", "r1")
    assert main(["budget", "--job", "nightly"]) == 0
    text = capsys.readouterr().out
    assert "job nightly: $0.25, no daily budget" in text and "the fleet" not in text and "triage" not in text, text
    assert main(["budget", "--job", "nightly", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["scopes"]
    assert (row["scope"], row["spent_usd"], row["limit_usd"], row["held"]) == ("job:nightly", 0.25, None, False)
    assert main(["budget", "--job", "triage"]) == 0
    assert "job triage: $0.00 of $0.50" in capsys.readouterr().out


def _day_in(zone: str) -> set[str]:
    now = datetime.now(ZoneInfo(zone))
    return {now.date().isoformat(), (now + timedelta(minutes=5)).date().isoformat()}  # a test across midnight


def test_machines_in_two_zones_count_one_day_when_the_config_names_it(capsys) -> None:
    """A shared store's machines in other zones counted their own local days: one held the fleet on its day, the
    other's `budget --raise` raised another day's limit, and the held runs stayed held. With `[budgets] timezone`
    both count that zone's day: the raise made in Los Angeles lifts the hold made in Kiritimati (22 hours apart)."""
    os.environ["TZ"] = "Asia/Tokyo"  # this machine's own zone, which the config overrides
    time.tzset()
    config('[budgets]\ndaily_usd = 1.0\ntimezone = "Pacific/Kiritimati"\n')
    budget = spend(1.25)
    hold = budget.check(datetime.now().astimezone())
    assert hold is not None and hold.day in _day_in("Pacific/Kiritimati")
    assert main(["budget", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["day"] == hold.day
    other = {**os.environ, "TZ": "America/Los_Angeles"}  # another machine of the store, its own zone
    done = subprocess.run(cli("budget", "--raise", "2"), env=other, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "today's budget is now $3.00" in done.stdout
    assert budget.check(datetime.now().astimezone()) is None  # lifted: the raise was for the hold's day


def test_a_timezone_this_machine_does_not_know_is_refused_by_name(capsys) -> None:
    config('[budgets]\ndaily_usd = 1.0\ntimezone = "Mars/Olympus_Mons"\n')
    assert main(["budget"]) == 2
    err = capsys.readouterr().err
    assert "budgets.timezone" in err and "unknown timezone 'Mars/Olympus_Mons'" in err, err
    assert os.environ.get("TZ") != "Mars/Olympus_Mons"


def test_jobs_shows_its_times_in_the_configs_zone_too(tmp_path: Path) -> None:
    """`jobs` reads no settings (console.locations, for its speed): it applies the operator's zone as they do, so a
    run's start reads the same there as in `budget`, `costs` and the console."""
    config('[budgets]\ntimezone = "Pacific/Kiritimati"\n')
    env = {**os.environ, "TZ": "UTC"}
    made = subprocess.run(cli("run", "--headless", str(SAMPLES / "quickstart"), "--speed", "0", "--max-turns", "1"),
                          env=env, capture_output=True, text=True, timeout=120)
    assert "run " in made.stdout + made.stderr
    listed = subprocess.run(cli("jobs", "--json"), env=env, capture_output=True, text=True, timeout=60)
    started = datetime.fromisoformat(json.loads(listed.stdout.splitlines()[0])["started_at"])
    table = subprocess.run(cli("jobs"), env=env | {"COLUMNS": "200"}, capture_output=True, text=True, timeout=60)
    assert table.returncode == 0, table.stderr
    there = started.astimezone(ZoneInfo("Pacific/Kiritimati"))
    assert f"{there:%m-%d %H:%M}" in table.stdout, table.stdout
    assert f"{started.astimezone(ZoneInfo('UTC')):%m-%d %H:%M}" not in table.stdout  # not this machine's zone
