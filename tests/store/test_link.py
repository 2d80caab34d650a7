"""The runner's link to a shared store, in-process against a real server: a command is delivered into the inbox
once whatever the link's kills, a hostile command row is refused, the lease keeps a second runner out, and a
store away past its limit asks the operator and is answered when it is back."""

from __future__ import annotations

import json
import uuid

import pytest

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.control import ControlChannel
from console.engine.job import JobPaths
from console.engine.operator import OperatorState
from console.engine.store.link import LeaseHeld, StoreLink
from console.engine.store.postgres import PgStore
from tests.pg_server import PgServer
from tests.provenance_support import data_dir
from tests.store.machines import sql, wait_until


def link_for(paths: JobPaths, store: PgStore, **kw: object) -> tuple[StoreLink, ev.EventStream, OperatorState]:
    clock = FakeClock()
    events = ev.EventStream(paths.events, clock)
    op = OperatorState(ControlChannel(paths.inbox))
    return StoreLink(store, paths, events, op, owner=kw.pop("owner", "test:1:run"), now=clock.now, **kw), events, op


def inbox_ids(paths: JobPaths) -> list[str]:
    return sorted(json.loads(p.read_text())["id"] for p in paths.inbox.glob("*.json")) if paths.inbox.is_dir() else []


def test_a_command_is_written_into_the_inbox_once_across_kills(make_job, pg_url: str) -> None:
    paths = make_job()
    paths.state.mkdir(parents=True, exist_ok=True)
    store = PgStore(pg_url)
    link, events, _op = link_for(paths, store)
    store.ensure_run(paths.root, paths.root.name, FakeClock().now())
    cid = uuid.uuid4().hex
    store.send_command(link.key, {"id": cid, "command": "pause", "args": {}, "source": "cli@b"})
    link._deliver()
    assert inbox_ids(paths) == [cid]
    # Killed between the inbox write and the delivered mark: a new link (a new process) finds it undelivered.
    sql(pg_url, "UPDATE commands SET delivered_at = NULL")
    again, _events, _ = link_for(paths, store)
    again._deliver()
    assert inbox_ids(paths) == [cid]  # its id is in the inbox already: only marked
    # The run read it (the file gone, its operator_command event in the log), then the same kill.
    for f in paths.inbox.glob("*.json"):
        f.unlink()
    events.emit(ev.OperatorCommand, command="pause", source="cli@b", status="applied", command_id=cid)
    sql(pg_url, "UPDATE commands SET delivered_at = NULL")
    third, _e, _ = link_for(paths, store)
    third._deliver()
    assert inbox_ids(paths) == []
    assert sql(pg_url, "SELECT count(*) FROM commands WHERE delivered_at IS NULL") == [(0,)]
    store.close()


@pytest.mark.parametrize("body", [{"command": "rm -rf /", "args": {}}, {"command": "pause", "args": {"x": 1}},
                                  {"command": "rewind", "args": {"issue": "\x1b[2J" * 5000}}, {"args": []}])
def test_a_command_row_that_is_no_command_is_refused(make_job, pg_url: str, body: dict[str, object]) -> None:
    paths = make_job()
    paths.state.mkdir(parents=True, exist_ok=True)
    store = PgStore(pg_url)
    link, _events, _ = link_for(paths, store)
    store.ensure_run(paths.root, paths.root.name, FakeClock().now())
    store.send_command(link.key, {"id": uuid.uuid4().hex, **body})
    link._deliver()
    assert inbox_ids(paths) == []
    said = [json.loads(x) for x in paths.events.read_text().splitlines()]
    assert [e["where"] for e in said if e["type"] == "error"] == ["store"]
    assert sql(pg_url, "SELECT count(*) FROM commands WHERE delivered_at IS NULL") == [(0,)]  # never retried
    store.close()


def test_a_second_runner_is_kept_out_by_the_lease(make_job, pg_url: str) -> None:
    paths = make_job()
    paths.state.mkdir(parents=True, exist_ok=True)
    store = PgStore(pg_url, data_dir=data_dir())
    first, _e, _ = link_for(paths, store, owner=f"{store.host}:1:r1")
    first.start()
    try:
        # The same folder, mounted by another machine with its data dir (a pod's volume holds both).
        other = PgStore(pg_url, host="machine-c", data_dir=data_dir())
        second, _e2, _ = link_for(paths, other, owner="machine-c:9:r2")
        assert second.key == first.key  # the folder's store id: one run, wherever it is
        with pytest.raises(LeaseHeld):
            second.start(lease_wait=0)
        other.close()
    finally:
        first.close()
    assert sql(pg_url, "SELECT lease_owner FROM runs") == [(None,)]
    store.close()


