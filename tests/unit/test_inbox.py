"""The control inbox played as an attacker (or a buggy script) would: whatever lies in ``JOB/.console/inbox/``
never stands in front of a valid command, each bad entry is moved aside and reported once, a command of another
user is refused, and the inbox stays bounded (unread commands, rejected files, temp files a killed writer left).

Each test counts looks at the inbox (``poll``), never seconds: a flood is handled in a bounded number of looks.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

import pytest

from console.engine import control
from console.engine.control import (
    KEEP_REJECTED,
    MAX_INBOX_WORK,
    MAX_PENDING,
    REJECTED,
    REPORT_EACH,
    Command,
    ControlChannel,
    InboxFull,
    RunLock,
    write_inbox,
)
from console.engine.job import JobPaths

NOBODY = 65534


@pytest.fixture
def paths(tmp_path: Path) -> JobPaths:
    root = tmp_path / "job"
    root.mkdir()
    (root / "instructions.md").write_text("# a job\n")
    p = JobPaths(root)
    p.inbox.mkdir(parents=True)
    return p


def channel(paths: JobPaths) -> ControlChannel:
    return ControlChannel(paths.inbox)


def junk_name(i: int) -> str:
    """A name that sorts before every command write_inbox makes (theirs start with 20 digits, '0' then '0')."""
    return f"0-{i:05d}.json"


def drain(ch: ControlChannel, looks: int) -> list[Command]:
    """What ``looks`` looks at the inbox return, in order (a look is what the engine does at a turn boundary)."""
    out: list[Command] = []
    for _ in range(looks):
        out += ch.poll()
    return out


def give_away(path: Path) -> None:
    """Make ``path`` another user's file (root can); skip the calling test where this user cannot."""
    try:
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    except PermissionError:
        pytest.skip("this test needs a file of another user: not root, and os.chown to uid 65534 is refused")


def refuse(monkeypatch: pytest.MonkeyPatch, name: str, *calls: str) -> None:
    """Make the os calls ``calls`` (rename, replace, unlink) fail with EPERM on the inbox entry ``name``."""
    for call in calls:
        real = getattr(os, call)

        def fake(path, *a, _real=real, **kw):
            if os.path.basename(os.fspath(path)) == name:
                raise OSError(errno.EPERM, "Operation not permitted")
            return _real(path, *a, **kw)

        monkeypatch.setattr(control.os, call, fake)


def test_a_hundred_and_fifty_rejected_files_never_block_a_later_stop(paths: JobPaths) -> None:
    # The bug: rejected files stayed in the inbox and were counted among the 100 entries read per look, so
    # once 100 of them existed no command was ever read again (stop, approve, pause: gone for ever).
    for i in range(150):
        (paths.inbox / junk_name(i)).write_text('{"command": "explode"}')
    ch = channel(paths)
    assert drain(ch, 3) == []
    stop = write_inbox(paths, "stop", run=None)
    pause = write_inbox(paths, "pause", run=None)
    got = drain(ch, 1)
    assert [c.id for c in got] == [stop.id, pause.id]  # the first look after they were sent, in order
    # Each bad file reported once though the inbox was looked at four times: REPORT_EACH by name, the rest counted.
    named = [line for line in ch.invalid if not line.startswith("and ")]
    counted = sum(int(line.split()[1]) for line in ch.invalid if line.startswith("and "))
    assert len(named) == len(set(named)) == REPORT_EACH and len(named) + counted == 150
    assert len(os.listdir(paths.inbox)) == KEEP_REJECTED  # and the inbox stays bounded


def test_each_bad_file_is_reported_exactly_once(paths: JobPaths) -> None:
    for i in range(5):
        (paths.inbox / junk_name(i)).write_text("not json")
    ch = channel(paths)
    drain(ch, 4)
    assert sorted(line.split(":")[0] for line in ch.invalid) == [junk_name(i) for i in range(5)]
    assert all("moved aside as inbox/" in line for line in ch.invalid)
    assert sorted(p.name for p in paths.inbox.iterdir()) == [f"0-{i:05d}{REJECTED}" for i in range(5)]


