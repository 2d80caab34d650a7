"""What a resume that answers nothing says: the need it does not answer, and the command that would."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from console.engine.commands import Resume
from console.engine.control import ControlChannel
from console.engine.needs import label
from console.engine.operator import NOT_ANSWERED_BY_RESUME, OperatorState


class Events:
    def __init__(self) -> None:
        self.emitted: list[dict[str, Any]] = []

    def emit(self, cls: type, **fields: Any) -> None:
        self.emitted.append(fields)


def rejected(op: OperatorState) -> str:
    rt: Any = SimpleNamespace(events=Events(), paths=SimpleNamespace(run_id="k3f9q"))
    op.channel.submit(Resume(), source="cli")
    op.apply(rt)
    (answer,) = [f for f in rt.events.emitted if f.get("status") == "rejected"]
    return str(answer["detail"])


@pytest.mark.parametrize("need", sorted(NOT_ANSWERED_BY_RESUME))
def test_every_need_that_does_not_pause_says_what_answers_it(need: str) -> None:
    op = OperatorState(ControlChannel())
    op.needs = need  # type: ignore[assignment]
    detail = rejected(op)
    assert detail.startswith(f"not paused: it waits for {label(need)}: ") and "k3f9q" in detail


def test_a_restart_awaiting_approval_names_approve_and_deny() -> None:
    op = OperatorState(ControlChannel())
    op.awaiting_restart = True
    assert rejected(op) == "not paused: it waits for restart approval: agent-console approve k3f9q or deny k3f9q"


def test_a_need_of_a_newer_version_still_says_what_ends_it() -> None:
    op = OperatorState(ControlChannel())
    op.needs = "something_new"  # type: ignore[assignment]
    assert rejected(op) == "not paused: it waits for something new: agent-console stop k3f9q ends it"
