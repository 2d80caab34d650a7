"""A kill -9 of `serve` at every durable write of an answer loses no answer and applies none twice.

An action link's button (POST /a/TOKEN) spends the link (console.engine.action_links.UsedLinks: a record written,
then linked into place) and writes the command into the run's inbox (an atomic write: a temp file, then a rename).
For every one of those writes, a forked serve dies there (``os._exit`` from the failpoint: no ``finally``, nothing
flushed, half a record left where a write tears), then a new serve (a new process: a new login, nothing in memory)
is given the same link, as the operator taps it again. Whatever the point: the run's inbox ends with exactly one
command, the link's, whole; the new serve's page offers the button while the answer is not sent and says "used" once
it is. The same for a page's approval (POST /run/ID/act): a new serve's page, in a new session, sends the same
command once.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from console.engine import action_links as al
from console.engine import failpoints
from console.engine.job import JobPaths
from console.engine.run_lock import RunLock
from console.engine.seal import Seal
from console.settings import load_settings
from console.view.fleet import FleetRow
from console.web import auth as au
from console.web.acting import Acting
from console.web.link_door import LinkDoor, command_id_of
from console.web.server import FleetFeed, WebApp
from tests.provenance_support import record
from tests.web.test_server import csrf_of, logged_in, row

KILLED = 137
NOW = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


class Run:
    """A run waiting for its restart approval, held by this process (its runner, for the inbox's purposes)."""

    def __init__(self, base: Path, name: str) -> None:
        self.folder = base / name
        (self.folder / ".console").mkdir(parents=True)
        self.paths = JobPaths(self.folder)
        record(self.paths)
        self.lock = RunLock(self.paths)
        assert self.lock.acquire()
        self.row = row(self.paths.run_id, path=self.folder, state="needs you", kind="needs",
                       needs="restart_approval", pending_seq=41, needs_seq=40, pid=os.getpid())

    def commands(self) -> list[dict[str, Any]]:
        """The inbox's commands, each read whole (a torn file fails the test). A kill's leftover temp file (a dot
        file, which the run's reader passes over, console.engine.control.pending_commands) is no command."""
        names = sorted(os.listdir(self.paths.inbox)) if self.paths.inbox.exists() else []
        assert all(n.endswith(".json") or (n.startswith(".") and n.endswith(".tmp")) for n in names), names
        return [json.loads((self.paths.inbox / n).read_text()) for n in names if not n.startswith(".")]

    def close(self) -> None:
        self.lock.release()


def serving(run: Run, test: Callable[[TestClient[Any, Any], au.Auth], Coroutine[Any, Any, None]]) -> None:
    """One serve (as `agent-console serve` wires it) with ``run`` in its fleet, given to ``test``."""
    settings = load_settings()
    acting = Acting(settings.store_path, settings.store_url)
    auth = au.Auth()
    door = LinkDoor(auth, lambda: Seal.of(settings.data_dir), al.UsedLinks(settings.data_dir), lambda: [run.row],
                    acting.answer, lambda: NOW, delivered=acting.delivered)
    rows: Callable[[], tuple[list[FleetRow], str]] = lambda: ([run.row], "")  # noqa: E731

    async def main() -> None:
        app = WebApp(auth, FleetFeed(rows), poll=0.05, act=acting, links=door).build()
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            await test(client, auth)

    asyncio.run(main())


async def tap(client: TestClient[Any, Any], token: str) -> tuple[int, str]:
    """Open the link and press its button (when its page has one)."""
    page = await client.get(f"/a/{token}")
    text = await page.text()
    form = re.search(r'name="form" value="([^"]+)"', text)
    if form is None:
        return page.status, text
    resp = await client.post(f"/a/{token}", data={"form": form.group(1), "action": "x"})
    return resp.status, await resp.text()


async def approve_on_page(client: TestClient[Any, Any], auth: au.Auth, rid: str) -> tuple[int, str]:
    await logged_in(client, auth)
    resp = await client.post(f"/run/{rid}/act", data={"action": "approve", "csrf": await csrf_of(client)})
    return resp.status, await resp.text()


def killed_at(n: int, answer: Callable[[], None]) -> bool:
    """Run ``answer`` in a forked serve that dies at its n-th durable write (tearing it where it can); whether it
    died (False: it finished before its n-th write)."""
    pid = os.fork()
    if pid == 0:  # the serve that is killed
        seen = 0

        def hook(name: str, tear: failpoints.Tear | None) -> None:
            nonlocal seen
            seen += 1
            if seen == n:
                if tear is not None and n % 2 == 0:
                    tear()
                os._exit(KILLED)

        code = 1
        try:
            failpoints.install(hook)
            answer()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    assert code in (0, KILLED), f"the forked serve failed (exit {code})"
    return code == KILLED


def writes_of(answer: Callable[[], None]) -> list[str]:
    names: list[str] = []
    failpoints.install(lambda name, tear: names.append(name))
    try:
        answer()
    finally:
        failpoints.install(None)
    return names


def test_a_link_tapped_again_after_serve_was_killed_anywhere_answers_once(tmp_path: Path) -> None:
    seal = Seal.of(load_settings().data_dir)

    def world(name: str) -> tuple[Run, str]:
        run = Run(tmp_path, name)
        return run, al.mint(seal, run.folder, run.row.id, "approve", request="restart:41", now=NOW)

    def tapped(run: Run, token: str, said: list[tuple[int, str]] | None = None) -> Callable[[], None]:
        def answer() -> None:
            async def test(client: TestClient[Any, Any], auth: au.Auth) -> None:
                result = await tap(client, token)
                if said is not None:
                    said.append(result)
            serving(run, test)
        return answer

    first, token = world("count")
    points = writes_of(tapped(first, token))
    first.close()
    assert points.count("write used-link") == 1 and points.count("link used-link") == 1
    assert any(p.startswith("rename ") for p in points), points  # the inbox's command
    for n in range(1, len(points) + 2):
        run, token = world(f"kill-{n}")
        try:
            died = killed_at(n, tapped(run, token))
            assert died == (n <= len(points))
            said: list[tuple[int, str]] = []
            tapped(run, token, said)()  # a new serve; the operator taps the link again
            (status, page), = said
            commands = run.commands()
            assert [c["id"] for c in commands] == [command_id_of(al.peek(token))], (n, points[n - 1:n], commands)
            assert commands[0]["command"] == "approve_restart" and commands[0]["source"].startswith("web link ")
            if died:
                assert status in (200, 409) and "sent" in page, (n, page)
            else:
                assert status == 409 and "This link was used" in page  # the first tap's answer went
            # and a third tap, after all that, sends nothing more
            tapped(run, token, said)()
            assert said[-1][0] == 409 and len(run.commands()) == 1
        finally:
            run.close()


@pytest.mark.parametrize("kill", ["write", "rename"])
def test_an_approval_pressed_again_in_a_new_serve_after_a_kill_is_sent_once(tmp_path: Path, kill: str) -> None:
    run = Run(tmp_path, f"page-{kill}")
    try:
        def pressed(said: list[tuple[int, str]] | None = None) -> Callable[[], None]:
            def answer() -> None:
                async def test(client: TestClient[Any, Any], auth: au.Auth) -> None:
                    result = await approve_on_page(client, auth, run.row.id)
                    if said is not None:
                        said.append(result)
                serving(run, test)
            return answer

        probe = Run(tmp_path, f"probe-{kill}")
        points = writes_of(lambda: serving(probe, lambda c, a: approve_on_page(c, a, probe.row.id)))  # type: ignore
        probe.close()
        n = 1 + next(i for i, p in enumerate(points) if p.startswith(kill + " "))
        assert killed_at(n, pressed())
        said: list[tuple[int, str]] = []
        pressed(said)()  # a new serve, a new login, the approval pressed again
        assert said == [(200, said[0][1])] and "approve sent" in said[0][1].lower()
        pressed(said)()
        commands = run.commands()
        assert len(commands) == 1 and commands[0]["command"] == "approve_restart", commands
    finally:
        run.close()
        shutil.rmtree(run.folder, ignore_errors=True)


def test_a_rewinds_text_reaches_the_runs_inbox_as_its_command(tmp_path: Path) -> None:
    from console.engine.commands import Rewind

    run = Run(tmp_path, "rewound")
    try:
        settings = load_settings()
        acting = Acting(settings.store_path, settings.store_url)
        command = Rewind(issue="Section 4's tables were skipped", phase=2)
        assert acting(run.row, "rewind", "web" + "3" * 28, "web 127.0.0.1 session s1", command) is None
        (sent,) = run.commands()
        assert (sent["command"], sent["args"], sent["source"]) == (
            "rewind", {"issue": "Section 4's tables were skipped", "phase": 2}, "web 127.0.0.1 session s1")
    finally:
        run.close()
