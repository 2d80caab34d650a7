"""Secrets in URLs never leave the process: :func:`shown_url` is a URL as a log, an event, the store, a
notification or an error line may show it; :func:`scrub_url` takes a URL's secrets out of any text.

A base URL may carry credentials: ``http://user:pw@proxy/v1`` (a proxy's basic auth: the user part alone can be a
token, as in ``https://TOKEN@host``), or a query parameter such as ``?api-key=...``, ``?key=`` or ``?token=`` (some
gateways take the key there). The provider's call uses the URL whole; everything the operator or another machine
reads shows it with the user-info as ``***`` and each query value whose name says it is a secret as ``***``
(other parameters, such as Azure's ``api-version``, stay: they say which API is spoken). The fragment is never sent
to a server and may hold a token (an OAuth redirect's): it is left out.

The store's own URL has :func:`console.engine.store.shown_store_url` (which drops the whole query: libpq takes a
password there). Stdlib only, and it never raises: a URL that does not parse is redacted as text.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["SECRET_PARAM", "scrub_url", "shown_url"]

HIDDEN = "***"
# The names of query parameters whose values are secrets (matched anywhere in the name, any case): api-key, apikey,
# key, access_token, token, secret, client_secret, password, pwd, auth, sig / signature (a signed URL), credential,
# session, code (an OAuth code).
SECRET_PARAM = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential|session|code", re.IGNORECASE)
_AUTHORITY = re.compile(r"[^/?#]*")
_PORT = re.compile(r"[0-9]*")
_MIN_SCRUBBED = 2  # a one-character secret is taken out of text only where it stands as user-info ("x@")


def _split(url: str) -> tuple[str, str | None, str, str, str | None]:
    """(scheme with ``://``, user-info or None, host and port, path, query or None) of ``url``, as text: never
    raises, whatever it holds (the fragment is dropped). A password with a ``/`` in it that was not escaped
    (``http://user:p/w@host``) ends the authority early, where a port cannot be: the user-info is then up to the
    path's ``@``, as the operator meant it (such a URL is refused as invalid, and its error line shows it so)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    else:
        scheme += sep
    authority = _AUTHORITY.match(rest).group()  # type: ignore[union-attr]  # matches every string (maybe "")
    tail = rest[len(authority):].partition("#")[0]
    path, mark, query = tail.partition("?")
    userinfo: str | None = None
    if "@" in authority:
        userinfo, _, authority = authority.rpartition("@")
    elif "@" in path and not _PORT.fullmatch(_port(authority)):
        userinfo, _, rest_of = (authority + path).rpartition("@")
        authority = _AUTHORITY.match(rest_of).group()  # type: ignore[union-attr]
        path = rest_of[len(authority):]
    return scheme, userinfo, authority, path, query if mark else None


def _port(authority: str) -> str:
    """What stands where a host's port is (after the last ``:`` past an IPv6 literal's ``]``), "" if nothing."""
    host = authority.rpartition("]")[2]
    return host.rpartition(":")[2] if ":" in host else ""


def _param_hidden(piece: str) -> str:
    name, eq, _value = piece.partition("=")
    return f"{name}={HIDDEN}" if eq and SECRET_PARAM.search(unquote(name)) else piece


def shown_url(url: str | None) -> str:
    """``url`` as it may be shown anywhere: user-info and secret query values as ``***``, no fragment. ``""`` for
    None. Idempotent."""
    if not url:
        return ""
    scheme, userinfo, authority, path, query = _split(url)
    shown = f"{scheme}{HIDDEN + '@' if userinfo is not None else ''}{authority}{path}"
    if query is not None:
        shown += "?" + "&".join(_param_hidden(piece) for piece in query.split("&"))
    return shown


def url_secrets(url: str | None) -> list[str]:
    """The secrets ``url`` holds (its user-info, password, secret query values), as written and decoded, longest
    first: what :func:`scrub_url` takes out of a text."""
    if not url:
        return []
    _scheme, userinfo, _authority, _path, query = _split(url)
    found: set[str] = set()
    if userinfo:
        found.add(userinfo)
        found.update(userinfo.split(":", 1))
        found.update(re.split(r"[:/]", userinfo))  # what a parser that cut it at a "/" quotes (as a "port")
    for piece in (query or "").split("&"):
        name, eq, value = piece.partition("=")
        if eq and value and SECRET_PARAM.search(unquote(name)):
            found.add(value)
    found |= {unquote(s) for s in found}
    return sorted((s for s in found if s), key=len, reverse=True)


def scrub_url(text: str, url: str | None) -> str:
    """``text`` with ``url`` in it shown as :func:`shown_url` shows it, and each of its secrets (long enough to be
    told apart from ordinary words) as ``***``: for a library's message that may quote the URL or a part of it."""
    if not url or not text:
        return text
    text = text.replace(url, shown_url(url))
    for secret in url_secrets(url):
        # A single character would take letters out of words: only where it stands as user-info ("p@").
        text = text.replace(secret, HIDDEN) if len(secret) >= _MIN_SCRUBBED else text.replace(f"{secret}@",
                                                                                               f"{HIDDEN}@")
    return text
