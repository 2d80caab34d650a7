"""`agent-console pause ID --wait N` for a run of another machine, in-process against a real server, with the
run's side played by hand at the moment that matters (inside send_command: before the command line looks again):
the answer of a run quicker than the command line is found; a run that ends, or whose runner goes, without
taking the command is said at once and the command withdrawn, never left for a later run of the folder."""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from console.cli.control import remote_control
from console.cli.parser import build_parser
from console.engine.runs import run_id
from console.engine.store.postgres import PgStore
from console.outcome import EXIT_FAILED, EXIT_OK
from tests.store.machines import sql

OWNER = "machine-a:4242:r1"


def ev_line(seq: int, kind: str, **fields: Any) -> tuple[int, str, str, str]:
    ts = datetime.now(UTC).isoformat()
    return seq, ts, kind, json.dumps({"v": 1, "ts": ts, "seq": seq, "session": 1, "type": kind, **fields})


class RunOnA:
    """A run of machine-a in the store (its row, its lease, its first events), and what it does when a command
    arrives: ``react(store, key, command_id)``, called inside the command line's send_command."""

    def __init__(self, url: str, base: Path) -> None:
        self.url = url
        self.folder = base / "machine-a" / "quickstart-20261126-120000"
        (self.folder / ".console").mkdir(parents=True)
        self.store = PgStore(url, host="machine-a")
        self.store.ensure_run(self.folder, self.folder.name, datetime.now(UTC))
        self.key = self.store.key(self.folder)
        assert self.store.take_lease(self.key, OWNER, 25, self.folder) is not None
        self.seq = 0
        self.ship(*(("turn_started", {"turn": n}) for n in range(1, 6)))

    def ship(self, *events: tuple[str, dict[str, Any]]) -> None:
        lines = []
        for kind, fields in events:
            self.seq += 1
            lines.append(ev_line(self.seq, kind, **fields))
        self.store.append_events(self.key, lines)


class Settings:
    """What remote_control reads of the settings: the store's URL and how to open it (as machine-b)."""

    def __init__(self, url: str, react: Any, before_withdraw: Any = None) -> None:
        self.store_url = url
        self.react = react
        self.before_withdraw = before_withdraw

    def open_store(self) -> PgStore:
        react, before_withdraw = self.react, self.before_withdraw

        class Seen(PgStore):
            def send_command(self, key: str, body: dict[str, Any]) -> str:
                cid = super().send_command(key, body)
                react(body["id"])
                return cid

            def withdraw(self, command_id: str) -> Any:
                if before_withdraw is not None:
                    before_withdraw(command_id)
                return super().withdraw(command_id)

        return Seen(self.store_url, host="machine-b")


def command(run: RunOnA, name: str, wait: float, react: Any, capsys: pytest.CaptureFixture[str],
            before_withdraw: Any = None) -> tuple[int | None, str, str]:
    args: argparse.Namespace = build_parser().parse_args([name, run_id(run.folder), "--wait", str(wait)])
    code = remote_control(args, Settings(run.url, react, before_withdraw))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def run_on_a(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunOnA]:
    monkeypatch.setenv("AGENT_CONSOLE_HOST", "machine-b")  # the command line's machine
    run = RunOnA(pg_url, tmp_path)
    yield run
    run.store.close()


def test_the_answer_of_a_run_quicker_than_the_command_line_is_found(run_on_a: RunOnA, capsys) -> None:
    run = run_on_a

    def at_once(command_id: str) -> None:
        # The run took the command and went on before the command line read the store again (a loaded machine,
        # where the command line waits for the CPU): its answer is followed by more events.
        run.ship(("operator_command", {"command": "pause", "source": "cli@machine-b", "status": "received",
                                       "command_id": command_id}),
                 ("operator_command", {"command": "pause", "source": "cli@machine-b", "status": "applied",
                                       "detail": "pausing after the current turn", "command_id": command_id}),
                 *(("turn_started", {"turn": n}) for n in range(6, 9)))

    code, out, err = command(run, "pause", 30, at_once, capsys)
    assert (code, out.strip(), err) == (EXIT_OK, "pause: applied: pausing after the current turn", "")


