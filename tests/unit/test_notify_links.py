"""A need's notification carries action links when the operator's config names serve's public URL ([serve]
public_url): each signed under the operator's seal for the run's folder, bound to the run, the action and the
request it answers, expiring; as ntfy buttons that open the link's page (``view``, never ``http``); in the text for
every channel. Tested through Apprise's real ntfy and JSON plugins posting to a loopback server; without a public
URL the messages are as they were. (tests/web/test_notify_links_serve.py opens them in serve.)"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from console.engine import action_links as al
from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.seal import Seal
from console.notify import BODY_LIMIT, LinkSettings, Notifier, link_settings, unlinked
from console.settings import load_settings
from tests.notify_server import Loopback, Request, loopback

PUBLIC = "https://phone.example.org/agent"
LINK = re.compile(re.escape(PUBLIC) + r"/a/([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)")


@pytest.fixture
def server() -> Iterator[Loopback]:
    with loopback() as lb:
        yield lb


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")  # the times a message shows are the machine's local ones
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def notifier(server: Loopback, folder: Path, clock: FakeClock, links: bool = True, **kw: Any) -> Notifier:
    settings = LinkSettings(PUBLIC, load_settings().data_dir) if links else None
    return Notifier([server.url("ntfy", "topic"), server.url("json", "hook")], "k3f9q", "audit", clock=clock,
                    look=False, folder=folder, links=settings, on_error=kw.pop("on_error", None), **kw)


def restart(clock: FakeClock, n: Notifier, pending: int = 41) -> None:
    n(ev.RestartPending(ts=clock.now(), seq=pending, session=1, used_tokens=9000, next_session=2))
    n(ev.NeedsOperator(ts=clock.now(), seq=pending + 1, session=1, reason="restart_approval",
                       message="the context is full (9,000 tokens): approve the restart into session 2",
                       evidence=["carryover: 6 messages"], paused=False))


def by_kind(requests: list[Request]) -> tuple[Request, Request]:
    ntfy = next(r for r in requests if "topic" in (r.body if isinstance(r.body, dict) else {}))
    hook = next(r for r in requests if r is not ntfy)
    return ntfy, hook


def tokens(text: str) -> list[str]:
    return LINK.findall(text)


def test_a_restart_to_approve_carries_approve_and_deny_links_in_both_payloads(server: Loopback,
                                                                               tmp_path: Path) -> None:
    clock = FakeClock()  # 2026-01-15 14:00 UTC
    folder = tmp_path / "run"
    folder.mkdir()
    n = notifier(server, folder, clock)
    restart(clock, n)
    ntfy, hook = by_kind(server.wait_for(2))
    n.close()
    body = hook.body["message"]
    # Above the shell's commands, which stay; when they stop holding.
    phone = body.index("Answer from your phone (each link works once, until 2026-01-16 14:00):")
    assert phone < body.index("Answer from a shell:") and "agent-console approve k3f9q" in body
    approve, deny = tokens(body)
    assert ntfy.body["message"] == body  # the same text on every channel
    # ntfy's buttons, as Apprise sends them: view actions opening each link's page (never an http action, which
    # would answer from the phone without the page).
    assert ntfy.headers["x-actions"] == f"view, Approve, {PUBLIC}/a/{approve}; view, Deny, {PUBLIC}/a/{deny}"
    assert "http," not in ntfy.headers["x-actions"]
    assert "x-actions" not in hook.headers
    seal = Seal.of(load_settings().data_dir)
    now = clock.now()
    for token, action in ((approve, "approve"), (deny, "deny")):
        claim = al.verify(seal, folder, token, now=now)
        assert (claim.run, claim.action, claim.request) == ("k3f9q", action, "restart:41")
        assert claim.exp == int((now + timedelta(hours=24)).timestamp())
        with pytest.raises(al.LinkRefused):  # another run's folder: not this link's
            al.verify(seal, tmp_path, token, now=now)
        with pytest.raises(al.LinkRefused):  # a day later: expired
            al.verify(seal, folder, token, now=now + timedelta(hours=24))


def test_each_need_gets_the_links_that_answer_it(server: Loopback, tmp_path: Path) -> None:
    clock = FakeClock()
    n = notifier(server, tmp_path, clock)
    seal = Seal.of(load_settings().data_dir)
    n(ev.NeedsOperator(ts=clock.now(), seq=7, session=1, reason="stuck", message="no todo completed",
                       paused=True))
    n(ev.NeedsOperatorCleared(ts=clock.now(), seq=8, session=1, reason="stuck", by="operator's resume"))
    n(ev.NeedsOperator(ts=clock.now(), seq=20, session=1, reason="gave_up", message="the agent gave up",
                       paused=False))
    n(ev.RunEnded(ts=clock.now(), seq=21, session=1, reason="gave_up", outcome="gave_up"))
    got = [r for r in server.wait_for(4) if "topic" not in r.body]  # the gave-up and its end: one message
    n.close()
    stuck, gave_up = (r.body["message"] for r in got[:2])
    [resume] = tokens(stuck)
    assert al.verify(seal, tmp_path, resume, now=clock.now()).request == "need:7"
    claims = [al.verify(seal, tmp_path, t, now=clock.now()) for t in tokens(gave_up)]
    assert [(c.action, c.request) for c in claims] == [("resume", "need:20"), ("acknowledge", "need:20")]
    ntfy = [r for r in server.requests if "topic" in r.body]
    assert ntfy[1].headers["x-actions"].startswith("view, Resume, ") and ", Acknowledge, " in ntfy[1].headers[
        "x-actions"]


def test_a_fleet_budgets_resume_link_says_it_lets_this_run_alone_go_on(server: Loopback, tmp_path: Path) -> None:
    """Found attacking the fleet budget: its hold is told once for every run it pauses, and the link's "resume
    the run" read as if it resumed them all. It answers the run that told it, alone, and says so."""
    clock = FakeClock()
    n = notifier(server, tmp_path, clock)
    n(ev.NeedsOperator(ts=clock.now(), seq=9, session=1, reason="fleet_budget", paused=True,
                       message="the fleet spent $5.00 today (2026-01-15), reaching its daily budget of $5.00",
                       evidence=["scope: the fleet"]))
    ntfy, hook = by_kind(server.wait_for(2))
    n.close()
    body = hook.body["message"]
    assert "Let this run alone go on past today's budget (the others stay paused): " + PUBLIC in body
    assert "resume the run" not in body.lower()
    assert ntfy.headers["x-actions"].startswith("view, Resume this run, ")


