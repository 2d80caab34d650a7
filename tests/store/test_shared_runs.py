"""Runs on two "machines" sharing one PostgreSQL store (a real server; each machine its own data dir and host
name): what one runs, the other lists, follows and commands; and the faults: a runner killed -9, its connection
dropped, the server stopped or killed mid-run. No event is lost, no command applied twice."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.pg_server import PgServer
from tests.store.machines import (
    QUICKSTART,
    Machine,
    endless,
    file_seqs,
    in_store,
    missing,
    sql,
    store_seqs,
    wait_until,
)


@pytest.fixture
def machines(pg_url: str, tmp_path: Path) -> tuple[Machine, Machine]:
    return Machine("machine-a", tmp_path, pg_url), Machine("machine-b", tmp_path, pg_url)


def applied(folder: Path) -> Counter[str]:
    """How often each command id was applied (or rejected) by the run."""
    lines = (folder / ".console" / "events.jsonl").read_text().splitlines()
    return Counter(e["command_id"] for e in map(json.loads, lines)
                   if e["type"] == "operator_command" and e["status"] in ("applied", "rejected"))


def test_another_machine_lists_and_reads_the_run(machines: tuple[Machine, Machine], pg_url: str) -> None:
    a, b = machines
    runner = a.start(str(QUICKSTART), "--speed", "0")
    assert runner.wait() == 0
    folder = runner.folder()
    (row,) = b.jobs()
    assert (row["host"], row["status"], row["path"]) == ("machine-a", "completed", str(folder))
    assert store_seqs(pg_url, folder) == file_seqs(folder)
    story = b.cli("logs", row["id"], "--json")
    assert story.returncode == 0, story.stderr
    assert [json.loads(line)["seq"] for line in story.stdout.splitlines()] == file_seqs(folder)
    told = b.cli("logs", row["id"])
    assert "job complete" in told.stdout
    (lease,) = sql(pg_url, "SELECT lease_owner FROM runs")
    assert lease == (None,)  # a run that ended gave its lease back


def test_commands_from_another_machine_are_applied_once(machines: tuple[Machine, Machine], pg_url: str,
                                                        tmp_path: Path) -> None:
    a, b = machines
    # A run that only the stop ends: the quickstart could finish before the last command on a loaded machine
    # (it did, in CI: the stop came after its end and had no answer).
    runner = a.start(*endless(tmp_path), "--speed", "0.3")
    folder = runner.folder()
    wait_until(lambda: in_store(pg_url, "SELECT 1 FROM runs WHERE lease_expires > now()"), 60,
               "the run leased in the store")
    rid = wait_until(lambda: [r["id"] for r in b.jobs() if r.get("leased")], 60, "the run leased in `jobs`")[0]
    for command in ("pause", "resume", "checkpoint", "stop"):
        done = b.cli(command, rid, "--wait", "60")
        # Each reaches the run and is answered (a checkpoint while the job bootstraps is refused, and says so).
        assert done.stdout.startswith((f"{command}: applied", f"{command}: rejected")), (command, done.stdout,
                                                                                        done.stderr)
    runner.wait()
    counts = applied(folder)
    assert len(counts) == 4 and set(counts.values()) == {1}
    assert all(delivered is not None for (delivered,) in sql(pg_url, "SELECT delivered_at FROM commands"))
    (row,) = [r for r in b.jobs() if r["id"] == rid]
    assert row["status"] == "stopped"


def test_a_runner_killed_9_is_interrupted_then_resumed_with_nothing_lost(machines: tuple[Machine, Machine],
                                                                          pg_url: str) -> None:
    a, b = machines
    runner = a.start(str(QUICKSTART), "--speed", "0.5")
    folder = runner.folder()
    wait_until(lambda: len(store_seqs(pg_url, folder)) >= 40, 60, "40 events in the store")
    runner.kill()
    (row,) = b.jobs()
    assert row["status"] == "running"  # the lease is current for up to its 25 s
    sql(pg_url, "UPDATE runs SET lease_expires = now() - interval '1 second'")  # those 25 s, passed
    (row,) = b.jobs()
    assert row["status"] == "interrupted"
    refused = b.cli("stop", row["id"])
    assert refused.returncode != 0 and "no runner holds" in refused.stderr
    again = a.start("--in-place", row["id"], "--speed", "0")
    assert again.wait() == 0, again.out.read_text()[-2000:]
    assert store_seqs(pg_url, folder) == file_seqs(folder)
    (row,) = b.jobs()
    assert row["status"] == "completed"


def test_a_runner_killed_9_is_resumed_at_once_on_its_machine(machines: tuple[Machine, Machine], pg_url: str) -> None:
    """Its machine's lock says no process runs it: the lease it left is taken over without waiting for it."""
    a, _b = machines
    runner = a.start(str(QUICKSTART), "--speed", "0.5")
    folder = runner.folder()
    wait_until(lambda: len(store_seqs(pg_url, folder)) >= 20, 60, "20 events in the store")
    runner.kill()
    again = a.start("--in-place", str(folder), "--speed", "0")
    assert again.wait() == 0, again.out.read_text()[-2000:]
    assert store_seqs(pg_url, folder) == file_seqs(folder)