@pytest.mark.parametrize("how", ["ended", "killed"])
def test_a_run_that_ends_without_taking_the_command_says_so_and_withdraws_it(run_on_a: RunOnA, how: str,
                                                                             capsys) -> None:
    run = run_on_a

    def ends(command_id: str) -> None:
        if how == "ended":  # its last turn was its last: it ends before its link delivers the command
            run.ship(("session_ended", {}), ("run_ended", {"status": "completed"}))
            run.store.drop_lease(run.key, OWNER)
        else:  # killed -9, and its lease lapsed: no end in its story
            sql(run.url, "UPDATE runs SET lease_expires = now() - interval '1 second'")

    code, out, err = command(run, "stop", 30, ends, capsys)
    assert code == EXIT_FAILED and out == ""
    assert "before it took the command: withdrawn, nothing was done" in err
    assert ("ended" if how == "ended" else "holds its lease no more") in err
    # Nothing left for a later run of this folder (a resume) to take.
    assert sql(run.url, "SELECT count(*) FROM commands") == [(0,)]
    assert run.store.undelivered(run.key) == []


@pytest.mark.parametrize("how", ["ended", "killed"])
def test_a_command_delivered_but_not_applied_before_the_end_is_said_so(run_on_a: RunOnA, how: str,
                                                                       capsys) -> None:
    run = run_on_a

    def delivered_then_ends(command_id: str) -> None:
        run.store.delivered(str(uuid.UUID(command_id)))  # in the run's inbox (addressed to that run only)
        if how == "ended":
            run.ship(("run_ended", {"status": "completed"}))
            run.store.drop_lease(run.key, OWNER)
        else:
            sql(run.url, "UPDATE runs SET lease_expires = now() - interval '1 second'")

    code, out, err = command(run, "checkpoint", 30, delivered_then_ends, capsys)
    assert code == EXIT_FAILED and out == ""
    assert ("ended before it applied the command, which had reached its inbox" in err if how == "ended"
            else "had reached its inbox: it applies only if that runner goes on" in err), err
    assert sql(run.url, "SELECT count(*) FROM commands WHERE delivered_at IS NOT NULL") == [(1,)]


def test_a_runner_back_before_the_withdrawal_keeps_the_command_and_answers_it(run_on_a: RunOnA, capsys) -> None:
    """Its lease lapsed (cut off from the store), then taken again just as the command line would withdraw the
    command: the command stays, the command line waits on, and the runner's answer is said."""
    run = run_on_a

    def lapses(_cid: str) -> None:
        sql(run.url, "UPDATE runs SET lease_expires = now() - interval '1 second'")

    def back(command_id: str) -> None:
        if run.store.take_lease(run.key, OWNER, 25, run.folder) is None:
            raise AssertionError("the runner could not take its lease again")
        if run.seq == 5:  # once: the runner takes the command and answers (read at the command line's next look)
            run.ship(("operator_command", {"command": "pause", "source": "cli@machine-b", "status": "applied",
                                           "detail": "pausing after the current turn", "command_id": command_id}))

    code, out, err = command(run, "pause", 30, lapses, capsys, before_withdraw=back)
    assert (code, out.strip(), err) == (EXIT_OK, "pause: applied: pausing after the current turn", "")
    assert len(run.store.undelivered(run.key)) == 1  # never withdrawn (the hand-played runner does not mark it)


def test_a_run_that_stays_quiet_is_waited_for_until_the_deadline(run_on_a: RunOnA, capsys) -> None:
    code, out, err = command(run_on_a, "pause", 0.3, lambda _cid: None, capsys)
    assert (code, err) == (EXIT_OK, "")
    assert "not confirmed within 0.3s" in out
    assert len(run_on_a.store.undelivered(run_on_a.key)) == 1  # still queued for the run, which takes it later


