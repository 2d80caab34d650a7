"""An MCP server's form (console.engine.questions): taken only flat and bounded, and the operator's answer checked
against it, field by field, before it goes to the server."""

from __future__ import annotations

from typing import Any

import pytest

from console.engine.questions import FormRefused, Question, check_answer, parse_form, parse_values, question_fields

FORM = {"type": "object", "required": ["email"], "properties": {
    "email": {"type": "string", "format": "email"},
    "site": {"type": "string", "format": "uri"},
    "day": {"type": "string", "format": "date"},
    "n": {"type": "integer", "minimum": 0},
    "ratio": {"type": "number", "maximum": 1},
    "ok": {"type": "boolean"},
    "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]}}}


@pytest.mark.parametrize("values, want", [
    ({"email": "a@b.io"}, {"email": "a@b.io"}),
    ({"email": "a@b.io", "n": " 7 ", "ratio": "0.5", "ok": "NO", "size": "l", "site": "https://x/y",
      "day": "2026-11-30"}, {"email": "a@b.io", "n": 7, "ratio": 0.5, "ok": False, "size": "l", "site": "https://x/y",
                             "day": "2026-11-30"}),
])
def test_values_become_the_forms_types(values: dict[str, str], want: dict[str, Any]) -> None:
    assert check_answer(parse_form(FORM), values) == want


@pytest.mark.parametrize("values, why", [
    ({"email": "a@b"}, "email: an email address expected"),
    ({"email": "a @b.io"}, "email: an email address expected"),
    ({"email": "a@b.io", "site": "no scheme"}, "site: a URI expected"),
    ({"email": "a@b.io", "day": "30/11/2026"}, "day: a date \\(YYYY-MM-DD\\) expected"),
    ({"email": "a@b.io", "n": "3.0"}, "n: an integer expected"),
    ({"email": "a@b.io", "n": "-1"}, "n: out of its bounds \\(0\\.\\.\\)"),
    ({"email": "a@b.io", "ratio": "nan"}, "ratio: a finite number expected"),
    ({"email": "a@b.io", "ratio": "2"}, "ratio: out of its bounds \\(\\.\\.1\\)"),
    ({"email": "a@b.io", "size": "Small"}, "size: one of s, l expected"),
    ({"email": "a@b.io", "ok": "maybe"}, "ok: true or false expected"),
    ({"email": "a@" + "b" * 3000}, "email: an email address expected"),
])
def test_a_value_that_does_not_fit_its_field_is_refused_with_why(values: dict[str, str], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        check_answer(parse_form(FORM), values)


@pytest.mark.parametrize("schema, why", [
    ({"type": "array"}, "not an object schema"),
    ({"type": "object", "properties": {"a": {"type": "integer", "minimum": True}}}, "minimum is not a number"),
    ({"type": "object", "properties": {"a": {"type": "number", "maximum": float("inf")}}}, "maximum is not a number"),
    ({"type": "object", "properties": {"a": {"type": "string", "maxLength": 10**9}}}, "maxLength is not a length"),
    ({"type": "object", "properties": {"a": {"type": "string", "format": "regex"}}}, "format regex is not one"),
    ({"type": "object", "properties": {"a": {"type": "string", "enum": []}}}, "an enum of 1 to 32 choices"),
    ({"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "x"]}}}, "two choices are the same"),
    ({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}, "only flat fields"),
    ({"type": "object", "properties": []}, "properties are not an object"),
    ({"type": "object", "properties": {}, "required": "a"}, "required list is not a list"),
])
def test_a_form_that_is_not_flat_and_bounded_is_refused(schema: Any, why: str) -> None:
    with pytest.raises(FormRefused, match=why):
        parse_form(schema)


def test_the_forms_lines_name_its_fields_and_a_question_is_answered_once() -> None:
    fields = parse_form(FORM)
    lines = [f.line() for f in fields]
    assert lines[0] == "email (string, email, required)" and lines[-1] == "size (one of s, l)"
    assert [name for name, _ in question_fields(lines)] == [f.name for f in fields]
    q = Question("q123abc", "srv", fields)
    assert q.answer("accept", parse_values(("email=a@b.io", "n=1")), by="operator (cli)") == \
        "answered question q123abc of MCP server srv (email, n)"
    assert (q.action, q.content) == ("accept", {"email": "a@b.io", "n": 1})
    with pytest.raises(ValueError, match="answered already"):
        q.answer("decline", {}, by="operator (cli)")


def test_values_are_name_equals_value_each_given_once() -> None:
    assert parse_values(("a=1", "b= x=y ")) == {"a": "1", "b": " x=y "}
    with pytest.raises(ValueError, match="given twice"):
        parse_values(("a=1", "a=2"))
    with pytest.raises(ValueError, match="is not NAME=VALUE"):
        parse_values(("a",))


def _multi(*choices: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string",
                                                                                 "enum": list(choices)}}}}


@pytest.mark.parametrize("choices", [("a,b", "c"), (" a", "b"), ("a ", "b")])
def test_a_multi_select_whose_choice_cannot_be_typed_comma_separated_is_refused(choices: tuple[str, ...]) -> None:
    # Its answer is the choices comma-separated, each stripped: a choice holding a comma, or spaces at its ends,
    # could never be picked (and "a,b" would read as two choices): the form is refused, never asked unanswerable.
    with pytest.raises(FormRefused, match="comma"):
        parse_form(_multi(*choices))


def test_an_enum_on_a_number_is_checked_against_its_choices() -> None:
    # {"type": "integer", "enum": [1, 2]}: a value outside the server's choices is refused here, as a string
    # enum's is, or the form is refused; never an unchecked number sent as if the form allowed it.
    schema = {"type": "object", "properties": {"n": {"type": "integer", "enum": [1, 2]}}}
    try:
        fields = parse_form(schema)
    except FormRefused:
        return
    with pytest.raises(ValueError):
        check_answer(fields, {"n": "5"})


def test_a_strings_titled_choices_in_any_of_are_its_choices() -> None:
    # 2025-11-25's titled enum is oneOf or anyOf of const: the anyOf one was read as a free string, any value sent.
    schema = {"type": "object", "properties": {"size": {"type": "string", "anyOf": [
        {"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]}}}
    (f,) = parse_form(schema)
    assert (f.kind, f.choices) == ("enum", ("s", "l"))
    with pytest.raises(ValueError, match="one of s, l"):
        check_answer((f,), {"size": "xl"})


def test_a_wrong_choice_is_refused_without_saying_what_was_typed() -> None:
    # The refusal is logged (the answer command's detail, in events.jsonl): what the operator typed is the
    # server's only (a token typed into the wrong field), never echoed there.
    secret = "sk-live-" + "9" * 30
    fields = parse_form(_multi("a", "b"))
    with pytest.raises(ValueError) as refused:
        check_answer(fields, {"tags": f"a,{secret}"})
    assert "sk-live" not in str(refused.value) and "one of a, b" in str(refused.value)


def test_a_number_out_of_its_bounds_is_refused_without_saying_it() -> None:
    # A one-time code typed one digit too long: the refusal (logged) says the bounds, never the number typed.
    fields = parse_form({"type": "object", "properties": {"code": {"type": "integer", "minimum": 0,
                                                                   "maximum": 999999}}})
    with pytest.raises(ValueError) as refused:
        check_answer(fields, {"code": "4711420"})
    assert "4711420" not in str(refused.value) and "0..999999" in str(refused.value)


def test_hostile_pieces_of_a_form_are_bounded_escaped_or_refused() -> None:
    esc = "\x1b]52;c;aGFjaw==\x07\x1b[2J"
    (f,) = parse_form({"type": "object", "required": ["a"] * 10_000, "properties": {"a": {
        "type": "string", "title": "T" * 100_000 + esc, "description": esc + "D" * 100_000, "default": esc * 50}}})
    line = f.line()
    assert "\x1b" not in line and "\x07" not in line and len(line) < 1000 and f.required
    for bad in ({"type": "integer", "minimum": True}, {"type": "boolean", "enum": [0, 1]},
                {"type": "string", "enum": [1, 2]}, {"type": "string", "enum": ["a", "a"]},
                {"type": "string", "enum": ["x" + esc]}, {"type": ["string", "null"]},
                {"type": "object", "properties": {"b": {"type": "object"}}}, {"type": "string", "format": "regex"}):
        with pytest.raises(FormRefused):
            parse_form({"type": "object", "properties": {"a": bad}})
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        deep = {"type": "object", "properties": {"a": deep}}
    with pytest.raises(FormRefused):
        parse_form(deep)


@pytest.mark.parametrize("action, said", [("decline", "declined"), ("cancel", "cancelled")])
def test_a_decline_or_a_cancel_is_said_in_words(action: str, said: str) -> None:
    # Tried as an operator: `answer RUN --cancel` said "question q... of MCP server asker: canceld".
    q = Question("q123abc", "srv", parse_form(FORM))
    assert q.answer(action, {}, by="operator (cli)") == f"question q123abc of MCP server srv: {said}"  # type: ignore[arg-type]
