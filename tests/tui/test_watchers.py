"""The theme and plan files are watched from a moment after the console's start, not before its first frames
(watchfiles' imports cost an attach or the fleet ~30 ms of CPU before anything was drawn), and a change made before
the watchers were up is still shown once they are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from console.tui import messages
from console.tui.widgets.plan_pane import PlanPane
from tests.conftest import time_limit
from tests.tui.conftest import attach_app, drive, wait_for

REPO_THEMES = Path(__file__).resolve().parents[2] / "themes"
WATCHERS = {"theme-watch", "plan-watch"}


def _watching(app: Any) -> set[str]:
    return {w.group for w in app.workers if w.group in WATCHERS and not w.is_finished}


def test_the_watchers_start_after_the_first_frames_and_show_what_changed_before(
        tmp_path: Path, make_job: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(messages, "WATCH_AFTER", 2.0)
    monkeypatch.setattr(messages, "WATCH_QUIET_MS", 300)  # the catch-up read comes after this quiet spell
    themes = tmp_path / "themes"
    themes.mkdir()
    for p in REPO_THEMES.glob("*.toml"):
        (themes / p.name).write_text(p.read_text(encoding="utf-8"), encoding="utf-8")
    paths = make_job("quickstart")
    paths.main_plan.write_text("# Plan\n\n## Phase 1: first draft\n- [ ] a step\n", encoding="utf-8")
    app = attach_app(paths, watch=True, themes=themes)
    seen: dict[str, Any] = {}

    async def body(pilot: Any) -> None:
        plan = app.main.query_one(PlanPane)
        await wait_for(pilot, lambda: plan.text is not None and "first draft" in plan.text, what="the plan read")
        seen["watching at the first read"] = _watching(app)
        # Both files change before the watchers are up: no watcher can see these changes happen.
        theme = themes / "agent-dark.toml"
        before = app.current_theme.primary
        theme.write_text(theme.read_text(encoding="utf-8").replace(before, "#ff00aa"), encoding="utf-8")
        paths.main_plan.write_text("# Plan\n\n## Phase 1: second draft\n- [ ] a step\n", encoding="utf-8")
        seen["watching after the changes"] = _watching(app)
        await wait_for(pilot, lambda: _watching(app) == WATCHERS, timeout=30, what="the watchers to start")
        await wait_for(pilot, lambda: plan.text is not None and "second draft" in plan.text, timeout=30,
                       what="the plan changed before the watcher was up")
        await wait_for(pilot, lambda: app.current_theme.primary == "#ff00aa", timeout=30,
                       what="the theme changed before the watcher was up")
        # And a change once they are up is seen as it happens.
        paths.main_plan.write_text("# Plan\n\n## Phase 1: third draft\n- [ ] a step\n", encoding="utf-8")
        await wait_for(pilot, lambda: plan.text is not None and "third draft" in plan.text, timeout=30,
                       what="a change seen by the watcher")

    with time_limit(90):
        drive(app, body)
    assert seen["watching at the first read"] == set()
    assert seen["watching after the changes"] == set()
