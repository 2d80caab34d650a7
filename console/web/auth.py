"""Who may use `serve`: a one-time login link, then a session cookie; a CSRF token per session; a bounded rate of
failed attempts per client.

Designed as Jupyter's token login and the OWASP session and CSRF cheat sheets describe: the login link's token is
random (256 bits), used once and only to set the session; the session id is another random value that never appears
in a URL, kept in an HttpOnly, SameSite=Strict cookie (Secure when served over TLS); every action is a POST that
carries the session's CSRF token, compared in constant time. Failures are counted per client address in a sliding
window, and past the limit the client gets 429 without the tokens it offers (a login link's, an action link's) being
looked at, so a guesser learns nothing more. A live session's cookie is still honoured then (the web server looks
at it first): behind a reverse proxy or a tunnel every client has the proxy's address, and a stranger's bad tokens
must not lock the logged-in operator out; a session id never travels in a URL, and its 256 random bits are beyond
guessing at any rate. Sessions live in the server's memory: a restarted `serve` prints a new login link.

Plain Python (the clock and the randomness injected): the web server asks it and does what it says.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

COOKIE = "agent_console_session"
TOKEN_BYTES = 32
SESSION_IDLE = 12 * 3600.0  # seconds without a request before a session ends
SESSION_MAX = 7 * 86400.0  # and the longest one lasts, however busy
MAX_SESSIONS = 64  # the oldest goes first past this (a login link is one person's; 64 is many devices)
FAIL_WINDOW = 60.0  # seconds
FAIL_LIMIT = 10  # failed attempts per client address per window
MAX_CLIENTS = 4096  # addresses remembered for the limit (the least recent forgotten first)


@dataclass
class Session:
    """One logged-in browser."""

    id: str
    csrf: str
    client: str  # the address it logged in from (said in events, never trusted for anything)
    created: float
    seen: float
    via: str  # "login" or the id of the link it came with

    @property
    def label(self) -> str:
        """The session as events name it (a digest of its id: the id itself is a credential)."""
        return hashlib.sha256(self.id.encode()).hexdigest()[:8]


@dataclass
class Failures:
    times: list[float] = field(default_factory=list)


class Auth:
    """The server's one authority on who is logged in (see the module)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic,
                 token: Callable[[int], str] = secrets.token_urlsafe) -> None:
        self.clock = clock
        self._token = token
        self._login: str | None = token(TOKEN_BYTES)
        self.sessions: OrderedDict[str, Session] = OrderedDict()
        self.failures: OrderedDict[str, Failures] = OrderedDict()

    # -- logging in -----------------------------------------------------------------------------------------
    def login_token(self) -> str | None:
        """The one-time token of the login link (None once it was used): the only secret `serve` prints."""
        return self._login

    def new_login(self) -> str:
        """Another one-time login token (the one printed before no longer works)."""
        self._login = self._token(TOKEN_BYTES)
        return self._login

    def log_in(self, offered: str, client: str) -> Session | None:
        """A new session for the login token ``offered``, which is then used up; None (a failure counted) when it
        is not the token."""
        if self._login is None or not isinstance(offered, str) or not hmac.compare_digest(
                offered.encode(), self._login.encode()):
            self.failed(client)
            return None
        self._login = None
        return self._open(client, via="login")

    def _open(self, client: str, via: str) -> Session:
        now = self.clock()
        session = Session(id=self._token(TOKEN_BYTES), csrf=self._token(TOKEN_BYTES), client=client[:80],
                          created=now, seen=now, via=via)
        self.sessions[session.id] = session
        while len(self.sessions) > MAX_SESSIONS:
            self.sessions.popitem(last=False)
        return session

    # -- each request ---------------------------------------------------------------------------------------
    def session(self, cookie: str | None) -> Session | None:
        """The live session of the cookie's value (its idle time restarted), or None."""
        if not cookie or len(cookie) > 128:
            return None
        found = self.sessions.get(cookie)
        if found is None:
            return None
        now = self.clock()
        if now - found.seen > SESSION_IDLE or now - found.created > SESSION_MAX:
            del self.sessions[cookie]
            return None
        found.seen = now
        self.sessions.move_to_end(cookie)
        return found

    def csrf_ok(self, session: Session, offered: str | None) -> bool:
        return isinstance(offered, str) and hmac.compare_digest(offered.encode(), session.csrf.encode())

    def log_out(self, session: Session) -> None:
        self.sessions.pop(session.id, None)

    # -- failures -------------------------------------------------------------------------------------------
    def limited(self, client: str) -> bool:
        """Whether ``client`` has failed too often lately: it is answered 429 and no token it offers is checked (a
        live session's cookie still is: console.web.server's gate)."""
        entry = self.failures.get(client)
        if entry is None:
            return False
        cutoff = self.clock() - FAIL_WINDOW
        entry.times = [t for t in entry.times if t > cutoff]
        if not entry.times:
            del self.failures[client]
            return False
        return len(entry.times) >= FAIL_LIMIT

    def failed(self, client: str) -> None:
        entry = self.failures.setdefault(client, Failures())
        self.failures.move_to_end(client)
        entry.times.append(self.clock())
        del entry.times[:-FAIL_LIMIT]
        while len(self.failures) > MAX_CLIENTS:
            self.failures.popitem(last=False)

    def retry_after(self, client: str) -> int:
        """Seconds until ``client`` may try again (for the 429's Retry-After)."""
        entry = self.failures.get(client)
        if entry is None or not entry.times:
            return 0
        return max(1, int(entry.times[0] + FAIL_WINDOW - self.clock()) + 1)