def test_a_run_whose_folder_moves_to_another_machine_stays_one_run(machines: tuple[Machine, Machine],
                                                                   pg_url: str, tmp_path: Path) -> None:
    """A pod evicted, its volume mounted by the next one: the run keeps its row and its events (its folder keeps its
    store id), and is the new machine's from then on. The volume holds the pod's data dir too (/work/data), whose key
    sealed the folder's records: the next pod's resume is its own run's."""
    a, b = machines
    runner = a.start(str(QUICKSTART), "--speed", "0.5")
    folder = runner.folder()
    wait_until(lambda: len(store_seqs(pg_url, folder)) >= 20, 60, "20 events in the store")
    runner.kill()
    sql(pg_url, "UPDATE runs SET lease_expires = now() - interval '1 second'")  # the dead pod's lease, expired
    stranger = Machine("machine-d", tmp_path, pg_url)  # another operator: its own data dir, its own key
    refused = stranger.cli("run", "--in-place", str(folder), "--headless", "--speed", "0")
    assert refused.returncode == 2 and "not made by this operator's agent-console" in refused.stderr, refused.stderr
    c = Machine("machine-c", tmp_path, pg_url)
    c.env["AGENT_CONSOLE_DATA_DIR"] = a.env["AGENT_CONSOLE_DATA_DIR"]  # the same volume's
    again = c.start("--in-place", str(folder), "--speed", "0")
    assert again.wait() == 0, again.out.read_text()[-2000:]
    (row,) = b.jobs()
    assert (row["host"], row["status"], row["path"]) == ("machine-c", "completed", str(folder))
    assert store_seqs(pg_url, folder) == file_seqs(folder)


def test_the_connection_dropped_mid_run_loses_nothing(machines: tuple[Machine, Machine], pg_url: str,
                                                     tmp_path: Path) -> None:
    a, b = machines
    runner = a.start(*endless(tmp_path), "--speed", "0.5")  # alive when the commands come, however late
    folder = runner.folder()
    wait_until(lambda: len(store_seqs(pg_url, folder)) >= 30, 60, "30 events in the store")
    rid = b.jobs()[0]["id"]
    dropped = sql(pg_url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                  "WHERE datname = current_database() AND pid <> pg_backend_pid()")
    assert dropped  # the runner's pool and its listening connection
    for command in ("pause", "resume", "stop"):
        done = b.cli(command, rid, "--wait", "60")
        assert done.stdout.startswith(f"{command}: applied"), (done.stdout, done.stderr)
    assert runner.wait() == 3  # stopped
    wait_until(lambda: store_seqs(pg_url, folder) == file_seqs(folder), 30, "every event in the store")
    assert len(applied(folder)) == 3 and set(applied(folder).values()) == {1}


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_the_server_down_mid_run_then_back(machines: tuple[Machine, Machine], pg_url: str, pg_server: PgServer,
                                           how: str, tmp_path: Path) -> None:
    a, b = machines
    runner = a.start(*endless(tmp_path), "--speed", "0.5")  # alive when the store is back, however late
    folder = runner.folder()
    wait_until(lambda: len(store_seqs(pg_url, folder)) >= 20, 60, "20 events in the store")
    rid = b.jobs()[0]["id"]
    sql(pg_url, "SELECT 1")
    pg_server.stop() if how == "stop" else pg_server.kill()
    grown = len(file_seqs(folder))
    wait_until(lambda: len(file_seqs(folder)) > grown + 10, 60, "the run going on without its store")
    pg_server.start()
    for command in ("pause", "resume", "stop"):
        done = b.cli(command, rid, "--wait", "60")
        assert done.stdout.startswith(f"{command}: applied"), (done.stdout, done.stderr)
    assert runner.wait() == 3  # stopped
    wait_until(lambda: store_seqs(pg_url, folder) == file_seqs(folder), 30,
               f"every event in the store: {missing(pg_url, folder)[:20]} {runner.out.read_text()[-1500:]}")
    assert len(applied(folder)) == 3 and set(applied(folder).values()) == {1}
    said = [json.loads(x) for x in (folder / ".console" / "events.jsonl").read_text().splitlines()]
    assert any(e["type"] == "error" and e.get("where") == "store" and "catches up" in e["message"] for e in said)


def test_a_run_started_while_the_store_is_away_catches_up(machines: tuple[Machine, Machine], pg_url: str,
                                                          pg_server: PgServer) -> None:
    a, b = machines
    pg_server.stop()  # a fresh database, not even migrated yet
    runner = a.start(str(QUICKSTART), "--speed", "0.5")
    folder = runner.folder()
    wait_until(lambda: len(file_seqs(folder)) > 20, 60, "the run going on without its store")
    assert "the store catches up" in runner.out.read_text()
    pg_server.start()
    wait_until(lambda: in_store(pg_url, "SELECT 1 FROM runs"), 60, "the run in the store once it is back")
    wait_until(lambda: len(b.jobs()) == 1, 60, "the run listed once the store is back")
    assert runner.wait() == 0
    wait_until(lambda: store_seqs(pg_url, folder) == file_seqs(folder), 30,
               f"every event in the store: {missing(pg_url, folder)[:20]}")
    (row,) = b.jobs()
    assert row["status"] == "completed" and row["provider"] == "scripted"
