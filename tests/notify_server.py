"""A loopback HTTP server that plays a notification service (a JSON webhook, an ntfy server) for the tests.

It records each request (path, headers, JSON body) and answers by path: ``/fail`` with 500, ``/hold`` only once
``release`` is set (a slow server), anything else 200 with ``{}``."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Loopback:
    port: int
    requests: list[Request] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)
    holding: threading.Event = field(default_factory=threading.Event)  # a /hold request is being held
    release: threading.Event = field(default_factory=threading.Event)

    def url(self, scheme: str, path: str) -> str:
        return f"{scheme}://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def wait_for(self, n: int, timeout: float = 10.0) -> list[Request]:
        """The first ``n`` requests, once they have arrived (AssertionError after ``timeout`` seconds)."""
        with self.arrived:
            if not self.arrived.wait_for(lambda: len(self.requests) >= n, timeout):
                raise AssertionError(f"{len(self.requests)} of {n} requests arrived within {timeout}s")
            return list(self.requests[:n])


@contextmanager
def loopback() -> Iterator[Loopback]:
    server_box: list[Loopback] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            lb = server_box[0]
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body: Any = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            if self.path.startswith("/hold"):
                lb.holding.set()
                lb.release.wait(30)
            with lb.arrived:
                lb.requests.append(Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                lb.arrived.notify_all()
            status = 500 if self.path.startswith("/fail") else 200
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": "boom", "code": 500}' if status == 500 else b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    lb = Loopback(server.server_address[1])
    server_box.append(lb)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield lb
    finally:
        lb.release.set()
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    """A loopback port nobody listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
