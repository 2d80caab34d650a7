"""The fleet's daily budget across two "machines" on one real PostgreSQL store (each its own data dir, config and
host name): their runs' spend together reaches ``[budgets] daily_usd``, both runs hold at a turn boundary, the
operator's channel (a loopback webhook) hears it once, and `agent-console budget --raise` on either machine lets both
go on. With a kill -9 of the runner that created the hold before it told anyone, the other machine's held run takes
the telling over once the claim is stale: told once, never zero times; and the killed run, resumed, goes on with
nothing lost and nothing twice."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.notify_server import Loopback, loopback
from tests.store.machines import REPO, Machine, Runner, file_events, missing, sql, wait_until

PRICES = '[prices."scripted-agent"]\ninput = 3.0\noutput = 15.0\n'
WAIT = 120.0

# A runner killed -9 (os.kill: no finally, nothing flushed) right after it created the hold and claimed its telling.
KILLED_AT_THE_HOLD = """
import os, signal, sys
from console.engine import failpoints
def hook(name, tear):
    if name == "fleet hold":
        os.kill(os.getpid(), signal.SIGKILL)
failpoints.install(hook)
from console.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture
def server() -> Iterator[Loopback]:
    with loopback() as lb:
        yield lb


def machines(tmp_path: Path, url: str, hook: str, daily: float) -> tuple[Machine, Machine]:
    pair = Machine("machine-a", tmp_path, url), Machine("machine-b", tmp_path, url)
    for m in pair:
        (m.base / "cfg" / "config.toml").write_text(
            f'{PRICES}\n[budgets]\ndaily_usd = {daily}\n\n[notify]\nurls = ["{hook}"]\non_end = false\n')
    return pair


def events(folder: Path) -> list[dict[str, object]]:
    return file_events(folder)  # whole lines: the runs append as the waits below read


def held(folder: Path) -> bool:
    needs = [e for e in events(folder) if e["type"] in ("needs_operator", "needs_operator_cleared")]
    return bool(needs) and needs[-1]["type"] == "needs_operator" and needs[-1]["reason"] == "fleet_budget"


def fleet_messages(server: Loopback) -> list[str]:
    return [r.body["title"] for r in server.requests if "fleet budget reached" in r.body.get("title", "")]


def test_two_machines_runs_hold_at_the_fleet_budget_are_told_once_and_a_raise_lets_both_go_on(
        pg_url: str, tmp_path: Path, server: Loopback) -> None:
    a, b = machines(tmp_path, pg_url, server.url("json", "hook"), 0.02)
    ra, rb = a.start(str(REPO / "sample_jobs" / "quickstart")), b.start(str(REPO / "sample_jobs" / "quickstart"))
    fa, fb = ra.folder(), rb.folder()
    wait_until(lambda: held(fa) and held(fb), WAIT, "both machines' runs held by the fleet budget")
    server.wait_for(1)
    # Marked told by the run that told it, once its channel took it (a takeover would have moved the claim).
    wait_until(lambda: sql(pg_url, "SELECT 1 FROM fleet_holds WHERE told_at IS NOT NULL"), WAIT, "the telling marked")
    [(claimed_by, created_by)] = sql(pg_url, "SELECT claimed_by, created_by FROM fleet_holds")
    assert claimed_by == created_by
    # The runs it pauses, counted by their runners' current leases when it was told, in words that fit the number
    # (both runs may not have been started on the store yet at that moment).
    [told] = [r.body["message"] for r in server.requests if "fleet budget reached" in r.body.get("title", "")]
    assert re.search(r"; (1 live run pauses at its|2 live runs pause at their) next turn\.", told), told
    from console.engine.runs import run_id

    wait_until(lambda: sql(pg_url, "SELECT COUNT(*) FROM runs WHERE status = 'needs you'") == [(2,)], WAIT,
               "both runs held in the store's rows")
    done = b.cli("budget", "--json")
    assert done.returncode == 0, done.stderr
    [fleet] = json.loads(done.stdout)["scopes"]
    assert fleet["held"] and fleet["spent_usd"] >= 0.02 and set(json.loads(done.stdout)["jobs"]) == {"quickstart"}
    assert fleet["held_runs"] == sorted([run_id(fa), run_id(fb)])  # every machine's, by the ids `jobs` prints
    raised = a.cli("budget", "--raise", "100")
    assert raised.returncode == 0 and "today's budget is now $100" in raised.stdout, raised.stdout + raised.stderr
    assert ra.wait(WAIT) == 0 and rb.wait(WAIT) == 0  # both completed, by themselves
    for folder in (fa, fb):
        [cleared] = [e for e in events(folder) if e["type"] == "needs_operator_cleared"]
        assert cleared["by"] == "the fleet budget was raised (agent-console budget --raise $100 on machine-a)"
    assert len(fleet_messages(server)) == 1, fleet_messages(server)
    assert len(sql(pg_url, "SELECT 1 FROM fleet_holds")) == 1


