"""A job folder someone handed the operator is input, never code the operator's own tools run: the processes the
console starts with ``python -m console...`` do not import a ``console`` package planted in the working folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.view.answering import resume_in_background


def plant(folder: Path) -> Path:
    """A console/cli package that leaves a mark when imported, in ``folder``."""
    pkg = folder / "console" / "cli"
    pkg.mkdir(parents=True)
    mark = folder / "PWNED"
    (folder / "console" / "__init__.py").write_text(f"open({str(mark)!r}, 'w').close()\n")
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text("")
    return mark


def test_a_resume_from_a_handed_folder_runs_the_operators_console(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    handed = tmp_path / "handed"
    handed.mkdir()
    mark = plant(handed)
    monkeypatch.chdir(handed)  # the operator cd'd into it, then resumed a run from the console
    said = resume_in_background(tmp_path / "no-such-run", "console")
    assert not mark.exists()
    assert said is not None and "no-such-run" in said  # the real console answered (and refused a folder it lacks)
