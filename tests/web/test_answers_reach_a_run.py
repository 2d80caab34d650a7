"""serve's answers reach a real run of another process, as the console's do: a page's approve and an action link's
approve each apply once, named by their sender, through the run's inbox (console.web.acting)."""

from __future__ import annotations

import asyncio
import re
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from console.engine import action_links as al
from console.engine import events as ev
from console.engine.seal import Seal
from console.settings import load_settings
from console.view.answers import current_request
from console.view.fleet import WAITING, Fleet
from console.web import auth as au
from console.web.acting import Acting
from console.web.link_door import LinkDoor
from console.web.server import FleetFeed, WebApp
from tests.conftest import SAMPLES
from tests.processes import end
from tests.tui.test_fleet import _start_headless
from tests.web.test_server import logged_in


def approvals(events: Path) -> list[ev.EventBase]:
    return [e for e in ev.read_events(events) if e.type == "operator_command" and e.command == "approve_restart"]


def test_a_page_and_a_link_each_approve_a_real_run_once(tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "requirements-extraction", job)
    proc = _start_headless(job, "--speed", "0", "--context-window", "10000", "--no-auto-restart")
    settings = load_settings()
    fleet = Fleet(settings.store_path, now=lambda: datetime.now(UTC))
    events = job / ".console" / "events.jsonl"
    auth = au.Auth()
    feed = FleetFeed(lambda: (list(fleet.poll()), fleet.error))
    acting = Acting(settings.store_path, settings.store_url)
    door = LinkDoor(auth, lambda: Seal.of(settings.data_dir), al.UsedLinks(settings.data_dir), lambda: list(feed.rows),
                    acting.answer, lambda: datetime.now(UTC))

    async def waiting(client: TestClient[Any, Any], after: int = 0) -> Any:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            row = next((r for r in feed.rows if r.path == job), None)
            if row is not None and row.state == WAITING and row.pending_seq > after:
                return row
            await asyncio.sleep(0.1)
        raise AssertionError(f"the run did not wait for approval: {feed.rows}")

    async def main() -> None:
        app = WebApp(auth, feed, poll=0.1, act=acting, links=door).build()
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            await logged_in(client, auth)
            # From the page.
            row = await waiting(client)
            csrf = re.search(r'name="csrf" value="([^"]+)"', await (await client.get("/")).text())
            assert csrf is not None
            resp = await client.post(f"/run/{row.id}/act", data={"action": "approve", "csrf": csrf.group(1)})
            assert resp.status == 200, await resp.text()
            deadline = time.monotonic() + 60
            while not any(e.status == "applied" for e in approvals(events)) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            applied = [e for e in approvals(events) if e.status == "applied"]
            assert len(applied) == 1 and applied[0].source.startswith("web 127.0.0.1 session ")
            # From a link, for the next restart it waits for.
            row = await waiting(client, after=row.pending_seq)
            request = current_request(row, "approve")
            assert request is not None
            token = al.mint(Seal.of(settings.data_dir), job, row.id, "approve", request=request,
                            now=datetime.now(UTC))
            client.session.cookie_jar.clear()  # a phone that never logged in
            page = await client.get(f"/a/{token}")
            form = re.search(r'name="form" value="([^"]+)"', await page.text())
            assert page.status == 200 and form is not None
            assert len(approvals(events)) == 2  # opening it did nothing
            resp = await client.post(f"/a/{token}", data={"form": form.group(1)})
            assert resp.status == 200, await resp.text()
            deadline = time.monotonic() + 60
            while len([e for e in approvals(events) if e.status == "applied"]) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            by_link = [e for e in approvals(events) if e.source.startswith("web link ")]
            assert [e.status for e in by_link] == ["received", "applied"]
            again = await client.post(f"/a/{token}", data={"form": form.group(1)})
            assert again.status == 409  # spent (or its restart answered): never applied twice
            await asyncio.sleep(0.5)
            assert len([e for e in approvals(events) if e.source.startswith("web link ")]) == 2

    try:
        asyncio.run(main())
    finally:
        fleet.close()
        end(proc)