def test_a_kill_9_between_the_hold_and_its_telling_is_told_once_by_another_machine_and_the_run_resumes(
        pg_url: str, tmp_path: Path, server: Loopback) -> None:
    a, b = machines(tmp_path, pg_url, server.url("json", "hook"), 0.02)
    job = REPO / "sample_jobs" / "quickstart"
    out = a.base / "killed.log"
    with out.open("wb") as fh:
        proc = subprocess.Popen([sys.executable, "-c", KILLED_AT_THE_HOLD, "run", str(job), "--headless"],
                                env=a.env, stdout=fh, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
    killed = Runner(proc, out)
    fa = killed.folder()
    assert killed.wait(WAIT) == -9
    [(claimed_by, told_at)] = sql(pg_url, "SELECT claimed_by, told_at FROM fleet_holds")
    assert claimed_by.startswith("machine-a:") and told_at is None
    assert not held(fa)  # it died before its need was recorded: nobody was told
    # Unpaced (--speed 0): it is held at its first look at the fleet's spend, which machine-a's hold has passed,
    # and what it and the resumed run do after the raise is theirs to do, not seconds of pacing to wait out.
    rb = b.start(str(job), "--speed", "0")
    fb = rb.folder()
    wait_until(lambda: held(fb), WAIT, "machine-b's run held by the hold machine-a made")
    assert fleet_messages(server) == []  # the claim is fresh: machine-b does not tell it (yet)
    # Time passes (as a stale claim's would): machine-b's held run, looking again, takes the telling over.
    sql(pg_url, "UPDATE fleet_holds SET claimed_at = now() - interval '1 hour'")
    wait_until(lambda: fleet_messages(server), WAIT, "the hold told by machine-b")
    # The telling is marked after the channel took it (told at least once, never zero times): wait for the mark.
    wait_until(lambda: sql(pg_url, "SELECT 1 FROM fleet_holds WHERE told_at IS NOT NULL"), WAIT, "the telling marked")
    [(claimed_by, told_at)] = sql(pg_url, "SELECT claimed_by, told_at FROM fleet_holds")
    assert claimed_by.startswith("machine-b:") and told_at is not None
    raised = b.cli("budget", "--raise", "100")
    assert raised.returncode == 0, raised.stderr
    assert rb.wait(WAIT) == 0
    # The killed run, resumed on its machine: it goes on to its end, nothing lost and nothing twice.
    resumed = a.cli("resume", fa.name, "--speed", "0")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr
    ended = a.cli("wait", fa.name, "--timeout", str(WAIT), timeout=WAIT + 30)
    assert ended.returncode == 0, ended.stdout + ended.stderr  # completed
    seqs = [e["seq"] for e in events(fa)]
    assert seqs == sorted(set(seqs))
    turns = [e["turn"] for e in events(fa) if e["type"] == "turn_started"]
    assert turns == sorted(set(turns))
    assert missing(pg_url, fa) == [] and missing(pg_url, fb) == []
    assert len(fleet_messages(server)) == 1, fleet_messages(server)


@pytest.mark.parametrize("bad", ["'NaN'", "'Infinity'", "-5", "1e300"])
def test_a_foreign_row_in_the_shared_store_counts_nothing_and_a_figure_is_never_lowered(pg_url: str, bad: str) -> None:
    from datetime import UTC, datetime, timedelta

    from console.engine.guardrails.fleet import local_day
    from console.engine.store.fleet import FleetLimits, StoreFleetBudget
    from console.engine.store.pg_fleet import PgFleet
    from console.engine.store.postgres import PgStore

    now = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)
    day, yesterday = local_day(now), local_day(now - timedelta(days=1))
    store = PgStore(pg_url, host="machine-a")
    try:
        path = Path("/runs/quickstart-20260115-140000")
        store.ensure_run(path, path.name, now)
        budget = StoreFleetBudget(PgFleet(store), path, "quickstart", lambda: FleetLimits(daily_usd=1.0), "a:1:r")
        budget.spent(now, 0.5)
        sql(pg_url, f"INSERT INTO fleet_spend (key, day, job, usd) VALUES ('foreign', %s, 'quickstart', {bad})",
            day)
        sql(pg_url, f"INSERT INTO fleet_raises (day, scope, usd, by) VALUES (%s, 'fleet', {bad}, 'x')", day)
        assert budget.check(now) is None and budget.known
        # The 'spent' update is a figure: applied again, or an older one late, it never lowers the day's.
        key = store.key(path)
        store.apply("spent", (day, "quickstart", 0.2, key))
        assert sql(pg_url, "SELECT usd FROM fleet_spend WHERE key = %s", key) == [(0.5,)]
        store.apply("spent", (yesterday, "quickstart", 9.0, key))  # yesterday's, late
        assert sql(pg_url, "SELECT day, usd FROM fleet_spend WHERE key = %s", key) == [(day, 0.5)]
        budget.spent(now, 0.5)
        hold = budget.check(now)
        assert hold is not None and hold.limit_usd == 1.0 and hold.spent_usd == 1.0
    finally:
        store.close()


