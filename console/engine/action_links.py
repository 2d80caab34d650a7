"""Action links: a notification's one-tap answer (approve or deny a restart, resume a stop, acknowledge a gave-up).

A link is a claim (which run, which action, the exact request it answers, when it expires, a nonce) and a MAC of it
under the operator's seal (:mod:`console.engine.seal`: the key in the private data dir), for the run's folder. So a
link is this operator's or nobody's: nobody without the data dir can make one; a link of one run does not hold for
another (the MAC covers the folder's real path, and the claim names the run); a changed claim (another action, a
later expiry) does not hold at all. The link is a bearer token for ONE answer, so it is also:

- bound to the request it answers (a restart's ``restart_pending`` event, say): once that request is answered, by
  this link or any other way, the link answers nothing (the caller checks the run's state; see ``request``);
- single-use: :class:`UsedLinks` records each nonce spent, with the command it became, durably and before that
  command is written, so a replay (or a second tap) is refused, and a kill -9 between the two finds the record and
  writes the SAME command again (its id, not a second command);
- short-lived: it expires (:data:`DEFAULT_TTL`, the operator's config may say otherwise).

Opening a link never acts by itself (chat apps fetch URLs to preview them): the web page shows what it will do and
a button, and only the button's POST spends it. Plain data and the standard library: the notifier mints links, the
web server checks them, and neither needs the other.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from console.engine import failpoints
from console.engine.atomic import PRIVATE_FILE, fsync_dir, private_dir, write_all
from console.engine.seal import Seal, read_record

Action = Literal["approve", "deny", "resume", "acknowledge"]
ACTIONS: tuple[str, ...] = get_args(Action)
KIND = "action-link"  # the seal's kind for a link: a MAC of one kind never holds as another's
DEFAULT_TTL = timedelta(hours=24)
MAX_TTL = timedelta(days=30)
# A token is read only up to this many characters: anything longer is no link (a URL of megabytes is refused
# before it is decoded).
MAX_TOKEN = 600
USED = "used-links"  # in the data dir's keys/ folder: one file per nonce spent
_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
_NONCE = r"[A-Za-z0-9_-]{16,43}"
NONCE_RE = re.compile(_NONCE)


class LinkRefused(ValueError):
    """Why a link answers nothing: one line for the page that says so."""

    def __init__(self, why: Literal["malformed", "forged", "expired", "used", "answered", "elsewhere"],
                 line: str) -> None:
        super().__init__(line)
        self.why = why


class LinkClaim(BaseModel):
    """What a link says (the MAC says whose it is)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1] = 1
    run: str = Field(pattern=f"^{_ID}$")
    action: Action
    # The request it answers, as the caller names it (``restart:SEQ`` for the restart_pending event SEQ of the
    # run's log): the same action for a later request of the same run needs a link of its own.
    request: str = Field(default="", max_length=64, pattern=r"^[A-Za-z0-9:._-]*$")
    exp: int = Field(ge=0)  # when it stops holding, in seconds since the epoch (UTC)
    nonce: str = Field(pattern=f"^{_NONCE}$")

    def payload(self) -> bytes:
        return json.dumps(self.model_dump(), sort_keys=True, separators=(",", ":")).encode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mint(seal: Seal, folder: str | os.PathLike[str], run: str, action: Action, *, request: str = "",
         now: datetime, ttl: timedelta = DEFAULT_TTL, nonce: str | None = None) -> str:
    """A link's token (URL-safe) for ``action`` on ``run`` (whose folder is ``folder``), holding until now + ttl."""
    ttl = min(max(ttl, timedelta(seconds=1)), MAX_TTL)
    claim = LinkClaim(run=run, action=action, request=request, exp=int((now + ttl).timestamp()),
                      nonce=nonce or secrets.token_urlsafe(16))
    body = claim.payload()
    mac = bytes.fromhex(seal.mac(KIND, folder, body))
    return f"{_b64(body)}.{_b64(mac)}"


def peek(token: str) -> LinkClaim:
    """The claim a token makes, NOT checked (which folder to check it against comes from its run): a token that is
    no link is :class:`LinkRefused` ("malformed")."""
    bad = LinkRefused("malformed", "this is not an action link of agent-console (it may have been cut short when "
                      "it was copied): answer from the console or the command line instead")
    if not isinstance(token, str) or len(token) > MAX_TOKEN or token.count(".") != 1:
        raise bad
    body_text, mac_text = token.split(".")
    try:
        body = _unb64(body_text)
        mac = _unb64(mac_text)
        claim = LinkClaim.model_validate_json(body)
    except (binascii.Error, ValueError, ValidationError):
        raise bad from None
    if len(mac) != 32 or claim.payload() != body:  # one spelling of each claim: the MAC is of exactly these bytes
        raise bad
    return claim


