"""serve in a real browser (headless Chromium): the login link, the phone-sized fleet page kept live without a
reload, agent text that never runs as script, and a Textual console under /console/ behind the same login."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import Any

from console.web import auth as au
from console.web.server import FleetFeed, WebApp
from tests.web.browser import browser, running, shot
from tests.web.test_server import HOSTILE, Acts, Rows, row

PHONE = {"width": 390, "height": 844}


def test_a_phone_logs_in_once_and_sees_the_fleet_live() -> None:
    rows = Rows()
    auth = au.Auth()
    acts = Acts()
    with running(lambda url: WebApp(auth, FleetFeed(rows), poll=0.05, act=acts).build()) as url, \
            browser() as chromium:
        page = chromium.new_page(viewport=PHONE)
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        token = auth.login_token()
        page.goto(f"{url}/login?token={token}")
        assert page.url == f"{url}/"  # the token left the address bar
        page.wait_for_selector("#run-r1")
        assert "Nothing needs you." in page.inner_text("#fleet")
        # The run starts needing its operator, with hostile text everywhere: the page changes without a reload.
        page.evaluate("() => { window.samePage = 'yes'; }")
        rows.rows = [row(), row("r2", state="needs you", kind="needs", needs="restart_approval", pending_seq=7,
                             job=HOSTILE, last=HOSTILE, needs_message=HOSTILE)]
        page.wait_for_selector(".needs #run-r2")
        assert page.evaluate("() => window.samePage") == "yes"
        assert "<script>alert(1)</script>" in page.inner_text("#run-r2")  # shown as text, never run
        assert page.locator("#run-r2 img").count() == 0
        assert page.locator("#run-r2 a[href^='http://evil']").count() == 0
        assert page.locator("#run-r2 button[value=approve]").is_visible()
        assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]  # nothing sideways
        shot(page, "phone-fleet")
        assert dialogs == []
        # A tap on the run's button acts (the browser's own POST, with its Origin and the session's CSRF token).
        page.click("#run-r2 button[value=approve]")
        page.wait_for_selector("text=approve sent")
        assert [(rid, action) for rid, action, _ in acts.sent] == [("r2", "approve")]
        # Deny is asked first: the question's button does it.
        page.goto(f"{url}/")
        page.wait_for_selector("#run-r2 button[value=deny]")
        page.click("#run-r2 button[value=deny]")
        page.wait_for_selector("text=Deny run r2")
        assert len(acts.sent) == 1
        page.click("button[name=confirm]")
        page.wait_for_selector("text=deny sent")
        assert [action for _, action, _ in acts.sent] == ["approve", "deny"]
        # Another browser (no cookie): 401; the login link used already: 401 too.
        other = chromium.new_context().new_page()
        assert other.goto(f"{url}/").status == 401
        assert other.goto(f"{url}/login?token={token}").status == 401


def test_a_textual_console_runs_in_the_page_behind_the_login(tmp_path: Path) -> None:
    """textual-serve's terminal in the page, its websocket behind the session: a tiny Textual app stands for the
    fleet console (what the browser gets is the same for any Textual app; `agent-console fleet` is tried by hand)."""
    app_file = tmp_path / "hello.py"
    app_file.write_text("from textual.app import App\nfrom textual.widgets import Static\n\n\n"
                        "class Hello(App):\n    def compose(self):\n        yield Static('fleet in a browser')\n\n\n"
                        "Hello().run()\n")
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(app_file))}"
    auth = au.Auth()
    with running(lambda url: WebApp(auth, FleetFeed(Rows()), poll=0.05).build(console=command, public_url=url)
                 ) as url, browser() as chromium:
        stranger = chromium.new_context().new_page()
        assert stranger.goto(f"{url}/console/").status == 401
        page = chromium.new_page(viewport={"width": 1000, "height": 600})
        seen: list[bytes] = []

        def on_socket(ws: Any) -> None:
            seen.append(ws.url.encode())
            ws.on("framereceived", lambda payload: seen.append(payload if isinstance(payload, bytes)
                                                               else payload.encode()))

        page.on("websocket", on_socket)
        page.goto(f"{url}/login?token={auth.login_token()}")
        page.goto(f"{url}/console/")
        # The terminal draws on a canvas: what the app wrote is read from the websocket's frames.
        deadline = time.monotonic() + 90
        while not any(b"fleet in a browser" in frame for frame in seen) and time.monotonic() < deadline:
            page.wait_for_timeout(200)
        assert seen and seen[0].startswith(f"{url.replace('http', 'ws', 1)}/console/ws?".encode())
        assert any(b"fleet in a browser" in frame for frame in seen), seen[:5]
        shot(page, "browser-console")
