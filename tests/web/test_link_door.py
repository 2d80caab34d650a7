"""Action links at serve's door (console.web.link_door) against a real aiohttp server on 127.0.0.1: opening a link
never acts; only its page's button does, once; a forged, expired, foreign, stale or replayed link does nothing and
says why."""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import Callable, Coroutine
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from yarl import URL

from console.engine import action_links as al
from console.engine.seal import Seal
from console.view.fleet import FleetRow
from console.web import auth as au
from console.web.link_door import FORM_COOKIE, LinkDoor, command_id_of
from console.web.server import FleetFeed, WebApp
from tests.web.test_server import row

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


class World:
    def __init__(self, tmp: Path) -> None:
        self.data = tmp / "data"
        self.folder = tmp / "runs" / "r1"
        self.folder.mkdir(parents=True)
        self.seal = Seal.of(self.data)
        self.rows = [row("r1", path=self.folder, state="needs you", kind="needs", needs="restart_approval",
                         pending_seq=41, needs_seq=40)]
        self.sent: list[tuple[str, str, str, str]] = []
        self.now = NOW
        self.auth = au.Auth()

    def answer(self, r: FleetRow, action: str, command_id: str, source: str) -> str | None:
        self.sent.append((r.id, action, command_id, source))
        return None

    def delivered(self, r: FleetRow, command_id: str) -> bool:
        return any(s[0] == r.id and s[2] == command_id for s in self.sent)

    def link(self, action: al.Action = "approve", request: str = "restart:41", **kw: Any) -> str:
        return al.mint(self.seal, self.folder, "r1", action, request=request, now=kw.pop("now", NOW), **kw)


def serve(tmp: Path, test: Callable[[TestClient[Any, Any], World], Coroutine[Any, Any, None]]) -> World:
    world = World(tmp)

    async def main() -> None:
        door = LinkDoor(world.auth, lambda: world.seal, al.UsedLinks(world.data), lambda: world.rows, world.answer,
                        lambda: world.now, delivered=world.delivered)
        app = WebApp(world.auth, FleetFeed(lambda: ([], "")), poll=0.05, links=door).build()
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            await test(client, world)

    asyncio.run(main())
    return world


async def press(client: TestClient[Any, Any], token: str) -> tuple[int, str]:
    page = await client.get(f"/a/{token}")
    form = re.search(r'name="form" value="([^"]+)"', await page.text())
    assert page.status == 200 and form is not None, await page.text()
    resp = await client.post(f"/a/{token}", data={"form": form.group(1), "action": "x"})
    return resp.status, await resp.text()


def test_opening_a_link_never_acts_its_button_does_once(tmp_path: Path) -> None:
    async def test(client: TestClient[Any, Any], world: World) -> None:
        token = world.link()
        page = await client.get(f"/a/{token}")
        body = await page.text()
        assert page.status == 200 and "Approve the context restart of run r1" in body and "<button" in body
        assert "SameSite=Strict" in page.headers["Set-Cookie"] and "HttpOnly" in page.headers["Set-Cookie"]
        assert world.sent == []  # a preview fetched by a chat app did nothing
        status, body = await press(client, token)
        assert status == 200 and "Approve sent to run r1" in body
        assert world.sent == [("r1", "approve", command_id_of(al.peek(token)), world.sent[0][3])]
        assert world.sent[0][3].startswith("web link ")
        again = await client.get(f"/a/{token}")
        assert again.status == 409 and "was used" in await again.text()

    serve(tmp_path, test)


def test_a_post_without_the_links_page_does_nothing(tmp_path: Path) -> None:
    async def test(client: TestClient[Any, Any], world: World) -> None:
        token = world.link()
        resp = await client.post(f"/a/{token}", data={"form": "guess"})
        assert resp.status == 403 and "Open the link again" in await resp.text()
        client.session.cookie_jar.update_cookies({FORM_COOKIE: "guess"})
        resp = await client.post(f"/a/{token}", data={"form": "other"})
        assert resp.status == 403
        assert world.sent == []

    serve(tmp_path, test)


def test_a_link_for_a_request_answered_since_does_nothing(tmp_path: Path) -> None:
    async def test(client: TestClient[Any, Any], world: World) -> None:
        token = world.link()
        page = await client.get(f"/a/{token}")
        form = re.search(r'name="form" value="([^"]+)"', await page.text())
        assert form is not None
        world.rows = [replace(world.rows[0], pending_seq=57)]  # answered from the shell; a new restart waits
        resp = await client.post(f"/a/{token}", data={"form": form.group(1)})
        assert resp.status == 409 and "has asked again since this link was sent" in await resp.text()
        world.rows = [replace(world.rows[0], pending_seq=0, state="running", kind="running")]
        assert (await client.get(f"/a/{token}")).status == 409
        assert world.sent == []

    serve(tmp_path, test)


