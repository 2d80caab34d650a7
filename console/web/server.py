"""serve's web application (aiohttp, the server textual-serve is built on, so the browser console and the pages are
one server): the routes, the login, the security headers, and the fleet's list kept live for every page.

Every response carries headers that make a page inert outside this server: no inline script or style from
anywhere (Content-Security-Policy), never framed, never sniffed, never cached, no Referer to another site (a link's
token must not leak). Every route but the login, the static files and the action links needs a session
(console.web.auth); a client that has failed too often gets 429 before any token it sends is looked at (a browser
with a live session is never refused by that limit: behind a proxy every client has the proxy's address).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import hmac
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Protocol
from urllib.parse import urlsplit

from aiohttp import web

from console.engine.commands import Answer, AnyCommand, CommandError, Rewind
from console.view.answers import current_request
from console.view.fleet import FleetRow, Listed
from console.view.fleet_offers import applies, refusal
from console.view.run_snapshot import RunSnapshot
from console.web import pages
from console.web.auth import COOKIE, Auth, Session
from console.web.link_door import LinkDoor

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Act(Protocol):
    """How an action reaches a run (console.web.acting.Acting): ``action`` on ``row`` as the command ``command_id``
    (None: a new one), named by ``source``; ``command`` the one built from the operator's text (a rewind's). Why it
    was not done, or None."""

    def __call__(self, row: FleetRow, action: str, command_id: str | None, source: str,
                 command: AnyCommand | None = None) -> str | None: ...


POLL_SECONDS = 1.0  # how often the fleet is read for the live pages (the console's fleet reads as often)
# How soon the fleet is read again while its logs are not all folded yet (a poll folds a slice of them: serve just
# started on a fleet of a few hundred runs, say): at once, not a poll a second (benchmarks/serve.py: every run of
# 200 with its last event 5.9 s after serve's exec, at one read a second).
CATCH_UP_SECONDS = 0.05
KEEP_ALIVE_SECONDS = 15.0  # the longest a live page's stream is silent
HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                                "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # same-origin, not no-referrer: a link's token never reaches another site, and the browser still names this
    # server as the Origin of its own forms' POSTs (under no-referrer Chromium sends "Origin: null", which the
    # origin check refuses: every action from a page was refused).
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
}
SESSION_KEY = web.RequestKey("session", Session)
# A form's own id in a drawing (pages.new_once: new each drawing): what two drawings of the same page differ by.
ONCE_FIELD = re.compile(r'name="once" value="[^"]*"')
CONSOLE = "/console/"
# textual-serve's page draws the terminal with inline script and styles of its own: its pages alone may run them
# (still only from this server, never framed, no referrer to another site).
CONSOLE_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
               "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
               "base-uri 'none'; form-action 'none'")


def browser_console(command: str, public_url: str) -> web.Application:
    """textual-serve's routes (its page, its websocket, its static files and downloads) as an application to mount
    under :data:`CONSOLE`, built from its public handlers rather than its ``serve()`` (which runs its own server
    and prints a banner): the parent's middleware (the session, the headers) then covers every one of them."""
    import aiohttp_jinja2
    import jinja2
    from textual_serve.server import Server

    # Its URLs are the public URL and the route's path, which in a mounted application carries /console/ already.
    public = public_url.rstrip("/")
    server = Server(command, title="agent-console", public_url=public)
    public_host = urlsplit(public).netloc

    async def index(request: web.Request) -> web.StreamResponse:
        # The page names its script's and websocket's address in full: the public URL's when the browser came by it
        # (behind a TLS proxy, its https), else the address the browser used (a tunnel on another port,
        # localhost for 127.0.0.1), which is the only one the page's policy lets it reach ('self'): named the public
        # URL's there, the console drew nothing. Set and read with no await between (one event loop).
        server.public_url = public if request.host == public_host else f"{request.scheme}://{request.host}"
        response: web.StreamResponse = await server.handle_index(request)
        return response

    sub = web.Application()
    aiohttp_jinja2.setup(sub, loader=jinja2.FileSystemLoader(server.templates_path), autoescape=True)
    sub.add_routes([
        web.get("/", index, name="index"),
        web.get("/ws", server.handle_websocket, name="websocket"),
        web.get("/download/{key}", server.handle_download, name="download"),
        web.static("/static", server.statics_path, name="static"),
    ])
    return sub


