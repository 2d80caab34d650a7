"""The operator's story end to end, in a real headless Chromium on a phone-sized page: `agent-console serve` (a real
process) prints its login link; the phone opens it, sees a real headless run waiting for its restart approval,
taps approve, and the run goes on; the run's own page shows its todo list, pressure and story; a notification's
action link, opened on a phone that never logged in, shows what it will do and acts only on its button.

With TEST_SHOTS set, each page is saved as a PNG there (docs/img/serve-*.png are these, looked at and kept)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from console.engine import action_links as al
from console.engine import events as ev
from console.engine.runs import run_id
from console.engine.seal import Seal
from console.settings import load_settings
from tests.commands_support import bwrap  # noqa: F401  (the fixture)
from tests.conftest import SAMPLES
from tests.processes import end
from tests.tui.test_fleet import _start_headless
from tests.web.browser import browser, shot
from tests.web.test_serve_cli import free_port, start, stop, wait_listening

PHONE = {"width": 390, "height": 844}


def wait(what: str, ready: Callable[[], object], seconds: float = 90) -> object:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if found := ready():
            return found
        time.sleep(0.1)
    raise AssertionError(f"never: {what}")


def test_a_phone_approves_a_real_run_waiting_for_its_restart(tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "requirements-extraction", job)
    runner = _start_headless(job, "--speed", "0", "--context-window", "10000", "--no-auto-restart")
    events = job / ".console" / "events.jsonl"
    rid = run_id(job)
    port = free_port()
    serve, first = start("--bind", f"127.0.0.1:{port}", "--no-console")
    try:
        login = first.rsplit(" ", 1)[-1].strip()
        assert login.startswith(f"http://127.0.0.1:{port}/login?token="), first
        wait_listening(port)
        with browser() as chromium:
            phone = chromium.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True)
            page = phone.new_page()
            page.goto(login)
            # Needs-you first: the run waiting for its approval, with its approve button, nothing sideways.
            page.wait_for_selector(f".needs #run-{rid} button[value=approve]", timeout=90_000)
            assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
            shot(page, "serve-phone-fleet")
            before = [e.seq for e in ev.read_events(events) if e.type == "restart_approved"]
            page.tap(f"#run-{rid} button[value=approve]")
            page.wait_for_selector("text=approve sent", timeout=60_000)
            shot(page, "serve-phone-sent")

            def approved_from_the_phone() -> list[ev.EventBase]:
                return [e for e in ev.read_events(events) if e.type == "operator_command"
                        and e.command == "approve_restart" and e.status == "applied"
                        and e.source.startswith("web 127.0.0.1 session ")]

            (applied,) = wait("the phone's approval applied", approved_from_the_phone)  # type: ignore[misc]
            # The run goes on: its restart happens, and the new context's work after it.
            wait("the restart approved", lambda: [e for e in ev.read_events(events) if e.type == "restart_approved"
                                                  and e.seq > applied.seq and e.seq not in before])
            wait("the run's next session", lambda: [e for e in ev.read_events(events)
                                                    if e.type == "session_started" and e.seq > applied.seq])
            # The run's own page: its todo list, its pressure, its story.
            page.goto(f"http://127.0.0.1:{port}/run/{rid}")
            page.wait_for_selector("section.todos li", timeout=60_000)
            assert "context:" in page.inner_text("body")  # its pressure
            page.wait_for_selector("section.tail li", timeout=60_000)
            assert "approve" in page.inner_text("section.tail")  # the phone's approval, in its story
            assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
            shot(page, "serve-phone-run")
            # The plan, opened, stays open while the page follows the run (its body is redrawn as the run moves:
            # below, when the link's approval lets it go on).
            page.click("details.plan summary")
            assert "Phase" in page.inner_text("details.plan pre")
            page.evaluate("() => { document.querySelector('#run').dataset.before = "
                          "document.querySelector('section.tail').innerText; }")

            # A notification's link for the restart it waits for next, on a phone that never logged in.
            settings = load_settings()

            def next_wait() -> int:
                seqs = [e.seq for e in ev.read_events(events) if e.type == "restart_pending" and e.seq > applied.seq]
                later = [e.seq for e in ev.read_events(events) if e.type in ("restart_approved", "restart_denied")]
                return next((s for s in seqs if not any(x > s for x in later)), 0)

            pending = wait("the run to wait again", next_wait)
            token = al.mint(Seal.of(settings.data_dir), job, rid, "approve", request=f"restart:{pending}",
                            now=datetime.now(UTC))
            stranger = chromium.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True,
                                            has_touch=True).new_page()
            assert stranger.goto(f"http://127.0.0.1:{port}/").status == 401  # no session: nothing shown
            preview = stranger.goto(f"http://127.0.0.1:{port}/a/{token}")
            assert preview is not None and preview.status == 200, stranger.content()
            assert stranger.locator("button[value=approve]").is_visible()
            shot(stranger, "serve-phone-link")
            time.sleep(0.5)
            assert not [e for e in ev.read_events(events) if e.type == "operator_command"
                        and e.source.startswith("web link ")]  # opening it did nothing
            stranger.tap("button[value=approve]")
            stranger.wait_for_selector("text=Approve sent", timeout=60_000)
            wait("the link's approval applied", lambda: [e for e in ev.read_events(events)
                                                         if e.type == "operator_command" and e.status == "applied"
                                                         and e.source.startswith("web link ")])
            page.wait_for_function("() => document.querySelector('section.tail').innerText !== "
                                   "document.querySelector('#run').dataset.before", timeout=90_000)
            assert page.evaluate("() => document.querySelector('details.plan').open")  # redrawn, still open
            again = stranger.goto(f"http://127.0.0.1:{port}/a/{token}")
            assert again is not None and again.status == 409  # once
            shot(stranger, "serve-phone-link-used")
    finally:
        code, err = stop(serve)
        end(runner)
    assert code == 0 and "Traceback" not in err, err


def test_a_phone_answers_an_mcp_servers_question_of_a_real_run(tmp_path: Path, bwrap) -> None:  # noqa: F811
    """A real headless run whose MCP server (confined, the operator's config letting it ask) asks its operator a
    question during its call: the run's page has the form; an answer that does not fit is refused by the run, said
    in its story, and the form stays; the right one is applied and the server gets the values."""
    from tests.integration.test_crash_resume import start as start_run
    from tests.integration.test_mcp_elicitation import headless_job

    job = headless_job(tmp_path)
    events = job / ".console" / "events.jsonl"
    runner = start_run(job)
    rid = run_id(job)
    port = free_port()
    serve, first = start("--bind", f"127.0.0.1:{port}", "--no-console")
    try:
        login = first.rsplit(" ", 1)[-1].strip()
        wait_listening(port)
        wait("the server's question", lambda: [e for e in ev.read_events(events) if e.type == "needs_operator"
                                               and e.reason == "mcp_question"])
        with browser() as chromium:
            phone = chromium.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True)
            page = phone.new_page()
            page.goto(login)
            page.goto(f"http://127.0.0.1:{port}/run/{rid}")
            page.wait_for_selector("form.answer input[name='field.name']", timeout=60_000)
            assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
            page.click("text=Answer the question")  # the live part's link: to the form, below it
            page.wait_for_function("() => document.querySelector('form.answer').getBoundingClientRect().top < 400")
            shot(page, "serve-phone-question")
            page.fill("input[name='field.count']", "3")  # the required name left out
            page.tap("button[value=accept]")
            page.wait_for_selector("text=Answer sent", timeout=60_000)
            wait("the run's refusal", lambda: [e for e in ev.read_events(events) if e.type == "operator_command"
                                               and e.status == "rejected" and "name" in e.detail])
            page.goto(f"http://127.0.0.1:{port}/run/{rid}")
            assert "required field missing: name" in page.inner_text("section.tail")
            page.fill("input[name='field.name']", "Ada")
            page.fill("input[name='field.count']", "3")
            page.tap("button[value=accept]")
            page.wait_for_selector("text=Answer sent", timeout=60_000)
            (got,) = wait("the call's result", lambda: [e for e in ev.read_events(events) if e.type == "tool_result"
                                                         and e.tool == "mcp__asker__ask"])  # type: ignore[misc]
            assert got.content == 'ELICITED: accept {"count": 3, "name": "Ada"}'
            (applied,) = [e for e in ev.read_events(events) if e.type == "operator_command"
                          and e.command == "answer" and e.status == "applied"]
            assert applied.source.startswith("web 127.0.0.1 session ") and "Ada" not in applied.model_dump_json()
    finally:
        code, err = stop(serve)
        end(runner)
    assert code == 0 and "Traceback" not in err, err
