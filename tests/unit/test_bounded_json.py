"""The one bounded JSON parse (console.engine.bounded_json.loads): a hostile body is one refused body, never a
RecursionError, whatever its depth or size; what it reads is what json.loads reads."""

from __future__ import annotations

import json

import pytest

from console.engine.bounded_json import MAX_DEPTH, BoundsError, loads


def nested(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


def test_python_s_own_parser_ends_in_recursion_error() -> None:
    with pytest.raises(RecursionError):  # what the store's readers (psycopg's jsonb loader) did with the attack
        json.loads(nested(5_000))


@pytest.mark.parametrize("depth", [MAX_DEPTH + 2, 5_000, 100_000])
def test_a_deep_body_is_refused_not_a_recursion_error(depth: int) -> None:
    for text in (nested(depth), '{"a":' * depth + "1" + "}" * depth, f'{{"type":"x","body":{nested(depth)}}}'):
        with pytest.raises(BoundsError, match=f"nested more than {MAX_DEPTH} levels deep"):
            loads(text)
        with pytest.raises(BoundsError):
            loads(text.encode())


def test_what_is_within_bounds_reads_as_json_loads_reads_it() -> None:
    deep_object = '{"a":' * (MAX_DEPTH - 1) + "1" + "}" * (MAX_DEPTH - 1)
    texts = [nested(MAX_DEPTH), deep_object, '{"a": [1, 2.5, "x\\u00e9", null, true, {"b": {}}], "a2": -0}',
             '"\\ud83d\\ude00"',
             '{"a": 1, "a": 2}', "[]", '"\\\\udc80"']
    for text in texts:
        assert loads(text) == json.loads(text)
        assert loads(text.encode()) == json.loads(text)
        assert loads(memoryview(text.encode())) == json.loads(text)


def test_a_lone_surrogate_reads_as_the_replacement_character() -> None:
    # Python's json writes one for a string it cannot encode (ensure_ascii); jiter refuses the text whole.
    assert loads('{"a": "x\\udc80y", "b": "\\ud83d\\ude00", "c": "\\ud800"}') == {"a": "x\ufffdy", "b": "😀",
                                                                                  "c": "\ufffd"}
    assert loads('["\\\\udc80", "\\\\\\udc80"]') == ["\\udc80", "\\\ufffd"]  # an escaped backslash, then one
    assert loads('"\\udc80\\ud83d\\ude00\\ud83d"') == "\ufffd😀\ufffd"


@pytest.mark.parametrize("text", ["", "{", "[1,]", '{"a": NaN}', "Infinity", "\x00", "nul", '{"a": 1} x'])
def test_what_is_no_json_is_refused(text: str) -> None:
    with pytest.raises(BoundsError):
        loads(text)


def test_a_body_over_the_size_is_refused_before_it_is_parsed() -> None:
    with pytest.raises(BoundsError, match="more than the 100 a body may have"):
        loads("[" + "1," * 60 + "1]", max_bytes=100)
    assert loads("[" + "1," * 40 + "1]", max_bytes=100) == [1] * 41
