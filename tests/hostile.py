"""Hostile text as an agent (or a job folder's name) would carry it, and the check that a view shows none of it raw.

Shared by the tests of the one function that makes text safe (console.engine.text.safe_text) and of every view
that prints through it: the headless log, `run` and `jobs`, the console, the fleet view."""

from __future__ import annotations

# Retitle the window and ring the bell, clear the screen, CSI as one C1 character, a bidi override, and markup
# that Rich and Textual would parse ("[/]" closes nothing: it raises).
ATTACK = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e[/][bold red]x"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202e[/][bold red]x"  # ATTACK as every view must show it


def hostile_turns(blank_lines: bool = False) -> list[dict]:
    """A scripted agent that carries ATTACK everywhere an agent's text goes: its reply, a file it writes and
    reads back, a tool name, a path in an error, a job_complete summary (the --script JSON form)."""
    gap = "\n\n" if blank_lines else "\n"
    return [
        {"text": f"I will write it.{gap}{ATTACK}{gap}Done.",
         "calls": [{"name": "write_file", "arguments": {"path": "evil.md", "content": f"line 1 {ATTACK}\nline 2"}}]},
        {"text": "", "calls": [{"name": "read_file", "arguments": {"path": "evil.md"}}]},
        {"text": "", "calls": [{"name": f"tool{ATTACK}", "arguments": {}}]},
        {"text": "", "calls": [{"name": "read_file", "arguments": {"path": f"missing{ATTACK}.md"}}]},
        {"text": "", "calls": [{"name": "job_complete", "arguments": {
            "summary": f"All done {ATTACK}", "deliverables": ["evil.md"], "confidence": 0.5}}]},
    ]


C1 = frozenset(chr(c) for c in range(0x80, 0xA0))
BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def raw_controls(text: str) -> set[str]:
    """The characters of ``text`` a terminal could take as a command (newlines and tabs aside): C0 controls, DEL,
    C1 controls, bidi embeddings, overrides and isolates, lone surrogates."""
    return {ch for ch in text if (ord(ch) < 32 and ch not in "\n\t") or ord(ch) == 0x7F or ch in C1 or ch in BIDI
            or 0xD800 <= ord(ch) <= 0xDFFF}