def test_a_crash_and_a_need_that_does_not_pause_get_no_link(server: Loopback, tmp_path: Path) -> None:
    # A crash's end clears the need it names: a link would have no request left to answer (it says the commands).
    clock = FakeClock()
    n = notifier(server, tmp_path, clock)
    n(ev.NeedsOperator(ts=clock.now(), seq=5, session=1, reason="crashed", message="it crashed", paused=False))
    got = server.wait_for(2)
    n.close()
    assert all("/a/" not in r.body["message"] and "x-actions" not in r.headers for r in got)
    assert "agent-console resume k3f9q" in got[0].body["message"]


def test_without_a_public_url_no_link_anywhere(server: Loopback, tmp_path: Path) -> None:
    clock = FakeClock()
    n = notifier(server, tmp_path, clock, links=False)
    restart(clock, n)
    got = server.wait_for(2)
    n.close()
    for r in got:
        assert "/a/" not in r.body["message"] and "phone" not in r.body["message"] and "x-actions" not in r.headers
        assert "Answer from a shell:\n  agent-console approve k3f9q" in r.body["message"]
    assert link_settings(load_settings()) is None  # the operator's config names no public URL


def test_a_reminder_repeats_the_links_with_the_same_nonce_and_a_later_expiry(server: Loopback,
                                                                              tmp_path: Path) -> None:
    # The same nonce: the first message's link and the reminder's are one answer (a link spent is spent in every
    # message, UsedLinks keys by the nonce); a later expiry: a reminder a day on still carries links that work.
    clock = FakeClock()
    n = notifier(server, tmp_path, clock)
    n(ev.NeedsOperator(ts=clock.now(), seq=7, session=1, reason="stuck", message="no todo completed",
                       paused=True))
    server.wait_for(2)
    clock.advance(15 * 60)
    assert n.remind_due() is not None
    got = [r.body["message"] for r in server.wait_for(4) if "topic" not in r.body]
    n.close()
    seal = Seal.of(load_settings().data_dir)
    first, again = (al.verify(seal, tmp_path, tokens(m)[0], now=clock.now()) for m in got)
    assert first.nonce == again.nonce and again.exp == first.exp + 15 * 60
    assert got[1].startswith("Reminder 1:") and "until 2026-01-16 14:15" in got[1]


