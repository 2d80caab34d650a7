"""The one formatter of a tool call's arguments: the argument that says what a call is about, and all of them for the
expanded view."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from console.engine.job_files import one_line
from console.engine.text import safe_text
from console.view.present.words import flat, plural

# The start of an escape (console.engine.text.safe_text's) that a cut would leave incomplete: a backslash, "x1" of
# "x1b" or "u20" of "u202e" after one.
_CUT_ESCAPE = re.compile(r"\\(?:x[0-9a-f]?|u[0-9a-f]{0,3}|U[0-9a-f]{0,7})?\Z")

# The argument that says what a call is about, first match wins; a path is self-evident and shown bare.
MAIN_KEYS = ("path", "pattern", "command", "query", "url", "text", "issue", "summary", "note")

# A value not a str as compact JSON, as json.dumps(value, ensure_ascii=False) writes it: one encoder made once
# (json.dumps given an option makes a new one at every call, ~7 k instructions; encode keeps no state between calls).
# An int (a count, a line number) is its digits, as the encoder writes it (int.__repr__), without the encoder's
# ~10 k instructions.
_to_json = json.JSONEncoder(ensure_ascii=False).encode
# json.loads's own scanner (a decoder's scan_once: the value at an index, and where it ends; it keeps no state
# between calls). typeshed leaves the attribute out, though JSONDecoder.__init__ sets it.
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


# What console.engine.events.cap_text puts after arguments it cut for the log (a write_file of 20 KB): the rest is
# not there, so they are no JSON, but what came before the cut is the call's.
_CUT_MARK = re.compile(r"\n\[\.\.\. \d+ more chars not logged; sha256 [0-9a-f]{16}\]\Z")


def _parse_args(raw: str) -> Any:
    """The arguments' JSON; those the log cut, read as far as they go (the path of a large write_file is its
    first key: it showed as "<invalid JSON>"); ValueError when they are no JSON."""
    try:
        if raw[:1] == "{" and raw[-1:] == "}":
            # The usual arguments, one object with nothing around it, read by json's own scanner at once:
            # json.loads would do the same after two regex matches for the whitespace around (~8 k instructions).
            data, end = _scan(raw, 0)
            if end == len(raw):
                return data
        return json.loads(raw or "{}")
    except (ValueError, RecursionError, StopIteration):
        cut = _CUT_MARK.search(raw or "")
        if cut is None:
            return ValueError  # the model's own malformed JSON: said so
    from pydantic_core import from_json  # pydantic's JSON parser, which reads a cut document as far as it goes

    try:
        return from_json(raw[: cut.start()], allow_partial="trailing-strings")
    except (ValueError, RecursionError):
        return ValueError


def tool_args(name: str, raw: str, limit: int = 48) -> str:
    """The one argument that says what a call is about: ``notes/a.md``, ``summary=done``, ``5 tasks``.

    ``name`` is the tool's; ``raw`` the arguments as the model sent them (JSON); at most ``limit`` characters
    (0: no limit), on one line. Every view shows a call's arguments with this."""
    data = _parse_args(raw)
    if data is ValueError:
        return "<invalid JSON>"
    if not isinstance(data, dict) or not data:
        return ""
    # A loop, not next() over a generator: ~7 k instructions fewer when no key matches (a call of every turn).
    for key in MAIN_KEYS:
        if key in data:
            break
    else:
        key = None
    if key is None:
        todos = data.get("todos")
        if isinstance(todos, list):
            return plural(len(todos), "task")
        key = next(iter(data))
    value = data[key]
    text = value if isinstance(value, str) else str(value) if type(value) is int else _to_json(value)
    # A path says exactly what it holds ("a\\nb.md" is not "a b.md"); other values read as prose.
    shown = one_line(text, 0) if key == "path" else f"{one_line(str(key), 40)}={flat(text, 0)}"
    if not limit or len(shown) <= limit:
        return shown
    # Never cut inside an escape: a cut "u202e" after its backslash would read as another character.
    return _CUT_ESCAPE.sub("", shown[: max(0, limit - 1)]) + "…"


def argument_items(raw: str) -> list[tuple[str, str]]:
    """A call's arguments for the expanded view: (key, value) with string values as their text (real line
    breaks, not JSON escapes) and others as compact JSON. Not JSON: one item with no key and the raw text."""
    data = _parse_args(raw)
    if data is ValueError or not isinstance(data, dict):
        return [("", safe_text(raw))] if (raw or "").strip() not in ("", "{}") else []
    out = []
    for key, value in data.items():
        # Decoded JSON: a "\u001b" in the arguments is a real ESC here, made visible again.
        text = value if isinstance(value, str) else _to_json(value)
        out.append((safe_text(str(key), one_line=True), safe_text(text)))
    if (cut := _CUT_MARK.search(raw or "")) is not None:
        out.append(("", safe_text(raw[cut.start():].strip())))  # the log has the call's start only: said
    return out
