"""serve's authentication (console.web.auth): a login link works once, a session lives while used, a CSRF token is
its own, and a client that fails too often is turned away before anything it offers is looked at."""

from __future__ import annotations

import itertools

from console.web import auth as au


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make() -> tuple[au.Auth, Clock]:
    clock = Clock()
    counter = itertools.count()
    return au.Auth(clock=clock, token=lambda n: f"tok{next(counter)}-{'x' * n}"), clock


def test_the_login_link_works_once() -> None:
    auth, _ = make()
    token = auth.login_token()
    assert token is not None
    session = auth.log_in(token, "10.0.0.5")
    assert session is not None and session.id != token and session.csrf not in (token, session.id)
    assert auth.login_token() is None
    assert auth.log_in(token, "10.0.0.6") is None  # replayed: refused, and counted
    assert auth.failures["10.0.0.6"].times
    assert auth.session(session.id) is session


def test_a_new_login_link_replaces_the_old_one() -> None:
    auth, _ = make()
    old = auth.login_token()
    new = auth.new_login()
    assert old is not None and auth.log_in(old, "c") is None
    assert auth.log_in(new, "c") is not None


def test_a_session_ends_when_idle_or_old() -> None:
    auth, clock = make()
    session = auth.log_in(auth.login_token() or "", "c")
    assert session is not None
    clock.now += au.SESSION_IDLE - 1
    assert auth.session(session.id) is session  # used: its idle time starts again
    clock.now += au.SESSION_IDLE - 1
    assert auth.session(session.id) is session
    clock.now += au.SESSION_IDLE + 1
    assert auth.session(session.id) is None
    busy = auth.log_in(auth.new_login(), "c")
    assert busy is not None
    for _ in range(int(au.SESSION_MAX // 3600) + 1):
        clock.now += 3600
        last = auth.session(busy.id)
    assert last is None  # however busy, a session ends after SESSION_MAX


def test_csrf_is_the_sessions_own() -> None:
    auth, _ = make()
    a = auth.log_in(auth.login_token() or "", "c")
    b = auth.log_in(auth.new_login(), "c")
    assert a is not None and b is not None
    assert auth.csrf_ok(a, a.csrf)
    assert not auth.csrf_ok(a, b.csrf) and not auth.csrf_ok(a, None) and not auth.csrf_ok(a, "")


def test_garbage_cookies_are_no_session() -> None:
    auth, _ = make()
    for cookie in (None, "", "x" * 10_000, "tok0", "\0\n"):
        assert auth.session(cookie) is None


def test_failures_past_the_limit_are_turned_away_then_forgiven() -> None:
    auth, clock = make()
    for _ in range(au.FAIL_LIMIT - 1):
        auth.failed("1.2.3.4")
    assert not auth.limited("1.2.3.4")
    auth.failed("1.2.3.4")
    assert auth.limited("1.2.3.4") and not auth.limited("5.6.7.8")
    assert 1 <= auth.retry_after("1.2.3.4") <= au.FAIL_WINDOW + 1
    clock.now += au.FAIL_WINDOW + 1
    assert not auth.limited("1.2.3.4")


def test_memory_stays_bounded_under_a_flood() -> None:
    auth, _ = make()
    for i in range(au.MAX_CLIENTS + 500):
        auth.failed(f"client{i}")
    assert len(auth.failures) == au.MAX_CLIENTS
    for _ in range(au.MAX_SESSIONS + 10):
        auth.log_in(auth.new_login(), "c")
    assert len(auth.sessions) == au.MAX_SESSIONS
