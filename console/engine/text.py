"""Text from the agent or the job, made safe to put on an operator's terminal: :func:`safe_text`.

Why: a model's reply, a tool's name, arguments or result, a summary, a file or folder name can hold escape
sequences (ESC ] 0 ; title BEL retitles the window, ESC [ 2 J clears the screen, some terminals do worse), bidi
overrides that show text in another order than it is stored, zero-width characters that hide part of a name, and
lone surrogates that make a write to stdout raise. Every view (the headless log, the console, the fleet view,
``jobs``, error lines) passes such text through this one function before printing it.

What becomes what:

* Printable characters (letters, marks, digits, punctuation, symbols, the space: Python's ``str.isprintable``) are
  kept as they are (but for the width marks below). So is markup such as ``[bold]`` or ``[/]``: it is ordinary
  text here, and the views draw it as text (Textual ``Content``, Rich ``Text``, ``markup=False``), never parse it.
* Other spaces (no-break, thin, ideographic: Unicode Zs) become a plain space.
* Every other character is shown as its Python escape, in printable ASCII: the C0 controls and DEL (``\\x1b``,
  ``\\x07``, ``\\x7f``), the C1 controls U+0080-U+009F (``\\x9b``, a one-character CSI on some terminals), the
  format characters (bidi embeddings and overrides U+202A-U+202E, isolates U+2066-U+2069, marks U+200E/U+200F,
  zero-width space and joiners U+200B-U+200D, U+FEFF, soft hyphen, tags: ``\\u202e``...), line and paragraph
  separators U+2028/U+2029, private-use and unassigned code points, and lone surrogates (``\\udc80``). An escape
  sequence thus loses its ESC (or CSI) and the rest of it is plain text after a visible ``\\x1b``: nothing of it
  reaches the terminal as a command.
* Marks that change the width of the character before them: the variation selectors U+FE0E/U+FE0F
  (``\\u2764\\ufe0f`` asks for a wide heart) and the skin-tone modifiers U+1F3FB-U+1F3FF
  (``\\U0001f44d\\U0001f3fd``). The console lays a line out by grapheme (Rich counts the heart as 2 cells, the
  toned thumb as 2) but many terminals draw a code point at a time (tmux 3.3: 1 cell, and 4): the rest of the
  row then lands that many cells off, so a reply could pull the pane beside it out of place, push the row's end
  off the screen or leave stale cells. Without them every terminal and the layout agree. Multi-line text
  (prose) drops them (the heart is drawn narrow, the thumb untoned); ``one_line`` text (a name, a path) shows
  them as escapes, as it does every character that changes how another is drawn. The Hangul fillers U+115F,
  U+1160, U+3164 and U+FFA0 draw nothing visible (a name of them looks blank) and U+3164 and U+FFA0 are laid out
  as 0 cells but drawn as 2 and 1: they are shown as escapes (``\\u3164``) in all text.
* Line breaks: multi-line text (the default: a reply, a tool result) keeps its newlines and tabs, and a CR LF
  pair becomes one newline; a lone CR (which would let a line overwrite itself) is shown as ``\\r``.
  ``one_line=True`` shows newlines and tabs as ``\\n`` and ``\\t`` too, so a path or a name says exactly what it
  holds; with ``join=True`` the lines are joined with a space instead (blank lines dropped), as prose reads.
* ``limit`` > 0: at most that many characters, cut with ``...`` (never in the middle of an escape).

The result only ever holds printable characters (and, multi-line, newlines and tabs), so the function is
idempotent: text made safe twice is the same as once. Backslashes are not doubled: a literal ``\\x1b`` typed by
the agent reads the same as an escaped ESC (the exact text is in ``.console/events.jsonl``).

Stdlib only, no console.* imports: it sits below everything that prints.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["BINARY_SAMPLE", "looks_binary", "safe_text"]

ELLIPSIS = "..."
_CACHE_MAX = 65_536  # characters remembered per table: a hostile text of every code point cannot grow it more
# The start of an escape that a cut would leave incomplete: a backslash, "x1" of "x1b", ...
_ESCAPE_AT_END = re.compile(r"\\(?:x[0-9a-f]?|u[0-9a-f]{0,3}|U[0-9a-f]{0,7})?\Z")


class _Table(dict[int, str]):
    """A ``str.translate`` table built as characters are met (each character is judged once per table)."""

    def __init__(self, keep: str) -> None:
        super().__init__()
        self.keep = frozenset(keep)

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        if ch in self.keep or ch.isprintable():
            out = ch
        elif unicodedata.category(ch) == "Zs":
            out = " "
        else:
            out = repr(ch)[1:-1]  # \x1b, \x9b, \u202e, \udc80, \U000e0041: printable ASCII
        if len(self) < _CACHE_MAX:
            self[code] = out
        return out


_MULTI = _Table("\n\t")
_ONE = _Table("")
# Printable, but drawn wider or narrower than the layout counts them: see the module's docstring.
_WIDTH_MARKS = "\ufe0e\ufe0f\U0001f3fb-\U0001f3ff"
_FILLERS = frozenset("\u115f\u1160\u3164\uffa0")
_MISDRAWN = re.compile(f"[{_WIDTH_MARKS}{''.join(sorted(_FILLERS))}]")


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _misdrawn_one(m: re.Match[str]) -> str:
    return _escape(m.group())


def _misdrawn_multi(m: re.Match[str]) -> str:
    return _escape(m.group()) if m.group() in _FILLERS else ""


def safe_text(text: str, *, one_line: bool = False, join: bool = False, limit: int = 0) -> str:
    """``text`` safe to print on a terminal; see the module's docstring for what becomes what.

    ``one_line``: newlines and tabs are shown as ``\\n`` and ``\\t`` (``join``: the lines are joined with a
    space instead, blank ones dropped). ``limit``: at most that many characters (0: no limit), cut with ``...``.
    Returns ``text`` itself when nothing needs to change (cheap to call on every line)."""
    if not isinstance(text, str):
        text = str(text)
    if one_line and join and ("\n" in text or "\r" in text):
        text = " ".join(part.strip() for part in text.splitlines() if part.strip())
    if not text.isprintable():
        if one_line:
            text = text.translate(_ONE)
        else:
            text = text.replace("\r\n", "\n")
            if not text.replace("\n", "").replace("\t", "").isprintable():
                text = text.translate(_MULTI)
    if not text.isascii() and _MISDRAWN.search(text):
        text = _MISDRAWN.sub(_misdrawn_one if one_line else _misdrawn_multi, text)
    if limit and len(text) > limit:
        if limit <= len(ELLIPSIS):
            return ELLIPSIS[:limit]
        head = text[: max(0, limit - len(ELLIPSIS))]
        cut = _ESCAPE_AT_END.search(head[-9:])
        if cut is not None:  # a cut escape ("\x1") would read as something else: drop it whole
            head = head[: len(head) - (len(head[-9:]) - cut.start())]
        text = head + ELLIPSIS
    return text


# How much of a file's start is looked at for a NUL byte. One test of "binary" for every reader: read_file and
# search_files pass such a file over, and a job whose instructions.md is one is refused before it starts
# (console.engine.job_files.check_instructions): the two must agree, or a run starts on a task it cannot read.
BINARY_SAMPLE = 8192


def looks_binary(data: bytes) -> bool:
    """Whether a file whose first bytes are ``data`` is binary, not text: a NUL in its first BINARY_SAMPLE bytes."""
    return b"\x00" in data[:BINARY_SAMPLE]
