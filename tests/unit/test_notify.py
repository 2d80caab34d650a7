"""Notifications: a run that needs its operator reaches their channels (Apprise URLs) from a background thread; a
failing channel is reported once, with no secret of its URL, and never holds the run. Against loopback servers
that play a JSON webhook and an ntfy server."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from console.engine import events as ev
from console.notify import Notifier, check_urls, shown_url
from tests.notify_server import Loopback, closed_port, loopback

T = datetime(2026, 1, 15, 14, 2, 0, tzinfo=UTC)


@pytest.fixture
def server() -> Iterator[Loopback]:
    with loopback() as lb:
        yield lb


def need(seq: int = 1, reason: str = "stuck", **kw: object) -> ev.NeedsOperator:
    fields: dict[str, object] = dict(message="no todo completed in 40 turns",
                                     evidence=["read_file(notes.md) x 12", "idle 40 turns"], paused=True)
    fields.update(kw)
    return ev.NeedsOperator(ts=T, seq=seq, session=1, reason=reason, **fields)  # type: ignore[arg-type]


def test_a_need_reaches_a_json_webhook_and_an_ntfy_server(server: Loopback) -> None:
    errors: list[str] = []
    n = Notifier([server.url("json", "hook"), server.url("ntfy", "alerts?priority=high")], "k3f9q", "quickstart",
                 on_error=errors.append)
    n(need())
    hook, ntfy = sorted(server.wait_for(2), key=lambda r: r.path != "/hook")
    assert n.close() and errors == []
    # The webhook: Apprise's JSON form.
    assert hook.path == "/hook" and hook.headers["content-type"] == "application/json"
    assert hook.body["title"] == "agent-console: run k3f9q needs you (stuck)" and hook.body["type"] == "warning"
    body = hook.body["message"]
    assert body.startswith("quickstart (run k3f9q): no todo completed in 40 turns")
    for line in ("- read_file(notes.md) x 12", "- idle 40 turns", "the run is paused", "agent-console resume k3f9q",
                 "agent-console stop k3f9q", "agent-console attach k3f9q"):
        assert line in body, line
    # ntfy: a JSON publish to the server's root naming the topic, the priority in its header.
    assert ntfy.path == "/" and ntfy.body["topic"] == "alerts" and ntfy.headers["x-priority"] == "high"
    assert ntfy.body["title"] == hook.body["title"] and ntfy.body["message"] == body
    assert sorted(shown for shown, _s in n.sent) == sorted([f"json://127.0.0.1:{server.port}",
                                                            f"ntfy://127.0.0.1:{server.port}"])


def test_each_need_says_how_to_answer_it(server: Loopback) -> None:
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit")
    n(need(1, "restart_approval", message="the context is full: approve the restart", paused=False))
    n(need(2, "crashed", message="the run crashed", evidence=["RuntimeError: boom"], paused=False))
    approval, crash = server.wait_for(2)
    n.close()
    assert approval.body["title"].endswith("needs you (restart approval)")
    assert "agent-console approve k3f9q" in approval.body["message"]
    assert "agent-console deny k3f9q" in approval.body["message"]
    assert "paused" not in approval.body["message"]
    assert crash.body["title"].endswith("needs you (crashed)") and crash.body["type"] == "failure"
    assert "agent-console resume k3f9q" in crash.body["message"] and "RuntimeError: boom" in crash.body["message"]


def test_agent_text_is_made_safe_and_a_long_body_is_cut(server: Loopback) -> None:
    n = Notifier([server.url("json", "hook")], "k3f9q", "job\x1b[31m")
    n(need(message="loop \x1b]52;c;aGk=\x07 detected " + "x" * 5000, evidence=["\x1b[2J" + "y" * 900] * 30))
    [req] = server.wait_for(1)
    n.close()
    assert "\x1b" not in req.body["message"] and "\x07" not in req.body["message"]
    assert "\x1b" not in req.body["title"] and len(req.body["message"]) <= 3500


def test_the_subscriber_returns_at_once_while_a_channel_is_slow(server: Loopback) -> None:
    n = Notifier([server.url("json", "hold")], "k3f9q", "job")
    n(need())  # the server holds the request: a subscriber that sent inline would be stuck here
    assert server.holding.wait(10), "the request never reached the server"
    assert n.sent == [] and server.requests == []  # returned while the send is still in flight
    server.release.set()
    assert n.close(10)
    assert len(n.sent) == 1 and len(server.requests) == 1


def test_close_is_bounded_when_a_channel_hangs(server: Loopback) -> None:
    n = Notifier([server.url("json", "hold")], "k3f9q", "job")
    n(need())
    assert server.holding.wait(10)
    assert n.close(0.2) is False  # gave up on the stuck channel; its thread is a daemon
    server.release.set()


def test_a_failing_channel_is_reported_once_and_the_others_go_on(server: Loopback) -> None:
    errors: list[str] = []
    dead = f"json://127.0.0.1:{closed_port()}/hook"
    n = Notifier([dead, server.url("json", "fail"), server.url("json", "ok")], "k3f9q", "job", on_error=errors.append)
    for seq in (1, 2, 3):
        n(need(seq, "stuck" if seq != 2 else "budget"))
    assert n.close(15)
    paths = [r.path for r in server.requests]
    assert paths.count("/ok") == 3 and paths.count("/fail") == 3  # every message tried on every live channel
    assert len(errors) == 2, errors  # one report per failing channel, whatever the number of failures
    refused = next(e for e in errors if e.startswith(f"notification to {shown_url(dead)} failed"))
    assert "the run goes on" in refused
    assert any(e.startswith(f"notification to json://127.0.0.1:{server.port} failed") for e in errors)


def test_a_url_that_is_not_one_is_reported_once_and_skipped(server: Loopback) -> None:
    errors: list[str] = []
    n = Notifier(["bogus://user:hunter2@example.org/x", server.url("json", "ok")], "k3f9q", "job",
                 on_error=errors.append)
    n(need(1))
    n(need(2, "budget"))
    assert n.close(10) and len(server.requests) == 2
    assert errors == ["notification to bogus://… failed: not a notification URL Apprise can send to; the run goes "
                      "on (this channel's later failures are not reported)"]


def test_no_secret_of_a_url_is_ever_shown(server: Loopback) -> None:
    port = closed_port()
    urls = [f"json://alice:pa55word@127.0.0.1:{port}/hook-s3cret?token=t0k3nvalue",
            f"ntfy://bob:hunter22@127.0.0.1:{port}/topic-s3cret",
            f"json://127.0.0.1:{server.port}/fail-s3cret-key"]
    errors: list[str] = []
    n = Notifier(urls, "k3f9q", "job", on_error=errors.append)
    n(need())
    assert n.close(15) and len(errors) == 3
    text = "\n".join(errors)
    for secret in ("alice", "pa55word", "hook-s3cret", "t0k3nvalue", "bob", "hunter22", "topic-s3cret",
                   "fail-s3cret-key", "s3cret"):
        assert secret not in text, (secret, text)
    assert f"json://127.0.0.1:{port}" in text  # what is shown: the scheme and the host
    # Hosts that are tokens, and a topic-only ntfy.sh URL, are not shown at all (no send is tried here).
    assert shown_url("tgram://123456789:AAbbccddeeffgg/12345") == "tgram://…"
    assert shown_url("slack://TokenA/TokenB/TokenC/#chan") == "slack://…"
    assert shown_url("ntfy://my-secret-topic") == "ntfy://…"
    assert shown_url("mailto://me:pw@example.org") == "mailto://example.org:25"


def test_check_urls_names_each_bad_one_without_its_secrets() -> None:
    assert check_urls(["json://127.0.0.1:8080/hook", "ntfy://ntfy.example.org/topic", "ntfys://mytopic",
                       "mailto://me:pw@example.org"]) == []
    problems = check_urls(["json://127.0.0.1/ok", "", "bogus://user:hunter2@host.example/x", "json://",
                           "no scheme at all"])
    assert [p.split(" ", 3)[2].rstrip(":") for p in problems] == ["2", "3", "4", "5"]
    assert problems[0] == "notify URL 2: empty"
    assert problems[1].startswith("notify URL 3 (bogus://…): not a notification URL Apprise can send to")
    joined = "\n".join(problems)
    assert "hunter2" not in joined and "host.example" not in joined and "\n" not in problems[1]


def test_the_end_of_a_run_is_one_short_line_when_asked(server: Loopback) -> None:
    n = Notifier([server.url("json", "end")], "k3f9q", "quickstart")
    n(ev.JobCompleted(ts=T, seq=5, session=1, summary="Produced digest.md.", confidence=0.9))
    n(ev.RunEnded(ts=T, seq=6, session=1, reason="job_complete"))  # the same end: not told twice
    [done] = server.wait_for(1)
    assert n.close() and len(server.requests) == 1
    assert done.body["title"] == "agent-console: run k3f9q completed" and done.body["type"] == "success"
    assert done.body["message"] == "quickstart: Produced digest.md."

    stopped = Notifier([server.url("json", "stopped")], "k3f9q", "quickstart")
    stopped(ev.RunEnded(ts=T, seq=7, session=1, reason="user_shutdown", detail="restart denied by the operator",
                        outcome="incomplete"))
    [req] = [r for r in server.wait_for(2) if r.path == "/stopped"]
    stopped.close()
    assert req.body["title"] == "agent-console: run k3f9q ended (stopped)"
    # Read on a phone: which run, and the command that goes on with it.
    assert req.body["message"] == ("quickstart (run k3f9q): restart denied by the operator\n\n"
                                   "Go on with: agent-console resume k3f9q")

    quiet = Notifier([server.url("json", "quiet")], "k3f9q", "quickstart", notify_on_end=False)
    quiet(ev.RunEnded(ts=T, seq=8, session=1, reason="max_turns"))
    quiet(ev.JobCompleted(ts=T, seq=9, session=1, summary="x", confidence=1.0))
    # A crash is told once, by its need (what to do), not again by the end that follows it.
    crash = Notifier([server.url("json", "crash")], "k3f9q", "quickstart")
    crash(need(10, "crashed", paused=False))
    crash(ev.RunEnded(ts=T, seq=11, session=1, reason="error", detail="internal error"))
    assert quiet.close() and crash.close()
    paths = [r.path for r in server.requests]
    assert "/quiet" not in paths and paths.count("/crash") == 1


def test_a_run_out_of_time_is_told_so_with_what_to_raise_before_it_goes_on(server: Loopback) -> None:
    n = Notifier([server.url("json", "late")], "k3f9q", "quickstart")
    n(ev.RunEnded(ts=T, seq=5, session=1, reason="budget_exhausted", outcome="incomplete",
                  detail="deadline passed: 33 seconds since the job started, deadline 25 seconds"))
    [req] = server.wait_for(1)
    assert n.close()
    assert req.body["title"] == "agent-console: run k3f9q ended (out of time)"
    assert req.body["message"].endswith("\n\nGo on with: raise the deadline in the run folder's job.toml, then "
                                        "agent-console resume k3f9q")


def test_events_that_are_not_needs_or_ends_send_nothing(server: Loopback) -> None:
    n = Notifier([server.url("json", "x")], "k3f9q", "job")
    for e in (ev.SessionStarted(ts=T, seq=1, session=1), ev.NeedsOperatorCleared(ts=T, seq=2, session=1,
                                                                                   reason="stuck", by="resume"),
              ev.ErrorEvent(ts=T, seq=3, session=1, message="x", where="notify")):
        n(e)
    assert n.close() and [c.thread for c in n.channels] == [None]  # not even a thread was started


def test_a_second_need_is_not_held_back_by_apprises_spacing(server: Loopback) -> None:
    """Apprise spaces two sends to an ntfy server by 5.5 s; a need must arrive within 5 s, so ours is at most 1 s."""
    from console.notify import SPACING

    n = Notifier([server.url("ntfy", "alerts")], "k3f9q", "job")
    assert 0 < n.channels[0].plugin.request_rate_per_sec <= SPACING <= 1.0
    n(need(1))
    n(need(2, "budget"))
    assert len(server.wait_for(2)) == 2 and n.close()


def test_checked_urls_load_apprise_at_the_first_message_not_before(server: Loopback) -> None:
    """A runner's URLs were checked by its starter: its notifier loads Apprise (every plugin: ~20 MB) as the first
    message is sent, not when it is made. In a fresh interpreter (this one has Apprise loaded already)."""
    import json
    import subprocess
    import sys

    code = """
