"""The operator's commands are one typed union and one spec table, and every surface derives from them (issue 20,
point 3): each spec is a CLI subcommand (with its arguments), a key when it has one (no two commands fight over a
key), an inbox command that survives the round trip, and a case of the engine's dispatch. Whatever else reaches
the inbox (an unknown kind, an extra field, a huge text, a wrong type) is refused: moved aside and reported,
never applied, and never in front of the valid command behind it."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest

from console.engine import events as ev
from console.engine.command_specs import BY_CLI, BY_NAME, COMMANDS, LIVE_ONLY, SPECS, Arg, CommandName, CommandSpec
from console.engine.commands import MAX_TEXT, MODELS, AnyCommand, CommandError, parse_command
from console.engine.control import REJECTED, Command, ControlChannel, make_command, write_inbox
from console.engine.job import JobPaths
from console.engine.operator import OperatorState
from console.engine.runtime import Runtime


def sample_args(spec: CommandSpec) -> dict[str, Any]:
    """A valid value for each of the command's arguments, as the command line would give them (a flag unset: a
    command's flags may exclude each other)."""
    def value(a: Arg) -> Any:
        one = a.example or (1 if a.type is int else f"{a.name} of the operator")
        return [one] if a.many else one

    return {a.name: value(a) for a in spec.args if not a.flag}


def cli_argv(spec: CommandSpec, job: str = "JOB") -> list[str]:
    argv = [spec.cli, job]
    for a in spec.args:
        if a.flag:
            continue
        given = sample_args(spec)[a.name]
        for value in given if a.many else [given]:
            argv += [str(value)] if a.positional else [f"--{a.name}", str(value)]
    return argv


@pytest.fixture
def paths(tmp_path: Path) -> JobPaths:
    root = tmp_path / "job"
    root.mkdir()
    (root / "instructions.md").write_text("# a job\n")
    p = JobPaths(root)
    p.inbox.mkdir(parents=True)
    return p


# -- one table, one union -----------------------------------------------------------------------------------------
def test_the_spec_table_and_the_union_name_the_same_commands() -> None:
    members = typing.get_args(typing.get_args(AnyCommand)[0])
    assert {MODELS[s.name] for s in SPECS} == set(members) and len(SPECS) == len(members)
    assert set(COMMANDS) == set(typing.get_args(CommandName)) == set(BY_NAME)
    assert len(BY_CLI) == len(SPECS)  # no two commands share a command-line name
    assert len({s.title for s in SPECS}) == len(SPECS)  # nor a palette entry
    assert {"approve_restart", "deny_restart", "stop", "answer"} == LIVE_ONLY
    for spec in SPECS:
        assert spec.help and spec.title and spec.palette_help
        for arg in spec.args:  # every argument the command line offers is a field of the model
            assert arg.name in MODELS[spec.name].model_fields


# -- the command line ---------------------------------------------------------------------------------------------
def test_every_spec_is_a_subcommand_with_its_arguments_and_help() -> None:
    from console.cli.parser import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    helps = {c.dest: c.help for c in sub._choices_actions}
    for spec in SPECS:
        assert helps[spec.cli] == spec.help
        args = parser.parse_args(cli_argv(spec))
        assert args.command == spec.cli and args.job == "JOB"
        given = {a.name: getattr(args, a.name) for a in spec.args}
        assert parse_command(spec.name, given) == parse_command(spec.name, sample_args(spec))


def test_the_command_line_queues_each_command_typed(make_job, capsys) -> None:
    """`agent-console CMD JOB ...` for every spec that may be queued: the inbox holds that typed command."""
    from console.cli import main

    paths = make_job()
    paths.state.mkdir(parents=True, exist_ok=True)
    for spec in SPECS:
        if spec.live or spec.cli == "resume":  # refused with no run (resume starts one): tests/test_cli.py
            continue
        assert main([*cli_argv(spec, str(paths.root)), "--wait", "0"]) == 0, capsys.readouterr()
        [queued] = ControlChannel(paths.inbox).poll()
        assert queued.body == parse_command(spec.name, sample_args(spec)) and queued.source == "cli"


def test_the_command_line_refuses_an_oversized_issue_before_queueing(make_job, capsys) -> None:
    from console.cli import main

    paths = make_job()
    paths.state.mkdir(parents=True, exist_ok=True)
    assert main(["rewind", str(paths.root), "x" * (MAX_TEXT + 1), "--wait", "0"]) == 2
    assert f"at most {MAX_TEXT} characters" in capsys.readouterr().err
    assert main(["rewind", str(paths.root), "   ", "--wait", "0"]) == 2
    assert "issue text is empty" in capsys.readouterr().err
    assert not paths.inbox.exists() or not list(paths.inbox.iterdir())


