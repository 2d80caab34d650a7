"""search_files runs the agent's pattern with RE2 (issue 17, point 10): linear time, bounded memory, each RE2
call bounded in the bytes it looks at, the whole search bounded in files, bytes and time; what RE2 cannot run
is refused with a message naming the construct."""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest

from console.engine import events as ev
from console.engine.messages import ToolCall
from console.engine.runtime import Runtime
from console.engine.tools import ToolOutcome, default_registry
from console.engine.tools import search_files as search_mod

REG = default_registry()


@pytest.fixture
def rt(make_job, clock) -> Runtime:
    paths = make_job(files={"a.md": "# Alpha\nline 2\nline 3\n"})
    return Runtime(paths, clock, ev.EventStream(paths.events, clock))


def search(rt: Runtime, **args: Any) -> ToolOutcome:
    parsed = REG.parse(ToolCall(id="c1", name="search_files", arguments=json.dumps(args)))
    assert not isinstance(parsed, ToolOutcome), parsed.content
    return REG.run(rt, *parsed)


@pytest.mark.parametrize(("pattern", "named"), [
    ("a{12000000}", "a repetition count is at most 1000"),
    ("(a{100}){100}", "a repetition count is at most 1000 (nested counts multiplied together)"),
    ("(?=x)", "lookahead (?=...) is not supported"),
    ("a(?!x)", "negative lookahead (?!...) is not supported"),
    ("(?<=a)b", "lookbehind (?<=...) is not supported"),
    ("(?<!a)b", "negative lookbehind (?<!...) is not supported"),
    (r"\1", r"backreferences (\1) are not supported"),
    (r"(a)(b)\2", r"backreferences (\2) are not supported"),
    ("(?P<x>a)(?P=x)", "named backreferences (?P=name)"),
    ("(?>ab)", "atomic groups (?>...) are not supported"),
    ("a++", "possessive quantifiers"),
    (r"end\Z", r"\Z is written \z here"),
    (r"\w{1000}\w{1000}", "it compiles to 16004 instructions, more than the 10000 a search allows"),
])
def test_what_re2_cannot_run_is_refused_naming_the_construct(rt, capfd, pattern: str, named: str) -> None:
    out = search(rt, pattern=pattern)
    assert not out.ok
    assert out.content.startswith(f"search_files failed: '{pattern}' is not a valid regular expression for "
                                  f"search_files: {named}"), out.content
    assert "It takes RE2 syntax" in out.content
    assert capfd.readouterr().err == ""  # RE2 logs its errors to stderr unless told not to


def test_the_usual_syntax_still_works(rt) -> None:
    (rt.paths.root / "code.py").write_text("def main():\n    return 42  # The answer\nx = 'main'\n")
    assert search(rt, pattern=r"^def\s+(?P<name>\w+)\(", path="code.py").content == "code.py:1: def main():"
    assert search(rt, pattern=r"\d{2}\s+#\s+the", path="code.py").content.startswith("code.py:2: ")
    assert search(rt, pattern=r"'main'$", path="code.py").content == "code.py:3: x = 'main'"
    assert search(rt, pattern="(?-i)The", path="code.py").content.startswith("code.py:2:")
    assert search(rt, pattern="(?-i)THE", path="code.py").content.startswith("No lines match")
    assert search(rt, pattern="^$", path="a.md").content.startswith("No lines match")
    # A match never spans lines, whatever the pattern says.
    assert search(rt, pattern=r"Alpha\s+line", path="a.md").content.startswith("No lines match")


def test_line_numbers_are_the_ones_read_file_uses(rt) -> None:
    (rt.paths.root / "crlf.txt").write_bytes(b"one\r\ntwo\rthree\x0cfour\xe2\x80\xa8five\r\n\r\nsix\n")
    out = search(rt, pattern="^(two|four|six)$", path="crlf.txt").content
    assert out.splitlines() == ["crlf.txt:2: two", "crlf.txt:4: four", "crlf.txt:7: six"]
    lines = (rt.paths.root / "crlf.txt").read_text().splitlines()
    assert [lines[1], lines[3], lines[6]] == ["two", "four", "six"]


