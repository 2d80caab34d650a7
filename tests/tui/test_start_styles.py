"""A run's panes are laid out for the screen's size (a class of RunPanes) and the active pane marked before they
are mounted: given on the screen's mount, the classes restyled every pane once more (~6 ms of CPU before an
attach's first frame, issue 37). The layout is still the one the size calls for, and a resize still changes it."""

from __future__ import annotations

from typing import Any

import pytest
from textual.dom import DOMNode
from textual.widgets import Footer

from console.tui.screens.main import RunPanes
from tests.tui.conftest import drive
from tests.tui.test_dialog_keys import Clock, Seq, recorded_app, started


@pytest.mark.parametrize(("size", "mode"), [((80, 24), "narrow"), ((120, 40), "medium"), ((200, 50), "wide")])
def test_the_panes_are_laid_out_before_they_are_mounted(make_job: Any, monkeypatch: pytest.MonkeyPatch,
                                                        size: tuple[int, int], mode: str) -> None:
    restyled: list[int] = []
    real = DOMNode.update_node_styles

    def counting(self: DOMNode, animate: bool = True) -> None:
        if isinstance(self, RunPanes) and self.children:
            restyled.append(len(self.children))
        real(self, animate)

    monkeypatch.setattr(DOMNode, "update_node_styles", counting)
    app, _rec = recorded_app(make_job, Clock())
    seen: dict[str, Any] = {}

    async def body(pilot: Any) -> None:
        await started(pilot, app, Seq())
        await pilot.pause()
        panes = app.screen.query_one(RunPanes)
        seen["classes"] = {c for c in panes.classes if c in ("-narrow", "-medium", "-wide")}
        seen["active"] = [p.id for p in panes.query(".pane.-active")]
        seen["palette"] = panes.query_one(Footer).show_command_palette
        seen["restyled at start"] = list(restyled)
        await pilot.resize_terminal(200 if mode != "wide" else 80, 50 if mode != "wide" else 24)
        await pilot.pause()
        seen["after a resize"] = {c for c in panes.classes if c in ("-narrow", "-medium", "-wide")}

    drive(app, body, size=size)
    assert seen["classes"] == {f"-{mode}"} and seen["active"] == ["conversation"]
    assert seen["palette"] == (mode != "narrow")
    assert seen["restyled at start"] == []
    assert seen["after a resize"] == ({"-wide"} if mode != "wide" else {"-narrow"})
