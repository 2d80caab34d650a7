"""What the commands' texts say they do is what they do: a pause takes hold at once while the model is asked,
else after the turn (console.engine.operator; tests/integration/test_context_run.py shows both), and a denied
restart goes on with `resume ID` (the headless line after it names that command)."""

from __future__ import annotations

import re
from types import SimpleNamespace

from console.cli import main
from console.engine.command_specs import PAUSE_WHEN
from tests.conftest import REPO as ROOT


def _help(capsys, command: str) -> str:
    assert main([command, "--help"]) == 0
    return re.sub(r"\s+", " ", capsys.readouterr().out)


def test_pause_help_says_when_a_pause_takes_hold(capsys) -> None:
    # It said "pause a running job after its current turn": a pause while the model is asked holds at once.
    said = _help(capsys, "pause")
    assert f"pause a running job: {PAUSE_WHEN}; resume ID unpauses it" in said
    assert "at once while the model is asked" in said


def test_every_text_of_the_pause_says_the_same(capsys) -> None:
    from console.web.pages import sent_line

    assert sent_line(SimpleNamespace(id="k3f9q"), "pause") == f"Run k3f9q: pause sent; it pauses {PAUSE_WHEN}."  # type: ignore[arg-type]
    docs = {name: re.sub(r"\s+", " ", (ROOT / "docs" / name).read_text()) for name in ("cli.md", "console.md")}
    assert "Pause at once while the model is asked (its reply is asked again on resume), else after the current " \
           "turn" in docs["cli.md"]
    assert "pause the selected run: at once while the model is asked" in docs["console.md"]
    for text in docs.values():
        assert "pause the selected run after its current turn" not in text


def test_deny_help_names_the_command_that_goes_on(capsys) -> None:
    # It said "resume later with run --in-place"; everything else (and the line after a denied run) says resume.
    said = _help(capsys, "deny")
    assert "exit code 3; resume ID goes on with it later" in said and "--in-place" not in said


def test_stop_help_says_when_a_stop_is_at_once(capsys) -> None:
    # It said "stop a running job after its current turn": the engine stops at once while the model is asked
    # (the reply in progress is dropped), while paused and while a restart waits (console.engine.operator).
    said = _help(capsys, "stop")
    assert "after its current turn, at once while the model is asked, the run is paused or a restart waits for " \
           "approval" in said
