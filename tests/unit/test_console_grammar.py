"""`attach` and the fleet parse their command line with their own grammar alone (the whole grammar and what it
imports cost ~12 ms of CPU before their first frame): whatever they are given, it reads it as the whole grammar
does, the same values or the same one-line error, and any other command line gets the whole grammar."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli.common import UsageError
from console.cli.parser import build_parser, console_only

SAME = [["attach", "abc"], ["attach", "abc", "--theme", "nord"], ["attach", "--theme", "nord", "abc"],
        ["attach", "--theme=agent-light", "run-1"], ["fleet"], ["fleet", "--theme", "agent-dark"], []]
REFUSED = [["attach"], ["attach", "a", "--bogus"], ["attach", "a", "b"], ["attach", "--them", "x", "a"],
           ["fleet", "extra"], ["fleet", "--theme"], ["attach", "a", "--version"]]


def _read(words: list[str], only: str | None) -> object:
    try:
        return vars(build_parser(only).parse_args(words))
    except UsageError as exc:
        return f"UsageError: {exc}"


@pytest.mark.parametrize("words", SAME + REFUSED)
def test_the_console_commands_own_grammar_reads_what_the_whole_grammar_reads(words: list[str]) -> None:
    only = console_only(words, terminal=True)
    assert only is not None
    assert _read(words, only) == _read(words, None)


@pytest.mark.parametrize("words", REFUSED)
def test_a_bad_console_command_line_is_refused_in_one_line(words: list[str]) -> None:
    assert str(_read(words, console_only(words, terminal=True))).startswith("UsageError: ")


@pytest.mark.parametrize(("words", "terminal"), [
    (["attach", "a", "-h"], True), (["fleet", "--help"], True), (["--help"], True), (["--version"], True),
    (["jobs"], True), (["run", "job"], True), (["pause", "a"], True), (["-h", "attach"], True),
    ([], False),  # no command and no terminal: the whole grammar's help is printed
])
def test_any_other_command_line_gets_the_whole_grammar(words: list[str], terminal: bool) -> None:
    assert console_only(words, terminal) is None


def test_no_command_on_a_terminal_is_the_fleet_with_no_command_grammar() -> None:
    assert console_only([], terminal=True) == ""
    assert build_parser("").parse_args([]).command is None  # console.cli then opens the fleet


def test_the_console_commands_grammar_imports_none_of_the_others(tmp_path: Path) -> None:
    """What the saving is made of: the run settings' and providers' tables, the other commands' modules."""
    code = ("import sys; from console.cli.parser import build_parser; build_parser('attach'); build_parser('fleet');"
            "print(sorted(m for m in sys.modules if m in ('console.providers.registry', "
            "'console.engine.run_setting_specs', 'console.cli.wait', 'console.cli.submit', 'console.cli.serve', "
            "'console.engine.command_specs')))")
    env = {**os.environ, "HOME": str(tmp_path), "AGENT_CONSOLE_DATA_DIR": str(tmp_path / "data"),
           "AGENT_CONSOLE_CONFIG": str(tmp_path / "config.toml")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"
    whole = subprocess.run([sys.executable, "-c", code.replace("build_parser('attach'); build_parser('fleet')",
                                                                "build_parser()")],
                           env=env, capture_output=True, text=True, check=True, timeout=60)
    assert "console.providers.registry" in whole.stdout  # the check can see them