@dataclass
class FleetFeed:
    """The fleet's rows, read in a worker thread every :data:`POLL_SECONDS` and handed to every live page: one read
    of the store however many pages are open."""

    read: Callable[[], tuple[list[FleetRow], str]]
    # One run's snapshot by its id (None: no such run), read on the same thread as the fleet.
    look: Callable[[str], RunSnapshot | None] = lambda rid: None
    rows: list[FleetRow] = field(default_factory=list)
    error: str = ""
    version: int = 0
    folded: bool = True  # whether the last read folded every run's log (a Listed says; a plain list: yes)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    # One thread reads the fleet, always the same (a Fleet is read from one thread: its store's connection).
    reader: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1, "fleet-feed"))

    async def ready(self) -> None:
        """Read the fleet now if it was never read (a page asked before the first reading: "no run" would be
        untrue)."""
        if not self.version:
            await self.refresh()

    async def refresh(self) -> None:
        rows, error = await asyncio.get_running_loop().run_in_executor(self.reader, self.read)
        # A Listed says whether every run's log was folded (a plain list: a test's rows, all there is); a store
        # that fails is read again a poll later.
        self.folded = (rows.folded if isinstance(rows, Listed) else True) or bool(error)
        if rows != self.rows or error != self.error or not self.version:
            self.rows, self.error = rows, error
            self.version += 1
            self.changed.set()
            self.changed = asyncio.Event()

    async def snapshot(self, rid: str) -> RunSnapshot | None:
        return await asyncio.get_running_loop().run_in_executor(self.reader, self.look, rid)

    async def run(self, every: float = POLL_SECONDS) -> None:
        while True:
            try:
                await self.refresh()
            except Exception as exc:  # said on every page (the rows kept as they were), and read again next time
                error = f"the fleet cannot be read now: {type(exc).__name__}: {exc}"
                if error != self.error:
                    self.error = error
                    self.version += 1
                    self.changed.set()
                    self.changed = asyncio.Event()
                self.folded = True
            await asyncio.sleep(every if self.folded else min(every, CATCH_UP_SECONDS))


def client_of(request: web.Request) -> str:
    """The peer's address (a reverse proxy's own: serve believes no X-Forwarded-For it cannot check)."""
    return request.remote or "unknown"


