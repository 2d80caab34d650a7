"""Notifications ping nobody: "@everyone" / "@here" in an agent's text pinged a whole Discord server (the webhook's
payload had no ``allowed_mentions``), Matrix's "@room" a whole room; Slack's <!channel>, Mattermost's and
Rocket.Chat's @all, Zulip's @**all**, Google Chat's <users/all> are the same for their channels.

Each channel is played by a loopback server that receives the payload Apprise really builds for it: the plugin's own
URL form where it takes a host (Matrix's webhook mode, Mattermost, Rocket.Chat, ntfy, JSON), else the plugin's
endpoint pointed at 127.0.0.1 (Discord, Slack, Google Chat, Telegram, Zulip post to their service's fixed host)."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from urllib.parse import unquote_plus

import pytest

from console.engine import events as ev
from console.notify import Notifier, no_mentions
from tests.notify_server import Loopback, loopback

T = datetime(2026, 1, 15, 14, 2, 0, tzinfo=UTC)
# Every channel's mass (and direct) mentions, as an agent's summary could carry them, and an address that stays.
MENTIONS = ["@everyone", "@here", "@channel", "@all", "@room", "@**all**", "@stream", "<!channel>", "<!here>",
            "<!everyone>", "<@U024BE7LH>", "<@123456789012345678>", "<@&123456789012345678>", "<#C024BE7LR>",
            "<users/all>", "@alice"]
SUMMARY = "done; " + " ".join(MENTIONS) + " (mail bob@example.org)"

# name: (Apprise URL, {plugin class: (attribute holding the service's fixed endpoint, the loopback's path)})
CHANNELS: dict[str, tuple[str, dict[str, tuple[str, str]]]] = {
    "discord": ("discord://1234567890/abcdefTOKEN", {"discord.NotifyDiscord": ("notify_url", "/discord")}),
    "slack": ("slack://T1234ABCD/B1234ABCD/abcdefghijklmnopqrstuvwx", {"slack.NotifySlack": ("webhook_url", "/slack")}),
    "matrix": ("matrix://token@127.0.0.1:{port}/?mode=matrix", {}),
    "mattermost": ("mmost://127.0.0.1:{port}/abcdefghijklmnopqrstuvwxyz", {}),
    "rocketchat": ("rocket://127.0.0.1:{port}/?webhook=abcdef&to=%23general", {}),
    "google chat": ("gchat://workspace/key/token",
                    {"google_chat.NotifyGoogleChat": ("notify_url", "/gchat/{workspace}/messages")}),
    "telegram": ("tgram://123456789:ABCdefGhIJKlmnoPQRsTUVwxyZ123456789/12345",
                 {"telegram.NotifyTelegram": ("notify_url", "/telegram/bot")}),
    "zulip": ("zulip://bot@org/abcdefghijklmnopqrstuvwxyzabcdef",
              {"zulip.NotifyZulip": ("notify_url", "/zulip/{org}.{hostname}/api/v1/messages")}),
    "ntfy": ("ntfy://127.0.0.1:{port}/topic", {}),
    "json webhook": ("json://127.0.0.1:{port}/hook", {}),
}


@pytest.fixture
def server() -> Iterator[Loopback]:
    with loopback() as lb:
        yield lb


def payload_text(body: object) -> str:
    """What a channel reads of a payload: its JSON (or form) text, with form encoding, Markdown's backslash escapes
    and HTML entities undone (a channel's escaping of "<" or "*" is not what keeps a mention from pinging here:
    the text itself must not hold one)."""
    text = unquote_plus(body) if isinstance(body, str) else json.loads(json.dumps(body, ensure_ascii=False))
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    return html.unescape(re.sub(r"\\\\?([^\w\s])", r"\1", text))


@pytest.mark.parametrize("name", sorted(CHANNELS))
def test_a_channel_gets_no_mention_from_agent_text(name: str, server: Loopback,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    url, endpoints = CHANNELS[name]
    for where, (attribute, path) in endpoints.items():
        module, cls = where.rsplit(".", 1)
        plugin = getattr(importlib.import_module(f"apprise.plugins.{module}"), cls)
        monkeypatch.setattr(plugin, attribute, f"http://127.0.0.1:{server.port}{path}")
    n = Notifier([url.format(port=server.port)], "k3f9q", "audit", notify_on_end=True, on_error=lambda line: None)
    n(ev.JobCompleted(ts=T, seq=2, session=1, summary=SUMMARY, deliverables=[], confidence=0.9))
    [req] = server.wait_for(1)
    n.close()
    text = payload_text(req.body)
    assert "done;" in text and "bob@example.org" in text and "everyone" in text, text  # delivered, as text
    assert not [m for m in MENTIONS if m in text], text
    if name == "discord":  # and the webhook is told to ping nobody, whatever the text
        assert req.body["allowed_mentions"] == {"parse": []}, req.body


def test_no_mentions_leaves_ordinary_text_as_it_is() -> None:
    plain = "run k3f9q completed: 3 of 3 phases; mail bob@example.org, a < b, x@y, [link](https://e.org/@x)"
    assert no_mentions(plain) == plain
    assert no_mentions("@everyone") == "@\u200beveryone" and no_mentions("<!here>") == "<\u200b!here>"
    assert no_mentions(no_mentions("@here <@1>")) == no_mentions("@here <@1>")  # made so once
