"""The README's screenshot (docs/img/console.svg) is the console as it is: the quickstart run, held mid-way
through its first phase as the snapshot tests hold it (tests/tui/test_snapshots.py), at 120x36.

A change to what the console shows fails this test until the picture is made again:
``UPDATE_DOCS_SCREENSHOT=1 .venv/bin/python -m pytest -n 0 tests/tui/test_docs_screenshot.py``
(then look at it: ``rsvg-convert docs/img/console.svg -o /tmp/console.png``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.tui.conftest import drive
from tests.tui.test_snapshots import frozen, gated_app

PICTURE = Path(__file__).resolve().parents[2] / "docs" / "img" / "console.svg"
UPDATE = "UPDATE_DOCS_SCREENSHOT"
SIZE = (120, 36)


@pytest.fixture
def make_job(fixed_make_job):
    return fixed_make_job  # the run id on the status line comes from the job's path


def test_the_readmes_screenshot_is_the_console_as_it_is(make_job) -> None:
    sup, app = gated_app(make_job)
    shot: list[str] = []

    async def body(pilot) -> None:
        await frozen(pilot, sup)
        shot.append(app.export_screenshot(title="agent-console run sample_jobs/quickstart"))

    drive(app, body, size=SIZE)
    if os.environ.get(UPDATE) == "1":
        PICTURE.write_text(shot[0])
    assert PICTURE.read_text() == shot[0], (
        f"the console no longer looks like {PICTURE.name}: make it again with {UPDATE}=1 (see this test's docstring)")