def test_the_search_agrees_with_python_re_line_by_line(rt, monkeypatch) -> None:
    """Small regions (16 bytes per RE2 call) so lines fall on every side of a region's end."""
    monkeypatch.setattr(search_mod, "MIN_SPAN_BYTES", 16)
    monkeypatch.setattr(search_mod, "MAX_SPAN_BYTES", 16)
    rng = random.Random(17)
    patterns = ["^a", "b$", "a.c", r"\d+", "^$", "x*", "[^a]", "ab|^c", r"c\s*$", "^", "$", "a b"]
    for _ in range(150):
        lines = ["".join(rng.choice("abc 1x") for _ in range(rng.randint(0, 15))) for _ in range(rng.randint(0, 9))]
        text = "\n".join(lines) + rng.choice(["", "\n", "\n\n"])
        (rt.paths.root / "f.txt").write_text(text)
        for pattern in patterns:
            expected = [f"f.txt:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1)
                        if re.search(pattern, line, re.IGNORECASE)]
            out = search(rt, pattern=pattern, path="f.txt", max_results=500).content
            got = [] if out.startswith("No lines match") else out.splitlines()
            assert got == expected, (text, pattern)


class _Recording:
    """A compiled pattern that records the bytes each RE2 call was given."""

    def __init__(self, rx: Any) -> None:
        self.rx = rx
        self.spans: list[int] = []
        self.programsize = rx.programsize

    def search(self, text: bytes, pos: int, endpos: int) -> Any:
        self.spans.append(endpos - pos)
        return self.rx.search(text, pos, endpos)


@pytest.mark.parametrize(("pattern", "span"),
                         [("zebra", search_mod.MAX_SPAN_BYTES), (r"\w{1000}z", search_mod.MIN_SPAN_BYTES)])
def test_each_re2_call_is_bounded_by_the_programs_size(rt, monkeypatch, pattern: str, span: int) -> None:
    """RE2 is linear, but its constant is the program's size when its DFA gives up; a call cannot be
    interrupted, so the bytes one call looks at shrink as the program grows."""
    made: list[_Recording] = []
    compile_pattern = search_mod.compile_pattern

    def recording(p: str) -> _Recording:
        made.append(_Recording(compile_pattern(p)))
        return made[-1]

    monkeypatch.setattr(search_mod, "compile_pattern", recording)
    (rt.paths.root / "big.txt").write_text(("w" * 100 + "\n") * 30_000 + "a" * 3_000_000 + "\nzebra\n")
    out = search(rt, pattern=pattern, path="big.txt")
    assert out.ok
    [rx] = made
    assert max(rx.spans) <= span and len(rx.spans) > 3_000_000 // span
    assert f"[1 line(s) longer than {span // 1024} KB were searched in their first {span // 1024} KB only]" \
        in out.content


def test_a_search_is_bounded_in_files_and_bytes_and_says_where_it_stopped(rt, monkeypatch) -> None:
    for i in range(5):
        (rt.paths.root / f"f{i}.txt").write_text("needle\n" + "hay\n" * 100)
    monkeypatch.setattr(search_mod, "MAX_SEARCH_FILES", 3)  # a.md, f0.txt, f1.txt (name order)
    out = search(rt, pattern="needle", path=".").content.splitlines()
    assert out == ["f0.txt:1: needle", "f1.txt:1: needle",
                   "[search stopped after 3 files and 0 MB: give a narrower path]"]
    monkeypatch.setattr(search_mod, "MAX_SEARCH_FILES", 100)
    monkeypatch.setattr(search_mod, "MAX_SEARCH_BYTES", 400)  # a.md and f0.txt are 430 bytes
    out = search(rt, pattern="needle", path=".").content.splitlines()
    assert out == ["f0.txt:1: needle", "[search stopped after 2 files and 0 MB: give a narrower path]"]
    monkeypatch.setattr(search_mod, "MAX_FILE_BYTES", 100)
    out = search(rt, pattern="needle", path=".").content.splitlines()
    assert out == ["No lines match 'needle'.", "[5 file(s) over 0 MB not searched]"]