import json, sys
from datetime import UTC, datetime
from console.engine import events as ev
from console.notify import Notifier
told = []
n = Notifier([sys.argv[1]], "k3f9q", "job", checked=True, on_told=told.append)
made = "apprise" in sys.modules
up = n.tells
n(ev.NeedsOperator(ts=datetime.now(UTC), seq=1, session=1, reason="stuck", message="m", paused=True))
done = n.close(15)
print(json.dumps({"made": made, "up": up, "sent": "apprise" in sys.modules, "done": done,
                  "shown": [s for s, _ in n.sent], "told": len(told)}))
"""
    out = subprocess.run([sys.executable, "-c", code, server.url("json", "hook")], capture_output=True, text=True,
                         timeout=60)
    assert json.loads(out.stdout) == {"made": False, "up": True, "sent": True, "done": True,
                                      "shown": [f"json://127.0.0.1:{server.port}"], "told": 1}, out.stderr
    [req] = server.wait_for(1)
    assert req.body["title"] == "agent-console: run k3f9q needs you (stuck)"


def test_a_checked_url_apprise_refuses_after_all_is_reported_once_as_it_would_send(server: Loopback) -> None:
    """The config changed between the check and the run: the URL is refused when Apprise reads it, said once, its
    messages settled (a fleet budget's hold is not left waiting for a channel that will never take it)."""
    errors: list[str] = []
    told: list[ev.NeedsOperator] = []
    n = Notifier(["bogus://user:hunter2@example.org/x", server.url("json", "ok")], "k3f9q", "job",
                 on_error=errors.append, checked=True, on_told=told.append)
    assert errors == []  # nothing read yet
    n(need(1))
    n(need(2, "budget"))
    assert n.close(10) and len(server.requests) == 2 and [e.seq for e in told] == [1, 2]
    assert errors == ["notification to bogus://… failed: not a notification URL Apprise can send to; the run goes "
                      "on (this channel's later failures are not reported)"]
    alone = Notifier(["bogus://user:hunter2@example.org/x"], "k3f9q", "job", on_error=errors.append, checked=True,
                     on_told=told.append)
    alone(need(3))
    assert alone.close(10) and [e.seq for e in told] == [1, 2, 3] and len(errors) == 2
    assert "hunter2" not in "\n".join(errors)
