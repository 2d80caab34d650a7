"""The scripted demo model's requirement extraction: fenced code blocks never hide a statement."""

from __future__ import annotations

from console.providers.scripted_requirements import (
    CODE,
    FENCE,
    OUT,
    PROSE,
    blocks,
    code_mask,
    duplicates_and_vague,
    extract_requirements,
)
from tests.conftest import SAMPLES

SPEC = SAMPLES / "requirements-extraction" / "docs" / "specification.md"


def chunk(first: int, last: int) -> str:
    return "\n".join(SPEC.read_text(encoding="utf-8").splitlines()[first - 1:last])


def test_the_chunk_that_starts_inside_a_json_block_has_its_28_requirements() -> None:
    # Lines 1501-1510 are the end of a ```json block opened at line 1493; the prose after it holds 28
    # statements (counted by hand: 4 list items on API versions, 2 rate-limit sentences, 5 webhook items,
    # 4 EDI sentences, 2 ledger items, 4 identity items, 4 encryption sentences, 3 application-security
    # items; the two "Note:" paragraphs are commentary).
    found = extract_requirements(chunk(1501, 1650))
    assert len(found) == 28
    assert found[0] == ("The system shall support each major API version for at least 18 months after its "
                        "successor is released.")
    assert found[4] == ("The system shall limit each API client to 600 requests per minute unless the client's "
                        "contract tier specifies a different limit.")
    assert found[5].startswith("When a client exceeds its rate limit, the system shall respond with HTTP status 429")
    assert found[-1] == ("Vulnerabilities rated critical shall be remediated within 7 days of discovery and those "
                         "rated high within 30 days.")
    assert not any("Webhook payloads carry the event" in s for s in found)  # a Note: paragraph


def test_the_chunk_that_opens_the_json_block_keeps_its_13_and_the_whole_document_has_256() -> None:
    assert len(extract_requirements(chunk(1351, 1500))) == 13  # ends inside the block: JSON has no statement
    assert len(extract_requirements(SPEC.read_text(encoding="utf-8"))) == 256


def test_a_statement_inside_a_fenced_block_is_found_line_by_line() -> None:
    text = ("Intro.\n\n```yaml\n# The gateway must retry three times.\nretries: 3\n"
            "comment: \"Carriers must confirm within 2 hours.\"\n```\n\nThe system shall log each retry.\n")
    assert extract_requirements(text) == [
        "# The gateway must retry three times.",
        'comment: "Carriers must confirm within 2 hours."',
        "The system shall log each retry.",
    ]


def test_prose_inside_a_text_fence_joins_like_a_paragraph() -> None:
    text = "```text\nThe carrier shall confirm the tender\nwithin two hours of receipt.\n```\n"
    assert extract_requirements(text) == ["The carrier shall confirm the tender within two hours of receipt."]


def test_an_open_fence_never_closed_does_not_hide_the_prose_after_it() -> None:
    text = ("Some setup:\n\n```python\n\nThe system shall announce the deprecation of an API version at least 6\n"
            "months before it is withdrawn.\n\n- Clients should migrate within the\n  deprecation period.\n")
    assert extract_requirements(text) == [
        "The system shall announce the deprecation of an API version at least 6 months before it is withdrawn.",
        "Clients should migrate within the deprecation period.",
    ]


def test_an_open_fence_never_closed_over_code_stays_code() -> None:
    text = 'The service shall expose a health endpoint.\n\n```json\n{\n  "status": "ok",\n  "uptime": 12,\n'
    mask = code_mask(text.splitlines())
    assert mask[:3] == [OUT, OUT, FENCE] and set(mask[3:]) == {CODE}
    assert extract_requirements(text) == ["The service shall expose a health endpoint."]


def test_a_text_that_starts_inside_a_block_reads_the_prose_after_its_closing_fence() -> None:
    text = ('    "weight": 12.5,\n    "unit": "KG"\n  }\n}\n```\n\nShipments shall carry a weight in KG.\n'
            "```js\nconst x = 1;\n```\nLabels must be printed at the dock.\n")
    mask = code_mask(text.splitlines())
    assert mask[:5] == [PROSE, PROSE, PROSE, PROSE, FENCE] and mask[8] == CODE
    assert extract_requirements(text) == ["Shipments shall carry a weight in KG.",
                                          "Labels must be printed at the dock."]


def test_a_longer_fence_nests_a_shorter_one_and_tildes_nest_backticks() -> None:
    text = ("````markdown\nAn example:\n```\nnot a closing fence\n```\nThe example shall render verbatim.\n"
            "````\n\n~~~\n```\nThe inner line must stay inside.\n~~~\n\nAfter both, the system shall continue.\n")
    mask = code_mask(text.splitlines())
    assert mask[6] == mask[8] == mask[11] == FENCE  # the outer fences
    assert mask[2] == mask[4] == mask[9] == PROSE  # shorter or other fences: content
    assert extract_requirements(text) == [
        "The example shall render verbatim.",
        "The inner line must stay inside.",
        "After both, the system shall continue.",
    ]


def test_indented_fences_inside_list_items_open_and_close() -> None:
    text = ("- Configure the agent:\n\n    ```\n    agent --mode strict\n    ```\n\n"
            "- The agent shall refuse unknown flags.\n  ~~~\n  x = 1\n  ~~~\n- Operators should read the log daily.\n")
    assert extract_requirements(text) == ["The agent shall refuse unknown flags.",
                                          "Operators should read the log daily."]


def test_inline_triple_backticks_are_not_a_fence() -> None:
    text = "Use ```code``` spans sparingly.\nThe parser must accept them.\n"
    assert code_mask(text.splitlines()) == [OUT, OUT]
    assert blocks(text) == ["Use ```code``` spans sparingly. The parser must accept them."]
    assert extract_requirements(text) == ["The parser must accept them."]


def test_headings_tables_and_notes_outside_fences_are_not_statements() -> None:
    text = ("## 3. Users must be named here\n\n| Rule | The system shall |\n|---|---|\n\n"
            "Note: the operator should ignore this.\n\nThe system shall keep one record per user.\n")
    assert blocks(text) == ["Note: the operator should ignore this.", "The system shall keep one record per user."]
    assert extract_requirements(text) == ["The system shall keep one record per user."]


def test_duplicates_ignore_case_and_a_code_name_is_not_vague() -> None:
    md = ("- The system shall be secure.\n- the system shall be SECURE\n"
          "- Session cookies shall be marked `Secure` and `HttpOnly`.\n")
    dups, vague = duplicates_and_vague(md)
    assert dups == ["the system shall be SECURE"]
    assert vague == ["The system shall be secure.", "the system shall be SECURE"]
