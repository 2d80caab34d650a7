"""The one formatter of a call's arguments against a hostile path: it shows what the path holds."""

from __future__ import annotations

from console.view.present import tool_args


def test_a_path_with_a_line_break_is_not_shown_as_another_path() -> None:
    # "nl\nname.md" and "nl name.md" are two files: the call line must not show the first as the second.
    assert tool_args("write_file", '{"path": "nl\\nname.md", "content": "x"}') == "nl\\nname.md"
    assert tool_args("write_file", '{"path": "nl name.md", "content": "x"}') == "nl name.md"
    assert tool_args("read_file", '{"path": "t\\tab\\u001b[2J.md"}') == "t\\tab\\x1b[2J.md"


def test_prose_arguments_still_read_as_one_line() -> None:
    assert tool_args("job_complete", '{"summary": "done\\n\\nall of it"}') == "summary=done all of it"


def test_a_cut_call_line_never_ends_inside_an_escape() -> None:
    for pad in range(36, 48):  # the escape lands on every place of the cut at 48 characters
        for raw, escape, rest in (("\\u001b[2J", "\\x1b", "[2J"), ("\\u202e.md", "\\u202e", ".md")):
            line = tool_args("read_file", f'{{"path": "{"a" * pad}{raw}"}}')
            assert len(line) <= 48 and line.startswith("a" * min(pad, 47))
            tail = line[pad:].removesuffix("…")
            # After the padding: nothing of the escape, or all of it (then maybe some of what follows).
            assert tail == "" or (tail.startswith(escape) and (escape + rest).startswith(tail)), line
