"""Lengths of time in words (console.view.format.span): "18:07 left · at 17:04:58" read as a clock time."""

from __future__ import annotations

import pytest

from console.view.format import span


@pytest.mark.parametrize(("seconds", "said"), [
    (18 * 60 + 7, "18 min 7 s"),  # the trial's "18:07 left"
    (0, "0 s"), (-5, "0 s"), (0.9, "0 s"), (59.99, "59 s"), (60, "1 min"), (3599, "59 min 59 s"),
    (3600, "1 h"), (3600 + 125, "1 h 2 min"), (86_400, "1 d"), (86_400 * 3 + 7200 + 59, "3 d 2 h"),
])
def test_span_says_units_never_a_clock_face(seconds, said):
    assert span(seconds) == said
    assert ":" not in span(seconds)
