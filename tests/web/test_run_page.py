"""A run's page (console.view.run_snapshot + console.web): the todo list, pressure, feedback and the story's tail of
a run as the fleet folds it, live, escaped; a run that is gone says so."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from console.engine import events as ev
from console.engine.job import JobPaths
from console.view.fleet import Fleet
from console.view.run_snapshot import look
from console.web import auth as au
from console.web.server import FleetFeed, WebApp
from tests.tui.conftest import FROZEN_NOW
from tests.tui.fleet_runs import make_fleet
from tests.web.test_server import HOSTILE, logged_in


def fleet_of(tmp_path: Path) -> tuple[Fleet, Any]:
    fx = make_fleet(tmp_path)
    fleet = Fleet(fx.store_path, now=lambda: FROZEN_NOW, holder=fx.holder)
    fleet.poll()
    return fleet, fx


def rid_of(fleet: Fleet, folder: Path) -> str:
    return next(r.id for r in fleet.rows if r.path == folder)


def test_a_runs_snapshot_is_its_fold_and_its_storys_tail(tmp_path: Path) -> None:
    fleet, fx = fleet_of(tmp_path)
    rid = rid_of(fleet, fx.runs["waiting"])
    snap = look(list(fleet.rows), list(fleet.folds.values()), rid)
    assert snap is not None
    assert snap.todos == ((True, "Read the notes"), (False, "Write the summary"))
    assert "Check the findings" in snap.todo_title
    assert snap.pressure.startswith("98%") and "28k tokens" in snap.pressure
    # The thresholds in the console's words (its gauge's "soft 70%  hard 85%"): the page said "wind down at 70%,
    # restart at 85%", where 70% is where masking starts and 85% where the wind-down comes.
    assert snap.pressure.endswith("tokens (soft 70%, hard 85%)"), snap.pressure
    assert "restart approval" in snap.need
    assert snap.tail[-1] == ("warning", "⏸ restart pending: context 98% full")
    assert look(list(fleet.rows), list(fleet.folds.values()), "nope") is None


def test_hostile_text_in_a_runs_log_reaches_the_page_as_text(tmp_path: Path) -> None:
    fleet, fx = fleet_of(tmp_path)
    folder = fx.runs["running"]
    events = JobPaths(folder).events
    seq = len(events.read_text().splitlines()) + 1
    with events.open("a") as fh:
        fh.write(ev.TodosChanged(ts=FROZEN_NOW, seq=seq, session=1, kind="phase", phase_name=HOSTILE, phase_number=2,
                                 total_phases=4, items=[ev.TodoItemRecord(text=HOSTILE, done=False)]
                                 ).model_dump_json() + "\n")
        fh.write(ev.AssistantMessage(ts=FROZEN_NOW, seq=seq + 1, session=1, turn=9, text=HOSTILE,
                                     tool_calls=[]).model_dump_json() + "\n")
    fleet.poll()
    rid = rid_of(fleet, folder)
    auth = au.Auth()
    feed = FleetFeed(lambda: (list(fleet.poll()), fleet.error),
                     look=lambda r: look(list(fleet.rows), list(fleet.folds.values()), r))

    async def main() -> None:
        async with TestClient(TestServer(WebApp(auth, feed, poll=0.05).build(), host="127.0.0.1")) as client:
            await asyncio.sleep(0.3)
            await logged_in(client, auth)
            page = await client.get(f"/run/{rid}")
            body = await page.text()
            assert page.status == 200 and "&lt;script&gt;alert(1)&lt;/script&gt;" in body
            assert "<script>alert" not in body and "<img" not in body and "\x1b" not in body
            live = await client.get(f"/live/run/{rid}")
            first = (await asyncio.wait_for(live.content.readuntil(b"\n\n"), 30)).decode()
            assert first.startswith("event: list\n") and "&lt;script&gt;alert(1)" in first
            live.close()
            assert (await client.get("/run/nope")).status == 404

    asyncio.run(main())
    fleet.close()


def test_the_tail_of_a_huge_log_is_read_from_its_end(tmp_path: Path) -> None:
    """A log of many megabytes: the page reads its last part only, and starts mid-line without harm."""
    fleet, fx = fleet_of(tmp_path)
    folder = fx.runs["running"]
    events = JobPaths(folder).events
    filler = json.dumps({"v": 1, "ts": FROZEN_NOW.isoformat(), "seq": 10**6, "session": 1, "type": "turn_started",
                         "turn": 1, "prompt_tokens_est": 1})
    with events.open("a") as fh:
        for _ in range(40_000):
            fh.write(filler + "\n")
        fh.write(ev.AssistantMessage(ts=FROZEN_NOW, seq=10**6 + 1, session=1, turn=2, text="the newest reply",
                                     tool_calls=[]).model_dump_json() + "\n")
    assert events.stat().st_size > 4 * 1024 * 1024
    fleet.poll()
    snap = look(list(fleet.rows), list(fleet.folds.values()), rid_of(fleet, folder))
    assert snap is not None and any("the newest reply" in line for _, line in snap.tail)
    fleet.close()


def test_a_rewind_is_written_on_the_runs_page_and_sent_as_the_operators_text(tmp_path: Path) -> None:
    """The run's page offers a rewind while one applies (a process runs it, in a phase), outside what the live
    stream redraws; the text is the engine's Rewind command for the phase the page showed; an empty or too long
    text, a run nobody runs, a form of another session: nothing is sent, and the page says why."""
    import re

    from console.engine.commands import Rewind
    from tests.web.test_server import Acts

    fleet, fx = fleet_of(tmp_path)
    running, stopped = rid_of(fleet, fx.runs["running"]), rid_of(fleet, fx.runs["stopped"])
    snap = look(list(fleet.rows), list(fleet.folds.values()), running)
    assert snap is not None and snap.rewind_refused == "" and snap.rewind_phase == 2
    gone = look(list(fleet.rows), list(fleet.folds.values()), stopped)
    assert gone is not None and gone.rewind_refused == "no process runs it"
    auth, acts = au.Auth(), Acts()
    feed = FleetFeed(lambda: (list(fleet.poll()), fleet.error),
                     look=lambda r: look(list(fleet.rows), list(fleet.folds.values()), r))

    async def main() -> None:
        app = WebApp(auth, feed, poll=0.05, act=acts).build()
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            await asyncio.sleep(0.3)
            await logged_in(client, auth)
            page = await (await client.get(f"/run/{running}")).text()
            form = page[page.index('<form class="rewind"'):]
            assert page.index('<form class="rewind"') > page.index('id="run"') and 'name="issue"' in form
            assert (await (await client.get(f"/run/{stopped}")).text()).count('class="rewind"') == 0
            fields = dict(re.findall(r'name="(csrf|once|phase)" value="([^"]*)"', form))
            assert fields["phase"] == "2"

            async def send(rid: str, **extra: str) -> tuple[int, str]:
                resp = await client.post(f"/run/{rid}/act", data={**fields, "action": "rewind", **extra})
                return resp.status, await resp.text()

            status, said = await send(running, issue="The tables in section 4 were skipped <b>entirely</b>")
            assert status == 200 and "Rewind sent" in said
            assert acts.commands == [Rewind(issue="The tables in section 4 were skipped <b>entirely</b>", phase=2)]
            assert acts.sent[0][2].startswith("web 127.0.0.1 session ")
            status, said = await send(running, issue="   ")
            assert status == 400 and "the issue text is empty" in said
            status, said = await send(running, issue="x" * 5000)
            assert status == 400 and "Rewind not sent" in said
            status, said = await send(stopped, issue="redo it")
            assert status == 409 and "no process runs it" in said
            status, said = await send(running, issue="redo it", csrf="forged")
            assert status == 403
            assert len(acts.commands) == 1

    asyncio.run(main())
    fleet.close()


def test_the_runs_plan_is_on_its_page_read_as_the_plan_pane_reads_it(tmp_path: Path) -> None:
    """main_plan.md (the agent's file) on the run's page: escaped; a link out of the folder (to the operator's
    secrets) is never followed; none yet says so."""
    fleet, fx = fleet_of(tmp_path)
    running, waiting = fx.runs["running"], fx.runs["waiting"]
    (running / "main_plan.md").write_text(f"# Plan\n\n## Phase 1: Read\n- {HOSTILE}\n", encoding="utf-8")
    secret = tmp_path / "id_rsa"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n", encoding="utf-8")
    (waiting / "main_plan.md").symlink_to(secret)
    fleet.poll()
    snap = look(list(fleet.rows), list(fleet.folds.values()), rid_of(fleet, running))
    assert snap is not None and "## Phase 1: Read" in snap.plan and "\x1b" not in snap.plan
    linked = look(list(fleet.rows), list(fleet.folds.values()), rid_of(fleet, waiting))
    assert linked is not None and "PRIVATE KEY" not in linked.plan and "not shown" in linked.plan
    none = look(list(fleet.rows), list(fleet.folds.values()), rid_of(fleet, fx.runs["stopped"]))
    assert none is not None and "has not been written yet" in none.plan
    auth = au.Auth()
    feed = FleetFeed(lambda: (list(fleet.poll()), fleet.error),
                     look=lambda r: look(list(fleet.rows), list(fleet.folds.values()), r))

    async def main() -> None:
        async with TestClient(TestServer(WebApp(auth, feed, poll=0.05).build(), host="127.0.0.1")) as client:
            await logged_in(client, auth)
            body = await (await client.get(f"/run/{rid_of(fleet, running)}")).text()
            assert '<details class="plan" id="plan">' in body and "## Phase 1: Read" in body
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert" not in body

    asyncio.run(main())
    fleet.close()


def _ask(folder: Path, server: str, qid: str, message: str, schema: dict[str, Any]) -> None:
    """The run's need for an MCP server's question, as console.engine.tools.mcp_elicitation records it."""
    from console.engine.questions import parse_form

    path = JobPaths(folder).events
    last = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
    need = ev.NeedsOperator(ts=FROZEN_NOW, seq=last["seq"] + 1, session=1, reason="mcp_question",
                            message=f"MCP server {server} asks (question {qid}, during mcp__{server}__go): {message}",
                            evidence=[f.line() for f in parse_form(schema)], paused=False)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(need.model_dump_json() + "\n")


def test_a_question_of_an_mcp_server_is_answered_on_the_runs_page_as_answer_sends_it(tmp_path: Path) -> None:
    """While a question waits (a runner holds the run), the run's page has its form, outside what the live stream
    redraws: a field each, and answer, decline, cancel. An answer is the engine's Answer command for that question
    (the fields left empty not sent), named by its web session; nothing typed is repeated on a page. A question of
    a run no runner holds has no form; a form of another question, of another session, or with no question waiting
    sends nothing."""
    import re

    from console.engine.commands import Answer
    from tests.web.test_server import Acts

    fleet, fx = fleet_of(tmp_path)
    schema = {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string", "title": "City <script>alert(1)</script>"},
        "count": {"type": "integer", "minimum": 1},
        "token": {"type": "string", "description": "the deploy token"}}}
    _ask(fx.runs["running"], "asker", "q1a2b3c", "Where to? <img src=x onerror=alert(1)>", schema)
    _ask(fx.runs["stopped"], "asker", "q0d0d0d", "Nobody answers this one", schema)
    fleet.poll()
    running, stopped, paused = (rid_of(fleet, fx.runs[s]) for s in ("running", "stopped", "paused"))
    auth, acts = au.Auth(), Acts()
    feed = FleetFeed(lambda: (list(fleet.poll()), fleet.error),
                     look=lambda r: look(list(fleet.rows), list(fleet.folds.values()), r))
    secret = "ghp_" + "W3" * 18

    async def main() -> None:
        app = WebApp(auth, feed, poll=0.05, act=acts).build()
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            await asyncio.sleep(0.3)
            await logged_in(client, auth)
            page = await (await client.get(f"/run/{running}")).text()
            assert page.index('<form class="answer"') > page.index('id="run"')
            form = page[page.index('<form class="answer"'):page.index("</form>", page.index('<form class="answer"'))]
            assert re.findall(r'name="(field\.[^"]+)"', form) == ["field.city", "field.count", "field.token"]
            assert "<script>" not in page and "<img" not in page and "&lt;script&gt;" in form
            assert f'href="/run/{running}?question=q1a2b3c#answer"' in page  # in the live part: where the form is
            assert (await (await client.get(f"/run/{stopped}")).text()).count('class="answer"') == 0
            fields = dict(re.findall(r'name="(csrf|once|question|action)" value="([^"]*)"', form))
            assert fields == {"csrf": fields["csrf"], "once": fields["once"], "question": "q1a2b3c",
                              "action": "answer"}

            async def send(rid: str, **extra: str) -> tuple[int, str]:
                resp = await client.post(f"/run/{rid}/act", data={**fields, **extra})
                return resp.status, await resp.text()

            status, said = await send(running, reply="accept", **{"field.city": "Lyon", "field.count": "",
                                                                  "field.token": secret})
            assert status == 200 and "Answer sent" in said and secret not in said
            assert acts.commands == [Answer(question="q1a2b3c", set=("city=Lyon", f"token={secret}"))]
            assert acts.sent[-1][1] == "answer" and acts.sent[-1][2].startswith("web 127.0.0.1 session ")
            status, said = await send(running, reply="decline")
            assert status == 200 and acts.commands[-1] == Answer(question="q1a2b3c", decline=True)
            status, said = await send(running, reply="cancel")
            assert status == 200 and acts.commands[-1] == Answer(question="q1a2b3c", cancel=True)
            # The same page's form sent again with another answer (a page the browser kept, after the run refused the
            # first) is another command, not the first one again (which the inbox would take for sent: nothing would
            # reach the run);
            # the same answer sent twice (a double tap) is one command; no id holds what was typed.
            status, said = await send(running, reply="accept", **{"field.city": "Paris", "field.token": secret})
            assert status == 200 and len(set(acts.ids)) == len(acts.ids) == 4
            status, said = await send(running, reply="decline")
            assert status == 200 and acts.ids[-1] == acts.ids[1]
            assert all(i is not None and secret not in i for i in acts.ids)
            sent = len(acts.commands)
            status, said = await send(running, reply="accept", question="q9f9f9f", **{"field.city": secret})
            assert status == 409 and "reload its page" in said and secret not in said
            status, said = await send(running, reply="accept", **{"field.city": secret * 200})
            assert status == 400 and "nothing was sent" in said and secret not in said
            status, said = await send(running, reply="maybe")
            assert status == 400
            status, said = await send(stopped, reply="decline", question="q0d0d0d")
            assert status == 409 and "no question" in said
            status, said = await send(paused, reply="decline")
            assert status == 409 and "no question" in said
            status, said = await send(running, reply="decline", csrf="forged")
            assert status == 403
            status, said = await send(running, reply="accept", **{"field.city": secret * 2000})  # over 64 KiB
            assert status == 413 and secret not in said
            assert len(acts.commands) == sent
            # Ten thousand fields (within the body's bound): refused whole by aiohttp, nothing sent.
            many = [("f", "1")] * 10_000 + [*fields.items(), ("reply", "accept"), ("field.city", "Nice")]
            resp = await client.post(f"/run/{running}/act", data=many)
            assert resp.status == 413 and len(acts.commands) == sent
            # Fields the form has not, and a value of control characters: read past, the form's own field sent as
            # typed (the run checks it; the log keeps its name only), nothing typed on the page.
            typed = "Nice\r\n\x00\x1b[2J"
            status, said = await send(running, reply="accept", **{"field.city": typed, "field.admin": "1", "x": "y"})
            assert status == 200 and typed not in said
            assert acts.commands[-1] == Answer(question="q1a2b3c", set=(f"city={typed}",))

    asyncio.run(main())
    fleet.close()


def test_a_run_starting_offers_no_rewind_and_its_facts_have_no_stray_dot(tmp_path: Path) -> None:
    """Found by a new operator's trial: a run a process holds, its first todo list not written yet (starting), was
    offered the rewind's form (no phase to re-plan: the engine refuses it once its bootstrap list comes), and its
    page said "· $0.00" with no phase before the dot."""
    from console.engine.store import JobStore
    from console.web import pages

    fx = make_fleet(tmp_path)
    folder = tmp_path / "runs" / "starting-20261201-050000"
    JobPaths(folder).state.mkdir(parents=True)
    JobPaths(folder).events.write_text(ev.SessionStarted(
        ts=FROZEN_NOW, seq=1, session=1, reason="new", provider="openai", model="gpt-6.2-sol",
        context_window=32_000).model_dump_json() + "\n")
    store = JobStore(fx.store_path)
    store.started(folder, folder.name, "openai", "gpt-6.2-sol", FROZEN_NOW)
    store.cost(folder, 0.0)
    store.close()
    fleet = Fleet(fx.store_path, now=lambda: FROZEN_NOW,
                  holder=lambda fold: 4250 if fold.paths.root == folder else fx.holder(fold))
    fleet.poll()
    rid = rid_of(fleet, folder)
    snap = look(list(fleet.rows), list(fleet.folds.values()), rid)
    assert snap is not None and "no todo list yet" in snap.rewind_refused and snap.rewind_phase is None
    row = next(r for r in fleet.rows if r.id == rid)
    assert row.has_runner
    page = pages.run_page(snap, row, "csrf")
    assert 'class="rewind"' not in page
    assert '<p class="facts">$0.00</p>' in page and "· $0.00" not in page, page
    # A run in a phase still has both, with the dot between them; the running run's rewind is still offered.
    running = look(list(fleet.rows), list(fleet.folds.values()), rid_of(fleet, fx.runs["running"]))
    assert running is not None and running.rewind_refused == ""
    assert f'<p class="facts">{running.phase} · {running.cost}</p>' in pages.run_body(running, None, "csrf")
    fleet.close()
