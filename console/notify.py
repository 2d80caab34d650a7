"""Telling the operator's channels: a run that needs its operator, and (optionally) a run's end.

An operator who walks away gives the run Apprise URLs (``--notify URL``, repeatable, or ``[notify] urls`` in the
config file): ntfy (a phone), Slack, Matrix, email, a JSON webhook... A :class:`Notifier` is an event subscriber:
on ``needs_operator`` it sends "agent-console: run k3f9q needs you (stuck)" with the message, the evidence and
the commands that answer; on the run's end one short line (``notify_on_end``). A need nobody answers is told again
(reminders, further and further apart: :data:`REMIND_MINUTES`), and one that comes back soon after its answer (the
answer did not resolve it) says so ("again, 3 times since 14:02") and is sent as more urgent. A need that is a new
request each time (a restart to approve: console.engine.needs.NEW_EACH_TIME) is never "again": each is its own
message, a warning the first time, and information once the operator has approved one (they chose to be asked). A
run that ends needing its operator (it gave up) is one message that says both.

Sending never holds the engine: the subscriber only queues, and each channel sends from its own thread (a slow or
dead channel delays no other; a working one is told within a second or two of the event). A channel that fails
(a bad URL, a server down, a timeout) never stops the run and is reported once (``on_error``, which the caller
turns into an ``error`` event, where="notify"). Apprise URLs carry tokens and passwords: what is shown of one,
anywhere, is only ``scheme://host`` (:func:`shown_url`), and Apprise's own log lines are kept from the terminal.

With serve's public URL in the operator's config (``[serve] public_url``: :class:`LinkSettings`), a need's message
carries action links that answer it from a phone (console.engine.action_links: signed under the operator's seal,
bound to the run, the action and the request, as console.view.answers spells it, used once, expiring), above the
shell's commands; ntfy shows them as buttons that open each link's page. A link's token never reaches an error line.

Why one module of ~830 lines: a need's message, its reminders, its links and the channels that send them share one
state under one lock (what was told, since when, what answered it, what is queued), and the URL helpers are what
keeps that state's secrets out of every message.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qsl, unquote, urlsplit

from console.engine import action_links as al
from console.engine import events as ev
from console.engine.clock import Clock, SystemClock
from console.engine.guardrails.fleet import job_flag, scope_of
from console.engine.needs import ANSWERED_AS, NEW_EACH_TIME, label
from console.engine.text import safe_text

if TYPE_CHECKING:
    from console.settings import Settings

# The most a body carries (ntfy takes 4 kB in a message before it makes it an attachment).
BODY_LIMIT = 3500
# Characters of the body a need's evidence of more than eight lines shares (with a message of 600 and the answers,
# within BODY_LIMIT).
EVIDENCE_ROOM = 2200
LINE_LIMIT = 300
QUEUE_LIMIT = 50  # messages waiting for one channel; more are dropped (and that is said once)
CLOSE_TIMEOUT = 5.0
SPACING = 1.0  # the least time between two sends to one channel (seconds)
# Reminders of a need nobody answered, each gap (minutes) after the message before it, the last one repeated: soon
# enough to catch a short absence, then further apart, so that a run left waiting overnight calls a few times
# instead of every quarter of an hour (a channel that nags gets muted). [notify] remind_minutes; [] turns them off.
REMIND_MINUTES: tuple[float, ...] = (15.0, 60.0, 240.0)
# A need that comes back this soon after the operator answered it is the same need "again": the answer did not fix
# it, and the operator must hear that it is not a new one.
AGAIN_WITHIN = 30 * 60.0
REMIND_LOOK = 30.0  # the reminder thread's longest sleep (real seconds) between two looks at the run's clock
# Needs told as the run ends: no process goes on waiting (no reminder), and the end is not told apart.
ENDING = ("gave_up", "crashed")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]{0,31}$")

# A channel's plugin not read yet (Notifier's ``checked``): Apprise is loaded by its first message.
_LATER: Any = object()

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
    if plugin is not None:
        _allow_no_mentions(plugin)
    return plugin


# Mentions in what a message quotes (an agent's summary, a need's reason, a job's name, a store's row) must not
# ping anyone: "@everyone" / "@here" pinged a whole Discord server, "@room" a Matrix room. An "@" that starts a word
# (not an address's: "bob@example.org") is followed by a zero-width space, as discord.py's escape_mentions does:
# Discord's @everyone/@here/<@id>, Matrix's @room, Mattermost's and Rocket.Chat's @all/@here/@channel, Zulip's
# @**all** are then text. A "<" that opens a Slack or Google Chat mention (<!channel>, <!here>, <@U1>, <#C1>,
# <users/all>) or a Discord user or role mention (<@1>, <@&1>) gets one too (Apprise's Slack plugin escapes "<" in
# plain text already; this holds for a channel whose URL asks for another format). The harness's own words have no
# "@" or "<" of this kind: every message is made so whole, at its delivery.
ZWSP = "\u200b"
_AT_MENTION = re.compile(r"(?<![\w.+\-/])@(?=[\w*!&#])")
_ANGLE_MENTION = re.compile(r"<(?=[!@#]|users/)", re.IGNORECASE)


def no_mentions(text: str) -> str:
    """``text`` with every mention made plain text (see above): what any channel shows, and nobody is pinged."""
    return _ANGLE_MENTION.sub("<" + ZWSP, _AT_MENTION.sub("@" + ZWSP, text))


def _allow_no_mentions(plugin: Any) -> None:
    """Discord's webhook, told in the payload to ping nobody whatever the text holds (``allowed_mentions`` with an
    empty ``parse``: https://discord.com/developers/docs/resources/message#allowed-mentions-object). Apprise has no
    option for it: its payload is given the key at the one place it posts from (its ``_send``), checked by
    tests/unit/test_notify_mentions.py against the payload that reaches a loopback server."""
    send = getattr(plugin, "_send", None)
    if type(plugin).__name__ != "NotifyDiscord" or not callable(send):
        return

    def _send(payload: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(payload, dict):
            payload["allowed_mentions"] = {"parse": []}
        return send(payload, *args, **kwargs)

    plugin._send = _send


def shown_url(url: str, plugin: Any = None) -> str:
    """``ntfy://ntfy.example.org``: what may be shown of a notification URL. Only the scheme and the host; a host
    that is itself a secret (Telegram's bot token, Slack's tokens: Apprise masks those) or missing (ntfy.sh's
    topic-only form) is shown as ``…``. Never the user, password, path (a topic, a webhook's key) or query."""
    scheme = _scheme(url)
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


def _scheme(url: str) -> str:
    """A URL's scheme, lower case ("?" for none): all that is shown of it before Apprise has read it."""
    head = url.split("://", 1)[0].strip() if "://" in url else ""
    return head.lower() if _SCHEME.match(head) else "?"


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
    # The action links the body carries, as (button label, URL): a channel with buttons (ntfy) shows them as such.
    actions: tuple[tuple[str, str], ...] = ()
    # Told each channel's outcome (True: it took the message), from the channel's thread: see Notifier's on_told.
    settle: Callable[[bool], None] | None = field(default=None, compare=False)


class _Settled:
    """Calls ``done`` once: when one channel took the message, or when every channel it went to is done with it."""

    def __init__(self, done: Callable[[], None], channels: int) -> None:
        self._done = done
        self._left = channels
        self._lock = threading.Lock()
        self._called = False

    def __call__(self, ok: bool) -> None:
        with self._lock:
            self._left -= 1
            if self._called or not (ok or self._left <= 0):
                return
            self._called = True
        with contextlib.suppress(Exception):  # the run's side of it: never the channel thread's end
            self._done()


@dataclass(frozen=True)
class LinkSettings:
    """Where the notifications' action links point (``[serve] public_url``: serve's address as a phone reaches it,
    checked by console.settings.check_public_url) and how long each holds; the key that signs them is the operator's
    seal, in ``data_dir``."""

    public_url: str
    data_dir: Path
    ttl: timedelta = al.DEFAULT_TTL


def link_settings(settings: Settings) -> LinkSettings | None:
    """The operator's settings' links (None: no public URL configured, so no links). Read from the operator's own
    config and environment only: a job.toml has no [serve] (a job folder does not choose where links go)."""
    serve = settings.serve
    if not serve.public_url:
        return None
    return LinkSettings(serve.public_url, Path(settings.data_dir), timedelta(hours=serve.link_ttl_hours))


# What each action link offers, in the body and as a button (ntfy shows at most three).
LINK_WORDS: dict[str, tuple[str, str]] = {
    "approve": ("Approve", "approve the restart"),
    "deny": ("Deny", "deny it (the run ends; resumable)"),
    "resume": ("Resume", "resume the run"),
    "acknowledge": ("Acknowledge", "acknowledge its end (it asks no more)"),
}
# A fleet budget's hold is told once for every run it pauses: a resume link answers the run that told it, alone.
FLEET_RESUME_WORDS = ("Resume this run", "let this run alone go on past today's budget (the others stay paused)")
# A link's token in a URL (console.engine.action_links: two base64url parts joined by a dot): what an error line
# never shows. Found as runs of base64url characters and dots (one character class, so the search is linear on any
# text: two quantified classes side by side were quadratic on a long run of "-"), then judged in Python.
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_.-]+")