def test_forged_expired_foreign_and_garbage_links_do_nothing(tmp_path: Path) -> None:
    async def test(client: TestClient[Any, Any], world: World) -> None:
        other = Seal.of(tmp_path / "someone-else")
        forged = al.mint(other, world.folder, "r1", "approve", request="restart:41", now=NOW)
        assert (await client.get(f"/a/{forged}")).status == 403
        body, mac = world.link().split(".")
        claim = al.peek(f"{body}.{mac}").model_copy(update={"action": "deny"})
        changed = base64.urlsafe_b64encode(claim.payload()).rstrip(b"=").decode() + "." + mac
        assert (await client.get(f"/a/{changed}")).status == 403
        expired = world.link(ttl=timedelta(minutes=5))
        world.now = NOW + timedelta(minutes=6)
        resp = await client.get(f"/a/{expired}")
        assert resp.status == 410 and "agent-console approve r1" in await resp.text()
        world.now = NOW
        world.rows = [replace(world.rows[0], host="machine-b")]  # another machine's run: its own serve answers
        assert (await client.get(f"/a/{world.link()}")).status == 404
        for junk in ("x", "a.b", "%3Cscript%3E.x", "A" * 700):
            resp = await client.get(f"/a/{junk}")
            assert resp.status == 400 and "<script>" not in await resp.text()
        assert world.sent == []
        assert len(world.auth.failures["127.0.0.1"].times) >= 4  # forgeries and garbage count as failures

    serve(tmp_path, test)


def test_a_kill_between_the_spend_and_the_command_sends_the_same_command_once_more(tmp_path: Path) -> None:
    async def test(client: TestClient[Any, Any], world: World) -> None:
        token = world.link("resume", "need:40")
        world.rows = [replace(world.rows[0], needs="stuck", pending_seq=0)]
        al.UsedLinks(world.data).spend(al.peek(token), command_id_of(al.peek(token)))  # then the kill
        page = await client.get(f"/a/{token}")
        text = await page.text()
        assert page.status == 200 and "its answer was not sent" in text  # ... so its button is offered again
        status, body = await press(client, token)
        assert status == 409 and "is sent, once" in body
        assert [s[:3] for s in world.sent] == [("r1", "resume", command_id_of(al.peek(token)))]
        # The button of a page opened before, pressed afterwards (its form still good): nothing more is sent.
        form = re.search(r'name="form" value="([^"]+)"', text)
        assert form is not None
        client.session.cookie_jar.update_cookies({FORM_COOKIE: form.group(1)}, URL(str(client.make_url("/a/"))))
        resp = await client.post(f"/a/{token}", data={"form": form.group(1)})
        assert resp.status == 409 and "was used" in await resp.text() and len(world.sent) == 1
        again = await client.get(f"/a/{token}")
        assert again.status == 409 and "was used" in await again.text()

    serve(tmp_path, test)


def test_a_link_tapped_before_the_fleet_was_read_again_is_checked_on_a_fresh_reading(tmp_path: Path) -> None:
    """Found in CI: the restart's link opened within a poll of the run asking for it got "Already answered" (the
    fleet's rows were a poll old). A refusal a newer reading could change is checked again on one."""
    world = World(tmp_path)
    waiting = world.rows
    world.rows = [replace(waiting[0], state="running", kind="running", needs=None, pending_seq=0, needs_seq=0)]
    reads: list[int] = []

    async def refresh() -> None:  # serve's FleetFeed.refresh: the fleet read again now
        reads.append(1)
        world.rows = waiting

    async def main() -> None:
        door = LinkDoor(world.auth, lambda: world.seal, al.UsedLinks(world.data), lambda: world.rows, world.answer,
                        lambda: world.now, delivered=world.delivered, refresh=refresh)
        app = WebApp(world.auth, FleetFeed(lambda: ([], "")), poll=0.05, links=door).build()
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            status, body = await press(client, world.link())
            assert status == 200 and "Approve sent to run r1" in body, body
            # A link for what truly no longer waits is still refused, after one more reading.
            world.rows = [replace(waiting[0], pending_seq=0, needs_seq=0, state="running", kind="running",
                                  needs=None)]
            waiting[:] = world.rows
            page = await client.get(f"/a/{world.link(request='restart:77')}")
            text = await page.text()
            assert page.status == 409 and "Already answered" in text and "no longer waits" in text
            assert "(its state now: running)" in text  # read as the state, whatever it is ("gave up" too)
            # A link for an earlier restart of a run that now asks for another one: refused, and said so (found
            # trying it by hand: "no longer waits" beside "needs you: approval" read as a contradiction).
            world.rows = [replace(waiting[0], pending_seq=91)]
            waiting[:] = world.rows
            page = await client.get(f"/a/{world.link(request='restart:77')}")
            text = await page.text()
            assert page.status == 409 and "has asked again since this link was sent" in text, text
            assert "page or the newer notification answers the new one" in text, text
            # A link for no run here (made up by anyone: its seal is not checked before the run is found) never
            # makes the fleet be read again.
            other = al.mint(world.seal, world.folder, "zz9", "approve", request="restart:41", now=world.now)
            assert (await client.get(f"/a/{other}")).status == 404

    asyncio.run(main())
    # Read again for each 409 of a link whose seal held (three), never for the made-up one.
    assert len(reads) == 3 and [s[1] for s in world.sent] == ["approve"]