def test_raises_in_the_shared_store_add_up_to_the_top_and_stop_there(pg_url: str) -> None:
    # A raise of the largest amount --raise takes, twice: it counted nothing, then the sum read back as no amount.
    from console.engine.store.fleet import MAX_LIMIT_USD
    from console.engine.store.pg_fleet import PgFleet
    from console.engine.store.postgres import PgStore

    store = PgStore(pg_url, host="machine-a")
    try:
        ledger = PgFleet(store)
        assert ledger.raise_limit("2026-01-15", "fleet", MAX_LIMIT_USD, "a") == MAX_LIMIT_USD
        assert ledger.raise_limit("2026-01-15", "fleet", MAX_LIMIT_USD, "b") == MAX_LIMIT_USD
        assert ledger.raises("2026-01-15") == {"fleet": (MAX_LIMIT_USD, "b")}
    finally:
        store.close()


def test_a_claim_ahead_of_the_servers_time_is_no_claim(pg_url: str) -> None:
    # A planted hold claimed far ahead was never stale: nobody would ever tell it.
    from datetime import UTC, datetime

    from console.engine.guardrails.fleet import local_day
    from console.engine.store.fleet import FleetLimits, StoreFleetBudget
    from console.engine.store.pg_fleet import PgFleet
    from console.engine.store.postgres import PgStore

    now = datetime(2026, 1, 15, 14, 0, tzinfo=UTC)
    store = PgStore(pg_url, host="machine-a")
    try:
        path = Path("/runs/quickstart-20260115-140000")
        store.ensure_run(path, path.name, now)
        budget = StoreFleetBudget(PgFleet(store), path, "quickstart", lambda: FleetLimits(daily_usd=1.0), "a:1:r")
        budget.spent(now, 2.0)
        sql(pg_url, """INSERT INTO fleet_holds (day, scope, limit_usd, spent_usd, running, created_at, created_by,
                       claimed_by, claimed_at) VALUES (%s, 'fleet', 1.0, 2.0, 0, 'x', 'planted', 'planted',
                       now() + interval '10 years')""", local_day(now))
        hold = budget.check(now)
        assert hold is not None and hold.tell
    finally:
        store.close()