def test_a_command_sent_without_waiting_to_a_run_that_ends_is_discarded_by_its_resume(run_on_a: RunOnA) -> None:
    """Found: `stop ID --wait 0` (or the fleet's, or an attached console's) to a run that ended before its link
    took it stayed in the store, and the run's next runner (a resume) took it and stopped. It is for the runner
    that held the run when it was sent: a later one discards it, as a local inbox's stale command."""
    from console.engine import events as ev
    from console.engine.control import ControlChannel
    from console.engine.job import JobPaths
    from console.engine.operator import OperatorState
    from console.engine.store.link import StoreLink

    paths = JobPaths(run_on_a.folder)
    sent = run_on_a.store.send_command(run_on_a.key, {"command": "stop", "args": {}, "source": "cli",
                                                      "id": uuid.uuid4().hex})
    [(cid, body)] = run_on_a.store.undelivered(run_on_a.key)
    assert cid == sent and body["for"] == OWNER  # for the runner that held the run then
    run_on_a.store.drop_lease(run_on_a.key, OWNER)  # ... which ended before its link took it
    resumed = StoreLink(run_on_a.store, paths, ev.EventStream(None), OperatorState(), owner="machine-a:4343:r2",
                        now=lambda: datetime.now(UTC))
    resumed._deliver()
    channel = ControlChannel(paths.inbox)
    channel.run_id = "r2"
    assert channel.poll() == [] and [c.command for c in channel.stale] == ["stop"]
    # Sent while no runner held it: for whichever takes the run next.
    run_on_a.store.send_command(run_on_a.key, {"command": "pause", "args": {}, "source": "cli",
                                               "id": uuid.uuid4().hex})
    [(_, body)] = run_on_a.store.undelivered(run_on_a.key)
    assert "for" not in body
    resumed._deliver()
    channel.stale.clear()
    assert [c.command for c in channel.poll()] == ["pause"]


def test_a_web_answer_to_another_machines_run_sent_again_reaches_it_once(run_on_a: RunOnA) -> None:
    """serve's answer to another machine's run (a page's approval, retried after a lost reply or a kill of serve)
    is the same command each time: the store keeps the first, and the run's link writes it into the inbox once;
    an answer of another id is another command."""
    from console.engine import events as ev
    from console.engine.control import ControlChannel
    from console.engine.job import JobPaths
    from console.engine.operator import OperatorState
    from console.engine.store.link import StoreLink
    from console.web.acting import Acting
    from tests.web.test_server import row

    remote = row(run_id(run_on_a.folder), path=run_on_a.folder, host="machine-a", key=run_on_a.key)
    acting = Acting(run_on_a.folder.parent / "machine-b.db", run_on_a.url)
    for _ in range(2):
        assert acting.answer(remote, "pause", "web" + "1" * 28, "web 10.0.0.7 session s1") is None
    assert len(run_on_a.store.undelivered(run_on_a.key)) == 1
    paths = JobPaths(run_on_a.folder)
    link = StoreLink(run_on_a.store, paths, ev.EventStream(None), OperatorState(), owner=OWNER,
                     now=lambda: datetime.now(UTC))
    link._deliver()
    assert acting.answer(remote, "pause", "web" + "1" * 28, "web 10.0.0.7 session s1") is None  # once more, late
    link._deliver()
    channel = ControlChannel(paths.inbox)
    taken = channel.poll()
    assert [(c.command, c.source) for c in taken] == [("pause", "web 10.0.0.7 session s1")]
    assert acting.answer(remote, "pause", "web" + "2" * 28, "web 10.0.0.7 session s1") is None  # another answer
    assert acting.answer(remote, "pause", None, "web 10.0.0.7 session s1") is None  # no id: a command each time
    link._deliver()
    assert len(channel.poll()) == 2


def test_an_answers_values_leave_the_shared_store_once_delivered(run_on_a: RunOnA) -> None:
    """`agent-console answer` to another machine's run: the values the operator typed for the MCP server (a token
    it asked for) pass through the shared store's commands; once the run's link has written the command into the
    run's inbox the store keeps no value (the row stays: a command of that id sent again is still not repeated)."""
    from console.engine import commands as cmds
    from console.engine import events as ev
    from console.engine.control import ControlChannel, make_command
    from console.engine.job import JobPaths
    from console.engine.operator import OperatorState
    from console.engine.store.link import StoreLink

    secret = "ghp_" + "Q7" * 18
    cmd = make_command(cmds.Answer(set=(f"token={secret}",)), source="cli@machine-b", id=uuid.uuid4().hex)
    body = cmd.model_dump(mode="json", include={"id", "command", "args", "source"})
    run_on_a.store.send_command(run_on_a.key, body)
    paths = JobPaths(run_on_a.folder)
    link = StoreLink(run_on_a.store, paths, ev.EventStream(None), OperatorState(), owner=OWNER,
                     now=lambda: datetime.now(UTC))
    link._deliver()
    (taken,) = ControlChannel(paths.inbox).poll()
    assert taken.body == cmds.Answer(set=(f"token={secret}",))  # the run has it as typed
    rows = sql(run_on_a.url, "SELECT body::text, delivered_at FROM commands")
    assert len(rows) == 1 and rows[0][1] is not None
    assert secret not in rows[0][0]
    run_on_a.store.send_command(run_on_a.key, body)  # the same command again (a retry): not queued again
    assert run_on_a.store.undelivered(run_on_a.key) == []


