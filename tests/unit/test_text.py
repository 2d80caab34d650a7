"""safe_text: what becomes what, for every kind of character a terminal could act on (console.engine.text)."""

from __future__ import annotations

import json

import pytest

from console.engine import events as ev
from console.engine.job import one_line
from console.engine.text import safe_text
from console.view import present
from tests.hostile import ATTACK, SHOWN, raw_controls
from tests.tui.guardrail_events import Log

# The attack, and a zero-width space, a BOM, a lone surrogate and DEL after it.
HOSTILE = ATTACK + "\u200b\ufeff\udc80\x7f"


@pytest.mark.parametrize("ch, shown", [
    ("\x1b", "\\x1b"), ("\x07", "\\x07"), ("\x00", "\\x00"), ("\x08", "\\x08"), ("\x7f", "\\x7f"),  # C0, DEL
    ("\x9b", "\\x9b"), ("\x85", "\\x85"), ("\x90", "\\x90"),  # C1: CSI, NEL, DCS
    ("\u202a", "\\u202a"), ("\u202e", "\\u202e"), ("\u2066", "\\u2066"), ("\u2069", "\\u2069"),  # bidi
    ("\u200e", "\\u200e"), ("\u200b", "\\u200b"), ("\u200d", "\\u200d"), ("\ufeff", "\\ufeff"),  # marks, zero-width
    ("\u2028", "\\u2028"), ("\u2029", "\\u2029"), ("\U000e0041", "\\U000e0041"),  # separators, a tag character
    ("\udc80", "\\udc80"), ("\ue000", "\\ue000"),  # a lone surrogate (stdout cannot even encode it), private use
    ("\xa0", " "), ("\u3000", " "),  # other spaces: a plain space
    ("é", "é"), ("中", "中"), ("✓", "✓"), ("[", "["), ("\\", "\\"),  # printable: as it is
])
def test_each_kind_of_character_becomes_what_the_docstring_says(ch: str, shown: str) -> None:
    assert safe_text(f"a{ch}b") == f"a{shown}b"
    assert safe_text(f"a{ch}b", one_line=True) == f"a{shown}b"


def test_an_escape_sequence_loses_its_escape_and_the_rest_is_plain_text() -> None:
    out = safe_text(HOSTILE)
    assert out == SHOWN + "\\u200b\\ufeff\\udc80\\x7f"
    assert not raw_controls(out)
    out.encode("utf-8")  # no lone surrogate left: printing it cannot raise


def test_multi_line_text_keeps_its_lines_and_tabs_one_line_text_shows_them() -> None:
    reply = "first\tline\r\nsecond \x1b[31mred\x1b[0m\rover\n\nlast"
    assert safe_text(reply) == "first\tline\nsecond \\x1b[31mred\\x1b[0m\\rover\n\nlast"
    assert safe_text(reply, one_line=True) == "first\\tline\\r\\nsecond \\x1b[31mred\\x1b[0m\\rover\\n\\nlast"
    assert safe_text(" a \n\n  b\x1b \n", one_line=True, join=True) == "a b\\x1b"


def test_a_limit_cuts_with_dots_never_inside_an_escape() -> None:
    text = "ab\x1bcdef"  # shown as ab\x1bcdef (10 characters)
    assert safe_text(text, limit=0) == "ab\\x1bcdef"
    for limit in range(4, 10):
        out = safe_text(text, limit=limit)
        assert len(out) <= limit and out.endswith("...")
        assert out in ("a...", "ab...", "ab\\x1b...", "ab\\x1bc...", "ab\\x1bcd...")  # "\x1" never shows alone


def test_it_is_idempotent_and_returns_clean_text_itself() -> None:
    for mode in ({}, {"one_line": True}, {"one_line": True, "join": True}):
        once = safe_text(HOSTILE + "\nnext", **mode)
        assert safe_text(once, **mode) == once
    clean = "read_file(notes/a.md) ✓ 12 chars"
    assert safe_text(clean) is clean and safe_text(clean, one_line=True) is clean


def test_one_line_and_flat_are_safe_text() -> None:
    assert one_line(HOSTILE, 0) == safe_text(HOSTILE, one_line=True)
    assert present.flat("a\n" + HOSTILE, 0) == safe_text("a\n" + HOSTILE, one_line=True, join=True)


def test_every_text_of_an_event_is_made_safe_at_any_depth() -> None:
    log = Log()
    todos = ev.TodosChanged(ts=log.start, seq=1, session=1, kind="phase", phase_name=f"Evil {HOSTILE}",
                            phase_number=1, total_phases=1, display=f"[ ] one {HOSTILE}\n[ ] two",
                            items=[ev.TodoItemRecord(text=HOSTILE, done=False)])
    safe = present.safe_event(todos)
    assert type(safe) is ev.TodosChanged and safe.seq == todos.seq
    assert safe.phase_name == safe_text(f"Evil {HOSTILE}") and safe.items[0].text == safe_text(HOSTILE)
    assert safe.display.splitlines()[1] == "[ ] two"  # multi-line text keeps its lines
    assert not raw_controls(json.dumps(safe.model_dump(mode="json"), ensure_ascii=False))
    plain = log.add(ev.TurnStarted, turn=3)
    assert present.safe_event(plain) is plain  # nothing to change: no copy


def test_describe_and_argument_items_show_no_raw_control() -> None:
    log = Log()
    args = json.dumps({"path": "a\u001b]0;x\u0007.md", "content": f"{HOSTILE}\nline 2"})  # JSON escapes, decoded
    called = log.add(ev.ToolCalled, turn=1, call_id="c1", tool=f"write{HOSTILE}", arguments=args)
    p = present.describe(called)
    assert p is not None and not raw_controls(p.text + p.detail + p.source)
    items = present.argument_items(args)
    assert items[1] == ("content", safe_text(f"{HOSTILE}\nline 2"))
    assert not raw_controls("".join(k + v for k, v in items))
