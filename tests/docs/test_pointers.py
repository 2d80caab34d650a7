"""Every message that sends an operator to a documentation page names a page that exists: a pointer to a moved
or renamed page is a word that leads nowhere (the README's sections moved into docs/)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
POINTER = re.compile(r"docs/([a-z0-9_-]+\.md)")


def pointers() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for source in sorted((ROOT / "console").rglob("*.py")):
        for line in source.read_text(encoding="utf-8").splitlines():
            if line.lstrip().startswith("#"):  # a comment's example path ("docs/spec.md" of a job) is no pointer
                continue
            for page in POINTER.findall(line):
                found.setdefault(page, []).append(str(source.relative_to(ROOT)))
    return found


def test_the_code_points_at_docs_pages() -> None:
    # The messages about [prices], job.toml's keys and Kubernetes point here: the scan must see them.
    assert {"operators-guide.md", "job.md", "kubernetes.md"} <= set(pointers())


def test_every_page_a_message_names_exists() -> None:
    missing = {page: where for page, where in pointers().items() if not (ROOT / "docs" / page).is_file()}
    assert not missing, f"messages point at pages docs/ does not have: {missing}"


def test_no_message_sends_the_operator_to_the_readme_for_what_moved() -> None:
    said = [str(p.relative_to(ROOT)) for p in (ROOT / "console").rglob("*.py")
            if re.search(r"see (the )?README", p.read_text(encoding="utf-8"))]
    assert not said, f"'see README' in {said}: the README is a front page; name the docs/ page"
