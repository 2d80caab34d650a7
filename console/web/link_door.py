"""The door an action link comes in by: ``GET /a/TOKEN`` shows what the link will do and a button; only the
button's ``POST /a/TOKEN`` does it (chat apps and mail scanners fetch links to preview them: a GET never acts).

A link needs no session (the operator taps it on a phone that never logged in): the link is the credential, for
one answer (console.engine.action_links). So every check is made at the GET and again at the POST: the token is a
link at all, of this operator for the run it names (a run of this machine: another machine's runs answer on their
own machine's serve), not expired, not spent, and the request it answers is still the one waiting. The POST also
carries a form token that the GET set as a cookie (double submit): a page elsewhere cannot make the browser post.
Every refusal is a page that says why and names the command that answers instead; a forged or malformed link
counts as a failed attempt (console.web.auth's limit).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from aiohttp import web

from console.engine import action_links as al
from console.engine.seal import Seal
from console.view.answers import current_request
from console.view.fleet import FleetRow
from console.web import pages
from console.web.auth import Auth

FORM_COOKIE = "agent_console_link_form"
VERBS = {"approve": "Approve the context restart of", "deny": "Deny the context restart of (the run ends)",
         "resume": "Resume", "acknowledge": "Acknowledge"}


class Answer(Protocol):
    """Send ``action`` to the run of ``row`` as the command ``command_id`` (the same id again after a crash: never
    applied twice); None when it went, else one line saying why not."""

    def __call__(self, row: FleetRow, action: str, command_id: str | None, source: str) -> str | None: ...


@dataclass(frozen=True)
class Checked:
    claim: al.LinkClaim
    row: FleetRow


def command_id_of(claim: al.LinkClaim) -> str:
    """The command a link becomes: the same id whoever spends it and however often (a kill -9 between the spend's
    record and the command's write writes the same command again)."""
    return "link" + hashlib.sha256(claim.nonce.encode()).hexdigest()[:28]


class LinkDoor:
    """The two routes of an action link (see the module), a part of serve's application."""

    def __init__(self, auth: Auth, seal: Callable[[], Seal], used: al.UsedLinks, rows: Callable[[], list[FleetRow]],
                 answer: Answer, now: Callable[[], datetime], secure: bool = False,
                 delivered: Callable[[FleetRow, str], bool] = lambda row, command_id: False,
                 refresh: Callable[[], Awaitable[None]] | None = None) -> None:
        self.auth = auth
        # The fleet read again now (console.web.server.FleetFeed.refresh): the rows are a poll old, and a link
        # tapped within that poll of its need (or of its run's start) must not be refused for a row not yet read.
        self.refresh = refresh
        # Whether a link's command reached its run (console.web.acting.Acting.delivered): a link spent by a serve
        # killed before it wrote the command is offered again, to send that same command, never a second one.
        self.delivered = delivered
        self.seal = seal
        self.used = used
        self.rows = rows
        self.answer = answer
        self.now = now
        self.secure = secure

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/a/{token}", self.preview), web.post("/a/{token}", self.act)]

    def _page(self, title: str, line: str, status: int) -> web.Response:
        return web.Response(status=status, text=pages.message_page(title, line, status), content_type="text/html")

    def _check(self, request: web.Request) -> Checked | web.Response:
        token = request.match_info["token"]
        client = request.remote or "unknown"
        try:
            claim = al.peek(token)
        except al.LinkRefused as exc:
            self.auth.failed(client)
            return self._page("Not an action link", str(exc), 400)
        row = next((r for r in self.rows() if r.id == claim.run and not r.host), None)
        if row is None:
            return self._page("No such run here", f"Run {claim.run} is not one of this machine's runs now (its folder "
                              "may have been removed, or it is another machine's: its own serve answers its links). "
                              f"{al.answer_elsewhere(claim)}.", 404)
        try:
            claim = al.verify(self.seal(), row.path, token, now=self.now())
        except al.LinkRefused as exc:
            if exc.why != "expired":
                self.auth.failed(client)
            return self._page("This link does not work", str(exc), 410 if exc.why == "expired" else 403)
        now_asked = current_request(row, claim.action)
        if now_asked != claim.request:
            if now_asked is not None:  # the same kind of request again, a newer one (a restart into the next session)
                return self._page("Already answered", f"Run {row.id} ({row.job}) was answered and has asked again "
                                  f"since this link was sent (its state now: {row.state_text}): this link answers the "
                                  "earlier request, and nothing was done. The fleet's page or the newer "
                                  "notification answers the new one.", 409)
            return self._page("Already answered", f"Run {row.id} ({row.job}) no longer waits for what this link "
                              f"answers (its state now: {row.state_text}): nothing was done.", 409)
        return Checked(claim, row)

    async def _fresh_check(self, request: web.Request) -> Checked | web.Response:
        """:meth:`_check`; a refusal that a newer reading of the fleet could change (no longer waiting, for a link
        whose seal held: a stranger's made-up links never make the fleet be read) is checked again once on a fresh
        reading before it is said."""
        checked = self._check(request)
        if isinstance(checked, web.Response) and checked.status == 409 and self.refresh is not None:
            await self.refresh()
            checked = self._check(request)
        return checked

    async def preview(self, request: web.Request) -> web.StreamResponse:
        checked = await self._fresh_check(request)
        if isinstance(checked, web.Response):
            return checked
        claim, row = checked.claim, checked.row
        spent = self.used.spent(claim.nonce)
        if spent is not None and self.delivered(row, spent.command_id or command_id_of(claim)):
            return self._page("This link was used", "It answered already; each link answers once.", 409)
        # Spent, its answer not delivered, and what it answers still waits: the serve that took it stopped (a kill,
        # a full disk) before the answer was sent. Its button sends that answer, once (the same command id).
        note = "" if spent is None else "It was pressed before, but its answer was not sent (serve stopped first)."
        form = secrets.token_urlsafe(24)
        response = web.Response(text=pages.render(
            "link.html", verb=VERBS[claim.action], run=pages.shown(row.id, 64), job=pages.shown(row.job, 80),
            state=pages.shown(row.state_text, 40), need=pages.shown(row.need_line), action=claim.action,
            label=claim.action.capitalize(), form=form, note=note), content_type="text/html")
        response.set_cookie(FORM_COOKIE, form, httponly=True, samesite="Strict", secure=self.secure,
                            path="/a/", max_age=900)
        return response

    async def act(self, request: web.Request) -> web.StreamResponse:
        data = await request.post()
        offered, kept = data.get("form"), request.cookies.get(FORM_COOKIE)
        if not (isinstance(offered, str) and kept and hmac.compare_digest(offered.encode(), kept.encode())):
            return self._page("Open the link again", "This answer did not come from the link's own page (or the "
                              "page is more than 15 minutes old): open the link again and press its button.", 403)
        checked = await self._fresh_check(request)
        if isinstance(checked, web.Response):
            return checked
        claim, row = checked.claim, checked.row
        spent = self.used.spend(claim, command_id_of(claim))
        source = f"web link {claim.nonce[:8]} from {request.remote or 'unknown'}"[:64]
        command_id = spent.command_id or command_id_of(claim)
        if not spent.fresh and self.delivered(row, command_id):
            return self._page("This link was used", "It answered already; each link answers once.", 409)
        # In a worker thread: a resume starts the run's process and waits for it to hold the run (seconds), and
        # the pages of every other client go on meanwhile.
        why = await asyncio.get_running_loop().run_in_executor(None, self.answer, row, claim.action, command_id,
                                                               source)
        if why is not None:
            return self._page("Not sent", f"{why}. {al.answer_elsewhere(claim)}.", 409)
        if not spent.fresh:  # sent again (the same command: a crash may have come between) and said as used
            return self._page("This link was used", f"It was used before: its answer ({claim.action} for run "
                              f"{row.id}) is sent, once; each link answers once.", 409)
        return self._page("Sent", f"{claim.action.capitalize()} sent to run {row.id} ({row.job}); it applies at the "
                          "run's next step, and every view shows it.", 200)
