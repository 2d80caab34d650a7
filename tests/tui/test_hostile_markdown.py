"""The conversation's Markdown (console.tui.widgets.markdown_lite) against text nested past the parser's limit.

markdown-it stops at 20 nested blocks and drops the rest of the container without a word: a reply could hide
words from the operator's console (the headless log and `logs` show them) behind 30 nested list items or a line
of 25 ">"."""

from __future__ import annotations

import pytest

from console.tui.widgets import markdown_lite

DEEP_LIST = "intro\n\n" + "".join("  " * i + f"- item{i}\n" for i in range(30)) + "\nafter the list\n"
DEEP_QUOTE = "intro\n\n" + ">" * 25 + " the hidden words\n\nafter\n"
DEEP_LINE = "- " * 30 + "the hidden words\n"


@pytest.mark.parametrize("text, words", [
    (DEEP_LIST, ["intro", "item0", "item29", "after the list"]),
    (DEEP_QUOTE, ["intro", "the hidden words", "after"]),
    (DEEP_LINE, ["the hidden words"]),
])
def test_text_nested_past_the_limit_is_all_shown(text: str, words: list[str]) -> None:
    for width in (0, 76):
        shown = markdown_lite.render(text, width).plain
        for word in words:
            assert word in shown, (word, shown[-300:])


def test_ordinary_nesting_keeps_its_formatting() -> None:
    shown = markdown_lite.render("- a\n  - b\n    - c\n\n> quoted\n\n**bold**", 76).plain
    assert shown.splitlines() == ["• a", "  ◦ b", "    ▪ c", "", "▎ quoted", "", "bold"]