def _answer(run: RunOnA, secret: str) -> dict[str, Any]:
    from console.engine import commands as cmds
    from console.engine.control import make_command

    cmd = make_command(cmds.Answer(set=(f"token={secret}",)), source="cli@machine-b", id=uuid.uuid4().hex)
    return cmd.model_dump(mode="json", include={"id", "command", "args", "source"})


@pytest.mark.parametrize("end", ["ended", "completed", "gave_up"])
def test_an_answer_no_run_took_leaves_the_shared_store_at_its_runs_end(run_on_a: RunOnA, end: str) -> None:
    # Sent with --wait 0 (nobody withdraws it), and the run ended before its link delivered it: the question ended
    # with its call, so no run ever takes it; the values the operator typed (a token) were kept in the row for ever.
    secret = "ghp_" + "R8" * 18
    run_on_a.store.send_command(run_on_a.key, _answer(run_on_a, secret))
    stop = {"id": uuid.uuid4().hex, "command": "stop", "args": {}, "source": "cli@machine-b"}
    run_on_a.store.send_command(run_on_a.key, stop)  # not an answer: left as it was (a later run discards it)
    now = datetime.now(UTC)
    match end:
        case "ended":
            run_on_a.store.ended(run_on_a.folder, "stopped", now, "stopped by the operator")
        case "completed":
            run_on_a.store.completed(run_on_a.folder, now, 0.9, "done")
        case _:
            run_on_a.store.gave_up(run_on_a.folder, now, 0.2, "it gave up")
    rows = sql(run_on_a.url, "SELECT body::text FROM commands")
    assert len(rows) == 1 and secret not in rows[0][0] and '"stop"' in rows[0][0]


def test_an_answer_to_a_run_killed_and_never_resumed_leaves_the_store_once_no_question_can_wait_for_it(
        run_on_a: RunOnA) -> None:
    from console.engine.store import open_store
    from console.engine.store.postgres import QUESTION_WAIT_BOUND
    from console.engine.tools.mcp_config import MAX_ELICITATION_TIMEOUT

    assert QUESTION_WAIT_BOUND > MAX_ELICITATION_TIMEOUT
    old, fresh = "ghp_" + "S9" * 18, "ghp_" + "T1" * 18
    run_on_a.store.send_command(run_on_a.key, _answer(run_on_a, old))
    run_on_a.store.send_command(run_on_a.key, _answer(run_on_a, fresh))
    sql(run_on_a.url, "UPDATE commands SET created_at = now() - make_interval(secs => %s) WHERE body::text LIKE %s",
        QUESTION_WAIT_BOUND + 60, f"%{old}%")
    store = open_store(run_on_a.url, run_on_a.folder.parent / "jobs.db")  # any machine's command opens it
    store.close()
    bodies = [b for (b,) in sql(run_on_a.url, "SELECT body::text FROM commands")]
    assert len(bodies) == 1 and fresh in bodies[0]  # one a question may still wait for is kept


def test_a_waiting_answer_whose_run_ended_and_dropped_it_says_withdrawn_nothing_was_done(
        run_on_a: RunOnA, capsys) -> None:
    run = run_on_a

    def ends(command_id: str) -> None:
        run.ship(("session_ended", {}), ("run_ended", {"status": "stopped"}))
        run.store.ended(run.folder, "stopped", datetime.now(UTC), "stopped")  # drops the answer
        run.store.drop_lease(run.key, OWNER)

    args = build_parser().parse_args(["answer", run_id(run.folder), "--set", "token=x", "--wait", "30"])
    code = remote_control(args, Settings(run.url, ends))
    err = capsys.readouterr().err
    assert code == EXIT_FAILED and "before it took the command: withdrawn, nothing was done" in err