def unlinked(text: str) -> str:
    """``text`` with every action link's token cut out (a channel's failure may quote the message it was sent): a
    run with two dot-joined parts of 8 characters or more after ``/a/``, or of 40 or more anywhere."""
    def cut(m: re.Match[str]) -> str:
        run = m.group(0)
        need = 8 if text[max(0, m.start() - 3):m.start()] == "/a/" else 40
        parts = run.split(".")
        return "…" if any(len(a) >= need and len(b) >= need for a, b in itertools.pairwise(parts)) else run

    return _TOKEN_RUN.sub(cut, text)


def ntfy_actions(actions: Iterable[tuple[str, str]]) -> str:
    """ntfy's ``X-Actions`` header for the links (https://docs.ntfy.sh/publish/#action-buttons): each a ``view``
    action, which opens the link's page in the browser; never an ``http`` action, which would POST from the phone
    with no page shown (a link acts only by its page's button). Labels and URLs hold no "," or ";" (the public URL
    is checked for that)."""
    return "; ".join(f"view, {label}, {url}" for label, url in list(actions)[:3])


@dataclass
class _Need:
    """The need being told: what its reminders repeat, and when the next one is due."""

    reason: str
    since: datetime  # when the run started waiting (kept across a restart of its process)
    body: str
    times: int  # asked this many times in a row, each soon after an answer (1: a new need)
    first: datetime  # the first of those times
    paused: bool
    due: float | None = None  # the clock's monotonic time of the next reminder (None: none)
    reminders: int = 0
    ended: bool = False  # the run ended with it (a gave-up run): the operator's resume is its answer
    approved: int = 0  # a new request each time (a restart): how many of its kind the operator approved before
    answers: str = ""  # "Answer from a shell:" and its commands (the links go above them)
    # The action links it offers: (action, the request it answers, the links' nonce). Each message of the need
    # (its reminders) carries links with the same nonces and a later expiry: one answer in all, whichever is used.
    offers: tuple[tuple[str, str, str], ...] = ()


