"""The README is a front page (issue 33: at most about 250 lines, the two commands at the top, links into docs/)
and every link it gives leads somewhere: a file of the checkout, a page of docs/ and a heading on that page.
docs/index.md, the site's home, is the README with its links made relative to docs/ (mkdocs build --strict, in
.ci/run, checks the site's links and anchors; this checks the README's own, which MkDocs does not read)."""

from __future__ import annotations

import re
from pathlib import Path

import markdown

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """The ids MkDocs gives the page's headings (Python-Markdown's toc extension, as mkdocs.yml configures it)."""
    html = markdown.markdown(page.read_text(), extensions=["toc", "tables", "fenced_code"])
    return set(re.findall(r'<h[1-6] id="([^"]+)"', html))


def test_the_readme_is_a_front_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    first = re.search(r"```bash\n(.*?)```", text, re.S)
    assert first is not None and text.index("```bash") < text.index("\n## ")  # the commands come first
    install, test = first.group(1).splitlines()
    assert install.startswith("python3 -m venv .venv && .venv/bin/pip install -e '.[test]'")
    # The second command is the one CI runs, verbatim.
    assert test == ".venv/bin/python -m pytest"
    assert f"\n{test}\n" in (ROOT / ".ci" / "run").read_text()


def test_every_link_of_the_readme_leads_somewhere() -> None:
    broken = []
    for target in LINK.findall(README.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        page = ROOT / path
        if not page.exists():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in anchors(page):
            broken.append(f"{target}: {path} has no heading #{anchor}")
    assert not broken, broken


def test_the_sites_home_is_the_readme() -> None:
    assert (ROOT / "docs" / "index.md").read_text() == README.read_text().replace("](docs/", "](")


def test_a_broken_anchor_is_found(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("# Title\n\n## A downloaded job's `.console/` is never yours\n")
    assert anchors(page) == {"title", "a-downloaded-jobs-console-is-never-yours"}
