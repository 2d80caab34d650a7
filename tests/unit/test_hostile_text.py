"""safe_text against text whose width the layout and the terminal would count differently.

The console lays each row out by grapheme (Rich and Textual count a heart with U+FE0F as 2 cells, a thumbs-up with
its skin tone as 2); a terminal that draws a code point at a time (tmux 3.3, measured: 1 cell and 4) then puts the
rest of the row that many cells off: an agent's reply pulled the pane beside the conversation out of place, or
pushed the row's end off the screen. Made safe, a text is as wide drawn either way."""

from __future__ import annotations

import unicodedata

import pytest
from rich.cells import cell_len

from console.engine.text import safe_text
from console.view import present

HEART = "\u2764\ufe0f"  # text-default heart asked to be emoji: 2 cells by grapheme, 1 on tmux 3.3
WARNING = "\u26a0\ufe0f"
KEYCAP = "1\ufe0f\u20e3"
THUMB = "\U0001f44d\U0001f3fd"  # a thumbs-up with a skin tone: 2 by grapheme, 4 on tmux 3.3
TONE = "\U0001f3fd"  # a skin tone alone: 0 by grapheme, 2 on tmux 3.3
FILLER = "\u3164"  # Hangul filler: draws nothing visible; 0 cells laid out, 2 on tmux 3.3
HALF_FILLER = "\uffa0"  # its halfwidth form: 0 laid out, 1 drawn
SEQUENCES = [HEART, WARNING, KEYCAP, THUMB, TONE, FILLER, HALF_FILLER]
AGREED = ["\u263a\ufe0e", "\U0001f600\ufe0e", "\u2705\ufe0f"]  # as wide either way: still so once made safe


def drawn_per_code_point(text: str) -> int:
    """The cells a terminal that draws a code point at a time gives ``text`` (wcwidth's rule: marks and format
    characters none, East Asian wide and fullwidth two, the rest one)."""
    def width(ch: str) -> int:
        if unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            return 0
        return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return sum(width(ch) for ch in text)


@pytest.mark.parametrize("seq", SEQUENCES)
@pytest.mark.parametrize("mode", [{}, {"one_line": True}, {"one_line": True, "join": True}])
def test_a_made_safe_text_is_as_wide_laid_out_as_drawn(seq: str, mode: dict[str, bool]) -> None:
    text = f"ok {seq * 30} end"
    assert cell_len(text) != drawn_per_code_point(text)  # the attack: 30 of them put a row up to 60 cells off
    out = safe_text(text, **mode)
    assert cell_len(out) == drawn_per_code_point(out)
    assert out.startswith("ok ") and out.endswith(" end")
    assert safe_text(out, **mode) == out  # still idempotent


@pytest.mark.parametrize("seq", AGREED)
def test_sequences_drawn_alike_stay_drawn_alike(seq: str) -> None:
    for mode in ({}, {"one_line": True}):
        out = safe_text(f"ok {seq * 30} end", **mode)
        assert cell_len(out) == drawn_per_code_point(out)


def test_prose_drops_the_marks_and_a_name_shows_them() -> None:
    reply = f"{WARNING} careful\nliked {THUMB} and {HEART} {KEYCAP}"
    assert safe_text(reply) == "\u26a0 careful\nliked \U0001f44d and \u2764 1\u20e3"
    assert safe_text(f"notes{HEART}.md", one_line=True) == "notes\u2764\\ufe0f.md"
    assert safe_text(f"a{THUMB}", one_line=True) == "a\U0001f44d\\U0001f3fd"
    # A path made safe says it is not notes.md: the two do not read the same.
    assert safe_text("notes\ufe0f.md", one_line=True) != safe_text("notes.md", one_line=True)


def test_a_blank_looking_filler_is_shown_as_an_escape_everywhere() -> None:
    for ch in ("\u115f", "\u1160", FILLER, HALF_FILLER):
        shown = f"\\u{ord(ch):04x}"
        assert safe_text(f"a{ch}b") == f"a{shown}b" and safe_text(f"a{ch}b", one_line=True) == f"a{shown}b"


def test_what_the_views_fold_carries_no_width_mark() -> None:
    assert present.flat(f"phase {HEART}\n{THUMB}", 0) == "phase \u2764\\ufe0f \U0001f44d\\U0001f3fd"


def test_a_limit_never_cuts_an_escaped_mark_in_half() -> None:
    text = "ab" + HEART + "cdefgh"  # one_line: ab + heart + \ufe0f + cdefgh (15 characters)
    for limit in range(4, 15):
        out = safe_text(text, one_line=True, limit=limit)
        assert len(out) <= limit and out.endswith("...")
        assert "\\u" not in out or "\\ufe0f" in out  # never "\ufe" alone


def test_text_without_marks_is_returned_itself() -> None:
    for clean in ("plain ascii", "emoji \U0001f600 and \u2705 and \u4e2d\u6587", "e\u0301"):
        assert safe_text(clean) is clean and safe_text(clean, one_line=True) is clean
