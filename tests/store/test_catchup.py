"""A run that ends while its shared store is away (a real PostgreSQL server, stopped or killed): the runner waits a
bounded time, leaves a marker, and whatever next opens the store on its machine catches the store up: every event
(the store's seqs equal the file's), the final status, the lease given back; on another machine the run is never
"running" once its lease expired, and is completed once healed. Kills of the catch-up lose nothing and do nothing
twice; only the run's own machine catches it up."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.job import JobPaths
from console.engine.operator import OperatorState
from console.engine.seal import Seal
from console.engine.store.catchup import catch_up_machine
from console.engine.store.link import StoreLink
from console.engine.store.marker import MARKER, POINTERS, read_marker
from console.engine.store.postgres import PgStore
from tests.pg_server import PgServer
from tests.store.machines import QUICKSTART, REPO, Machine, file_seqs, missing, sql, store_seqs, wait_until


@pytest.fixture
def machines(pg_url: str, tmp_path: Path) -> tuple[Machine, Machine]:
    return Machine("machine-a", tmp_path, pg_url), Machine("machine-b", tmp_path, pg_url)


def expire_leases(url: str) -> None:
    sql(url, "UPDATE runs SET lease_expires = now() - interval '1 second' WHERE lease_expires IS NOT NULL")


def ended_while_away(a: Machine, url: str, server: PgServer, make_job, events: int = 30) -> tuple[JobPaths, str]:
    """A run of machine A (in-process link, A's data dir) whose store goes away before its end: its marker."""
    paths = make_job()
    paths.state.mkdir(parents=True, exist_ok=True)
    store = PgStore(url, host="machine-a")
    store.data_dir = a.base / "data"
    clock = FakeClock()
    stream = ev.EventStream(paths.events, clock)
    said: list[str] = []
    link = StoreLink(store, paths, stream, OperatorState(), owner="machine-a:1:r1", now=clock.now, exit_wait=0.5,
                     say=said.append)
    link.start()
    store.started(paths.root, paths.root.name, "scripted", "m", clock.now())
    stream.emit(ev.ErrorEvent, message="shipped before", where="test", recoverable=True)
    wait_until(lambda: link.shipped >= 1 and link.outbox.empty(), 30, "the first event and the row in the store")
    server.stop()
    for i in range(events):
        stream.emit(ev.ErrorEvent, message=f"while away {i}", where="test", recoverable=True)
    store.cost(paths.root, 0.25)
    store.completed(paths.root, clock.now(), 0.9, "all done")
    stream.close()
    link.close()
    store.close()
    assert any("waiting up to" in s for s in said) and any(MARKER in s for s in said), said
    behind = read_marker(paths, Seal.of(a.base / "data"))
    assert behind is not None and [u.op for u in behind.updates] == ["cost", "completed"]
    assert (a.base / "data" / POINTERS / f"{behind.key}.json").is_file()
    server.start()
    return paths, behind.key


# A run's own default pace: after its 20th event in the store some 5 s of turns are left, which the server's stop
# (a fast shutdown: well under a second) comes well before. Half of it (0.5) only made each test wait out ~5-10 s
# more of a run that had nothing left to show.
PACE = "1"


def test_a_run_ending_while_its_store_is_away_is_healed_by_jobs_on_its_machine(
        machines: tuple[Machine, Machine], pg_url: str, pg_server: PgServer) -> None:
    """Real runner processes: the server stopped before the run's end and started after its exit."""
    a, b = machines
    a.env["AGENT_CONSOLE_STORE_EXIT_WAIT"] = "1"
    runner = a.start(str(QUICKSTART), "--speed", PACE)
    folder = runner.folder()
    wait_until(lambda: len(store_seqs(pg_url, folder)) >= 20, 60, "20 events in the store")
    pg_server.stop()
    assert runner.wait() == 0, runner.out.read_text()[-2000:]
    told = runner.out.read_text()
    assert "waiting up to 1s" in told and f".console/{MARKER}" in told, told[-2000:]
    assert (folder / ".console" / MARKER).is_file()
    pg_server.start()
    expire_leases(pg_url)  # the lease the runner held when the store went away, past its 25 s
    (row,) = b.jobs()
    assert row["status"] == "interrupted"  # never "running": the end is not known there yet
    assert missing(pg_url, folder)
    a.jobs()  # the run's machine opens the store: it is caught up
    (row,) = b.jobs()
    assert (row["status"], row["host"]) == ("completed", "machine-a")
    assert store_seqs(pg_url, folder) == file_seqs(folder)
    assert sql(pg_url, "SELECT lease_owner, lease_expires FROM runs") == [(None, None)]
    assert not (folder / ".console" / MARKER).exists()
    assert list((a.base / "data" / POINTERS).iterdir()) == []
    story = b.cli("logs", row["id"], "--json")
    assert [json.loads(line)["seq"] for line in story.stdout.splitlines()] == file_seqs(folder)


def healed_by_its_machine(a: Machine, b: Machine, pg_url: str, folder: Path) -> None:
    """``jobs`` on the run's machine (a) sends what it owes; the other (b) then sees it completed, whole."""
    a.jobs()
    expire_leases(pg_url)
    (row,) = b.jobs()
    assert row["status"] == "completed", row
    assert store_seqs(pg_url, folder) == file_seqs(folder)
    assert sql(pg_url, "SELECT lease_owner FROM runs") == [(None,)]
    assert not (folder / ".console" / MARKER).exists()


def test_the_server_killed_during_the_exit_wait(machines: tuple[Machine, Machine], pg_url: str,
                                                pg_server: PgServer) -> None:
    """The store back during the runner's exit wait, then SIGKILLed in the middle of its flush, then back: what the
    runner could not send is in its marker, and the next look on its machine sends it; nothing twice."""
    a, b = machines
    a.env["AGENT_CONSOLE_STORE_EXIT_WAIT"] = "8"
    runner = a.start(str(QUICKSTART), "--speed", PACE)
    folder = runner.folder()
    wait_until(lambda: len(store_seqs(pg_url, folder)) >= 20, 60, "20 events in the store")
    pg_server.stop()
    wait_until(lambda: "waiting up to" in runner.out.read_text(), 120, "the runner waiting for its store")
    pg_server.start()
    pg_server.kill()
    pg_server.start()
    assert runner.wait() == 0, runner.out.read_text()[-2000:]
    healed_by_its_machine(a, b, pg_url, folder)  # with or without a marker left: the run's machine looks


def test_a_runner_killed_9_while_it_waits_for_its_store(machines: tuple[Machine, Machine], pg_url: str,
                                                       pg_server: PgServer) -> None:
    """The marker is written when the wait begins: a kill -9 during the wait loses nothing the store is owed."""
    a, b = machines
    a.env["AGENT_CONSOLE_STORE_EXIT_WAIT"] = "600"
    runner = a.start(str(QUICKSTART), "--speed", PACE)
    folder = runner.folder()
    wait_until(lambda: len(store_seqs(pg_url, folder)) >= 20, 60, "20 events in the store")
    pg_server.stop()
    wait_until(lambda: "waiting up to 600s" in runner.out.read_text(), 120, "the runner waiting for its store")
    runner.kill()
    assert (folder / ".console" / MARKER).is_file()
    pg_server.start()
    healed_by_its_machine(a, b, pg_url, folder)


def test_a_marker_whose_run_folder_was_deleted(machines: tuple[Machine, Machine], pg_url: str,
                                               pg_server: PgServer, make_job) -> None:
    a, b = machines
    paths, key = ended_while_away(a, pg_url, pg_server, make_job)
    shutil.rmtree(paths.root)
    a.jobs()
    assert list((a.base / "data" / POINTERS).iterdir()) == []
    (row,) = b.jobs()
    assert row["status"] == "interrupted" and "folder was deleted" in (row["detail"] or "")
    assert sql(pg_url, "SELECT lease_owner FROM runs WHERE key=%s", key) == [(None,)]


def test_only_the_runs_own_machine_catches_it_up(machines: tuple[Machine, Machine], pg_url: str,
                                                 pg_server: PgServer, make_job) -> None:
    """Two machines look at once (the folder and the pointer visible to both, as on a shared volume): machine B
    leaves it; A heals it, once."""
    a, b = machines
    paths, key = ended_while_away(a, pg_url, pg_server, make_job)
    (b.base / "data" / POINTERS).mkdir(parents=True)
    shutil.copy(a.base / "data" / POINTERS / f"{key}.json", b.base / "data" / POINTERS / f"{key}.json")
    procs = [subprocess.Popen([sys.executable, "-m", "console.cli", "store", "sync"], env=m.env, cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for m in (a, b)]
    outs = [p.communicate(timeout=120) for p in procs]
    # B leaves it, whichever it sees first: A's machine named, A holding it (the order on a busy machine), or done.
    assert any(said in outs[1][0] for said in ("only that machine catches it up", "another process is catching it up",
                                               "nothing to catch up")), outs[1]
    assert procs[0].returncode == 0, outs[0]
    assert store_seqs(pg_url, paths.root) == file_seqs(paths.root)
    assert sql(pg_url, "SELECT host, status, cost_usd, lease_owner FROM runs") == [("machine-a", "completed", 0.25,
                                                                                     None)]
    assert read_marker(paths, Seal.of(a.base / "data")) is None
    assert not (paths.state / MARKER).exists()


CHILD = """
import os, sys
from console.engine import failpoints
from console.engine.store.catchup import catch_up_machine
from console.engine.store.postgres import PgStore
from pathlib import Path
n = int(sys.argv[1]); seen = [0]
def hook(name, tear):
    seen[0] += 1
    if seen[0] == n:
        os._exit(137)
failpoints.install(hook)
store = PgStore(sys.argv[2], host="machine-a", data_dir=Path(sys.argv[3]))
out = catch_up_machine(store, Path(sys.argv[3]))
print("points", seen[0], [o.done for o in out])
"""


def test_a_catch_up_killed_9_at_every_point_then_again(machines: tuple[Machine, Machine], pg_url: str,
                                                       pg_server: PgServer, make_job) -> None:
    """Each kill point of the catch-up in turn (a batch of events sent, each update, the marker, the pointer),
    then a whole one: every event once, the final row, the marker and pointer gone."""
    a, b = machines
    paths, key = ended_while_away(a, pg_url, pg_server, make_job, events=1200)  # three batches of events
    data = a.base / "data"
    env = {**os.environ, "AGENT_CONSOLE_HOST": "machine-a"}
    killed = 0
    for n in range(1, 40):
        done = subprocess.run([sys.executable, "-c", CHILD, str(n), pg_url, str(data)], env=env, cwd=REPO,
                              capture_output=True, text=True, timeout=120)
        if done.returncode == 0:
            break
        assert done.returncode == 137, done.stderr[-2000:]
        killed += 1
        assert sql(pg_url, "SELECT count(*) = count(DISTINCT seq) FROM events") == [(True,)]
    # The n-th catch-up is killed at its n-th point: each goes further than the one before (what a killed one sent
    # is not sent again), through the batches, the updates, the lease and the marker, until one ends.
    assert killed >= 4
    assert "[]" in done.stdout or "True" in done.stdout, done.stdout
    assert store_seqs(pg_url, paths.root) == file_seqs(paths.root)
    expire_leases(pg_url)
    (row,) = b.jobs()
    assert (row["status"], row["cost_usd"], row["summary"]) == ("completed", 0.25, "all done")
    assert not (paths.state / MARKER).exists() and not (data / POINTERS / f"{key}.json").exists()


def test_the_next_run_of_the_folder_sends_the_markers_updates_first(machines: tuple[Machine, Machine], pg_url: str,
                                                                    pg_server: PgServer, make_job) -> None:
    """A runner that holds the run's lock: a catch-up leaves the run to it, and its link applies the marker's
    updates before its own, then removes the marker."""
    a, _b = machines
    paths, key = ended_while_away(a, pg_url, pg_server, make_job)
    from console.engine.run_lock import RunLock

    lock = RunLock(paths)
    assert lock.acquire()
    store = PgStore(pg_url, host="machine-a")
    store.data_dir = a.base / "data"
    try:
        (out,) = catch_up_machine(store, store.data_dir)
        assert not out.done and "a runner runs it" in out.why
        clock = FakeClock()
        stream = ev.EventStream(paths.events, clock)
        link = StoreLink(store, paths, stream, OperatorState(), owner="machine-a:2:r2", now=clock.now)
        link.start()
        store.cost(paths.root, 1.5)  # after the marker's 0.25, never before it
        stream.close()
        link.close()
    finally:
        lock.release()
    assert not (paths.state / MARKER).exists() and not (store.data_dir / POINTERS / f"{key}.json").exists()
    assert sql(pg_url, "SELECT status, summary, cost_usd FROM runs") == [("completed", "all done", 1.5)]
    assert store_seqs(pg_url, paths.root) == file_seqs(paths.root)
    store.close()


def test_a_markers_updates_are_the_stores_own_and_nothing_else() -> None:
    """A marker names updates the store knows, with as many values as each takes: anything else does not read."""
    from pydantic import ValidationError

    from console.engine.store.marker import ARITY, KEY_AT, Behind
    from console.engine.store.postgres import UPDATES

    assert {op: sql.count("%s") for op, sql in UPDATES.items()} == ARITY
    # Where each update names its run: the key column's placeholder (KEY_AT), read out of the SQL.
    for op, text in UPDATES.items():
        if op == "started":
            columns = text.split("(", 1)[1].split(")", 1)[0].replace(" ", "").split(",")
            assert columns.index("key") == KEY_AT[op]
        else:
            assert text.split("WHERE key=%s", 1)[0].count("%s") == KEY_AT[op], op
    base = {"store": "postgresql://h/db", "key": "0" * 32, "host": "a", "owner": "a:1:r", "since": "x"}
    for bad in ([{"op": "DROP TABLE runs", "params": []}], [{"op": "cost", "params": [1.0]}],
                [{"op": "cost", "params": [{"x": 1}, "k"]}]):
        with pytest.raises(ValidationError):
            Behind.model_validate({**base, "updates": bad})
    with pytest.raises(ValidationError):
        Behind.model_validate({**base, "key": "../../etc"})


def test_a_link_ships_even_where_its_sync_lock_cannot_be_made(make_job, pg_url: str) -> None:
    """Something that is no file where the sync lock goes: the link never waits for a lock it cannot have."""
    paths = make_job()
    paths.state.mkdir(parents=True, exist_ok=True)
    (paths.state / "store-sync.lock").mkdir()
    store = PgStore(pg_url)
    clock = FakeClock()
    stream = ev.EventStream(paths.events, clock)
    link = StoreLink(store, paths, stream, OperatorState(), owner="test:1:r", now=clock.now)
    link.start()
    try:
        stream.emit(ev.ErrorEvent, message="one", where="test", recoverable=True)
        wait_until(lambda: store_seqs(pg_url, paths.root) == [1], 30, "the event in the store")
    finally:
        stream.close()
        link.close()
    store.close()


def test_an_answer_sent_to_a_run_that_ended_while_its_store_was_away_leaves_the_store_at_the_catch_up(
        machines: tuple[Machine, Machine], pg_url: str, pg_server: PgServer, make_job) -> None:
    """The run's end reaches the store by its marker (console.engine.store.catchup): the answers no run took are
    dropped then, as at an end the link sends (their question ended with the run's call); nothing else is."""
    import uuid

    from console.engine import commands as cmds
    from console.engine.control import make_command

    a, _b = machines
    paths, key = ended_while_away(a, pg_url, pg_server, make_job)
    assert (paths.state / MARKER).is_file()
    secret = "ghp_" + "U2" * 18
    answer = make_command(cmds.Answer(set=(f"token={secret}",)), source="cli@machine-b", id=uuid.uuid4().hex)
    stop = {"id": uuid.uuid4().hex, "command": "stop", "args": {}, "source": "cli@machine-b"}
    sender = PgStore(pg_url, host="machine-b")
    sender.send_command(key, answer.model_dump(mode="json", include={"id", "command", "args", "source"}))
    sender.send_command(key, stop)
    sender.close()
    a.jobs()  # the run's machine opens the store: it is caught up
    assert sql(pg_url, "SELECT status FROM runs") == [("completed",)] and not (paths.state / MARKER).exists()
    bodies = [b for (b,) in sql(pg_url, "SELECT body::text FROM commands")]
    assert len(bodies) == 1 and '"stop"' in bodies[0] and secret not in bodies[0]
