"""Assistant text as styled Content: Markdown parsed by markdown-it-py (CommonMark, plus tables and strikethrough),
drawn with the theme's variables, so every theme (light, dark, ANSI) styles inline code, headings and quotes in its
own palette.

One Content per message, wrapped to the pane's width by the caller's width (list items and quotes keep their
indent on every line they wrap to). Inline: **bold**, *italic*, ~~strike~~, `code`, [links](url) (the text,
underlined), images (their alt text). Blocks: paragraphs (a paragraph's lines join, as in Markdown), headings,
bullet and numbered lists, quotes, fenced and indented code (highlighted by language when one is given), tables,
rules. Raw HTML is shown as text, never interpreted. markdown-it-py's parser is linear in its input: no pattern
here backtracks on the model's text.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.token import Token
from textual.content import Content, Span

# Inline styles, and the block styles, in theme variables (see Textual's design system).
INLINE = {"strong": "bold", "em": "italic", "s": "strike", "link": "underline"}
CODE = "$text-accent"
HEADING = {1: "bold $markdown-h1-color", 2: "bold $markdown-h2-color", 3: "bold $markdown-h3-color",
           4: "$markdown-h4-color $markdown-h4-text-style", 5: "$markdown-h5-color $markdown-h5-text-style",
           6: "$markdown-h6-color $markdown-h6-text-style"}
QUOTE = "$text-muted"
QUOTE_BAR = "▎ "
RULE = "$text-muted"
TABLE_RULE = "$text-muted"
BULLETS = ("• ", "◦ ", "▪ ")
CODE_INDENT = "  "


def make_parser() -> MarkdownIt:
    """CommonMark with tables and strikethrough. Raw HTML is text; no linkify (``digest.md`` is a file name here,
    not Moldova's web)."""
    return MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


@lru_cache(maxsize=1)
def parser() -> MarkdownIt:
    return make_parser()


def inline(token: Token) -> Content:
    """An inline token's children as styled Content (soft line breaks join with a space, as Markdown does)."""
    parts: list[str] = []
    spans: list[Span] = []
    opened: list[tuple[str, int]] = []
    pos = 0

    def add(text: str, style: str = "") -> None:
        nonlocal pos
        if not text:
            return
        parts.append(text)
        if style:
            spans.append(Span(pos, pos + len(text), style))
        pos += len(text)

    for child in token.children or ():
        kind = child.type
        if kind == "text":
            add(child.content)
        elif kind == "softbreak":
            add(" ")
        elif kind == "hardbreak":
            add("\n")
        elif kind == "code_inline":
            add(child.content, CODE)
        elif kind == "html_inline":
            add(child.content)
        elif kind == "image":
            add(child.content or str(child.attrs.get("alt", "")) or "image", "italic")
        elif kind.endswith("_open"):
            opened.append((INLINE.get(kind[:-5], ""), pos))
        elif kind.endswith("_close") and opened:
            style, start = opened.pop()
            if style and pos > start:
                spans.append(Span(start, pos, style))
    return Content("".join(parts), spans=spans)


@dataclass
class _Box:
    """A container a block sits in: a list item (its marker on the first line, spaces after) or a quote."""

    first: str
    rest: str
    style: str = ""
    used: bool = False


class _Renderer:
    def __init__(self, width: int) -> None:
        self.width = width
        self.lines: list[Content] = []
        self.boxes: list[_Box] = []
        self.lists: list[list[int]] = []  # per open list: [next number, or -1 for bullets]
        self.gap = False  # a blank line before the next block

    def prefix(self) -> tuple[Content, Content]:
        """The prefix of a block's first line and of its other lines."""
        first: list[Content] = []
        rest: list[Content] = []
        for box in self.boxes:
            first.append(Content.styled(box.rest if box.used else box.first, box.style))
            rest.append(Content.styled(box.rest, box.style))
            box.used = True
        return Content("").join(first), Content("").join(rest)

    def block(self, body: Content, *, wrap: bool = True) -> None:
        if self.gap and self.lines:
            self.lines.append(self._bars())
        self.gap = False
        first, rest = self.prefix()
        room = self.width - first.cell_length
        for n, line in enumerate(body.split("\n")):
            pieces = line.wrap(room) if wrap and self.width and room >= 10 else [line]
            for k, piece in enumerate(pieces or [Content("")]):
                self.lines.append((first if n == 0 and k == 0 else rest) + piece)

    def _bars(self) -> Content:
        """A blank line inside quotes keeps the quotes' bars."""
        return Content("").join(Content.styled(b.rest, b.style) for b in self.boxes if b.style and b.used).rstrip()

    def table(self, rows: list[list[Content]], header: int) -> None:
        if not rows:
            return
        cols = max(len(r) for r in rows)
        rows = [r + [Content("")] * (cols - len(r)) for r in rows]
        widths = [max(r[c].cell_length for r in rows) for c in range(cols)]
        sep = Content.styled(" │ ", TABLE_RULE)
        out: list[Content] = []
        for n, row in enumerate(rows):
            out.append(sep.join(cell.pad_right(widths[c] - cell.cell_length) if c < cols - 1 else cell
                                for c, cell in enumerate(row)))
            if n + 1 == header:
                out.append(Content.styled("─┼─".join("─" * w for w in widths), TABLE_RULE))
        self.block(Content("\n").join(out), wrap=True)

    def render(self, tokens: list[Token]) -> Content:
        i = 0
        rows: list[list[Content]] = []
        header = 0
        while i < len(tokens):
            t = tokens[i]
            kind = t.type
            if kind == "paragraph_open":
                self.gap = self.gap or not t.hidden
                self.block(inline(tokens[i + 1]))
                i += 2
            elif kind == "heading_open":
                level = int(t.tag[1:]) if t.tag[1:].isdigit() else 1
                self.gap = True
                self.block(inline(tokens[i + 1]).stylize(HEADING.get(level, "bold")))
                i += 2
            elif kind in ("bullet_list_open", "ordered_list_open"):
                self.lists.append([_start(t) if kind == "ordered_list_open" else -1])
                self.gap = self.gap or len(self.lists) == 1
            elif kind in ("bullet_list_close", "ordered_list_close"):
                self.lists.pop()
                self.gap = True
            elif kind == "list_item_open":
                counter = self.lists[-1] if self.lists else [-1]
                if counter[0] < 0:
                    marker = BULLETS[(len(self.lists) - 1) % len(BULLETS)]
                else:
                    marker = f"{counter[0]}. "
                    counter[0] += 1
                self.boxes.append(_Box(marker, " " * len(marker)))
            elif kind == "list_item_close":
                self.boxes.pop()
            elif kind == "blockquote_open":
                self.gap = True
                self.boxes.append(_Box(QUOTE_BAR, QUOTE_BAR, QUOTE))
            elif kind == "blockquote_close":
                self.boxes.pop()
                self.gap = True
            elif kind in ("fence", "code_block"):
                self.gap = True
                self.block(code(t.content, t.info.strip().split(" ")[0] if kind == "fence" else ""), wrap=True)
                self.gap = True
            elif kind == "hr":
                self.gap = True
                self.block(Content.styled("─" * max(3, min(40, self.width or 40)), RULE), wrap=False)
                self.gap = True
            elif kind == "html_block":
                self.gap = True
                self.block(Content.styled(t.content.rstrip("\n"), QUOTE))
            elif kind == "table_open":
                rows, header = [], 0
            elif kind == "tr_open":
                rows.append([])
            elif kind == "inline" and rows and tokens[i - 1].type in ("th_open", "td_open"):
                cell = inline(t)
                rows[-1].append(cell.stylize("bold") if tokens[i - 1].type == "th_open" else cell)
            elif kind == "thead_close":
                header = len(rows)
            elif kind == "table_close":
                self.gap = True
                self.table(rows, header)
                rows = []
                self.gap = True
            i += 1
        return Content("\n").join(self.lines)


def _start(t: Token) -> int:
    try:
        return int(t.attrs.get("start", 1))
    except (TypeError, ValueError):
        return 1


def code(text: str, language: str) -> Content:
    """A code block: highlighted in the theme's colours when its language is known, indented, never reflowed."""
    text = text.rstrip("\n")
    body: Content | None = None
    if language:
        try:
            from textual.highlight import highlight

            body = highlight(text, language=language)
        except Exception:  # an unknown language, a lexer's failure: the plain text is as good
            body = None
    if body is None:
        body = Content(text)
    return Content("\n").join(Content(CODE_INDENT) + line for line in body.split("\n"))


# A character that can start Markdown's inline or block syntax (an entity, an escape, a table, a heading, ...).
SYNTAX = frozenset("*_`[]<>!\\&~#|=")


def _plain(text: str) -> bool:
    """Nothing in ``text`` for a parser to find: then its paragraphs are all there is (parsing costs ~100 us)."""
    if not SYNTAX.isdisjoint(text):
        return False
    for line in text.splitlines():
        head = line.lstrip()
        if head and (line.startswith(("    ", "\t")) or head[:2] in ("- ", "+ ") or not head.rstrip("-")):
            return False
        digits = len(head) - len(head.lstrip("0123456789"))
        if digits and head[digits:digits + 1] in (".", ")"):
            return False
    return True


def render(text: str, width: int = 0) -> Content:
    """Markdown ``text`` as Content; ``width`` > 0: wrapped to it, a list item's or quote's lines indented under
    its text (0: lines as long as they come; the widget wraps them)."""
    if _plain(text):
        r = _Renderer(width)
        for para in paragraphs(text):
            r.gap = True
            r.block(Content(para))
        return Content("\n").join(r.lines)
    tokens = parser().parse(text)
    if too_deep(tokens):  # the parser dropped text: all of it is shown as it is instead
        r = _Renderer(width)
        r.block(Content(text.strip("\n")))
        return Content("\n").join(r.lines)
    return _Renderer(width).render(tokens)


def too_deep(tokens: list[Token]) -> bool:
    """Whether markdown-it reached its nesting limit (``maxNesting``, 20 blocks deep: lists or quotes in lists or
    quotes). Past it the parser drops the rest of the container without a word: 30 nested "- " items, or a line of
    25 ">", and the text after them was not shown at all (and an agent could hide words from the operator there).
    A 9-deep list just reaches it and loses nothing; that rare text is then shown as it is, unformatted."""
    deepest = parser().options["maxNesting"] - 1
    return any(t.level >= deepest for t in tokens)


def paragraphs(text: str) -> list[str]:
    """Plain text's paragraphs (blank lines apart), the lines of each joined with a space, as Markdown does."""
    out: list[str] = []
    lines: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.strip():
            lines.append(line.strip())
        elif lines:
            out.append(" ".join(lines))
            lines = []
    return out
