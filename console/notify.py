"""Telling the operator's channels: a run that needs its operator, and (optionally) a run's end.

An operator who walks away gives the run Apprise URLs (``--notify URL``, repeatable, or ``[notify] urls`` in the
config file): ntfy (a phone), Slack, Matrix, email, a JSON webhook... A :class:`Notifier` is an event subscriber:
on ``needs_operator`` it sends "agent-console: run k3f9q needs you (stuck)" with the message, the evidence and
the commands that answer; on the run's end one short line (``notify_on_end``).

Sending never holds the engine: the subscriber only queues, and each channel sends from its own thread (a slow or
dead channel delays no other; a working one is told within a second or two of the event). A channel that fails
(a bad URL, a server down, a timeout) never stops the run and is reported once (``on_error``, which the caller
turns into an ``error`` event, where="notify"). Apprise URLs carry tokens and passwords: what is shown of one,
anywhere, is only ``scheme://host`` (:func:`shown_url`), and Apprise's own log lines are kept from the terminal.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from console.engine import events as ev
from console.engine.clock import Clock, SystemClock
from console.engine.needs import label
from console.engine.text import safe_text

# The most a body carries (ntfy takes 4 kB in a message before it makes it an attachment).
BODY_LIMIT = 3500
LINE_LIMIT = 300
QUEUE_LIMIT = 50  # messages waiting for one channel; more are dropped (and that is said once)
CLOSE_TIMEOUT = 5.0
SPACING = 1.0  # the least time between two sends to one channel (seconds)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]{0,31}$")

_log_lock = threading.Lock()
_last_warning: dict[int, str] = {}  # thread id -> Apprise's last warning in that thread (why a send failed)


class _Capture(logging.Handler):
    """Apprise logs why a send failed; the line is kept (per thread) for the one report, never printed."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            with _log_lock:
                _last_warning[record.thread or 0] = record.getMessage()


def _quiet_apprise() -> None:
    """Apprise's log lines go to our capture only: never to the terminal (a console's screen, a headless log)."""
    logger = logging.getLogger("apprise")
    if not any(isinstance(h, _Capture) for h in logger.handlers):
        logger.addHandler(_Capture())
        logger.propagate = False


def _instantiate(url: str) -> Any:
    """Apprise's plugin for ``url``, or None when it is not a notification URL Apprise knows."""
    import apprise

    _quiet_apprise()
    try:
        plugin = apprise.Apprise.instantiate(url)
    except Exception:
        return None
    if plugin is not None and getattr(plugin, "request_rate_per_sec", 0) > SPACING:
        # Apprise spaces two sends to one service by 5.5 s by default: a second need right after a first (a
        # restart to approve, then the end) would miss its 5 s. Needs are rare (one per reason): 1 s is polite.
        plugin.request_rate_per_sec = SPACING
    return plugin


def shown_url(url: str, plugin: Any = None) -> str:
    """``ntfy://ntfy.example.org``: what may be shown of a notification URL. Only the scheme and the host; a host
    that is itself a secret (Telegram's bot token, Slack's tokens: Apprise masks those) or missing (ntfy.sh's
    topic-only form) is shown as ``…``. Never the user, password, path (a topic, a webhook's key) or query."""
    head = url.split("://", 1)[0].strip() if "://" in url else ""
    scheme = head.lower() if _SCHEME.match(head) else "?"
    if plugin is None:
        plugin = _instantiate(url) if scheme != "?" else None
    if plugin is None:
        return f"{scheme}://…"
    host = getattr(plugin, "host", None)
    try:
        private = urlsplit(plugin.url(privacy=True))
        private_host = private.hostname or ""
    except Exception:
        private_host = ""
    if not isinstance(host, str) or not host or host.lower() != private_host.lower():
        return f"{scheme}://…"
    port = getattr(plugin, "port", None)
    return f"{scheme}://{host}" + (f":{port}" if isinstance(port, int) else "")


def check_urls(urls: Iterable[str]) -> list[str]:
    """The problems of the notification URLs (one line each, secrets left out): empty, or not a URL that Apprise
    knows how to send to (an unknown scheme, a missing token or topic...). Checked before a run starts: a typo
    must not leave the operator waiting for a message that never comes."""
    problems = []
    for n, url in enumerate(urls, 1):
        if not isinstance(url, str) or not url.strip():
            problems.append(f"notify URL {n}: empty")
            continue
        if _instantiate(url.strip()) is None:
            problems.append(f"notify URL {n} ({shown_url(url.strip(), None)}): not a notification URL Apprise can "
                            "send to (a scheme it does not know, or a token, topic or host missing); see "
                            "https://github.com/caronc/apprise/wiki for the forms")
    return problems


