"""The operator's commands travel typed from the key to the engine: a controller takes the engine's command
(``Pause()``, ``Rewind(issue=...)``), and what reaches the run is what a name and its arguments made before (the
inbox file a run of an older console reads, the line a refusal says)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.engine.commands import (
    MAX_TEXT,
    MODELS,
    AnyCommand,
    Checkpoint,
    CommandError,
    Pause,
    Rewind,
    Stop,
    parse_command,
)
from console.engine.control import Command, write_inbox
from console.engine.job import JobPaths
from console.engine.run_lock import RunLock
from console.tui.commands import InboxController, RecordingController


def inbox_files(paths: JobPaths) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(paths.inbox.glob("*.json"))]


@pytest.mark.parametrize("command, name, args", [
    (Pause(), "pause", {}),
    (Stop(), "stop", {}),
    (Checkpoint(note="look again"), "checkpoint", {"note": "look again"}),
    (Rewind(issue="the digest misses the risks", phase=2), "rewind", {"issue": "the digest misses the risks",
                                                                        "phase": 2}),
])
def test_an_inbox_controller_writes_the_file_a_name_and_its_arguments_wrote(tmp_path: Path, command: AnyCommand,
                                                                             name: str, args: dict[str, object]):
    typed, named = JobPaths(tmp_path / "typed"), JobPaths(tmp_path / "named")
    for paths in (typed, named):
        paths.root.mkdir()
    locks = [RunLock(typed), RunLock(named)]
    assert all(lock.acquire() for lock in locks)  # a process runs each job: the inbox is written
    try:
        assert InboxController(typed).send(command) is None
        write_inbox(named, name, args, source="console")  # the way the console sent it before
    finally:
        for lock in locks:
            lock.release()
    (got,), (before,) = inbox_files(typed), inbox_files(named)
    unique = ("id", "issued_at", "run")  # each file's own
    assert {k: v for k, v in got.items() if k not in unique} == {k: v for k, v in before.items() if k not in unique}
    assert got["command"] == name and got["args"] == args and got["source"] == "console"
    # The engine reads it back as the same typed command.
    assert Command.model_validate(got).body == command


def test_every_command_built_by_its_model_is_the_one_its_name_parses_to():
    for name, model in MODELS.items():
        args = {"issue": "again"} if name == "rewind" else {}
        assert model.build(**args) == parse_command(name, args)


@pytest.mark.parametrize("args", [{"issue": "x" * (MAX_TEXT + 1)}, {"issue": "  "}, {"issue": "i", "phase": 0},
                                  {"issue": "i", "phase": True}, {"issue": "i", "colour": "red"}])
def test_a_command_built_from_the_operators_text_refuses_what_parse_command_refuses_with_its_line(args):
    with pytest.raises(CommandError) as parsed:
        parse_command("rewind", args)
    with pytest.raises(CommandError) as built:
        Rewind.build(**args)
    assert str(built.value) == str(parsed.value)


def test_a_recording_controller_keeps_the_typed_commands():
    rec = RecordingController()
    assert rec.send(Rewind(issue="wrong order", phase=2)) is None and rec.send(Pause()) is None
    assert rec.commands == [Rewind(issue="wrong order", phase=2), Pause()]
    assert rec.sent == [("rewind", {"issue": "wrong order", "phase": 2}), ("pause", {})]


def test_each_controller_declares_what_the_views_ask_of_it(tmp_path: Path):
    """The capabilities the views use are the Controller protocol's, answered by every controller (no probe)."""
    from console.tui.screens.run_context import RunContext
    from console.tui.store_follow import StoreController
    from console.view.state import ConsoleState

    paths = JobPaths(tmp_path)
    here = InboxController(paths)
    there = StoreController("postgresql://nobody@127.0.0.1:1/none", "k" * 32, "machine-a\x1b[2J", "k3f9q",
                            screenshots=tmp_path / "shots")
    recorder = RecordingController()
    assert (here.local, here.startable, here.host, here.resume_hint) == (True, True, "", "")
    assert (here.follower, here.plan_source, here.screenshots, here.problem) == (None, None, None, None)
    assert (recorder.local, recorder.startable, recorder.follower) == (False, False, None)
    assert (there.local, there.startable) == (False, False) and there.screenshots == tmp_path / "shots"
    assert there.follower == there.follow_events and there.plan_source == there.plan_text
    assert "\x1b" not in there.host and there.resume_hint.endswith(f"on {there.host} (where its folder is)")
    for controller, startable, local in ((here, True, True), (there, False, False), (recorder, False, False)):
        ctx = RunContext(ConsoleState("job"), controller, paths, "k3f9q")
        facts = ctx.facts()
        assert (facts.startable, facts.local) == (startable, local)
        assert (ctx.host, ctx.resume_hint) == (controller.host, controller.resume_hint)
    there.close()
