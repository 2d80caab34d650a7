"""serve's web application against a real aiohttp server on 127.0.0.1: the login link works once, nothing else
answers without a session (401 and nothing more), every page is inert outside the server (its headers), agent text
arrives escaped, the fleet's list is live, and a guesser is turned away."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp import WSServerHandshakeError
from aiohttp.test_utils import TestClient, TestServer

from console.engine.commands import AnyCommand
from console.view.fleet import FleetRow
from console.web import auth as au
from console.web.server import HEADERS, FleetFeed, WebApp

HOSTILE = '<script>alert(1)</script><img src=x onerror=alert(2)> \x1b[31mred\x1b[0m [link](http://evil)'


def row(rid: str = "r1", **kw: Any) -> FleetRow:
    facts: dict[str, Any] = dict(path=Path(f"/runs/{rid}"), id=rid, name=rid, job="demo", state="running",
                                 kind="running", phase="1/3", phase_long="", ctx=0.25, cost=0.5, elapsed="1m",
                                 last="tool call read_file", detail="", pending_seq=0, started_at="2026-11-29T10:00",
                                 pid=123)
    facts.update(kw)
    return FleetRow(**facts)


class Rows:
    def __init__(self) -> None:
        self.rows = [row()]

    def __call__(self) -> tuple[list[FleetRow], str]:
        return list(self.rows), ""


def serve(test: Callable[[TestClient[Any, Any], au.Auth, Rows], Coroutine[Any, Any, None]]) -> None:
    async def main() -> None:
        rows = Rows()
        auth = au.Auth()
        app = WebApp(auth, FleetFeed(rows), poll=0.05).build()
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            await test(client, auth, rows)

    asyncio.run(main())


async def page_showing(client: TestClient[Any, Any], path: str, sign: str, patience: float = 30.0) -> str:
    """The page at ``path`` once it shows ``sign``: the feed reads the rows on its own thread every poll, a read
    that a busy machine can delay past any fixed pause (a ceiling, not a pace)."""
    deadline = time.monotonic() + patience
    while sign not in (body := await (await client.get(path)).text()):
        assert time.monotonic() < deadline, f"{path} never showed {sign!r}"
        await asyncio.sleep(0.02)
    return body


async def logged_in(client: TestClient[Any, Any], auth: au.Auth) -> None:
    resp = await client.get(f"/login?token={auth.login_token()}", allow_redirects=False)
    assert resp.status == 303 and resp.headers["Location"] == "/"
    cookie = resp.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie


def test_nothing_answers_without_a_session_and_the_login_link_works_once() -> None:
    async def test(client: TestClient[Any, Any], auth: au.Auth, rows: Rows) -> None:
        for path in ("/", "/live/fleet", "/run/r1", "/nothing"):
            resp = await client.get(path)
            assert resp.status == 401, path
            assert "demo" not in await resp.text()
        token = auth.login_token()
        await logged_in(client, auth)
        resp = await client.get("/")
        assert resp.status == 200 and "r1" in await resp.text()
        client.session.cookie_jar.clear()
        again = await client.get(f"/login?token={token}", allow_redirects=False)
        assert again.status == 401 and "Set-Cookie" not in again.headers

    serve(test)


def test_every_response_is_inert_outside_the_server() -> None:
    async def test(client: TestClient[Any, Any], auth: au.Auth, rows: Rows) -> None:
        for resp in (await client.get("/"), await client.get("/login?token=nope"),
                     await client.get("/static/live.js")):
            for name, value in HEADERS.items():
                assert resp.headers.get(name) == value, (resp.url, name)
        await logged_in(client, auth)
        resp = await client.get("/")
        assert resp.status == 200 and "<script>" not in (await resp.text()).replace(
            '<script src="/static/live.js" defer></script>', "")

    serve(test)


def test_agent_text_arrives_escaped() -> None:
    async def test(client: TestClient[Any, Any], auth: au.Auth, rows: Rows) -> None:
        rows.rows = [row(job=HOSTILE, last=HOSTILE, state="needs you", kind="needs", needs="stuck",
                         needs_message=HOSTILE, host=HOSTILE)]
        await logged_in(client, auth)
        body = await page_showing(client, "/", "Needs you (1)")  # the feed's next read has the hostile row
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "&lt;img src=x" in body
        assert "<img" not in body and "\x1b" not in body and "<script>alert" not in body
        assert 'href="http://evil"' not in body

    serve(test)


def test_the_fleet_list_is_live() -> None:
    async def test(client: TestClient[Any, Any], auth: au.Auth, rows: Rows) -> None:
        await logged_in(client, auth)
        resp = await client.get("/live/fleet")
        assert resp.headers["Content-Type"].startswith("text/event-stream")

        async def next_list() -> str:
            lines: list[str] = []
            while True:
                raw = (await resp.content.readline()).decode()
                if raw == "\n" and lines:
                    return "\n".join(lines)
                if raw.startswith("data: "):
                    lines.append(raw[6:].rstrip("\n"))

        first = await asyncio.wait_for(next_list(), 30)
        assert 'id="run-r1"' in first and 'id="run-r2"' not in first  # (a random token may hold "r2")
        rows.rows = [row(), row("r2", state="needs you", kind="needs", needs="restart_approval", pending_seq=7)]
        second = await asyncio.wait_for(next_list(), 30)
        assert re.search(r"Needs you \(1\).*r2", second, re.S)
        assert 'value="approve"' in second and 'name="csrf"' in second
        resp.close()

    serve(test)


def test_a_guesser_is_turned_away_before_anything_it_offers_is_looked_at() -> None:
    async def test(client: TestClient[Any, Any], auth: au.Auth, rows: Rows) -> None:
        for i in range(au.FAIL_LIMIT):
            assert (await client.get(f"/login?token=guess{i}")).status == 401
        token = auth.login_token()
        resp = await client.get(f"/login?token={token}", allow_redirects=False)
        assert resp.status == 429 and int(resp.headers["Retry-After"]) >= 1
        assert auth.login_token() == token  # the real token was not even tried

    serve(test)


async def flood(client: TestClient[Any, Any]) -> None:
    """What anyone who reaches serve can send (behind a proxy, from the proxy's address, as every browser): bad login
    tokens, a forged action link and a made-up session cookie, without the cookies of ``client``'s browser."""
    import aiohttp

    async with aiohttp.ClientSession() as stranger:
        for i in range(au.FAIL_LIMIT + 1):
            await stranger.get(client.make_url(f"/login?token=bad{i}"))
        await stranger.get(client.make_url("/a/forged.link"))
        await stranger.get(client.make_url("/"), headers={"Cookie": f"{au.COOKIE}=made-up"})


def test_a_logged_in_browser_is_never_refused_by_the_limit_of_failed_attempts() -> None:
    """Found by a new operator's trial: behind the reverse proxy, tunnel or `tailscale serve` docs/serve.md
    recommends, every client has the proxy's address, and 10 bad login links a minute from anyone answered the
    logged-in operator's every page 429. A request with a live session is not refused by the limit; a stranger's,
    from the same address, still is."""
    async def test(client: TestClient[Any, Any], auth: au.Auth, rows: Rows, acts: Acts) -> None:
        csrf = await csrf_of(client)
        await flood(client)
        assert auth.limited("127.0.0.1")
        for path in ("/", "/static/style.css"):
            resp = await client.get(path)
            assert resp.status == 200, (path, resp.status)
        live = await client.get("/live/fleet")
        assert live.status == 200 and (await live.content.readuntil(b"\n\n")).startswith(b"event: list")
        live.close()
        resp = await client.post("/run/r1/act", data={"action": "pause", "csrf": csrf})
        assert resp.status == 200 and acts.sent[-1][:2] == ("r1", "pause")
        await flood(client)  # still flooded, still in
        assert (await client.get("/")).status == 200
        # Logged out (the cookie gone), the same browser is a stranger again: 429, its tokens not looked at.
        client.session.cookie_jar.clear()
        token = auth.new_login()
        assert (await client.get("/")).status == 429
        assert (await client.get(f"/login?token={token}", allow_redirects=False)).status == 429
        assert auth.login_token() == token

    acting(test)


def test_while_a_guesser_is_limited_no_token_and_no_made_up_cookie_gets_in() -> None:
    """The limit still stops guessing: past it, a login token, an action link and a session cookie that is none
    are each answered 429 (and counted: the address stays limited while it keeps guessing)."""
    async def test(client: TestClient[Any, Any], auth: au.Auth, rows: Rows) -> None:
        await flood(client)
        token = auth.login_token()
        for path, cookie in ((f"/login?token={token}", ""), ("/a/x.y", ""), ("/", f"{au.COOKIE}=made-up"),
                             ("/run/r1", f"{au.COOKIE}={'x' * 43}")):
            resp = await client.get(path, headers={"Cookie": cookie} if cookie else None, allow_redirects=False)
            assert resp.status == 429 and int(resp.headers["Retry-After"]) >= 1, path
        assert auth.login_token() == token  # the real token was not even tried
        assert not auth.sessions

    serve(test)


def test_the_browser_console_is_behind_the_same_login() -> None:
    async def main() -> None:
        auth = au.Auth()
        web_app = WebApp(auth, FleetFeed(Rows()), poll=0.05)
        server = TestServer(web_app.build(console="agent-console fleet", public_url="http://127.0.0.1"),
                            host="127.0.0.1")
        async with TestClient(server) as client:
            for path in ("/console/", "/console/ws", "/console/static/js/textual.js"):
                resp = await client.get(path)
                assert resp.status == 401, path
            with pytest.raises(WSServerHandshakeError) as refused:
                await client.ws_connect("/console/ws")
            assert refused.value.status == 401
            await logged_in(client, auth)
            page = await client.get("/console/")
            body = await page.text()
            # (The address this browser came by: the public URL names no port.)
            port = client.server.port
            assert page.status == 200 and f'data-session-websocket-url="ws://127.0.0.1:{port}/console/ws"' in body
            assert "'unsafe-inline'" in page.headers["Content-Security-Policy"]
            assert page.headers["X-Frame-Options"] == "DENY"
            assert (await client.get("/")).headers["Content-Security-Policy"] == HEADERS["Content-Security-Policy"]
            assert (await client.get("/console/static/js/textual.js")).status == 200

    asyncio.run(main())


def test_the_browser_console_names_the_address_the_browser_came_by() -> None:
    """Found by a new operator's trial: the browser console's page named the public URL (the bound address by
    default) for its script and websocket, whatever address the browser used: opened as localhost:8765, or through
    a tunnel on another port, its policy ('self') refused them and it drew nothing. It names the browser's address,
    or the public URL when the browser came by it (a TLS proxy's https kept)."""
    async def main() -> None:
        auth = au.Auth()
        web_app = WebApp(auth, FleetFeed(Rows()), poll=0.05)
        app = web_app.build(console="agent-console fleet", public_url="https://console.example")
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            await logged_in(client, auth)
            body = await (await client.get("/console/", headers={"Host": "localhost:9000"})).text()
            assert 'data-session-websocket-url="ws://localhost:9000/console/ws"' in body, body
            assert "https://console.example" not in body
            body = await (await client.get("/console/", headers={"Host": "console.example"})).text()
            assert 'data-session-websocket-url="wss://console.example/console/ws"' in body

    asyncio.run(main())


def test_a_websocket_or_post_from_another_sites_page_is_refused() -> None:
    async def main() -> None:
        auth = au.Auth()
        app = WebApp(auth, FleetFeed(Rows()), poll=0.05).build(console="true", public_url="https://console.example")
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            await logged_in(client, auth)
            with pytest.raises(WSServerHandshakeError) as refused:
                await client.ws_connect("/console/ws", origin="https://evil.example")
            assert refused.value.status == 403
            resp = await client.post("/a/x.y", headers={"Origin": "https://evil.example"})
            assert resp.status == 403
            ok = await client.get("/", headers={"Origin": "https://evil.example"})  # a GET acts on nothing
            assert ok.status == 200

    asyncio.run(main())


class Acts:
    def __init__(self, problem: str | None = None) -> None:
        self.sent: list[tuple[str, str, str]] = []
        self.ids: list[str | None] = []
        self.commands: list[AnyCommand | None] = []
        self.problem = problem

    def __call__(self, r: FleetRow, action: str, command_id: str | None, source: str,
                 command: AnyCommand | None = None) -> str | None:
        self.sent.append((r.id, action, source))
        self.ids.append(command_id)
        self.commands.append(command)
        return self.problem


def acting(test: Callable[[TestClient[Any, Any], au.Auth, Rows, Acts], Coroutine[Any, Any, None]],
           problem: str | None = None) -> None:
    async def main() -> None:
        rows, acts = Rows(), Acts(problem)
        rows.rows = [row(), row("r2", state="needs you", kind="needs", needs="restart_approval", pending_seq=7)]
        auth = au.Auth()
        app = WebApp(auth, FleetFeed(rows), poll=0.05, act=acts).build()
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            await asyncio.sleep(0.2)
            await logged_in(client, auth)
            await test(client, auth, rows, acts)

    asyncio.run(main())


async def csrf_of(client: TestClient[Any, Any]) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', await (await client.get("/")).text())
    assert found is not None
    return found.group(1)


def test_an_action_needs_the_sessions_csrf_token_and_applies_only_where_it_applies() -> None:
    async def test(client: TestClient[Any, Any], auth: au.Auth, rows: Rows, acts: Acts) -> None:
        csrf = await csrf_of(client)
        for data in ({"action": "approve"}, {"action": "approve", "csrf": "nope"}):
            assert (await client.post("/run/r2/act", data=data)).status == 403
        resp = await client.post("/run/r1/act", data={"action": "approve", "csrf": csrf})  # r1 waits for nothing
        assert resp.status == 409
        assert (await client.post("/run/r9/act", data={"action": "pause", "csrf": csrf})).status == 404
        assert (await client.post("/run/r1/act", data={"action": "rm -rf", "csrf": csrf})).status == 400
        assert acts.sent == []
        resp = await client.post("/run/r2/act", data={"action": "approve", "csrf": csrf})
        assert resp.status == 200 and "approve sent" in await resp.text()
        assert acts.sent[0][:2] == ("r2", "approve") and acts.sent[0][2].startswith("web 127.0.0.1 session ")
        session_id = next(iter(auth.sessions))
        assert session_id not in acts.sent[0][2]  # the session's credential never names it

    acting(test)


def test_an_action_from_this_servers_origin_or_none_is_taken_and_from_another_is_refused() -> None:
    """docs/security.md: every action carries the session's CSRF token, and an Origin that is this server's when the
    request has one. A browser sends it on every POST; a script (curl) sends none, and with the session's cookie
    and CSRF token it acts: the token is the check, the Origin defence in depth beside it and SameSite=Strict."""
    async def test(client: TestClient[Any, Any], auth: au.Auth, rows: Rows, acts: Acts) -> None:
        csrf = await csrf_of(client)
        form = {"action": "pause", "csrf": csrf}
        own = f"http://{client.host}:{client.port}"
        assert (await client.post("/run/r1/act", data=form, headers={"Origin": "https://evil.example"})).status \
            == 403
        assert (await client.post("/run/r1/act", data=form, headers={"Origin": "null"})).status == 403
        assert acts.sent == []
        assert (await client.post("/run/r1/act", data=form, headers={"Origin": own})).status == 200
        assert (await client.post("/run/r1/act", data=form)).status == 200  # no Origin: the token decides
        assert (await client.post("/run/r1/act", data={"action": "pause"})).status == 403
        assert [a for _, a, _ in acts.sent] == ["pause", "pause"]

    acting(test)


def test_an_action_that_ends_a_run_is_asked_first() -> None:
    async def test(client: TestClient[Any, Any], auth: au.Auth, rows: Rows, acts: Acts) -> None:
        csrf = await csrf_of(client)
        ask = await client.post("/run/r2/act", data={"action": "deny", "csrf": csrf})
        body = await ask.text()
        assert ask.status == 200 and "Deny run r2" in body and 'name="confirm" value="yes"' in body
        assert acts.sent == []
        done = await client.post("/run/r2/act", data={"action": "deny", "csrf": csrf, "confirm": "yes"})
        assert done.status == 200 and acts.sent[0][:2] == ("r2", "deny")

    acting(test)


def test_an_action_not_sent_says_why() -> None:
    async def test(client: TestClient[Any, Any], auth: au.Auth, rows: Rows, acts: Acts) -> None:
        resp = await client.post("/run/r1/act", data={"action": "pause", "csrf": await csrf_of(client)})
        assert resp.status == 409 and "no process is running this job" in await resp.text()

    acting(test, problem="no process is running this job (read-only)")


def test_without_the_console_its_link_says_why() -> None:
    async def test(client: TestClient[Any, Any], auth: au.Auth, rows: Rows) -> None:
        await logged_in(client, auth)
        assert 'href="/console/"' in await (await client.get("/")).text()
        resp = await client.get("/console/")
        assert resp.status == 404 and "--no-console" in await resp.text()

    serve(test)


def test_a_fleet_that_cannot_be_read_is_said_on_the_page() -> None:
    calls = {"n": 0}

    def read() -> tuple[list[FleetRow], str]:
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError("the jobs database is gone")
        return [row()], ""

    async def main() -> None:
        auth = au.Auth()
        async with TestClient(TestServer(WebApp(auth, FleetFeed(read), poll=0.05).build(), host="127.0.0.1")) as c:
            # A third read has begun once the failed second one was handled (the feed reads them one after another):
            # a fixed pause for it was passed on a busy machine.
            deadline = time.monotonic() + 30
            while calls["n"] < 3:
                assert time.monotonic() < deadline, "the feed did not read the fleet again"
                await asyncio.sleep(0.02)
            await logged_in(c, auth)
            body = await (await c.get("/")).text()
            assert "the fleet cannot be read now: OSError: the jobs database is gone" in body
            assert "r1" in body  # what was read last is kept

    asyncio.run(main())



def test_a_form_sent_twice_is_one_command() -> None:
    """A tap retried after a lost answer (or a reload that posts again) sends the form's own command again: the same
    id, which reaches the run once (console.view.answering.send_local); the next drawing of the page is a new one.
    An answer to one request (a restart's approval) is one command whatever page, session or serve sends it."""
    async def test(client: TestClient[Any, Any], auth: au.Auth, rows: Rows, acts: Acts) -> None:
        page = await (await client.get("/")).text()
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        once = re.search(r'name="once" value="([^"]+)"', page)
        assert csrf is not None and once is not None
        form = {"action": "pause", "csrf": csrf.group(1), "once": once.group(1)}
        for _ in range(2):
            assert (await client.post("/run/r1/act", data=form)).status == 200
        again = re.search(r'name="once" value="([^"]+)"', await (await client.get("/")).text())
        assert again is not None and again.group(1) != once.group(1)
        assert (await client.post("/run/r1/act", data={**form, "once": again.group(1)})).status == 200
        assert acts.ids[0] is not None and acts.ids[0] == acts.ids[1] != acts.ids[2]
        # The approval of restart 7 of r2: one command from this page, a later one, and another session's.
        approve = {**form, "action": "approve"}
        assert (await client.post("/run/r2/act", data=approve)).status == 200
        assert (await client.post("/run/r2/act", data={**approve, "once": again.group(1)})).status == 200
        client.session.cookie_jar.clear()
        auth.new_login()  # another device's login
        await logged_in(client, auth)
        other = await csrf_of(client)
        assert other != csrf.group(1)
        assert (await client.post("/run/r2/act", data={**approve, "csrf": other})).status == 200
        assert acts.ids[3] is not None and acts.ids[3] == acts.ids[4] == acts.ids[5] != acts.ids[0]
        rows.rows[1] = replace(rows.rows[1], pending_seq=9, last="restart 9 asked")  # the next: a new answer
        for _ in range(600):  # until the fleet's list has it (the feed polls every 0.05 s)
            if "restart 9 asked" in await (await client.get("/")).text():
                break
            await asyncio.sleep(0.05)
        assert (await client.post("/run/r2/act", data={**approve, "csrf": other})).status == 200
        assert acts.ids[6] not in acts.ids[:6]
        # A deny asked first keeps the form's token through its question.
        ask = await (await client.post("/run/r2/act", data={**form, "csrf": other, "action": "deny"})).text()
        assert f'name="once" value="{once.group(1)}"' in ask

    acting(test)


def test_a_page_asked_before_the_fleets_first_reading_waits_for_it() -> None:
    """A page (or its live stream) asked while the fleet is still being read for the first time shows the runs
    once read, never "no run" meanwhile."""
    import threading

    released = threading.Event()

    def slow() -> tuple[list[FleetRow], str]:
        assert released.wait(60)
        return [row()], ""

    async def main() -> None:
        auth = au.Auth()
        app = WebApp(auth, FleetFeed(slow), poll=0.05).build()
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            await logged_in(client, auth)
            page = asyncio.ensure_future(client.get("/"))
            await asyncio.sleep(0.3)
            assert not page.done()  # waiting for the first reading, not drawing an empty fleet
            released.set()
            assert 'id="run-r1"' in await (await page).text()

    asyncio.run(main())


def test_a_need_is_said_once_on_its_runs_card() -> None:
    """Found trying it on a phone: a run waiting for its approval said the need, then the same sentence again as its
    last event. The last event is shown unless it is the need the card already says."""
    from console.web.pages import row_view

    message = "the context is full (9,043 tokens): approve the restart into session 3, or deny it to end the run"
    waiting = row(state="needs you: approval", kind="needs", needs="restart_approval", needs_message=message,
                  needs_since="08:46", last=f"⚑ NEEDS YOU (restart approval): {message}")
    view = row_view(waiting)
    assert message in view.need and view.last == ""
    # Another last event is still shown beside the need; a run that needs nothing shows its last event.
    assert row_view(replace(waiting, last="tool call read_file")).last == "tool call read_file"
    assert row_view(row()).last == "tool call read_file"


def test_a_question_of_an_mcp_server_names_where_it_is_answered_and_offers_no_button() -> None:
    """No button of the list takes a form's fields: the card says the run's page has its form, and the shell's
    command, and offers no resume (which would be refused: the run is not paused, its call waits for the answer)."""
    from console.web.pages import row_view

    asking = row(state="needs you", kind="needs", needs="mcp_question", needs_seq=9,
                 needs_message="MCP server asker asks (question q1a2b3c, during ask): Who are you?")
    view = row_view(asking)
    assert "Who are you?" in view.need
    assert view.need.endswith("answer it on its page (open r1), or from a shell: agent-console answer r1 --set "
                              "NAME=VALUE (or --decline)")
    assert [a for a, _ in view.actions] == ["stop"]