@dataclass
class _Channel:
    url: str
    plugin: Any  # Apprise's plugin; None: not a URL it sends to; _LATER: read by the first message's send
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
    the channel's answer) of each delivered message (what benchmarks/notify.py measures).

    ``remind``: the gaps (minutes) of the reminders of a need nobody answers (:data:`REMIND_MINUTES`; empty: none).
    A thread of the notifier looks at the run's clock (at most every :data:`REMIND_LOOK` s, and at once when a need
    comes or goes); :meth:`remind_due` is that look. ``look`` False: no thread looks, the caller does (a test that
    moves a fake clock: a thread's look would race its own).

    ``checked``: the URLs were checked already (:func:`check_urls`, before the run started). Apprise is then
    loaded by a channel's thread as it sends its first message, not now: loading it reads every plugin it has
    (with cryptography, requests, oauthlib), ~20 MB of a runner's memory and ~0.4 s of CPU, and most runs never
    need their operator (benchmarks/fleet_scale.py counts memory per run). A URL Apprise refuses after all (the
    config changed in between) is reported then, once, as a failing channel is."""

    def __init__(self, urls: Iterable[str], run_id: str, job: str, *, clock: Clock | None = None,
                 on_error: Callable[[str], None] | None = None, notify_on_end: bool = True,
                 remind: Iterable[float] | None = None, look: bool = True, folder: Path | str | None = None,
                 links: LinkSettings | None = None,
                 on_told: Callable[[ev.NeedsOperator], None] | None = None, checked: bool = False) -> None:
        self.run_id = run_id
        # Called (from a channel's thread) once a need's first message is done: a channel took it, or every one
        # refused it (said by on_error). The fleet budget's hold is marked told then (console.engine.guardrails.
        # fleet.Telling): a kill before leaves its telling to another run.
        self.on_told = on_told
        # Action links in the needs' messages (None: no public URL, no links); their key is read at the first one.
        self.links = links
        self._seal: Any = None
        self._pending_seq = 0  # the restart_pending event waiting (its seq), as the fleet's row says it
        self.folder = folder  # the run's folder: one deleted or moved away has nothing to resume
        self.job = safe_text(job, one_line=True, join=True, limit=120)
        self.clock = clock or SystemClock()
        self.on_error = on_error
        self.notify_on_end = notify_on_end
        self.remind = tuple(float(m) for m in (REMIND_MINUTES if remind is None else remind) if m > 0)
        self.sent: list[tuple[str, float]] = []
        self.channels: list[_Channel] = []
        self._lock = threading.Lock()
        self._closed = False
        self._ended = False
        self._crashed = False
        # The need being told, and the last answered one of each reason (when, how many times in a row, since
        # when): guarded by _state, which the reminder thread waits on. Taken before _lock, never inside it.
        self._state = threading.Condition()
        self._need: _Need | None = None
        self._answered: dict[str, tuple[datetime, int, datetime]] = {}
        # Of the needs that are a new request each time (a restart): how many the operator approved, the last when.
        self._approved: dict[str, tuple[int, datetime]] = {}
        self._carried: _Need | None = None  # a need the run's last process died waiting on (a kill, a reboot)
        self._timer: threading.Thread | None = None
        self._look = look
        for url in urls:
            url = url.strip()
            if checked and url:
                self.channels.append(_Channel(url, _LATER, f"{_scheme(url)}://…"))
                continue
            plugin = _instantiate(url) if url else None
            channel = _Channel(url, plugin, shown_url(url, plugin) if plugin is not None else shown_url(url, None))
            self.channels.append(channel)
            if plugin is None:  # check_urls() refuses these first; a caller that did not is told here, once
                self._failed(channel, "not a notification URL Apprise can send to")

    # -- the subscriber ------------------------------------------------------------------------
    def __call__(self, event: ev.EventBase) -> None:
        """Queue what ``event`` tells the operator's channels; returns at once (the engine's thread)."""
        message = self.message_for(event)
        if message is None:
            return
        if isinstance(event, ev.NeedsOperator) and self.on_told is not None:
            told = self.on_told
            message = dataclasses.replace(message, settle=_Settled(lambda: told(event), self._channels_up()))
        self._send(message)

    @property
    def tells(self) -> bool:
        """Whether any channel can be sent to (else a need's message is done at once: nobody to tell)."""
        return self._channels_up() > 0

    def _channels_up(self) -> int:
        return sum(1 for c in self.channels if c.plugin is not None)

    def prime(self, history: Iterable[ev.EventBase]) -> None:
        """Learn the run's earlier needs from its log (a resumed run, in a new process), sending nothing: a need
        its last process died waiting on keeps its "since", and one that comes back right after the operator's
        answer (a gave-up run resumed, giving up again) is told as "again"."""
        for e in history:
            self._follow(e)
        with self._state:
            if self._need is not None and not self._need.ended:
                # Killed while it waited: asked again by the new process (a need ended with its run stays: the
                # resume that starts the new process is its answer).
                self._carried, self._need = self._need, None

    def message_for(self, e: ev.EventBase) -> Message | None:
        if isinstance(e, ev.NeedsOperator) and not e.notify:
            return None  # told by another run (the fleet budget's hold is told once, for every run it pauses)
        now = self.clock.monotonic()
        need = self._follow(e, now)
        if isinstance(e, ev.NeedsOperator) and need is not None:
            self._crashed = e.reason == "crashed"
            if e.reason in ENDING:
                self._ended = True  # one message says both: the run ended, and it needs its operator
            return self._need_message(e, need, now)
        if isinstance(e, ev.SessionStarted) and e.reason in ("new", "resume"):
            self._ended = self._crashed = False
            return None
        if not self.notify_on_end or self._ended:
            return None
        if isinstance(e, ev.JobCompleted):
            self._ended = True
            if e.unmet:  # a free stop let it through: the agent's word, not the record's (the views say so too)
                left = "\n".join(f"- {_line(x, LINE_LIMIT)}" for x in e.unmet[:10])
                return Message(f"agent-console: run {self.run_id} ended (incomplete: job_complete with work left)",
                               _cut(f"{self.job}: {_line(e.summary, 300)}\n\nThe record shows work left:\n{left}"),
                               "warning", now)
            return Message(f"agent-console: run {self.run_id} completed",
                           f"{self.job}: {_line(e.summary, 300)}", "success", now)
        if isinstance(e, ev.RunEnded):
            self._ended = True
            if self._crashed:
                return None  # the crash was just told, with what to do
            from console.engine.enforcement.limits import spent_key  # the engine's words for a spent limit

            late = spent_key(e.detail) == "deadline"
            what = {"job_complete": "completed", "user_shutdown": "stopped",
                    "budget_exhausted": "out of time" if late else "out of budget",
                    }.get(e.reason, e.reason.replace("_", " "))
            detail = f": {_line(e.detail, 300)}" if e.detail else ""
            kind = "success" if e.reason in ("job_complete", "agent_stopped") else \
                "info" if e.reason in ("user_shutdown", "interrupted") else "failure"
            body = f"{self.job} (run {self.run_id}){detail}"
            if self._folder_gone(e):
                # `resume` would find nothing (exit 2): the run's work went with its folder.
                body += "\n\nNothing to resume: its folder was deleted or moved away."
            elif e.fix:  # a key to set, credit to add: then the same command goes on where it was
                body += f"\n\nGo on with: {_line(e.fix, 300)}, then agent-console resume {self.run_id}"
            elif e.outcome not in (None, "completed", "failed"):
                # Read on a phone, away from the terminal: what goes on with it, typed on the run's machine.
                # After a spent budget the same command would end it again at once: the limit is raised first, in
                # the run folder's own job.toml (the job folder's is not read again).
                first = (f"raise {'the deadline' if late else 'the budget'} in the run folder's job.toml, then "
                         if e.reason == "budget_exhausted" else "")
                body += f"\n\nGo on with: {first}agent-console resume {self.run_id}"
            return Message(f"agent-console: run {self.run_id} ended ({what})", body, kind, now)
        return None

    def _folder_gone(self, e: ev.RunEnded | None = None) -> bool:
        """The run's folder was deleted or moved away (its end says so, or it is not there now)."""
        from console.engine.run_end import folder_removed
        from console.engine.store import folder_gone

        return (e is not None and folder_removed(e)) or (self.folder is not None and folder_gone(self.folder))

    def died(self, how: str, when: datetime, log: Path | str, why: str = "") -> Message:
        """Tell the channels the run's process died without recording its end (``how``: "killed by SIGKILL"...;
        ``why``: what may have done it), at ``when``: a runner's watcher (console.watcher) calls it once, after the
        process is gone. Nothing else would tell them: a process killed by kill -9 or the out-of-memory killer
        says nothing."""
        rid = self.run_id
        now = self.clock.now()
        how = _line(how, 200)
        if self._folder_gone():
            body = (f"{self.job} (run {rid}) died at {_at(when, now)} ({how}); no process runs it, and its folder was "
                    "deleted or moved away: nothing to resume.")
            message = Message(f"agent-console: run {rid} died ({how})", _cut(body), "failure", self.clock.monotonic())
            self._send(message)
            return message
        links = self._mint(self._died_offers())
        body = "\n".join([
            f"{self.job} (run {rid}) died at {_at(when, now)} ({how}); no process runs it."
            + (f" {_line(why, 300)}" if why else ""),
            "", "Its last step is kept: what it did is recorded, and a resume does nothing twice.",
            "", *self._phone(links, LINK_WORDS), "Go on from a shell:",
            f"  agent-console resume {rid}   (the job goes on where it was)",
            f"  agent-console logs {rid}   (what it did)",
            "", f"Its log: {_line(str(log), 600)}"])
        message = Message(f"agent-console: run {rid} died ({how})", _cut(body), "failure", self.clock.monotonic(),
                          tuple((LINK_WORDS[a][0], url) for a, url in links))
        self._send(message)
        return message

    def _died_offers(self) -> tuple[tuple[str, str, str], ...]:
        """A died run's resume link: it answers the run as its log was left (console.view.answers: ``died:SEQ``,
        the log's last seq now, what serve's door reads there when the link is opened)."""
        if self.links is None or self.folder is None:
            return ()
        from console.engine.events.log import last_seq
        from console.engine.job_files import JobPaths
        from console.view.answers import request_for

        request = request_for("resume", died_seq=last_seq(JobPaths(Path(self.folder)).events))
        return (("resume", request, _nonce()),) if request is not None else ()

    # -- needs, answers, reminders -------------------------------------------------------------
    def _follow(self, e: ev.EventBase, now: float | None = None) -> _Need | None:
        """The state of the run's needs after ``e``; the need ``e`` asks, if it asks one. ``now``: the clock's
        monotonic time, for the reminders (None: learning from the log, nothing to remind)."""
        with self._state:
            need = self._need
            if isinstance(e, ev.NeedsOperator):
                carried, self._carried = self._carried, None
                last = self._answered.get(e.reason)
                if carried is not None and carried.reason == e.reason:
                    # The need its last process died waiting on, asked again: the same wait, not a new need.
                    times, first, since = carried.times, carried.first, carried.since
                elif need is not None and need.reason == e.reason and not need.ended:
                    times, first, since = need.times, need.first, need.since
                elif (last is not None and e.reason not in NEW_EACH_TIME
                      and 0 <= (e.ts - last[0]).total_seconds() <= AGAIN_WITHIN):
                    times, first, since = last[1] + 1, last[2], e.ts
                else:
                    times, first, since = 1, e.ts, e.ts
                approved = self._approved.get(e.reason)
                body, answers = self._need_body(e, since, approved)
                need = self._need = _Need(e.reason, since, body, times, first, e.paused,
                                          approved=approved[0] if approved is not None else 0, answers=answers,
                                          offers=self._offers(e) if now is not None else ())
                if now is not None and self.remind and e.reason not in ENDING:
                    need.due = now + self.remind[0] * 60
                    self._start_timer()
                self._state.notify_all()
                return need
            if isinstance(e, ev.RestartPending):
                self._pending_seq = e.seq
            elif isinstance(e, ev.RestartApproved | ev.RestartDenied):
                self._pending_seq = 0
            if isinstance(e, ev.NeedsOperatorCleared):
                if need is not None and need.reason == e.reason:
                    if _lets_it_go_on(e.by):
                        self._answered[e.reason] = (e.ts, need.times, need.first)
                        # (a question counts as answered when the operator did, not when its time ran out)
                        if e.reason in NEW_EACH_TIME and (e.reason != "mcp_question" or e.by.startswith("operator")):
                            self._approved[e.reason] = (self._approved.get(e.reason, (0, e.ts))[0] + 1, e.ts)
                    else:
                        # A stop or a denial is no attempt at a fix: the need a later resume meets is not "again".
                        self._answered.pop(e.reason, None)
                    self._need = None
                    self._state.notify_all()
            elif isinstance(e, ev.TurnStarted):
                self._carried = None  # the resumed run went on without asking it again: it was answered
            elif isinstance(e, ev.RunEnded):
                self._carried = None  # the process that could have asked it again ended without
                if need is not None:
                    need.due = None  # no process waits on it any more: nothing to remind
                    # A signal's end (interrupted) answered nothing: the next process asks again, the same wait.
                    need.ended = e.reason != "interrupted"
            elif isinstance(e, ev.SessionStarted) and e.reason in ("new", "resume"):
                self._pending_seq = 0  # as the fleet's fold: a new process asks anew
            if isinstance(e, ev.SessionStarted) and e.reason in ("new", "resume") and need is not None:
                if need.ended:
                    # The run had ended needing its operator, who resumed it: that was the answer.
                    self._answered[need.reason] = (e.ts, need.times, need.first)
                else:
                    self._carried = need  # its process was killed while it waited: the new one asks again
                self._need = None
            return None

    def _need_message(self, e: ev.NeedsOperator, need: _Need, now: float) -> Message:
        # A need back right after its answer (the answer did not fix it) is more urgent, and its title (what a
        # phone shows) says so.
        # A new request each time (a restart) is never "again"; once the operator approved one, the next is
        # information: they chose to be asked at each one, and a long run must not page them urgently each time.
        again = need.times > 1
        kind = "failure" if e.reason == "crashed" or again else "info" if need.approved else "warning"
        count = f", {need.times} times since {_at(need.first, e.ts)}" if again else ""
        if e.reason == "gave_up":
            title = f"agent-console: run {self.run_id} ended (gave up{' again' if again else ''}) and needs you{count}"
        else:
            before = f"; {need.approved} {ANSWERED_AS.get(e.reason, 'answered')} before" if need.approved else ""
            title = (f"agent-console: run {self.run_id} needs you{' again' if again else ''} ({label(e.reason)}"
                     f"{before}){count}")
        body, actions = self._compose(need)
        return Message(title, body, kind, now, actions)

    def remind_due(self) -> Message | None:
        """A reminder of the need nobody answered, sent now if one is due (at most one, whatever time passed: a
        machine back from sleep does not send the ones it slept through); the next is due one more gap later."""
        with self._state:
            need = self._need
            now = self.clock.monotonic()
            if need is None or need.due is None or now < need.due or self._closed:
                return None
            need.reminders += 1
            gaps = self.remind
            need.due = now + gaps[min(need.reminders, len(gaps) - 1)] * 60
            wall = self.clock.now()
            waited = _span((wall - need.since).total_seconds())
            title = (f"agent-console: run {self.run_id} still needs you ({label(need.reason)}): reminder "
                     f"{need.reminders}, waiting {waited}")
            head = (f"Reminder {need.reminders}: run {self.run_id} has waited for you since "
                    f"{_at(need.since, wall)} ({waited}); nothing answered it yet.")
            if need.times > 1:
                head += f" Asked {need.times} times since {_at(need.first, wall)}."
            body, actions = self._compose(need, head)
            # Urgent from the second reminder on (or for a need that came back): an hour and more of waiting.
            message = Message(title, body, "failure" if need.reminders > 1 or need.times > 1 else "warning", now,
                              actions)
            self._send(message)  # under _state: an answer that clears the need comes before or after, not between
        return message

    def _start_timer(self) -> None:
        """The reminders' thread (a daemon; started with the first need that may be reminded). Under _state."""
        if self._look and self._timer is None and any(c.plugin is not None for c in self.channels):
            self._timer = threading.Thread(target=self._remind_loop, daemon=True, name="notify reminders")
            self._timer.start()

    def _remind_loop(self) -> None:
        while True:
            with self._state:
                if self._closed:
                    return
                need = self._need
                left = None if need is None or need.due is None else need.due - self.clock.monotonic()
                if left is None or left > 0:
                    # A real wait (the run's clock may be a test's), bounded: the clock is looked at again soon.
                    self._state.wait(REMIND_LOOK if left is None else min(REMIND_LOOK, left))
                    continue
            self.remind_due()

    def _need_body(self, e: ev.NeedsOperator, since: datetime,
                   approved: tuple[int, datetime] | None = None) -> tuple[str, str]:
        """The need's message (what it is, its evidence, since when) and the commands that answer it."""
        rid = self.run_id
        lines = [f"{self.job} (run {rid}): {_line(e.message, 600)}"]
        if approved is not None:  # a new request each time: the earlier ones were answered, this one is new
            lines += ["", f"A new request: {approved[0]} earlier one{'s' if approved[0] > 1 else ''} of this run "
                          f"{ANSWERED_AS.get(e.reason, 'answered')}, the last at {_at(approved[1], e.ts)}."]
        if e.evidence:
            # A question's fields are its evidence, up to 16: each is cut shorter then, so that every one is named
            # within the body's bound (cut at its end, the fields past the eighth were left out).
            limit = LINE_LIMIT if len(e.evidence) <= 8 else max(60, EVIDENCE_ROOM // len(e.evidence))
            lines += ["", "Evidence:", *(f"- {_line(x, limit)}" for x in e.evidence)]
        state = "; the run is paused" if e.paused else "; the run has ended, no process runs it" \
            if e.reason in ENDING else ""
        lines += ["", f"Since {since.astimezone():%Y-%m-%d %H:%M:%S %Z}" + state]
        if e.reason == "restart_approval":
            answers = [f"agent-console approve {rid}", f"agent-console deny {rid}   (the run ends; resumable)",
                       f"agent-console attach {rid}"]
        elif e.reason == "fleet_budget":
            # Told once for every run the hold pauses: the answers are the fleet's, then this run's alone.
            # A job's hold is answered by that job's limit (`--job NAME`): the fleet's raise lifts nothing of it.
            job = job_flag(scope_of(e.evidence))
            answers = [f"agent-console budget{job}   (today's spend, the limits, the runs held)",
                       f"agent-console budget{job} --raise USD   (every paused run goes on)",
                       f"agent-console resume {rid}   (this run alone, today)"]
        elif e.reason == "mcp_question":
            # The call waits for the answer (its question's time, then it is cancelled); the fields are the evidence.
            answers = [f"agent-console answer {rid} --set NAME=VALUE   (one --set for each field)",
                       f"agent-console answer {rid} --decline   (or --cancel)",
                       f"agent-console attach {rid}"]
            if self.links is not None:  # serve's run page has the question's form (a session of serve's, no link)
                lines += ["", f"Or answer on its page: {self.links.public_url}/run/{rid}#answer (in a browser "
                              "logged in to agent-console serve)"]
        elif e.reason in ENDING:
            # No process runs it any more: `stop` and `attach`'s keys have nothing to act on. It goes on with a
            # resume (a new process), and its story is read with `logs`.
            answers = [f"agent-console resume {rid}   (once the cause is fixed; the job goes on where it was)",
                       f"agent-console logs {rid}   (what it did and why)"]
        else:
            answers = [f"agent-console resume {rid}", f"agent-console stop {rid}", f"agent-console attach {rid}"]
        return "\n".join(lines), "\n".join(["Answer from a shell:", *(f"  {a}" for a in answers)])

    def _offers(self, e: ev.NeedsOperator) -> tuple[tuple[str, str, str], ...]:
        """The action links ``e`` gets (none without a public URL): approve and deny for a restart (the request:
        the restart_pending event that waits, as the fleet's row names it), resume for a paused run (a stop, an
        outage: the needs_operator event), acknowledge and resume for a run whose agent gave up. A crash asks
        with no link: its end clears the need it names, so no request would be left for a link to answer."""
        from console.view.answers import request_for

        if self.links is None:
            return ()
        if e.reason == "restart_approval":
            actions: tuple[str, ...] = ("approve", "deny")
        elif e.reason == "gave_up":
            actions = ("resume", "acknowledge")
        elif e.reason not in ENDING and e.paused:
            actions = ("resume",)
        else:
            return ()
        out = []
        for action in actions:
            request = request_for(action, pending_seq=self._pending_seq, needs_seq=e.seq)
            if request is not None:
                out.append((action, request, _nonce()))
        return tuple(out)

    def _compose(self, need: _Need, head: str = "") -> tuple[str, tuple[tuple[str, str], ...]]:
        """The need's body as sent now: ``head`` (a reminder's first line), its message, its action links (each
        minted now: the same nonce as every message of this need, an expiry from now) above the shell's commands;
        and the links as buttons. The message is cut, never the links or the commands."""
        links = self._mint(need.offers)
        words = {**LINK_WORDS, "resume": FLEET_RESUME_WORDS} if need.reason == "fleet_budget" else LINK_WORDS
        lines = self._phone(links, words)
        tail = "\n".join([*lines, need.answers]) if need.answers else "\n".join(lines)
        text = f"{head}\n\n{need.body}" if head else need.body
        room = BODY_LIMIT - len(tail) - 2
        if len(text) > room:
            text = text[: max(0, room - 1)] + "…"
        body = f"{text}\n\n{tail}" if tail else text
        return body, tuple((words[a][0], url) for a, url in links)

    def _phone(self, links: list[tuple[str, str]], words: dict[str, tuple[str, str]]) -> list[str]:
        """The lines of the action links (above the shell's commands, a blank line after them); none for none."""
        if not links:
            return []
        ttl = self.links.ttl if self.links is not None else al.DEFAULT_TTL
        wall = self.clock.now()
        until = _at(wall + min(ttl, al.MAX_TTL), wall)
        return [f"Answer from your phone (each link works once, until {until}):",
                *(f"  {words[a][1][0].upper()}{words[a][1][1:]}: {url}" for a, url in links), ""]

    def _mint(self, offers: Iterable[tuple[str, str, str]]) -> list[tuple[str, str]]:
        """(action, URL) of each offer, signed now under the operator's seal for this run's folder; none when the
        key cannot be read (said once: the messages go on, with the shell's commands)."""
        settings = self.links
        offers = list(offers)
        if settings is None or not offers or self.folder is None:
            return []
        try:
            if self._seal is None:
                from console.engine.seal import Seal

                self._seal = Seal.of(settings.data_dir)
            now = self.clock.now()
            return [(action, f"{settings.public_url}/a/" + al.mint(
                self._seal, self.folder, self.run_id, cast(al.Action, action), request=request, now=now,
                ttl=settings.ttl, nonce=nonce)) for action, request, nonce in offers]
        except (OSError, ValueError) as exc:
            self.links = None
            if self.on_error is not None:
                with contextlib.suppress(Exception):
                    self.on_error(f"the notifications carry no action links: {_line(str(exc), 200)}; answer from "
                                  "a shell (each message names the commands)")
            return []

    # -- sending -------------------------------------------------------------------------------
    def _send(self, message: Message) -> None:
        settle = message.settle
        with self._lock:
            if self._closed:
                return
            if settle is not None and not self._channels_up():
                settle(False)  # nobody to tell: done at once
            for channel in self.channels:
                if channel.plugin is None:
                    continue
                try:
                    channel.queue.put_nowait(message)
                except queue.Full:
                    channel.dropped += 1
                    if settle is not None:
                        settle(False)
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
            if channel.plugin is _LATER:
                self._load(channel)
            ok = False
            if channel.plugin is not None:  # else refused by Apprise: said once by _load, and nothing is sent
                ok, why = self._deliver(channel, message)
                if ok:
                    self.sent.append((channel.shown, self.clock.monotonic() - message.ts))
                else:
                    self._failed(channel, why)
            if message.settle is not None:
                message.settle(ok)

    def _load(self, channel: _Channel) -> None:
        """Apprise's plugin for a channel whose URL was checked before (``checked``), read as it first sends."""
        plugin = _instantiate(channel.url)
        if plugin is None:
            channel.plugin = None  # what follows for it is not queued (_send)
            self._failed(channel, "not a notification URL Apprise can send to")
            return
        channel.shown = shown_url(channel.url, plugin)  # before the plugin: whoever sees it sees the name too
        channel.plugin = plugin

    def _deliver(self, channel: _Channel, message: Message) -> tuple[bool, str]:
        ident = threading.get_ident()
        with _log_lock:
            _last_warning.pop(ident, None)
        try:
            from apprise import NotifyFormat, NotifyType

            # The body quotes the agent (a summary, a phase name, a refusal): it is plain text, and Apprise is told
            # so. Without a format it passes the body as it is to a channel that reads HTML (email, Telegram,
            # ``?format=html``) or Markdown (Slack, Discord, ``?format=markdown``), where an agent's
            # ``<a href=...>`` or ``[Approve](https://...)`` would be a link on the operator's phone; with it,
            # Apprise escapes the text for the channel's format.
            plugin = _with_buttons(channel, message.actions)
            ok = bool(plugin.notify(body=no_mentions(message.body), title=no_mentions(message.title),
                                    notify_type=NotifyType(message.kind), body_format=NotifyFormat.TEXT))
        except Exception as exc:
            ok, why = False, f"{type(exc).__name__}: {exc}"
        else:
            why = ""
        with _log_lock:
            said = _last_warning.pop(ident, "")
        if ok:
            return True, ""
        # A failure's words may quote the message (Apprise's ntfy plugin quotes its payload on an I/O error): the
        # links' tokens, each a credential for one answer, are cut out before anything else looks at the line.
        return False, redact(unlinked(why or said or "the channel did not accept the message"), channel.url,
                             channel.shown)

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
        with self._state:
            self._closed = True
            self._state.notify_all()  # the reminders' thread ends
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


def _nonce() -> str:
    import secrets

    return secrets.token_urlsafe(16)


def _with_buttons(channel: _Channel, actions: tuple[tuple[str, str], ...]) -> Any:
    """The plugin that sends a message with ``actions``: for ntfy, an instance of its plugin made from the
    channel's URL with the message's buttons (Apprise's ntfy plugin takes them as its ``actions`` argument, sent as
    the ``X-Actions`` header); for every other channel, its own plugin (the links are in the text)."""
    plugin = channel.plugin
    if not actions or type(plugin).__name__ != "NotifyNtfy":
        return plugin
    kind = type(plugin)
    args = kind.parse_url(channel.url)
    if not args:
        return plugin
    args["actions"] = ntfy_actions(actions)
    with_buttons = kind(**args)
    with_buttons.request_rate_per_sec = plugin.request_rate_per_sec
    return with_buttons


def _line(text: str, limit: int) -> str:
    return safe_text(str(text), one_line=True, join=True, limit=limit)


def _lets_it_go_on(by: str) -> bool:
    """Whether the answer that cleared a need let the run go on (a resume, an approval), not end it (a stop, a
    denied restart): ``by`` is console.engine.needs.answered's."""
    return "stop" not in by and "denied" not in by


def _cut(body: str) -> str:
    return body if len(body) <= BODY_LIMIT else body[: BODY_LIMIT - 1] + "…"


def _at(when: datetime, now: datetime) -> str:
    """A moment as the operator's phone should show it: the time, with the date when it is not today's."""
    local = when.astimezone()
    return f"{local:%H:%M}" if local.date() == now.astimezone().date() else f"{local:%Y-%m-%d %H:%M}"


def _span(seconds: float) -> str:
    """``1 h 15 min``, ``40 min``, ``2 d 3 h``; ``30 s`` under a minute (a reminder may come that soon:
    remind_minutes down to 0.5)."""
    if seconds < 60:
        return f"{max(0, int(seconds))} s"
    minutes = int(seconds // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    return f"{hours} h {mins} min" if hours else f"{mins} min"


def history(path: Path) -> list[ev.EventBase]:
    """The events of a run's log that :meth:`Notifier.prime` learns from (needs, answers, starts, ends). The other
    lines are skipped unparsed: a log of 100,000 events is read in a fraction of a second."""
    wanted = ('"type":"needs_operator', '"type":"session_started"', '"type":"run_ended"')
    out: list[ev.EventBase] = []
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if any(w in line for w in wanted):
                    with contextlib.suppress(ValueError):
                        out.append(ev.parse_event(line))
    except OSError:
        return []
    return out