def test_thousands_of_junk_files_are_cleared_in_a_few_looks_and_a_stop_gets_through(paths: JobPaths) -> None:
    junk = 3 * MAX_INBOX_WORK + 7  # several looks' work, and thirty times what is kept of it
    kinds = ["not json", '{"command": "explode"}', "", '{"command": "stop"']
    for i in range(junk):
        name = junk_name(i) if i % 3 else f"0-{i:05d}.txt"  # a third without .json: never a command
        (paths.inbox / name).write_text(kinds[i % len(kinds)])
    # A run reads this inbox (it holds the job's lock): the stop is addressed to it, and never refused as the
    # inbox is full (the run clears it).
    lock = RunLock(paths)
    assert lock.acquire()
    ch = channel(paths)
    ch.run_id = lock.run_id
    stop = write_inbox(paths, "stop")
    assert stop.run == lock.run_id
    looks = 0
    got: list[Command] = []
    while not got:
        looks += 1
        assert looks <= junk // MAX_INBOX_WORK + 2, "the stop did not get through"
        got = ch.poll()
    assert [c.id for c in got] == [stop.id]
    # Bounded reports: at most REPORT_EACH lines and one count per look, and the counts add up to every file.
    assert len(ch.invalid) <= looks * (REPORT_EACH + 1)
    counted = sum(int(line.split()[1]) for line in ch.invalid if line.startswith("and "))
    named = [line for line in ch.invalid if not line.startswith("and ")]
    assert len(named) + counted == junk and len(set(named)) == len(named)
    # Bounded inbox: the newest rejected files kept, the rest deleted; nothing pending.
    left = os.listdir(paths.inbox)
    assert len(left) <= KEEP_REJECTED and all(n.endswith(REJECTED) for n in left)
    lock.release()


def _odd_entries(paths: JobPaths, outside: Path) -> dict[str, str]:
    """One of each odd thing an inbox may hold; name -> the words its report must have."""
    inbox = paths.inbox
    valid_stop = Command(command="stop").model_dump_json()
    outside.write_text(valid_stop)
    os.mkfifo(inbox / "0-fifo.json")
    (inbox / "0-dir.json").mkdir()
    (inbox / "0-dir.json" / "inside.txt").write_text("kept")
    os.symlink(outside, inbox / "0-link.json")  # a link to a valid stop: never followed, never applied
    with open(inbox / "0-huge.json", "wb") as fh:
        fh.truncate(64 * 2**20)  # 64 MB (sparse): never read into memory
    (inbox / "0-latin1.json").write_bytes(b'{"command": "st\xf6p"}')
    (inbox / "0-notes.txt").write_text(valid_stop)  # a valid command under a name that is not a command's
    (inbox / "0-deep.json").write_text("[" * 30_000)  # nested past any parser's depth, within the size
    (inbox / "0-\x1b]0;pwned\x07.json").write_text("{}")  # an escape sequence in the name
    os.link(outside, inbox / "0-hardlink.json")
    return {"0-fifo.json": "named pipe", "0-dir.json": "a folder", "0-link.json": "symbolic link",
            "0-huge.json": "more than the 65536", "0-latin1.json": "not a command", "0-notes.txt": ".json",
            "0-deep.json": "not a command", "0-\\x1b]0;pwned\\x07.json": "not a command",
            "0-hardlink.json": "hard link"}


def test_odd_entries_are_moved_aside_as_they_are_reported_once_and_never_applied(paths: JobPaths,
                                                                                tmp_path: Path) -> None:
    outside = tmp_path / "outside-stop.json"
    expected = _odd_entries(paths, outside)
    ch = channel(paths)
    assert drain(ch, 1) == []
    checkpoint = write_inbox(paths, "checkpoint", run=None)
    assert [c.id for c in drain(ch, 3)] == [checkpoint.id]
    reports = {line.split(": ", 1)[0]: line for line in ch.invalid}
    assert set(reports) == set(expected), ch.invalid
    for name, words in expected.items():
        assert words in reports[name], reports[name]
        assert "\x1b" not in reports[name]  # a name is shown, never played to the terminal
    # Kept as they were, beside the commands, for the operator to look at.
    inbox = paths.inbox
    assert stat.S_ISFIFO(os.lstat(inbox / f"0-fifo{REJECTED}").st_mode)
    assert (inbox / f"0-dir{REJECTED}" / "inside.txt").read_text() == "kept"
    assert os.readlink(inbox / f"0-link{REJECTED}") == str(outside)
    assert os.stat(inbox / f"0-huge{REJECTED}").st_size == 64 * 2**20
    assert (inbox / f"0-notes.txt{REJECTED}").exists()
    assert Command.model_validate_json(outside.read_text()).command == "stop"  # the link's target untouched


def test_a_command_file_of_another_user_is_refused(paths: JobPaths) -> None:
    forged = paths.inbox / "00000000000000000001-forged0000001.json"
    forged.write_text(Command(command="stop", source="cli").model_dump_json())
    give_away(forged)
    ch = channel(paths)
    mine = write_inbox(paths, "pause", run=None)
    assert [c.command for c in drain(ch, 2)] == ["pause"] and mine.command == "pause"
    (line,) = ch.invalid
    assert line.startswith(forged.name) and f"owned by uid {NOBODY}" in line and "refused" in line
    assert (paths.inbox / f"00000000000000000001-forged0000001{REJECTED}").exists()


