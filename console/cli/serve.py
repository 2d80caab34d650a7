"""`serve`: the operator's runs in a browser or on a phone (console.web), behind a one-time login link.

Bound to 127.0.0.1 by default: reach it from elsewhere through an SSH tunnel (``ssh -L 8765:127.0.0.1:8765 HOST``),
Tailscale (``tailscale serve 8765``), or a reverse proxy that terminates TLS (then ``--public-url`` is the address
the browser uses); or serve TLS itself with ``--certfile``/``--keyfile``.
"""

from __future__ import annotations

import argparse
import ipaddress
import shlex
import sys
from typing import Any

from console.cli.common import UsageError, say
from console.outcome import EXIT_OK

HELP = "serve the fleet and each run to a browser or a phone, behind a one-time login link (127.0.0.1 by default)"
DEFAULT_BIND = "127.0.0.1:8765"


def add_parser(sub: Any) -> None:
    s = sub.add_parser("serve", help=HELP,
                       description=HELP + ". It prints the login link: open it once (in the browser that is to "
                                  "stay logged in); it works once, and a restarted serve prints a new one. "
                                  "The browser console is at /console/. Ctrl+C stops it (exit 0).")
    s.add_argument("--bind", default=DEFAULT_BIND, metavar="HOST:PORT",
                   help=f"the address to listen on (default {DEFAULT_BIND}; another machine reaches it through a "
                        "tunnel or a reverse proxy: see docs/serve.md)")
    s.add_argument("--public-url", metavar="URL",
                   help="the address browsers use (a reverse proxy's or tunnel's); default: the config's [serve] "
                        "public_url, else the bound address")
    s.add_argument("--certfile", metavar="PEM", help="serve over TLS with this certificate (and --keyfile)")
    s.add_argument("--keyfile", metavar="PEM", help="the certificate's private key")
    s.add_argument("--no-console", action="store_true", help="do not serve the browser console at /console/")


def parse_bind(text: str) -> tuple[str, int]:
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UsageError(f"serve: --bind {text!r}: give HOST:PORT, such as {DEFAULT_BIND}")
    return host, int(port_text)


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def public_url_of(args: argparse.Namespace, host: str, port: int, configured: str | None = None) -> str:
    """--public-url, else the config's ``[serve] public_url`` (the address the notifications' links name, checked
    when the settings were read), else the bound address."""
    if args.public_url:
        from console.settings import check_public_url

        try:
            return check_public_url(args.public_url, "serve: --public-url")
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if configured:
        return configured
    scheme = "https" if args.certfile else "http"
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


def cmd_serve(args: argparse.Namespace) -> int:
    import ssl

    host, port = parse_bind(args.bind)
    from console.engine.job_files import JobError
    from console.settings import load_settings

    try:
        settings = load_settings()
    except (JobError, ValueError) as exc:  # a config that cannot be used: its one line, exit 2
        raise UsageError(str(exc)) from None
    public = public_url_of(args, host, port, settings.serve.public_url)
    if bool(args.certfile) != bool(args.keyfile):
        raise UsageError("serve: TLS needs both --certfile and --keyfile")
    context = None
    if args.certfile:
        try:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(args.certfile, args.keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(f"serve: the certificate cannot be used: {exc}") from None
    from datetime import UTC, datetime

    from aiohttp import web

    from console.engine.seal import Seal, SealError
    from console.view.fleet import Fleet
    from console.web.auth import Auth
    from console.web.server import FleetFeed, WebApp

    try:  # with the operator's key, each run's first fold starts from the view's fold its runner kept
        seal: Seal | None = Seal.of(settings.data_dir)
    except (SealError, OSError):
        seal = None  # every log folded from its start, as without a kept fold
    fleet = Fleet(settings.store_path, now=lambda: datetime.now(UTC), url=settings.store_url, seal=seal)
    auth = Auth()
    from console.view.run_snapshot import look

    feed = FleetFeed(lambda: (fleet.poll(budget=0.5), fleet.error),  # (its `folded` says when to read again)
                     look=lambda rid: look(list(fleet.rows), list(fleet.folds.values()), rid))
    from console.engine import action_links
    from console.web.acting import Acting
    from console.web.link_door import LinkDoor

    secure = context is not None or public.startswith("https://")
    acting = Acting(settings.store_path, settings.store_url)
    door = LinkDoor(auth, lambda: Seal.of(settings.data_dir), action_links.UsedLinks(settings.data_dir),
                    lambda: list(feed.rows), acting.answer, lambda: datetime.now(UTC), secure=secure,
                    delivered=acting.delivered, refresh=feed.refresh)
    app = WebApp(auth, feed, secure=secure, links=door, act=acting)
    # -I: textual-serve starts it in this process's working folder, which may be a job folder someone handed the
    # operator: `-m` would import a console/ package planted there first.
    console = None if args.no_console else f"{shlex.quote(sys.executable)} -I -m console.cli fleet"
    def listening(_said: str) -> None:
        """Said once the socket is bound (aiohttp's ``print``, called after its sites started): a port another
        process holds gets no login link (it would open that process's page) and no word of listening."""
        if not loopback(host) and context is None:
            say(f"serve: listening on {host}, not only this machine, without TLS: the login link and the session "
                "travel in clear; prefer --certfile/--keyfile, a reverse proxy with TLS, or an SSH tunnel",
                sys.stderr)
        say(f"serve: open this login link once (it works once): {public}/login?token={auth.login_token()}")
        say(f"serve: listening on {args.bind}; Ctrl+C stops it")

    try:
        web.run_app(app.build(console=console, public_url=public), host=host, port=port, ssl_context=context,
                    print=listening, access_log=None)
    except OSError as exc:
        raise UsageError(f"serve: cannot listen on {args.bind}: {exc.strerror or exc}") from None
    finally:
        fleet.close()
    return EXIT_OK