class WebApp:
    """The application: routes over an :class:`Auth` and a :class:`FleetFeed`."""

    def __init__(self, auth: Auth, feed: FleetFeed, *, secure: bool = False, poll: float = POLL_SECONDS,
                 links: LinkDoor | None = None, act: Act | None = None) -> None:
        self.auth = auth
        self.feed = feed
        self.links = links  # the action links' door (None: links are not answered here)
        self.public_url = ""
        self.acting = act  # how an action reaches a run (None: the pages offer none)
        self.secure = secure  # served over TLS: the cookie is Secure
        self.poll = poll
        # Keys the ids of the commands a run's page sends (send_typed): an id that depends on what was typed, yet
        # tells nothing of it to whoever reads the run's log (the sessions it serves end with this process too).
        self._command_key = secrets.token_bytes(32)
        self.closing = False  # serve is stopping: every live page's stream ends

    def build(self, console: str | None = None, public_url: str = "") -> web.Application:
        """The application; with ``console`` (the command of the Textual console to serve), the browser console
        under /console/ (textual-serve: the console runs as a process per browser tab, its screen streamed over a
        websocket), behind the same session."""
        app = web.Application(middlewares=[self.headers, self.gate], client_max_size=64 * 1024)
        app.add_routes([
            web.get("/login", self.login),
            web.get("/", self.fleet),
            web.post("/run/{id}/act", self.act),
            web.get("/live/fleet", self.live_fleet),
            web.get("/run/{id}", self.run_page),
            web.get("/live/run/{id}", self.live_run),
            web.get("/static/{name}", self.static),
        ])
        if self.links is not None:
            app.add_routes(self.links.routes())
        self.public_url = public_url
        if console is not None:
            app.add_subapp(CONSOLE, browser_console(console, public_url))
        else:
            app.add_routes([web.get(CONSOLE, self.no_console)])
        app.cleanup_ctx.append(self._polling)
        app.on_shutdown.append(self._closing)
        return app

    async def _closing(self, app: web.Application) -> None:
        # Ctrl+C or SIGTERM: aiohttp waits for every request's handler before it stops, and a live page's stream
        # never ends by itself (serve stayed up as long as a phone kept its page open: 120 s for a page held 120 s).
        # Each stream is woken, and ends.
        self.closing = True
        self.feed.changed.set()

    async def _polling(self, app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(self.feed.run(self.poll))
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        self.feed.reader.shutdown(wait=True, cancel_futures=True)

    # -- middleware -----------------------------------------------------------------------------------------
    @web.middleware
    async def headers(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as exc:  # a redirect, a 404: raised, with the same headers
            for name, value in HEADERS.items():
                exc.headers.setdefault(name, value)
            raise
        if request.path.startswith(CONSOLE):
            response.headers.setdefault("Content-Security-Policy", CONSOLE_CSP)
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    @web.middleware
    async def gate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        client = client_of(request)
        # A live session's cookie is looked at first: the limit counts failures per address, and behind the proxy,
        # tunnel or `tailscale serve` docs/serve.md recommends every browser has the same one (the proxy's), so ten
        # bad tokens a minute from anyone kept the logged-in operator out. The limit is there against guessing the
        # tokens of the URLs (the login link's, an action link's), and those stay unchecked while it holds; a
        # session id is never in a URL, and its 256 random bits are no guess at any rate serve answers.
        session = self.auth.session(request.cookies.get(COOKIE))
        if session is None and self.auth.limited(client):
            return web.Response(status=429, text="too many failed attempts; try again later\n",
                                headers={"Retry-After": str(self.auth.retry_after(client))})
        if not self.same_origin(request):
            return self.page("Refused", "This request came from another site's page.", 403)
        if request.path == "/login" or request.path.startswith(("/static/", "/a/")):  # a link is its own credential
            return await handler(request)
        if session is None:
            if request.cookies.get(COOKIE):
                self.auth.failed(client)
            return self.page("Log in first", "Open the login link `agent-console serve` printed (each link works "
                             "once; restart serve for a new one).", 401)
        request[SESSION_KEY] = session
        return await handler(request)

    def same_origin(self, request: web.Request) -> bool:
        """Whether a request that acts (a POST, a websocket) came from this server's own pages: its Origin, when the
        browser sends one, is this server's (the public URL's, or the address it was reached at). Defence in depth
        beside the SameSite=Strict cookie and the CSRF token, which is the check: a request with no Origin is let
        through to it (browsers name one on every POST and websocket; a script such as curl names none, and an
        older browser's same-origin form post did not, so requiring it would refuse the operator, not a page of
        another site) - docs/security.md says so."""
        acting = request.method not in ("GET", "HEAD") or request.headers.get("Upgrade", "").lower() == "websocket"
        origin = request.headers.get("Origin")
        if not acting or origin is None:
            return True
        mine = {f"{request.scheme}://{request.host}"}
        if self.public_url:
            parts = urlsplit(self.public_url)
            mine.add(f"{parts.scheme}://{parts.netloc}")
        return origin in mine

    # -- pages ----------------------------------------------------------------------------------------------
    def page(self, title: str, line: str, status: int = 200) -> web.Response:
        return web.Response(status=status, text=pages.message_page(title, line, status), content_type="text/html")

    async def no_console(self, request: web.Request) -> web.StreamResponse:
        return self.page("No console here", "This serve was started with --no-console: the pages are all it serves "
                         "(restart it without --no-console for the full console).", 404)

    async def login(self, request: web.Request) -> web.StreamResponse:
        session = self.auth.log_in(request.query.get("token", ""), client_of(request))
        if session is None:
            return self.page("This login link does not work", "It was used already, or serve was restarted since "
                             "it was printed: use the newest link `agent-console serve` printed.", 401)
        response = web.HTTPSeeOther("/")  # the token leaves the address bar at once
        response.set_cookie(COOKIE, session.id, httponly=True, samesite="Strict", secure=self.secure, path="/")
        raise response

    async def fleet(self, request: web.Request) -> web.StreamResponse:
        session = request[SESSION_KEY]
        await self.feed.ready()
        return web.Response(text=pages.fleet_page(self.feed.rows, session.csrf, self.feed.error),
                            content_type="text/html")

    async def act(self, request: web.Request) -> web.StreamResponse:
        """A run's action from its form: the session's CSRF token, an action that applies to the run now (as the
        console's keys decide), and for one that ends or starts a run, a confirmation first."""
        session = request[SESSION_KEY]
        form = await request.post()
        token = form.get("csrf")
        if not self.auth.csrf_ok(session, token if isinstance(token, str) else None):
            return self.page("Refused", "This form is not one of this session's pages: reload the page and try "
                             "again.", 403)
        action = form.get("action")
        rid = request.match_info["id"]
        row = next((r for r in self.feed.rows if r.id == rid), None)
        if action == "rewind" and self.acting is not None:
            return await self.rewind(request, session, form, rid, row)
        if action == "answer" and self.acting is not None:
            return await self.answer(request, session, form, rid, row)
        if self.acting is None or not isinstance(action, str) or action not in dict(pages.WEB_ACTIONS):
            return self.page("No such action", "Nothing was done.", 400)
        if row is None:
            return self.page("No such run", f"No run {pages.shown(rid, 64)} in the fleet now: nothing was done.", 404)
        if (no := refusal(action, row)) is not None or not applies(action, row):
            line = no.message if no is not None else f"{action} does not apply to run {row.id} now"
            return self.page(no.title if no is not None else "Nothing to do", line, 409)
        once = form.get("once")
        once = once if isinstance(once, str) and pages.ONCE.fullmatch(once) else None
        if action in pages.ASK_FIRST and form.get("confirm") != "yes":
            return web.Response(text=pages.confirm_page(row, action, session.csrf, once or pages.new_once()),
                                content_type="text/html")
        source = f"web {client_of(request)} session {session.label}"[:64]
        # The form's own command: sent again (a tap retried after a lost answer, a reload that posts again), it is
        # the same command, which reaches the run once (console.view.answering.send_local, the store). An answer to
        # one request (a restart's approval) is the same command from every page, session and serve: pressed
        # again after serve was killed and started again, it is not sent twice.
        answers = current_request(row, action)
        command_id = "web" + hashlib.sha256(f"{row.id}:{answers}:{action}".encode()).hexdigest()[:28] \
            if answers is not None else None if once is None else "web" + hashlib.sha256(
                f"{session.id}:{once}:{row.id}:{action}".encode()).hexdigest()[:28]
        problem = await asyncio.get_running_loop().run_in_executor(None, self.acting, row, action, command_id,
                                                                   source)
        if problem:
            return self.page(f"{action.capitalize()} not sent", problem, 409)
        return self.page(f"{action.capitalize()} sent", pages.sent_line(row, action), 200)

    async def rewind(self, request: web.Request, session: Session, form: Any, rid: str,
                     row: FleetRow | None) -> web.StreamResponse:
        """A rewind from a run's page: the operator's text, for the phase the page showed; refused (and said) when
        the run cannot take one now, as the console's key is; the engine refuses it too if the phase has moved on."""
        assert self.acting is not None
        if row is None:
            return self.page("No such run", f"No run {pages.shown(rid, 64)} in the fleet now: nothing was done.", 404)
        snap = await self.feed.snapshot(rid)
        why = "its state is not read yet" if snap is None else snap.rewind_refused
        if why:
            return self.page("Nothing to rewind", f"Run {row.id}: no rewind now ({why}); nothing was done.", 409)
        issue, phase = form.get("issue"), form.get("phase")
        try:
            command = Rewind.build(issue=issue if isinstance(issue, str) else "",
                                   phase=int(phase) if isinstance(phase, str) and phase.isdecimal() else None)
        except CommandError as exc:
            return self.page("Rewind not sent", f"{exc}; nothing was done: go back, and write what is wrong.", 400)
        return await self.send_typed(request, session, form, row, "rewind", command)

    async def send_typed(self, request: web.Request, session: Session, form: Any, row: FleetRow, action: str,
                         command: AnyCommand) -> web.StreamResponse:
        """Send ``command``, built from what the operator typed on a run's page (a rewind's text, a question's
        answer), as that form's own command (sent again, it reaches the run once), named by the web session."""
        assert self.acting is not None
        once = form.get("once")
        # Sent twice (a double tap, a retry), the same form's same command is one; another one from the same page's
        # form (a page the browser kept as it was, its once the same: another answer once the run refused the first)
        # is another, which the inbox must not take for the first one sent again (it would reach the run never, the
        # page saying sent). Headless Chromium fetches a no-store page again on back; not every browser does.
        typed = f"{session.id}:{once}:{row.id}:{action}:".encode() + command.model_dump_json().encode()
        command_id = "web" + hmac.new(self._command_key, typed, hashlib.sha256).hexdigest()[:28] \
            if isinstance(once, str) and pages.ONCE.fullmatch(once) else None
        source = f"web {client_of(request)} session {session.label}"[:64]
        problem = await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(self.acting, row, action, command_id, source, command))
        if problem:
            return self.page(f"{action.capitalize()} not sent", pages.shown(problem), 409)
        return self.page(f"{action.capitalize()} sent", pages.sent_line(row, action), 200)

    async def answer(self, request: web.Request, session: Session, form: Any, rid: str,
                     row: FleetRow | None) -> web.StreamResponse:
        """An answer to the MCP server's question the run's page showed: its fields' values (the empty ones left
        out), or a decline or a cancel, as `agent-console answer` sends it; the run checks it against the form and
        refuses it (said in its story) when it does not fit, or when another question waits by then. Nothing the
        operator typed is repeated on a page."""
        assert self.acting is not None
        if row is None:
            return self.page("No such run", f"No run {pages.shown(rid, 64)} in the fleet now: nothing was done.", 404)
        snap = await self.feed.snapshot(rid)
        question = snap.question if snap is not None else None
        if question is None:
            return self.page("No question", f"Run {row.id}: no question of an MCP server waits now (answered, or its "
                             "call ended); nothing was sent.", 409)
        asked = form.get("question")
        if question.id is not None and asked != question.id:
            return self.page("Another question", f"Run {row.id}: the question on that page waits no more (another "
                             "one does): reload its page; nothing was sent.", 409)
        reply = form.get("reply")
        values: list[str] = []
        for name, _line in question.fields:
            value = form.get(f"field.{name}")
            if isinstance(value, str) and value != "":
                values.append(f"{name}={value}")
        try:
            command = Answer(question=question.id, set=tuple(values) or None) if reply == "accept" else \
                Answer(question=question.id, decline=True) if reply == "decline" else \
                Answer(question=question.id, cancel=True) if reply == "cancel" else None
        except ValueError:  # (pydantic's ValidationError is one) the values are not echoed: they may be secrets
            command = None
        if command is None:
            return self.page("Answer not sent", f"Run {row.id}: that answer is not one (a value too long, or no "
                             "button pressed); nothing was sent: go back and answer again.", 400)
        return await self.send_typed(request, session, form, row, "answer", command)

    async def run_page(self, request: web.Request) -> web.StreamResponse:
        session = request[SESSION_KEY]
        rid = request.match_info["id"]
        snap = await self.feed.snapshot(rid)
        if snap is None:
            return self.page("No such run", f"No run {pages.shown(rid, 64)} in the fleet now.", 404)
        row = next((r for r in self.feed.rows if r.id == rid), None)
        return web.Response(text=pages.run_page(snap, row, session.csrf), content_type="text/html")

    async def live_fleet(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: the fleet's list each time it changes (and once at the start)."""
        session = request[SESSION_KEY]

        async def draw() -> str:
            return pages.fleet_list(self.feed.rows, session.csrf, self.feed.error)

        return await self.stream(request, session, draw)

    async def live_run(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: a run's page body each time the fleet's reading changes."""
        session = request[SESSION_KEY]
        rid = request.match_info["id"]

        async def draw() -> str:
            snap = await self.feed.snapshot(rid)
            row = next((r for r in self.feed.rows if r.id == rid), None)
            return pages.run_body(snap, row, session.csrf) if snap is not None else pages.gone_body(rid)

        return await self.stream(request, session, draw)

    async def stream(self, request: web.Request, session: Session,
                     draw: Callable[[], Awaitable[str]]) -> web.StreamResponse:
        """Server-sent events of ``draw()``'s HTML each time the feed changes (and once at the start), until the
        page is closed or the session ends."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"})
        for name, value in HEADERS.items():
            response.headers[name] = value
        seen, sent, wrote = -1, None, 0.0
        clock = asyncio.get_running_loop().time
        try:
            # In the try: a page closed while its headers are sent (a phone moving to the next page) is no error
            # either (CI saw aiohttp's "Error handling request" traceback on serve's stderr from here).
            await response.prepare(request)
            await self.feed.ready()
            # Logged out or expired, or serve stopping: the stream ends.
            while self.auth.session(session.id) is session and not self.closing:
                if self.feed.version != seen:
                    seen = self.feed.version
                    html = await draw()
                    # A drawing that shows what the last one sent showed (a running run's elapsed time moved, which
                    # no page shows, once a second) is not sent: the page in the browser stays as it is (a tap is
                    # not lost to a redraw; its forms' ids stay valid) and nothing crosses the network.
                    if (shown := ONCE_FIELD.sub("", html)) != sent:
                        sent = shown
                        data = "".join(f"data: {line}\n" for line in html.splitlines() or [""])
                        await response.write(f"event: list\n{data}\n".encode())
                        wrote = clock()
                if clock() - wrote >= KEEP_ALIVE_SECONDS:  # a proxy keeps a stream that says something
                    await response.write(b": keep-alive\n\n")
                    wrote = clock()
                if self.closing:  # looked at with no await before the wait: _closing sets the event waited on
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.feed.changed.wait(),
                                           timeout=max(0.1, KEEP_ALIVE_SECONDS - (clock() - wrote)))
        except ConnectionResetError:  # the page was closed (aiohttp's ClientConnectionResetError is one)
            pass
        return response

    async def static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        types = {"live.js": "text/javascript", "style.css": "text/css"}
        if name not in types:
            raise web.HTTPNotFound()
        body = resources.files("console.web").joinpath("static", name).read_bytes()
        return web.Response(body=body, content_type=types[name])
