"""Cheap rendering for the common case of assistant text: prose with inline Markdown.

Parsing Markdown with Rich costs a few milliseconds per message, which adds up when
thousands of messages stream past. Text without block syntax (headings, lists,
quotes, code blocks, tables) is turned into styled Content directly: **bold**,
*italic* / _italic_, `code` and [links](url). Anything else goes to Rich's full
Markdown renderer, so what the operator sees is Markdown either way.
"""

from __future__ import annotations

import re

from textual.content import Content

# Both run on the model's text, so neither may backtrack badly: the thematic break uses [ \t], not \s (which
# spans lines and made a run of blank lines quadratic), a link's text stops at '[' and its URL at '(' (a run of
# '[' or of "[a](b" used to rescan the rest of the text from every bracket).
BLOCK = re.compile(r"^\s{0,3}(?:#{1,6}\s|[-*+]\s|\d+[.)]\s|>|\||```|~~~)|^\s{4}\S|^[ \t]*(?:[-*_][ \t]*){3,}$", re.M)
INLINE = re.compile(
    r"(?P<code>`[^`\n]+`)"
    r"|(?P<bold>\*\*[^*\n]+\*\*|__[^_\n]+__)"
    r"|(?P<italic>(?<![\w*])\*[^*\s][^*\n]*?\*(?![\w*])|(?<![\w_])_[^_\s][^_\n]*?_(?![\w_]))"
    r"|(?P<link>\[[^\[\]\n]+\]\([^()\s]+\))"
)
STYLES = {"code": "$text-accent", "bold": "bold", "italic": "italic", "link": "underline"}


def is_simple(text: str) -> bool:
    return not BLOCK.search(text)


def inline(text: str) -> Content:
    """Prose with inline Markdown as Content (the caller checked :func:`is_simple`)."""
    parts: list[str | tuple[str, str]] = []
    pos = 0
    for m in INLINE.finditer(text):
        if m.start() > pos:
            parts.append(text[pos:m.start()])
        kind = m.lastgroup or ""
        raw = m.group(0)
        if kind == "code":
            inner = raw[1:-1]
        elif kind == "bold":
            inner = raw[2:-2]
        elif kind == "italic":
            inner = raw[1:-1]
        else:
            inner = raw[1:raw.index("](")]
        parts.append((inner, STYLES.get(kind, "")))
        pos = m.end()
    if pos < len(text):
        parts.append(text[pos:])
    # Markdown joins the lines of a paragraph; blank lines separate paragraphs.
    content = Content.assemble(*parts)
    return content