def _secret_parts(url: str) -> list[str]:
    """The pieces of a URL that may be secret (user, password, host, path segments, query values), longest first."""
    try:
        parts = urlsplit(url)
        pieces = [parts.username, parts.password, parts.hostname, *parts.path.split("/"),
                  *(v for _k, v in parse_qsl(parts.query)), parts.fragment]
    except ValueError:
        pieces = re.split(r"[/:@?&=#]+", url)
    out = {p for piece in pieces if piece for p in (piece, unquote(piece)) if len(p) >= 3}
    return sorted(out, key=len, reverse=True)


def redact(text: str, url: str, shown: str) -> str:
    """``text`` (Apprise's reason for a failure) with every piece of ``url`` that may be secret replaced by ``…``
    (the host stays when :func:`shown_url` shows it), one line, cut."""
    keep = shown.split("://", 1)[-1]
    for piece in _secret_parts(url):
        if piece and piece not in keep:
            text = text.replace(piece, "…")
    return safe_text(text, one_line=True, join=True, limit=200)


@dataclass
class Message:
    title: str
    body: str
    kind: str  # apprise NotifyType value: info | success | warning | failure
    ts: float  # the clock's monotonic time of the event (for the send's latency)


@dataclass
class _Channel:
    url: str
    plugin: Any
    shown: str
    queue: queue.Queue[Message | None] = field(default_factory=lambda: queue.Queue(QUEUE_LIMIT))
    thread: threading.Thread | None = None
    failed: bool = False  # reported already (once per channel)
    dropped: int = 0


