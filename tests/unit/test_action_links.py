"""Action links (console.engine.action_links): a link is this operator's, for one run, one action and one request,
until it expires, and is spent once; everything else is refused with a line that says why."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from console.engine import action_links as al
from console.engine.seal import Seal

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture
def seal(tmp_path: Path) -> Seal:
    return Seal.of(tmp_path / "data")


@pytest.fixture
def run(tmp_path: Path) -> Path:
    folder = tmp_path / "runs" / "r1"
    folder.mkdir(parents=True)
    return folder


def test_a_link_holds_for_its_run_until_it_expires(seal: Seal, run: Path) -> None:
    token = al.mint(seal, run, "r1", "approve", request="restart:41", now=NOW, ttl=timedelta(hours=2))
    assert len(token) < 250 and all(c.isalnum() or c in "-_." for c in token)  # a URL path segment as it is
    claim = al.verify(seal, run, token, now=NOW + timedelta(hours=1, minutes=59))
    assert (claim.run, claim.action, claim.request) == ("r1", "approve", "restart:41")
    with pytest.raises(al.LinkRefused) as refused:
        al.verify(seal, run, token, now=NOW + timedelta(hours=2))
    assert refused.value.why == "expired" and "agent-console approve r1" in str(refused.value)


def test_a_link_changed_in_any_part_holds_nowhere(seal: Seal, run: Path, tmp_path: Path) -> None:
    token = al.mint(seal, run, "r1", "approve", request="restart:41", now=NOW)
    _body, mac = token.split(".")
    claim = al.peek(token)
    for other in (claim.model_copy(update={"action": "deny"}), claim.model_copy(update={"exp": claim.exp + 10**6}),
                  claim.model_copy(update={"request": "restart:42"}), claim.model_copy(update={"run": "r2"})):
        forged = f"{al._b64(other.payload())}.{mac}"
        with pytest.raises(al.LinkRefused) as refused:
            al.verify(seal, run, forged, now=NOW)
        assert refused.value.why == "forged"
    # Another run's folder (the link copied to another run), another operator's key: not this operator's link.
    other_run = tmp_path / "runs" / "r2"
    other_run.mkdir()
    for where, key in ((other_run, seal), (run, Seal.of(tmp_path / "other-data"))):
        with pytest.raises(al.LinkRefused) as refused:
            al.verify(key, where, token, now=NOW)
        assert refused.value.why == "forged"


@pytest.mark.parametrize("token", [
    "", ".", "abc", "a.b.c", "x" * 5000, "!!!.###", "e30.AAAA",  # e30 is "{}"
    al._b64(b'{"v":1}') + "." + al._b64(b"\0" * 32),
    al._b64(b"[" * 100000) + "." + al._b64(b"\0" * 32),
])
def test_garbage_is_no_link(seal: Seal, run: Path, token: str) -> None:
    with pytest.raises(al.LinkRefused) as refused:
        al.verify(seal, run, token, now=NOW)
    assert refused.value.why == "malformed"


def test_a_second_spelling_of_the_same_claim_is_refused(seal: Seal, run: Path) -> None:
    """The MAC is of the exact bytes: the same claim spelled with spaces is not the link."""
    token = al.mint(seal, run, "r1", "resume", now=NOW)
    body, mac = token.split(".")
    spaced = al._unb64(body).replace(b",", b", ")
    with pytest.raises(al.LinkRefused):
        al.verify(seal, run, f"{al._b64(spaced)}.{mac}", now=NOW)


def test_a_link_is_spent_once_even_by_two_taps_at_once(seal: Seal, run: Path, tmp_path: Path) -> None:
    used = al.UsedLinks(tmp_path / "data")
    claim = al.verify(seal, run, al.mint(seal, run, "r1", "deny", now=NOW), now=NOW)
    assert used.spent(claim.nonce) is None
    results: list[al.Spent] = []
    barrier = threading.Barrier(8)

    def tap(i: int) -> None:
        barrier.wait()
        results.append(used.spend(claim, f"cmd{i}"))

    threads = [threading.Thread(target=tap, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r.command_id for r in results}) == 1  # one command, whichever tap came first
    assert [r.fresh for r in results].count(True) == 1  # and one tap spent it
    earlier = used.spent(claim.nonce)
    assert earlier is not None and earlier.command_id == results[0].command_id and not earlier.fresh
    folder = tmp_path / "data" / "keys" / al.USED
    assert sorted(os.listdir(folder)) == [claim.nonce]  # no temp file left
    assert os.stat(folder).st_mode & 0o777 == 0o700
    assert os.stat(folder / claim.nonce).st_mode & 0o777 == 0o600


def test_a_kill_before_the_record_leaves_the_link_unspent_and_after_it_spent(seal: Seal, run: Path,
                                                                             tmp_path: Path) -> None:
    used = al.UsedLinks(tmp_path / "data")
    claim = al.verify(seal, run, al.mint(seal, run, "r1", "approve", now=NOW), now=NOW)
    used.folder.mkdir(parents=True, mode=0o700)
    (used.folder / f".{claim.nonce}.dead.tmp").write_text('{"command_id": "half')  # a kill mid-write
    assert used.spent(claim.nonce) is None
    assert used.spend(claim, "c1").command_id == "c1"
    assert used.spend(claim, "c2").command_id == "c1"  # after the kill: the same command again, never a second


def test_a_record_that_cannot_be_read_still_means_spent(seal: Seal, run: Path, tmp_path: Path) -> None:
    used = al.UsedLinks(tmp_path / "data")
    claim = al.peek(al.mint(seal, run, "r1", "approve", now=NOW))
    used.folder.mkdir(parents=True, mode=0o700)
    (used.folder / claim.nonce).write_bytes(b"\xff garbage")
    spent = used.spent(claim.nonce)
    assert spent is not None and spent.command_id == ""


def test_prune_forgets_only_links_long_expired(seal: Seal, run: Path, tmp_path: Path) -> None:
    used = al.UsedLinks(tmp_path / "data")
    old = al.peek(al.mint(seal, run, "r1", "approve", now=NOW - timedelta(days=3), ttl=timedelta(hours=1)))
    live = al.peek(al.mint(seal, run, "r1", "deny", now=NOW))
    used.spend(old, "a")
    used.spend(live, "b")
    (used.folder / ".inflight.x.tmp").write_text("")  # a spend in flight in another process: left alone
    assert used.prune(NOW) == 1
    assert used.spent(old.nonce) is None and used.spent(live.nonce) is not None
    assert (used.folder / ".inflight.x.tmp").exists()
    assert used.spent("../../etc/passwd") is None  # a nonce is a name in the folder, nothing else
