"""serve's fleet feed (console.web.server.FleetFeed) and the live pages it feeds: while the fleet's logs are not all
folded (serve just started on a fleet of a few hundred runs: a poll folds a slice of them), it reads again at once
rather than a poll later; once folded, or while the store fails, a poll a second; a page is sent a drawing only when
it shows something new."""

from __future__ import annotations

import asyncio
import contextlib
import time

from aiohttp.test_utils import TestClient, TestServer

from console.view.fleet import FleetRow, Listed
from console.web import auth as au
from console.web.server import FleetFeed, WebApp
from tests.web.test_server import Rows, logged_in, row


class Slices:
    """A fleet whose first ``slices`` reads each fold a slice of its logs (``folded`` False), then all of them."""

    def __init__(self, slices: int, error: str = "") -> None:
        self.slices = slices
        self.error = error
        self.reads = 0

    def __call__(self) -> tuple[list[FleetRow], str]:
        self.reads += 1
        last = row(last=f"read {self.reads}")
        return Listed([last], folded=self.reads > self.slices), self.error


def reads_within(read: Slices, want: int, patience: float) -> int:
    """How many reads the feed made, polling once a minute, by the time it made ``want`` (or ``patience`` s)."""

    async def main() -> int:
        feed = FleetFeed(read)
        task = asyncio.create_task(feed.run(every=60))
        deadline = time.monotonic() + patience
        while read.reads < want and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # a read more would come now, if the feed went on reading at once
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        feed.reader.shutdown(wait=True)
        return read.reads

    return asyncio.run(main())


def test_a_fleet_not_yet_folded_is_read_again_at_once_then_a_poll_later() -> None:
    # Three slices, then folded: four reads, not one a minute; and then no fifth.
    assert reads_within(Slices(3), want=4, patience=30) == 4


def test_a_store_that_fails_is_not_read_again_at_once() -> None:
    assert reads_within(Slices(3, error="the store cannot be read"), want=2, patience=1) == 1


def test_a_drawing_that_shows_nothing_new_is_not_sent_to_the_page() -> None:
    """A running run's elapsed time moves every second (no page shows it): the pages in the browsers are not drawn
    again for it (a tap is not lost to a redraw); the next change a page shows is the next frame."""

    async def main() -> None:
        rows, auth = Rows(), au.Auth()
        feed = FleetFeed(rows)
        async with TestClient(TestServer(WebApp(auth, feed, poll=0.05).build(), host="127.0.0.1")) as client:
            await logged_in(client, auth)
            live = await client.get("/live/fleet")

            async def frame() -> str:
                return (await asyncio.wait_for(live.content.readuntil(b"\n\n"), 30)).decode()

            async def read(change: list[FleetRow]) -> None:
                version = feed.version
                rows.rows = change
                while feed.version == version:
                    await asyncio.sleep(0.01)
                await asyncio.sleep(0.3)  # the stream drew it (and sent it, or not)

            first = await frame()
            assert "tool call read_file" in first
            await read([row(elapsed="2m")])
            await read([row(elapsed="3m")])
            await read([row(elapsed="4m", last="tool call write_file")])
            second = await frame()
            assert second.startswith("event: list\n") and "tool call write_file" in second
            live.close()

    asyncio.run(main())


def test_a_page_closed_while_its_stream_starts_is_no_error(monkeypatch, caplog) -> None:
    """Found by CI: a phone test moved on while serve sent the headers of /live/fleet; aiohttp's "Cannot write to
    closing transport" came out of the stream's start, outside what it caught, and serve printed a traceback."""
    import logging

    from aiohttp import web
    from aiohttp.client_exceptions import ClientConnectionResetError

    real = web.StreamResponse.prepare

    async def closing(self, request):  # type: ignore[no-untyped-def]
        if self.headers.get("Content-Type") == "text/event-stream":
            raise ClientConnectionResetError("Cannot write to closing transport")
        return await real(self, request)

    monkeypatch.setattr(web.StreamResponse, "prepare", closing)

    async def main() -> None:
        rows, auth = Rows(), au.Auth()
        async with TestClient(TestServer(WebApp(auth, FleetFeed(rows), poll=0.05).build(), host="127.0.0.1")) as client:
            await logged_in(client, auth)
            with contextlib.suppress(Exception):  # the response the client gets is whatever a closed page gets
                (await client.get("/live/fleet")).close()
            await asyncio.sleep(0.2)

    with caplog.at_level(logging.ERROR, logger="aiohttp"):
        asyncio.run(main())
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
