"""`agent-console serve` as an operator starts it: the login link on one line, a bad flag on one line with exit 2,
TLS with a certificate (the cookie then Secure), a stop by SIGTERM or Ctrl+C with exit 0 and no traceback."""

from __future__ import annotations

import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(*args: str) -> tuple[subprocess.Popen[str], str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "console.cli", "serve", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    return proc, first


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("serve did not stop") from None
    return proc.returncode, err


def wait_listening(port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError("serve never listened")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_its_login_link_and_stops_cleanly(sig: int) -> None:
    port = free_port()
    proc, first = start("--bind", f"127.0.0.1:{port}", "--no-console")
    link = re.fullmatch(rf"serve: open this login link once \(it works once\): (http://127\.0\.0\.1:{port}/login\?"
                        r"token=[A-Za-z0-9_-]{43})\n", first)
    assert link is not None, first
    wait_listening(port)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/")
    assert refused.value.code == 401
    # A phone's live page held open as serve is stopped: its stream ends and serve stops (it stayed up as long as
    # the page did: aiohttp waits for every handler, and a live page's never ended by itself).
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    assert browser.open(link.group(1), timeout=60).status == 200  # logged in, sent on to the fleet page
    live = browser.open(f"http://127.0.0.1:{port}/live/fleet", timeout=120)
    try:
        assert live.readline() == b"event: list\n"  # its stream is in its loop
        code, err = stop(proc, sig)
        assert code == 0 and "Traceback" not in err, err
        assert live.read().endswith(b"\n\n")  # the stream ended whole (the last event's blank line), not cut
    finally:
        live.close()


@pytest.mark.parametrize("flags, said", [
    (["--bind", "nowhere"], "--bind 'nowhere': give HOST:PORT"),
    (["--bind", "127.0.0.1:99999"], "give HOST:PORT"),
    (["--public-url", "javascript:alert(1)"], "--public-url"),
    (["--certfile", "x.pem"], "needs both --certfile and --keyfile"),
    (["--certfile", "/nonexistent.pem", "--keyfile", "/nonexistent.key"], "the certificate cannot be used"),
])
def test_a_bad_flag_is_one_line_and_exit_2(flags: list[str], said: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "console.cli", "serve", *flags], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 2 and said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_port_taken_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = dict(os.environ, PYTHONPATH=str(REPO))
        done = subprocess.run([sys.executable, "-m", "console.cli", "serve", "--bind", f"127.0.0.1:{port}"],
                              capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    # Nothing says it listens, and no login link is given for a page another process serves there.
    assert "login" not in done.stdout and "listening" not in done.stdout + done.stderr, done.stdout


def test_tls_with_a_certificate_and_the_cookie_is_secure(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    port = free_port()
    proc, first = start("--bind", f"127.0.0.1:{port}", "--certfile", str(cert), "--keyfile", str(key),
                        "--no-console")
    try:
        found = re.search(r"(https://127\.0\.0\.1:\d+/login\?token=\S+)", first)
        assert found is not None, first
        wait_listening(port)
        context = ssl.create_default_context(cafile=str(cert))

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: object, **kwargs: object) -> None:
                return None

        opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context), NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as moved:
            opener.open(found.group(1))
        assert moved.value.code == 303
        cookie = moved.value.headers["Set-Cookie"]
        assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    finally:
        code, err = stop(proc)
    assert code == 0 and "Traceback" not in err, err