def test_a_long_message_is_cut_never_its_links_or_commands(server: Loopback, tmp_path: Path) -> None:
    clock = FakeClock()
    n = notifier(server, tmp_path, clock)
    n(ev.NeedsOperator(ts=clock.now(), seq=7, session=1, reason="stuck", message="x " * 400,
                       evidence=["y " * 150] * 8, paused=True))
    got = [r for r in server.wait_for(2) if "topic" not in r.body]
    n.close()
    body = got[0].body["message"]
    assert len(body) <= BODY_LIMIT and "…" in body
    assert len(tokens(body)) == 1 and body.endswith("agent-console attach k3f9q")


def test_a_failing_channel_never_says_a_links_token(server: Loopback, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # Apprise's ntfy plugin quotes its payload in its warning on an I/O error; any plugin may. The error line (an
    # error event in the run's log, a line in runner.log) must not carry a credential.
    from apprise.plugins.custom_json import NotifyJSON

    def quoting(self: Any, body: str, **kw: Any) -> bool:
        self.logger.warning(f"could not send {body[body.index('Answer from your phone'):]!r}")
        return False

    monkeypatch.setattr(NotifyJSON, "send", quoting)
    lines: list[str] = []
    clock = FakeClock()
    n = notifier(server, tmp_path, clock, on_error=lines.append)
    restart(clock, n)
    [sent] = server.wait_for(1)  # ntfy got it
    n.close()
    [approve, _deny] = tokens(sent.body["message"])
    assert len(lines) == 1 and "json://127.0.0.1" in lines[0]
    assert approve not in lines[0] and approve.split(".")[0][:20] not in lines[0] and "/a/…" in lines[0]


def test_unlinked_cuts_every_token() -> None:
    token = al.mint(Seal.of(load_settings().data_dir), "/tmp", "k3f9q", "approve", request="restart:1",
                    now=FakeClock().now())
    text = f"POST failed: {{'message': 'Approve: {PUBLIC}/a/{token}'}} and {token} alone"
    out = unlinked(text)
    assert token not in out and token.split(".")[1] not in out and "/a/…" in out


def _config(text: str) -> None:
    import os

    Path(os.environ["AGENT_CONSOLE_CONFIG"]).write_text(text)


def test_the_links_settings_are_the_operators_config_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from console.engine.job import JobError

    _config('[serve]\npublic_url = "https://phone.example.org/x/"\nlink_ttl_hours = 2\n')
    links = link_settings(load_settings())
    assert links is not None and links.public_url == "https://phone.example.org/x"
    assert links.ttl == timedelta(hours=2) and links.data_dir == load_settings().data_dir
    monkeypatch.setenv("AGENT_CONSOLE_SERVE_LINK_TTL_HOURS", "0.5")
    monkeypatch.setenv("AGENT_CONSOLE_SERVE_PUBLIC_URL", "http://10.0.0.2:8765")
    links = link_settings(load_settings())
    assert links is not None and (links.public_url, links.ttl) == ("http://10.0.0.2:8765", timedelta(minutes=30))
    for value, said in (("soon", "AGENT_CONSOLE_SERVE_LINK_TTL_HOURS: expected hours"),
                        ("0", "greater than 0"), ("721", "less than or equal to 720")):
        monkeypatch.setenv("AGENT_CONSOLE_SERVE_LINK_TTL_HOURS", value)
        with pytest.raises(JobError, match=said):
            load_settings()
    monkeypatch.delenv("AGENT_CONSOLE_SERVE_LINK_TTL_HOURS")
    monkeypatch.setenv("AGENT_CONSOLE_SERVE_PUBLIC_URL", "")  # empty: no links
    assert link_settings(load_settings()) is None
