"""A notification's action link, end to end: a real headless run (its own process) waits for a restart approval;
its notifier, with [serve] public_url in the operator's config, posts to ntfy and a JSON webhook (Apprise's real
plugins, a loopback server); the link it sent, opened in serve's application (the real fleet row of the run's
folder), shows its page, and the page's button approves: the run's inbox gets the command and the run goes on. The
other link of that message (deny) answers nothing any more; a job.toml cannot choose where links point."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from console.engine import action_links as al
from console.engine import events as ev
from console.engine.seal import Seal
from console.settings import load_settings
from console.view.answers import current_request
from console.view.fleet import WAITING, Fleet, FleetRow
from console.web import auth as au
from console.web.acting import Acting
from console.web.link_door import LinkDoor
from console.web.server import FleetFeed, WebApp
from tests.conftest import REPO, SAMPLES
from tests.notify_server import Loopback, Request, loopback
from tests.processes import end
from tests.tui.test_fleet import _start_headless

PUBLIC = "https://phone.example.org"
LINK = re.compile(re.escape(PUBLIC) + r"(/a/[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)")


@pytest.fixture
def server() -> Iterator[Loopback]:
    with loopback() as lb:
        yield lb


def configure(text: str) -> None:
    Path(os.environ["AGENT_CONSOLE_CONFIG"]).write_text(text)


def restart_messages(server: Loopback) -> list[Request]:
    return [r for r in list(server.requests) if "restart approval" in str(r.body.get("title", ""))]


def test_a_notifications_link_approves_a_real_run_through_serve(server: Loopback, tmp_path: Path) -> None:
    configure(f'[serve]\npublic_url = "{PUBLIC}"\n')
    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "requirements-extraction", job)
    proc = _start_headless(job, "--speed", "0", "--context-window", "10000", "--no-auto-restart",
                           "--notify", server.url("ntfy", "topic"), "--notify", server.url("json", "hook"))
    settings = load_settings()
    fleet = Fleet(settings.store_path, now=lambda: datetime.now(UTC))
    events = job / ".console" / "events.jsonl"
    auth = au.Auth()
    feed = FleetFeed(lambda: (list(fleet.poll()), fleet.error))
    acting = Acting(settings.store_path, settings.store_url)
    door = LinkDoor(auth, lambda: Seal.of(settings.data_dir), al.UsedLinks(settings.data_dir), lambda: list(feed.rows),
                    acting.answer, lambda: datetime.now(UTC))

    async def waiting() -> FleetRow:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            row = next((r for r in feed.rows if r.path == job), None)
            if row is not None and row.state == WAITING and row.pending_seq:
                return row
            await asyncio.sleep(0.1)
        raise AssertionError(f"the run did not wait for approval: {feed.rows}")

    async def main() -> None:
        app = WebApp(auth, feed, poll=0.1, act=acting, links=door).build()
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:  # a phone that never logged in
            row = await waiting()
            deadline = time.monotonic() + 30
            while len(restart_messages(server)) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            ntfy, hook = sorted(restart_messages(server)[:2], key=lambda r: "topic" not in r.body)
            # The first restart's message, on both channels: the same links, as ntfy view buttons and in the text.
            approve, deny = LINK.findall(hook.body["message"])
            assert LINK.findall(ntfy.body["message"]) == [approve, deny]
            assert ntfy.headers["x-actions"] == f"view, Approve, {PUBLIC}{approve}; view, Deny, {PUBLIC}{deny}"
            # Minted by the notifier for the request the fleet's row names: what serve's door checks.
            claim = al.verify(Seal.of(settings.data_dir), row.path, approve[3:], now=datetime.now(UTC))
            assert (claim.run, claim.action) == (row.id, "approve")
            assert claim.request == current_request(row, "approve") == f"restart:{row.pending_seq}"
            page = await client.get(approve)
            text = await page.text()
            form = re.search(r'name="form" value="([^"]+)"', text)
            assert page.status == 200 and form is not None and f"run {row.id}" in text, text
            assert not [e for e in ev.read_events(events) if e.type == "operator_command"]  # opening did nothing
            resp = await client.post(approve, data={"form": form.group(1)})
            assert resp.status == 200 and "Approve sent" in await resp.text()
            deadline = time.monotonic() + 60
            applied: list[Any] = []
            while not applied and time.monotonic() < deadline:
                applied = [e for e in ev.read_events(events) if e.type == "restart_approved"]
                await asyncio.sleep(0.1)
            commands = [e for e in ev.read_events(events) if e.type == "operator_command"
                        and e.command == "approve_restart"]
            assert applied and [c.status for c in commands][:2] == ["received", "applied"]
            assert commands[0].source.startswith("web link ")
            # The same message's deny answers nothing now: its restart was approved.
            page = await client.get(deny)
            assert page.status == 409 and "nothing was done" in await page.text()

    try:
        asyncio.run(main())
    finally:
        fleet.close()
        end(proc)


def test_a_job_toml_cannot_choose_where_links_point(server: Loopback, tmp_path: Path) -> None:
    configure("")  # the operator names no public URL
    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "requirements-extraction", job)
    with (job / "job.toml").open("a") as fh:
        fh.write('\n[serve]\npublic_url = "https://attacker.example.org"\nlink_ttl_hours = 720\n')
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "console.cli", "run", str(job), "--in-place", "--headless",
                           "--speed", "0", "--notify", server.url("json", "hook")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and "'serve' is the operator's setting" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and server.requests == []
    # Nor at the top level, nor as a run setting: the operator's settings alone have [serve].
    (job / "job.toml").write_text((job / "job.toml").read_text().split("\n[serve]")[0]
                                  + '\npublic_url = "https://attacker.example.org"\n')
    done = subprocess.run([sys.executable, "-m", "console.cli", "run", str(job), "--in-place", "--headless",
                           "--speed", "0"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and "public_url" in done.stderr, done.stderr
    assert load_settings().serve.public_url is None


def test_serve_takes_its_public_url_from_the_operators_config() -> None:
    from tests.web.test_serve_cli import free_port, start, stop, wait_listening

    configure('[serve]\npublic_url = "https://phone.example.org/console-of-bob/"\n')
    port = free_port()
    proc, first = start("--bind", f"127.0.0.1:{port}", "--no-console")
    wait_listening(port)
    code, err = stop(proc)
    assert first.startswith("serve: open this login link once (it works once): "
                            "https://phone.example.org/console-of-bob/login?token="), first
    assert code == 0 and "Traceback" not in err, err
    # --public-url still wins.
    proc, first = start("--bind", f"127.0.0.1:{port}", "--no-console", "--public-url", "http://127.0.0.1:9")
    wait_listening(port)
    stop(proc)
    assert ": http://127.0.0.1:9/login?token=" in first, first


@pytest.mark.parametrize("where, value, said", [
    ("config", "ftp://files.example.org", "not an http:// or https:// URL"),
    ("config", "https://bob:secret@phone.example.org", "holds a user or password"),
    ("config", "https://phone.example.org/?next=1", "holds a query or a fragment"),
    ("env", "https://phone.example.org/#x", "holds a query or a fragment"),
    ("flag", "https://bob:secret@phone.example.org", "--public-url: holds a user or password"),
    ("flag", "https://phone.example.org/a,b", "--public-url: holds characters a link cannot carry"),
])
def test_a_bad_public_url_is_one_line_and_exit_2(where: str, value: str, said: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    args = ["--public-url", value] if where == "flag" else []
    if where == "config":
        configure(f'[serve]\npublic_url = "{value}"\n')
    elif where == "env":
        env["AGENT_CONSOLE_SERVE_PUBLIC_URL"] = value
    done = subprocess.run([sys.executable, "-m", "console.cli", "serve", *args], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert "secret" not in done.stderr  # the value is not repeated: a URL may carry a password


def test_a_died_runners_resume_link_resumes_it_once_through_serve(server: Loopback) -> None:
    # A runner killed by SIGKILL: its watcher tells the channels, with a resume link bound to the run as its log was
    # left (died:SEQ); serve's door checks it against the fleet's row (interrupted) and the log's tail.
    from tests.integration.test_runner_death import SLOW, WITHIN, _died, _kill, _processes_of, _started
    from tests.processes import alive, cli, wait_for

    configure(f'[serve]\npublic_url = "{PUBLIC}"\n')
    done = subprocess.run(cli("run", str(SAMPLES / "quickstart"), "--detach", "--notify", server.url("json", "hook"),
                              "--notify", server.url("ntfy", "topic"), "--speed", SLOW),
                          capture_output=True, text=True, timeout=WITHIN * 2)
    assert done.returncode == 0, done.stderr
    from console.engine.control import RunLock
    from console.engine.job import JobPaths

    paths = JobPaths(Path(done.stdout.split(": ", 1)[1].splitlines()[0]))
    watcher = int(done.stdout.split("(process ", 1)[1].split(" ", 1)[0])
    runner = wait_for(lambda: RunLock(paths).holder(), WITHIN * 2, "the runner to take the run")
    settings = load_settings()
    fleet = Fleet(settings.store_path, now=lambda: datetime.now(UTC))
    try:
        wait_for(lambda: _started(paths), WITHIN, "the run's first session")
        os.kill(runner, 9)
        wait_for(lambda: not alive(watcher), WITHIN * 2, "the watcher to end once it told the channels")
        ntfy, hook = sorted(_died(server), key=lambda r: "topic" not in r.body)
        [resume] = LINK.findall(hook.body["message"])
        assert hook.body["message"].index("Answer from your phone") < hook.body["message"].index("Go on from a shell")
        assert ntfy.headers["x-actions"] == f"view, Resume, {PUBLIC}{resume}"
        last = list(ev.read_events(paths.events))[-1].seq
        claim = al.verify(Seal.of(settings.data_dir), paths.root, resume[3:], now=datetime.now(UTC))
        assert (claim.run, claim.action, claim.request) == (paths.run_id, "resume", f"died:{last}")
        auth = au.Auth()
        feed = FleetFeed(lambda: (list(fleet.poll()), fleet.error))
        acting = Acting(settings.store_path, settings.store_url)
        door = LinkDoor(auth, lambda: Seal.of(settings.data_dir), al.UsedLinks(settings.data_dir),
                        lambda: list(feed.rows), acting.answer, lambda: datetime.now(UTC))

        async def main() -> None:
            app = WebApp(auth, feed, poll=0.1, act=acting, links=door).build()
            async with TestClient(TestServer(app, host="127.0.0.1")) as client:
                deadline = time.monotonic() + WITHIN
                while not any(r.path == paths.root and r.state == "interrupted" for r in feed.rows):
                    assert time.monotonic() < deadline, feed.rows
                    await asyncio.sleep(0.1)
                page = await client.get(resume)
                text = await page.text()
                form = re.search(r'name="form" value="([^"]+)"', text)
                assert page.status == 200 and form is not None and "Resume" in text, text
                resp = await client.post(resume, data={"form": form.group(1)})
                assert resp.status == 200 and "Resume sent" in await resp.text()
                wait_for(lambda: any(isinstance(e, ev.SessionStarted) and e.reason == "resume"
                                     for e in ev.read_events(paths.events)), WITHIN * 2, "the run to resume")
                # Resumed: the link answers nothing more (a second tap, a replay).
                again = await client.get(resume)
                assert again.status == 409, await again.text()

        asyncio.run(main())
        stopped = subprocess.run(cli("stop", paths.run_id), capture_output=True, text=True, timeout=WITHIN * 2)
        assert stopped.returncode in (0, 2), stopped.stderr  # 2: it completed first (nothing to stop)
        wait_for(lambda: not _processes_of(paths.root), WITHIN * 2, "the resumed run's processes to end")
    finally:
        fleet.close()
        _kill(runner, watcher, *_processes_of(paths.root))


def test_a_gave_up_runs_links_acknowledge_it_and_then_resume_answers_nothing(make_job: Any, tmp_path: Path,
                                                                             server: Loopback) -> None:
    # The run's own notifier (the command line's: the operator's config read there) links a gave-up run's
    # acknowledge and resume to its need; serve's door accepts them against the fleet's row of the ended run.
    import json
    import uuid

    from console.cli import main
    from console.outcome import EXIT_GAVE_UP
    from tests.integration.test_acknowledge_run import GIVE_UP

    configure(f'[serve]\npublic_url = "{PUBLIC}"\n')
    paths = make_job()
    script = tmp_path / f"script-{uuid.uuid4().hex[:6]}.json"
    script.write_text(json.dumps([GIVE_UP]))
    assert main(["run", str(paths.root), "--headless", "--in-place", "--script", str(script),
                 "--notify", server.url("json", "hook")]) == EXIT_GAVE_UP
    [told] = [r for r in server.wait_for(1) if "gave up" in r.body["title"]]
    resume, acknowledge = LINK.findall(told.body["message"])
    settings = load_settings()
    fleet = Fleet(settings.store_path, now=lambda: datetime.now(UTC))
    rows = [r for r in fleet.poll() if r.id == paths.run_id]
    fleet.close()
    auth = au.Auth()
    acting = Acting(settings.store_path, settings.store_url)
    door = LinkDoor(auth, lambda: Seal.of(settings.data_dir), al.UsedLinks(settings.data_dir), lambda: rows,
                    acting.answer, lambda: datetime.now(UTC))

    async def main_() -> None:
        app = WebApp(auth, FleetFeed(lambda: (rows, "")), poll=0.1, act=acting, links=door).build()
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            assert (await client.get(resume)).status == 200  # it would resume: its page, nothing done
            page = await client.get(acknowledge)
            form = re.search(r'name="form" value="([^"]+)"', await page.text())
            assert page.status == 200 and form is not None
            resp = await client.post(acknowledge, data={"form": form.group(1)})
            assert resp.status == 200, await resp.text()
            acked = [e for e in ev.read_events(paths.events) if isinstance(e, ev.RunAcknowledged)]
            assert len(acked) == 1 and acked[0].by.startswith("web link ")
            # Acknowledged, the run asks no more: the same message's resume answers nothing now.
            fresh = Fleet(settings.store_path, now=lambda: datetime.now(UTC))
            rows[:] = [r for r in fresh.poll() if r.id == paths.run_id]
            fresh.close()
            page = await client.get(resume)
            assert page.status == 409 and "nothing was done" in await page.text()

    asyncio.run(main_())
