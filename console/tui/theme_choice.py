"""The theme picked in the command palette, kept for the next start.

A file of the console's own in the operator's data dir (``console.json``), written atomically and read back checked:
the config file is the operator's, with their comments, and never rewritten by the console. No Textual here: the
command line reads it before deciding whether a console opens at all. No pydantic either: the fleet's first frame
imports none (its import and a first model cost ~40 ms of CPU, issue 37); the file is read as a model of
``{"theme": str of 1-200 characters | null}``, other keys ignored, would read it (tests/tui/test_themes.py holds the
two equal).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

from console.locations import DEFAULT_THEME as DEFAULT_THEME

CHOICE_FILE = "console.json"
CHOICE_MAX_BYTES = 4096
THEME_MAX_CHARS = 200  # a theme's name, as kept


def read_choice(raw: bytes) -> str | None:
    """The theme a choices file's bytes hold (None: none, or bytes that are not such a file: not UTF-8, not JSON,
    not an object, a theme that is not text of 1-200 characters)."""
    try:
        data = json.loads(raw.decode("utf-8"))  # a BOM is no JSON (decoded, it is a character before the object)
    except (ValueError, RecursionError):
        return None
    theme = data.get("theme") if isinstance(data, dict) else ""
    if theme is None or (isinstance(theme, str) and 1 <= len(theme) <= THEME_MAX_CHARS and _utf8(theme)):
        return theme
    return None


def _utf8(text: str) -> bool:
    """No lone surrogate (JSON's ``"\\ud800"``): text that has no UTF-8 is no theme's name."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def choices_path(data_dir: Path) -> Path:
    return data_dir / CHOICE_FILE


def saved_theme(data_dir: Path) -> str | None:
    """The theme last picked in the palette (None: none, or a file that cannot be read as ours)."""
    path = choices_path(data_dir)
    try:
        with path.open("rb") as fh:
            raw = fh.read(CHOICE_MAX_BYTES + 1)
    except OSError:
        return None
    if len(raw) > CHOICE_MAX_BYTES:
        return None
    return read_choice(raw)


def save_theme(data_dir: Path, name: str) -> None:
    """Keep ``name`` as the theme of the next start (atomically: a crash leaves the old choice or the new one)."""
    from console.engine.atomic import atomic_write_json

    if not 1 <= len(name) <= THEME_MAX_CHARS:
        raise ValueError(f"a theme's name is 1-{THEME_MAX_CHARS} characters, not {len(name)}")
    atomic_write_json(choices_path(data_dir), {"theme": name}, durable=False)


class ThemeSettings(Protocol):
    """What the theme's choice reads of the operator's settings (console.settings.Settings has both)."""

    @property
    def data_dir(self) -> Path: ...

    @property
    def theme(self) -> str: ...


def chosen_theme(flag: str | None, settings: ThemeSettings) -> str:
    """The theme a console starts with: ``--theme``, else the one last picked in the palette, else the config's
    ``theme`` (or ``AGENT_CONSOLE_THEME``)."""
    if flag:
        return flag
    return saved_theme(Path(settings.data_dir)) or settings.theme or DEFAULT_THEME