class Notifier:
    """Sends a run's needs (and its end) to the operator's Apprise URLs. Subscribe it to the run's events:
    ``sup.subscribe(notifier)``; ``close()`` at the run's end flushes what is still being sent (bounded).

    ``on_error(line)`` is called once per failing channel, from that channel's thread, with a line that names the
    channel as ``scheme://host`` only; the run goes on. ``sent`` records (channel shown, seconds from the event to
    the channel's answer) of each delivered message (what benchmarks/notify.py measures)."""

    def __init__(self, urls: Iterable[str], run_id: str, job: str, *, clock: Clock | None = None,
                 on_error: Callable[[str], None] | None = None, notify_on_end: bool = True) -> None:
        self.run_id = run_id
        self.job = safe_text(job, one_line=True, join=True, limit=120)
        self.clock = clock or SystemClock()
        self.on_error = on_error
        self.notify_on_end = notify_on_end
        self.sent: list[tuple[str, float]] = []
        self.channels: list[_Channel] = []
        self._lock = threading.Lock()
        self._closed = False
        self._ended = False
        self._crashed = False
        for url in urls:
            url = url.strip()
            plugin = _instantiate(url) if url else None
            channel = _Channel(url, plugin, shown_url(url, plugin) if plugin is not None else shown_url(url, None))
            self.channels.append(channel)
            if plugin is None:  # check_urls() refuses these first; a caller that did not is told here, once
                self._failed(channel, "not a notification URL Apprise can send to")

    # -- the subscriber ------------------------------------------------------------------------
    def __call__(self, event: ev.EventBase) -> None:
        """Queue what ``event`` tells the operator's channels; returns at once (the engine's thread)."""
        message = self.message_for(event)
        if message is not None:
            self._send(message)

    def message_for(self, e: ev.EventBase) -> Message | None:
        now = self.clock.monotonic()
        if isinstance(e, ev.NeedsOperator):
            self._crashed = e.reason == "crashed"
            return Message(f"agent-console: run {self.run_id} needs you ({label(e.reason)})", self._need_body(e),
                           "warning" if e.reason != "crashed" else "failure", now)
        if isinstance(e, ev.SessionStarted) and e.reason in ("new", "resume"):
            self._ended = self._crashed = False
            return None
        if not self.notify_on_end or self._ended:
            return None
        if isinstance(e, ev.JobCompleted):
            self._ended = True
            return Message(f"agent-console: run {self.run_id} completed",
                           f"{self.job}: {_line(e.summary, 300)}", "success", now)
        if isinstance(e, ev.RunEnded):
            self._ended = True
            if self._crashed:
                return None  # the crash was just told, with what to do
            what = {"job_complete": "completed", "user_shutdown": "stopped"}.get(e.reason, e.reason.replace("_", " "))
            detail = f": {_line(e.detail, 300)}" if e.detail else ""
            kind = "success" if e.reason in ("job_complete", "agent_stopped") else \
                "info" if e.reason in ("user_shutdown", "interrupted") else "failure"
            body = f"{self.job} (run {self.run_id}){detail}"
            if e.outcome not in (None, "completed", "failed"):
                # Read on a phone, away from the terminal: what goes on with it, typed on the run's machine.
                body += f"\n\nGo on with: agent-console resume {self.run_id}"
            return Message(f"agent-console: run {self.run_id} ended ({what})", body, kind, now)
        return None

    def _need_body(self, e: ev.NeedsOperator) -> str:
        rid = self.run_id
        lines = [f"{self.job} (run {rid}): {_line(e.message, 600)}"]
        if e.evidence:
            lines += ["", "Evidence:", *(f"- {_line(x, LINE_LIMIT)}" for x in e.evidence)]
        lines += ["", f"Since {e.ts.astimezone():%Y-%m-%d %H:%M:%S %Z}" + ("; the run is paused" if e.paused else "")]
        if e.reason == "restart_approval":
            answers = [f"agent-console approve {rid}", f"agent-console deny {rid}   (the run ends; resumable)"]
        elif e.reason == "crashed":
            answers = [f"agent-console resume {rid}   (once the cause is fixed)", f"agent-console logs {rid}"]
        else:
            answers = [f"agent-console resume {rid}", f"agent-console stop {rid}"]
        lines += ["", "Answer from a shell:", *(f"  {a}" for a in answers), f"  agent-console attach {rid}"]
        body = "\n".join(lines)
        return body if len(body) <= BODY_LIMIT else body[: BODY_LIMIT - 1] + "…"

    # -- sending -------------------------------------------------------------------------------
    def _send(self, message: Message) -> None:
        with self._lock:
            if self._closed:
                return
            for channel in self.channels:
                if channel.plugin is None:
                    continue
                try:
                    channel.queue.put_nowait(message)
                except queue.Full:
                    channel.dropped += 1
                    continue
                if channel.thread is None:
                    channel.thread = threading.Thread(target=self._work, args=(channel,), daemon=True,
                                                      name=f"notify {channel.shown}")
                    channel.thread.start()

    def _work(self, channel: _Channel) -> None:
        while True:
            message = channel.queue.get()
            if message is None:
                return
            ok, why = self._deliver(channel, message)
            if ok:
                self.sent.append((channel.shown, self.clock.monotonic() - message.ts))
            else:
                self._failed(channel, why)

    def _deliver(self, channel: _Channel, message: Message) -> tuple[bool, str]:
        ident = threading.get_ident()
        with _log_lock:
            _last_warning.pop(ident, None)
        try:
            from apprise import NotifyType

            ok = bool(channel.plugin.notify(body=message.body, title=message.title,
                                            notify_type=NotifyType(message.kind)))
        except Exception as exc:
            ok, why = False, f"{type(exc).__name__}: {exc}"
        else:
            why = ""
        with _log_lock:
            said = _last_warning.pop(ident, "")
        if ok:
            return True, ""
        return False, redact(why or said or "the channel did not accept the message", channel.url, channel.shown)

    def _failed(self, channel: _Channel, why: str) -> None:
        if channel.failed:
            return
        channel.failed = True
        if self.on_error is not None:
            with contextlib.suppress(Exception):  # reporting must not take the channel's thread down
                self.on_error(f"notification to {channel.shown} failed: {why}; the run goes on (this channel's "
                              "later failures are not reported)")

    def close(self, timeout: float = CLOSE_TIMEOUT) -> bool:
        """Flush what is still being sent, waiting at most ``timeout`` seconds in all; True when nothing is left.
        (The channels' threads are daemons: one stuck on a dead server never holds the process.)"""
        with self._lock:
            self._closed = True
            threads = [c.thread for c in self.channels if c.thread is not None]
            for channel in self.channels:
                if channel.thread is not None:
                    # A stuck channel with a full queue takes no end mark: its (daemon) thread is left to the exit.
                    with contextlib.suppress(queue.Full):
                        channel.queue.put_nowait(None)
        deadline = time.monotonic() + timeout  # a real wait, whatever the run's clock
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in threads)


def _line(text: str, limit: int) -> str:
    return safe_text(str(text), one_line=True, join=True, limit=limit)