# -- the console's keys -------------------------------------------------------------------------------------------
def test_keys_are_derived_and_unique() -> None:
    from console.tui.keymap import OPERATOR_KEYS, command_keys

    derived = command_keys()
    for spec in SPECS:
        if spec.key is not None:
            assert any(k.id == spec.key.id and k.action == spec.action for k in derived)
    # One key per binding id, and one binding id per key: a remap moves every action of the id together (pause
    # and resume share p on purpose, as stop and stop now share s: the footer shows whichever applies).
    key_of: dict[str, str] = {}
    id_of: dict[str, str] = {}
    for k in OPERATOR_KEYS:
        assert key_of.setdefault(k.id, k.key) == k.key, f"binding id {k.id} has two keys"
        assert id_of.setdefault(k.key, k.id) == k.id, f"key {k.key} is bound under two ids"
    assert len({k.action for k in OPERATOR_KEYS}) == len(OPERATOR_KEYS)  # each action bound once
    # Every binding id is listed once on the help screen.
    assert sorted(k.id for k in OPERATOR_KEYS if k.help) == sorted(key_of)


# -- the inbox: the typed round trip ------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_each_command_survives_the_inbox_round_trip(paths, spec) -> None:
    body = parse_command(spec.name, sample_args(spec))
    sent = write_inbox(paths, body, source="cli")
    [got] = ControlChannel(paths.inbox).poll()
    assert got.body == body and got.id == sent.id and got.args == body.args()
    assert Command.model_validate_json(got.model_dump_json()).body == body


HOSTILE: dict[str, Any] = {
    "unknown kind": {"command": "format_disk"},
    "kind in args": {"command": "stop", "args": {"kind": "pause"}},
    "extra argument": {"command": "stop", "args": {"now": True}},
    "extra envelope field": {"command": "stop", "exec": "rm -rf /"},
    "args not an object": {"command": "pause", "args": ["x"]},
    "issue too long": {"command": "rewind", "args": {"issue": "x" * (MAX_TEXT + 1)}},
    "issue blank": {"command": "rewind", "args": {"issue": " \n "}},
    "issue missing": {"command": "rewind"},
    "issue a number": {"command": "rewind", "args": {"issue": 7}},
    "note an object": {"command": "checkpoint", "args": {"note": {"a": 1}}},
    "phase zero": {"command": "rewind", "args": {"issue": "x", "phase": 0}},
    "phase true": {"command": "rewind", "args": {"issue": "x", "phase": True}},
    "command null": {"command": None},
    "source huge": {"command": "stop", "source": "s" * 10_000},
    "id empty": {"command": "stop", "id": ""},
    "deep nesting": {"command": "checkpoint", "args": {"note": json.loads("[" * 200 + "]" * 200)}},
}


def test_hostile_inbox_files_are_refused_and_never_block_a_valid_command(paths, make_job, clock) -> None:
    for n, (what, raw) in enumerate(HOSTILE.items()):
        (paths.inbox / f"0-{n:03d}-{what.replace(' ', '_')}.json").write_text(json.dumps(raw))
    (paths.inbox / "0-999-not-json.json").write_bytes(b"\xff{not json")
    write_inbox(paths, "pause")  # sorts after every hostile file
    rt = Runtime(paths, clock, ev.EventStream(paths.events, clock))
    op = OperatorState(ControlChannel(paths.inbox))
    applied = op.apply(rt)
    assert [c.command for c in applied] == ["pause"] and op.paused
    answers = [e for e in ev.read_events(paths.events) if isinstance(e, ev.OperatorCommand)]
    invalid = [e for e in answers if e.command == "invalid"]
    assert len(invalid) == len(HOSTILE) + 1 and all(e.status == "rejected" for e in invalid)
    assert all(len(e.detail) < 400 and "\n" not in e.detail for e in invalid)
    moved = {f"0-{n:03d}-{what.replace(' ', '_')}{REJECTED}" for n, what in enumerate(HOSTILE)}
    assert {p.name for p in paths.inbox.iterdir()} == {*moved, f"0-999-not-json{REJECTED}"}


@pytest.mark.parametrize("name,args", [("format_disk", {}), ("stop", {"now": True}), ("pause", [1]), (3, {}),
                                       ("rewind", {"issue": "x" * (MAX_TEXT + 1)}), ("rewind", {"issue": ""}),
                                       ("stop", {"kind": "pause"})])
def test_in_process_commands_are_checked_the_same_way(name, args) -> None:
    ch = ControlChannel()
    with pytest.raises(CommandError):
        ch.submit(name, args)
    assert ch.poll() == []
    with pytest.raises(CommandError):
        make_command(name, args)


# -- the engine's dispatch ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_command_has_a_meaning_in_the_engine(make_job, clock, spec) -> None:
    """Each command reaches OperatorState and is answered (applied or refused with a reason of its own), never
    'unknown'; the answer names the command and carries its arguments."""
    paths = make_job()
    rt = Runtime(paths, clock, ev.EventStream(paths.events, clock))
    rt.phases.ensure_bootstrap()
    op = OperatorState()
    op.channel.submit(spec.name, sample_args(spec))
    op.apply(rt)
    [received, answer] = [e for e in ev.read_events(paths.events) if isinstance(e, ev.OperatorCommand)]
    assert received.status == "received" and answer.command == spec.name == received.command
    assert answer.status in ("applied", "rejected") and "unknown" not in answer.detail
    assert answer.args == parse_command(spec.name, sample_args(spec)).logged()
