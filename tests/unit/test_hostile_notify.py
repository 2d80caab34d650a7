"""A notification quotes the agent (a job_complete summary, a phase name in a refusal): on a channel that reads HTML
or Markdown (email, Telegram, Slack, Discord, or any Apprise URL with ``?format=``) that text stays text. Against a
loopback JSON webhook told to take HTML or Markdown, which shows the body as Apprise made it for such a channel."""

from __future__ import annotations

import html
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from console.engine import events as ev
from console.notify import Notifier
from tests.notify_server import Loopback, loopback

T = datetime(2026, 1, 15, 14, 2, 0, tzinfo=UTC)
HTML = "<a href='https://evil.example/approve'>Approve</a><img src=https://evil.example/t.png>"
MARKDOWN = "[Approve](https://evil.example/approve) **urgent**"


@pytest.fixture
def server() -> Iterator[Loopback]:
    with loopback() as lb:
        yield lb


def refused(text: str) -> ev.NeedsOperator:
    return ev.NeedsOperator(ts=T, seq=1, session=1, reason="completion_refused", paused=True,
                            message=f"the agent tried to stop: {text}", evidence=[f"protocol: phase '{text}'"])


def test_html_from_the_agent_is_escaped_for_an_html_channel(server: Loopback) -> None:
    n = Notifier([server.url("json", "hook?format=html")], "k3f9q", "audit", notify_on_end=True)
    n(refused(HTML))
    n(ev.JobCompleted(ts=T, seq=2, session=1, summary=f"done {HTML}", deliverables=[], confidence=0.9))
    need, done = server.wait_for(2)
    assert n.close()
    for body in (need.body["message"], done.body["message"]):
        assert "<a " not in body and "<img" not in body, body
        assert HTML in html.unescape(body).replace("\xa0", " ")  # shown as the text it is, not dropped
    assert "agent-console resume k3f9q" in html.unescape(need.body["message"]).replace("\xa0", " ")


def test_markdown_from_the_agent_is_escaped_for_a_markdown_channel(server: Loopback) -> None:
    n = Notifier([server.url("json", "hook?format=markdown")], "k3f9q", "audit")
    n(refused(MARKDOWN))
    [req] = server.wait_for(1)
    assert n.close()
    body = req.body["message"]
    assert "[Approve](" not in body and "**urgent**" not in body, body
    assert "\\[Approve\\]" in body


def test_a_plain_text_channel_gets_the_text_as_it_is(server: Loopback) -> None:
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit")
    n(refused(HTML + " " + MARKDOWN))
    [req] = server.wait_for(1)
    assert n.close()
    assert f"the agent tried to stop: {HTML} {MARKDOWN}" in req.body["message"]


def test_a_stop_the_record_does_not_back_is_not_told_as_completed(server: Loopback) -> None:
    # [guardrails.completion] type = "none": the agent's job_complete is let through and the run ends incomplete;
    # its summary ("all done!") must not reach the operator's phone as a success.
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", notify_on_end=True)
    n(ev.JobCompleted(ts=T, seq=1, session=1, summary="all done!", deliverables=[], confidence=1.0,
                      unmet=["3 todos are not done", "phase 2 not worked through"]))
    [req] = server.wait_for(1)
    assert n.close()
    assert "completed" not in req.body["title"] and "incomplete" in req.body["title"]
    assert req.body["type"] == "warning"
    assert "all done!" in req.body["message"] and "- 3 todos are not done" in req.body["message"]