def verify(seal: Seal, folder: str | os.PathLike[str], token: str, *, now: datetime) -> LinkClaim:
    """The claim of ``token`` if it is this operator's link for the run in ``folder`` and has not expired; else
    :class:`LinkRefused` saying which of those it is not. Whether it was spent, or its request answered, is the
    caller's next question (:class:`UsedLinks`, the run's state)."""
    claim = peek(token)
    body_text, mac_text = token.split(".")
    if not seal.holds(KIND, folder, _unb64(body_text), _unb64(mac_text).hex()):
        raise LinkRefused("forged", f"this link was not made for run {claim.run} by this operator's agent-console "
                          "(or the run's folder has moved): nothing was done")
    if now.timestamp() >= claim.exp:
        when = datetime.fromtimestamp(claim.exp).astimezone()
        raise LinkRefused("expired", f"this link expired at {when:%Y-%m-%d %H:%M %Z}: nothing was done; "
                          f"{answer_elsewhere(claim)}")
    return claim


def answer_elsewhere(claim: LinkClaim) -> str:
    """How to give the answer a refused link would have given: the command that does it."""
    return f"answer with agent-console {claim.action} {claim.run} (or from the console)"


@dataclass(frozen=True)
class Spent:
    """A link spent: the command it became (its id) and when."""

    nonce: str
    command_id: str
    exp: int
    fresh: bool = False  # spent by this call (False: it was spent before)


class UsedLinks:
    """The nonces of the links spent (``DATA/keys/used-links/NONCE``, 0600 in a 0700 folder): a file appears whole or
    not at all (a hard link of a complete temp file), so two taps at once spend a link once, and a kill -9 at any
    moment leaves it spent or not, never half."""

    def __init__(self, data_dir: Path) -> None:
        self.folder = Path(data_dir) / "keys" / USED

    def spend(self, claim: LinkClaim, command_id: str) -> Spent:
        """Record ``claim``'s nonce as spent on the command ``command_id``; when it already was, the record made
        then (whose command the caller writes again, with that id, if the kill came between)."""
        if (problem := private_dir(self.folder)) is not None:
            raise OSError(f"the record of spent links cannot be kept: {problem}")
        path = self.folder / claim.nonce
        record = json.dumps({"command_id": command_id, "exp": claim.exp}).encode()
        tmp = self.folder / f".{claim.nonce}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)
        try:
            failpoints.hit("write used-link", tear=lambda: os.write(fd, record[: len(record) // 2]))
            write_all(fd, record)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            failpoints.hit("link used-link")
            os.link(tmp, path)
            fsync_dir(self.folder)
            return Spent(claim.nonce, command_id, claim.exp, fresh=True)
        except FileExistsError:
            earlier = self.spent(claim.nonce)
            if earlier is None:
                raise OSError(f"{path}: a spent link's record cannot be read") from None
            return earlier
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def spent(self, nonce: str) -> Spent | None:
        if not NONCE_RE.fullmatch(nonce):
            return None
        raw = read_record(self.folder / nonce, 4096)
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            return Spent(nonce, str(data["command_id"])[:64], int(data["exp"]))
        except (ValueError, KeyError, TypeError):
            return Spent(nonce, "", 0)  # a record there that cannot be read: spent all the same (never twice)

    def prune(self, now: datetime) -> int:
        """Forget the links that expired more than a day ago (a link refused as expired needs no record): the
        folder stays as small as the links in flight."""
        gone = 0
        cutoff = now.timestamp() - 86400
        try:
            names = os.listdir(self.folder)
        except OSError:
            return 0
        for name in names:
            if name.startswith(".") and name.endswith(".tmp"):  # a kill's leftover, not a spend in flight
                with contextlib.suppress(OSError):
                    if os.stat(self.folder / name, follow_symlinks=False).st_mtime >= cutoff:
                        continue
            else:
                rec = self.spent(name)
                if rec is None or rec.exp == 0 or rec.exp >= cutoff:
                    continue
            with contextlib.suppress(OSError):
                os.unlink(self.folder / name)
                gone += 1
        return gone