def test_a_pod_given_the_budget_as_kubernetes_is_held_with_the_operators_runs_and_a_raise_here_lets_it_go_on(
        pg_url: str, tmp_path: Path, server: Loopback, monkeypatch: pytest.MonkeyPatch) -> None:
    # "machine-b" is a pod: no config file of its own, only the variables `submit --kubernetes` gives it
    # (console.kube.carry.settings_env of the operator's settings: [budgets] and [prices] among them) and the store.
    from console.kube import carry
    from console.settings import load_settings

    a, pod = machines(tmp_path, pg_url, server.url("json", "hook"), 0.02)
    (pod.base / "cfg" / "config.toml").write_text("")
    monkeypatch.setenv("AGENT_CONSOLE_CONFIG", a.env["AGENT_CONSOLE_CONFIG"])
    monkeypatch.setenv("AGENT_CONSOLE_STORE", pg_url)
    given = carry.settings_env(load_settings())
    assert "AGENT_CONSOLE_BUDGETS" in given and "AGENT_CONSOLE_PRICES" in given
    pod.env.update(given)
    ra, rp = a.start(str(REPO / "sample_jobs" / "quickstart")), pod.start(str(REPO / "sample_jobs" / "quickstart"))
    fa, fp = ra.folder(), rp.folder()
    wait_until(lambda: held(fa) and held(fp), WAIT, "the operator's run and the pod's held by the fleet budget")
    raised = a.cli("budget", "--raise", "100")
    assert raised.returncode == 0, raised.stdout + raised.stderr
    assert ra.wait(WAIT) == 0 and rp.wait(WAIT) == 0  # both completed, by themselves
    [cleared] = [e for e in events(fp) if e["type"] == "needs_operator_cleared"]
    assert cleared["by"] == "the fleet budget was raised (agent-console budget --raise $100 on machine-a)"


def test_a_held_run_whose_process_died_goes_on_after_one_resume_and_the_others_stay_held(
        pg_url: str, tmp_path: Path, server: Loopback) -> None:
    # The operator's resume of a held run answers its hold whether a process runs it or not: a run killed while
    # held, started again by `resume`, is not held again at its first turn (it was, and needed a second resume).
    a, b = machines(tmp_path, pg_url, server.url("json", "hook"), 0.02)
    job = REPO / "sample_jobs" / "quickstart"
    ra, other = a.start(str(job)), b.start(str(job))
    fa, fo = ra.folder(), other.folder()
    wait_until(lambda: held(fa) and held(fo), WAIT, "both runs held by the fleet budget")
    ra.kill()
    assert ra.wait(WAIT) == -9
    resumed = a.cli("resume", str(fa), "--speed", "0")  # unpaced: the rest of its run is not what is looked at
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr
    # At once, as an operator types it: the need the dead process left is not the run's now (it said "needs you").
    ended = a.cli("wait", str(fa), "--timeout", str(WAIT), timeout=WAIT + 30)
    assert ended.returncode == 0, ended.stdout + ended.stderr  # completed, after the one resume
    needs = [e["reason"] for e in events(fa) if e["type"] == "needs_operator"]
    assert needs == ["fleet_budget"], needs  # held once: not again by the process the resume started
    assert held(fo)  # the other run stays held: the resume was this run's alone
    other.kill()
