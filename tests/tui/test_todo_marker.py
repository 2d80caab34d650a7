"""The todo pane's current-task marker is never cut in two at the pane's edge ('←' on one line, 'CURRENT' on the
next): where it would be, it has its own line."""

from __future__ import annotations

import pytest

from console.tui.widgets.todo_pane import render_display

DISPLAY = ("Phase: Review (1 of 2)\n[x] Task 2: Read the notes\n"
           "[ ] Task 3: Summarise the notes into the report file  ← CURRENT\n[ ] Task 4")


@pytest.mark.parametrize("width", range(20, 81))
def test_the_current_marker_is_whole_at_every_width(width: int) -> None:
    lines = [line.plain.rstrip() for line in render_display(DISPLAY, width).wrap(width)]
    assert all(len(line) <= width for line in lines)
    assert not any(line.endswith("←") or line.lstrip().startswith("CURRENT") for line in lines), (width, lines)
    assert sum("← CURRENT" in line for line in lines) == 1
    # The task's own words are all there, in order, before the marker.
    text = " ".join(lines)
    assert text.index("Summarise") < text.index("report file") < text.index("← CURRENT") < text.index("Task 4")