def test_an_entry_that_can_be_neither_moved_nor_removed_is_reported_once_and_passed_over(
        paths: JobPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    stuck = junk_name(0)
    (paths.inbox / stuck).write_text("junk")
    refuse(monkeypatch, stuck, "rename", "replace", "unlink")  # an immutable file (chattr +i), say
    ch = channel(paths)
    for n in range(3):
        cmd = write_inbox(paths, "checkpoint", {"note": str(n)}, run=None)
        assert [c.id for c in ch.poll()] == [cmd.id]
    (line,) = ch.invalid
    assert line.startswith(stuck) and "neither moved nor removed" in line


def test_a_command_that_cannot_be_removed_is_applied_once(paths: JobPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    cmd = write_inbox(paths, "checkpoint", run=None)
    name = next(p.name for p in paths.inbox.iterdir())
    refuse(monkeypatch, name, "unlink")
    ch = channel(paths)
    assert [c.id for c in drain(ch, 4)] == [cmd.id]


def test_a_flood_of_commands_with_no_run_reading_is_capped_then_read_in_order(paths: JobPaths) -> None:
    sent = [write_inbox(paths, "checkpoint", {"note": str(n)}, run=None) for n in range(MAX_PENDING)]
    with pytest.raises(InboxFull, match=f"{MAX_PENDING} files wait unread .* no process runs the job"):
        write_inbox(paths, "stop", run=None)
    assert len(os.listdir(paths.inbox)) == MAX_PENDING
    ch = channel(paths)
    got = drain(ch, MAX_PENDING // control.MAX_INBOX)
    assert [c.id for c in got] == [c.id for c in sent] and not ch.invalid
    write_inbox(paths, "stop", run=None)  # read: there is room again


def test_temp_files_a_killed_writer_left_are_removed_fresh_ones_kept(paths: JobPaths) -> None:
    old = paths.inbox / ".00000000000000000001-aaaaaaaaaaaa.json.0badf00d.tmp"
    fresh = paths.inbox / ".00000000000000000002-bbbbbbbbbbbb.json.0badf00d.tmp"
    old.write_text("{")
    fresh.write_text("{")
    long_ago = os.stat(old).st_mtime - 3600
    os.utime(old, (long_ago, long_ago))
    ch = channel(paths)
    assert drain(ch, 1) == [] and not ch.invalid
    assert not old.exists() and fresh.exists()


def test_only_the_newest_rejected_files_are_kept(paths: JobPaths) -> None:
    for i in range(KEEP_REJECTED + 50):
        (paths.inbox / junk_name(i)).write_text("junk")
    ch = channel(paths)
    drain(ch, 1)
    (paths.inbox / "zz-late.json").write_text("junk")  # rejected by a later look: the newest
    drain(ch, 1)
    left = sorted(os.listdir(paths.inbox))
    assert len(left) == KEEP_REJECTED and f"zz-late{REJECTED}" in left


def test_a_hidden_file_that_is_no_temp_file_is_moved_aside(paths: JobPaths) -> None:
    (paths.inbox / ".hidden.json").write_text(Command(command="stop").model_dump_json())
    ch = channel(paths)
    assert drain(ch, 2) == []
    (line,) = ch.invalid
    assert line.startswith(".hidden.json") and ".json" in line


def counting_listings(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The inbox's listings from now on (each ``os.listdir``), counted."""
    listed: list[object] = []
    real = os.listdir

    def listdir(path: object = ".") -> list[str]:
        listed.append(path)
        return real(path)  # type: ignore[call-overload, no-any-return]

    monkeypatch.setattr(os, "listdir", listdir)
    return listed


def test_an_unchanged_inbox_is_looked_at_by_its_stat_and_a_command_sent_later_is_read_at_the_next_look(
        paths: JobPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 37: a run looks at its inbox five times a second; listing a folder nothing was written to is its
    # largest cost while it waits for its model. Nothing written since a listing: the folder's stat says so.
    long_ago = time.time() - 60
    os.utime(paths.inbox, (long_ago, long_ago))
    listed = counting_listings(monkeypatch)
    ch = channel(paths)
    assert drain(ch, 5) == [] and len(listed) == 1
    cmd = write_inbox(paths, "pause", run=None)
    assert [c.id for c in ch.poll()] == [cmd.id]  # the very next look: the write changed the folder


def test_a_folder_changed_just_before_a_look_is_listed_again_and_every_folder_now_and_then(
        paths: JobPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    # A file system stamps a change with a coarse clock: a folder changed within MTIME_SLACK of a look may carry
    # the same stamp after a change right after it, so such a listing is not the last one needed.
    listed = counting_listings(monkeypatch)
    ch = channel(paths)  # the inbox was just made: its mtime is now
    assert drain(ch, 3) == [] and len(listed) == 3
    # An old, unchanged folder is still listed every RELIST (a temp file a killed writer left ages there).
    long_ago = time.time() - 60
    os.utime(paths.inbox, (long_ago, long_ago))
    monkeypatch.setattr(control, "RELIST", 0.0)
    assert drain(ch, 3) == [] and len(listed) == 6
