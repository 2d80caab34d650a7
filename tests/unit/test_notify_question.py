"""A question of an MCP server, as the operator's channels are told it (console.notify, against a loopback JSON
webhook, on a fake clock): the `agent-console answer` command lines, every field but bounded (a form of sixteen
fields of the longest lines a form may have), a reminder while it waits, none once it is answered."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from console.engine import events as ev
from console.engine.clock import FakeClock
from console.engine.questions import MAX_FIELDS, MAX_LINE
from console.notify import Notifier
from tests.notify_server import Loopback, loopback

MIN = 60.0


@pytest.fixture
def server() -> Iterator[Loopback]:
    with loopback() as lb:
        yield lb


def test_a_question_is_told_with_its_answers_bounded_reminded_and_no_more_once_answered(server: Loopback) -> None:
    clock = FakeClock()
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", clock=clock, look=False)
    fields = [f"f{i} (string): " + "\x1b[2J" + "d" * (MAX_LINE - 20) for i in range(MAX_FIELDS)]
    n(ev.NeedsOperator(ts=clock.now(), seq=1, session=1, reason="mcp_question", paused=False, evidence=fields,
                       message="MCP server asker asks (question q0a1b2c, during ask): " + "m" * 2000))
    (told,) = server.wait_for(1)
    body = told.body["message"]
    assert "agent-console answer k3f9q --set NAME=VALUE" in body and "agent-console answer k3f9q --decline" in body
    assert "\x1b" not in body and len(body) <= 3500
    assert all(f"- f{i} (string)" in body for i in range(MAX_FIELDS))
    clock.advance(15 * MIN)
    reminder = n.remind_due()
    assert reminder is not None and "still needs you (question from an MCP server)" in reminder.title
    n(ev.NeedsOperatorCleared(ts=clock.now(), seq=2, session=1, reason="mcp_question", by="operator (cli)"))
    clock.advance(60 * MIN)
    assert n.remind_due() is None
    assert n.close()


def test_with_serves_address_a_question_names_its_runs_page_where_its_form_is(server: Loopback, tmp_path) -> None:
    from console.notify import LinkSettings

    clock = FakeClock()
    n = Notifier([server.url("json", "hook")], "k3f9q", "audit", clock=clock, look=False,
                 links=LinkSettings("https://console.example.org", tmp_path / "data"))
    fields = [f"f{i} (string): " + "d" * (MAX_LINE - 20) for i in range(MAX_FIELDS)]
    n(ev.NeedsOperator(ts=clock.now(), seq=1, session=1, reason="mcp_question", paused=False, evidence=fields,
                       message="MCP server asker asks (question q0a1b2c, during ask): " + "m" * 2000))
    (told,) = server.wait_for(1)
    body = told.body["message"]
    assert "Or answer on its page: https://console.example.org/run/k3f9q#answer" in body
    assert "agent-console answer k3f9q --set NAME=VALUE" in body and len(body) <= 3500
    assert all(f"- f{i} (string)" in body for i in range(MAX_FIELDS))
    assert n.close()