def test_the_store_away_past_its_limit_asks_the_operator(make_job, pg_url: str, pg_server: PgServer) -> None:
    paths = make_job()
    paths.state.mkdir(parents=True, exist_ok=True)
    store = PgStore(pg_url)
    link, events, op = link_for(paths, store, down_limit=0.0)
    link.start()
    try:
        events.emit(ev.ErrorEvent, message="before", where="test", recoverable=True)
        wait_until(lambda: link.shipped >= 1, 30, "the first event shipped")
        pg_server.stop()
        events.emit(ev.ErrorEvent, message="while away", where="test", recoverable=True)
        wait_until(lambda: op.needs == "store_down", 60, "the operator asked")
        pg_server.start()
        wait_until(lambda: op.needs is None, 60, "the need answered once the store is back")
        wait_until(lambda: link.have is None and link.shipped == events.seq, 60, "the log caught up")
    finally:
        link.close()
        if pg_server.proc is None:
            pg_server.start()
    said = [json.loads(x) for x in paths.events.read_text().splitlines()]
    kinds = [(e["type"], e.get("reason", e.get("where"))) for e in said]
    assert ("needs_operator", "store_down") in kinds and ("needs_operator_cleared", "store_down") in kinds
    assert sorted(s for (s,) in sql(pg_url, "SELECT seq FROM events")) == [e["seq"] for e in said]
    store.close()


def test_a_nul_in_an_event_is_stored_and_the_log_keeps_it(make_job, pg_url: str) -> None:
    paths = make_job()
    paths.state.mkdir(parents=True, exist_ok=True)
    store = PgStore(pg_url)
    link, events, _ = link_for(paths, store)
    events.emit(ev.ErrorEvent, message="a\x00b \\u0000 c", where="test", recoverable=True)
    with paths.events.open("ab") as fh:  # damage and garbage: skipped, never a batch that fails for ever
        fh.write(b'{"seq": "x"}\nnot json\n{"seq": 99, "type": "error", "ts": "yesterday", "message": "m"}\n')
    while link._ship():
        pass
    got = dict(sql(pg_url, "SELECT seq, body->>'message' FROM events"))
    assert got[1] == "a\ufffdb \\u0000 c" and got[99] == "m"
    assert "\x00" in json.loads(paths.events.read_text().splitlines()[0])["message"]
    store.close()


def test_events_are_shipped_off_the_turn_path(make_job, pg_url: str) -> None:
    """The engine's runs-table updates wait in the link's queue while it runs: a turn never waits on the store."""
    paths = make_job()
    paths.state.mkdir(parents=True, exist_ok=True)
    store = PgStore(pg_url)
    link, _events, _ = link_for(paths, store)
    link.start()
    try:
        assert store.outbox is link.outbox
        link._stop.set()  # the thread stops: an update must still return at once, queued
        assert link._thread is not None
        link._thread.join(30)
        store.started(paths.root, paths.root.name, "scripted", "m", FakeClock().now())
        assert link.outbox.qsize() == 1 and (row := store.get(paths.root)) is not None and row.provider == ""
    finally:
        link.close()
    assert store.outbox is None and link.outbox.empty()  # closing applied what was queued
    row = store.get(paths.root)
    assert row is not None and row.provider == "scripted"
    store.close()


def test_a_store_commands_sender_is_its_claim_never_a_signal_and_a_command_it_names_not_none(make_job,
                                                                                              pg_url: str) -> None:
    """Any machine writing the store writes a command's source: escape sequences in it are kept as text, a claim to
    be a signal (the run would end "interrupted", not stopped by its operator) is said as a claim, and a body
    without a command is no command, said so (it read "unknown command 'None'")."""
    paths = make_job()
    paths.state.mkdir(parents=True, exist_ok=True)
    store = PgStore(pg_url)
    link, events, _op = link_for(paths, store)
    store.ensure_run(paths.root, paths.root.name, FakeClock().now())
    sent = {uuid.uuid4().hex: "SIGTERM", uuid.uuid4().hex: "evil\x1b]0;T\x07"}
    for cid, source in sent.items():
        store.send_command(link.key, {"id": cid, "command": "pause", "args": {}, "source": source})
    nameless = uuid.uuid4().hex
    store.send_command(link.key, {"id": nameless, "args": {}, "source": "cli@b"})
    link._deliver()
    written = {json.loads(p.read_text())["id"]: json.loads(p.read_text()) for p in paths.inbox.glob("*.json")}
    sources = sorted(w["source"] for w in written.values())
    assert sources == ["evil\\x1b]0;T\\x07", "store, claiming SIGTERM"]
    assert nameless not in written
    events.close()
    errors = [e.message for e in ev.read_events(paths.events) if isinstance(e, ev.ErrorEvent)]
    assert errors == ["a command from the store is not one: it names no command"], errors
    store.close()
