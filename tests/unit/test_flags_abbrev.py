"""Flags are never abbreviated: argparse's prefix matching took `--unconf` as `--unconfined` (the sandbox off),
`--headles` as `--headless` and `--no-auto` as `--no-auto-restart`. Every subcommand's every long flag is walked: a
flag cut short is an unknown flag, exit 2, named in the one line."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from console.cli import main
from console.cli.parser import build_parser
from console.outcome import EXIT_USAGE


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                                                      argparse.ArgumentParser]]:
    yield path, parser
    for name, child in _subparsers(parser).items():
        yield from _walk(child, (*path, name))


def _positionals(parser: argparse.ArgumentParser) -> list[str]:
    """A value for each positional of a subcommand (a choice where it has choices), so only the flag is wrong."""
    values = []
    for action in parser._actions:
        if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
            values.append(next(iter(action.choices)) if action.choices else "x")
    return values


def _cases() -> list[tuple[tuple[str, ...], str, str]]:
    cases = []
    for path, parser in _walk(build_parser()):
        for action in parser._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and len(flag) > 3 and flag != "--help":
                    cases.append((path, flag, flag[:-1]))
    return cases


CASES = _cases()


def test_every_parser_refuses_abbreviations() -> None:
    parsers = list(_walk(build_parser()))
    assert len(parsers) > 10  # the walk reached the subcommands (run, the operator's commands, submit, store, ...)
    assert all(not parser.allow_abbrev for _, parser in parsers), [p for p, parser in parsers if parser.allow_abbrev]


@pytest.mark.parametrize(("path", "flag", "cut"), CASES, ids=[f"{' '.join(p) or '-'} {f}" for p, f, _ in CASES])
def test_a_flag_cut_short_is_unknown(path: tuple[str, ...], flag: str, cut: str, capsys) -> None:
    parser = dict(_walk(build_parser()))[path]
    assert main([*path, *_positionals(parser), cut]) == EXIT_USAGE
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and cut in lines[0] and "unrecognized arguments" in lines[0], out
    # ...and it names the flag meant (never taken for it) and the help of the command it was given to.
    assert f"did you mean {flag}" in lines[0] and f"(see: agent-console {' '.join((*path, '--help'))})" in lines[0]


@pytest.mark.parametrize("cut", ["--unconf", "--headles", "--no-auto", "--in-pl"])
def test_the_attacks(cut: str, capsys) -> None:
    assert main(["run", "some-job", cut]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"unrecognized arguments: {cut}" in err and err.count("\n") == 1
