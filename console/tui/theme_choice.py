"""The theme picked in the command palette, kept for the next start.

A file of the console's own in the operator's data dir (``console.json``), written atomically and read back typed:
the config file is the operator's, with their comments, and never rewritten by the console. No Textual here: the
command line reads it before deciding whether a console opens at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from console.locations import DEFAULT_THEME as DEFAULT_THEME

CHOICE_FILE = "console.json"
CHOICE_MAX_BYTES = 4096


class ConsoleChoices(BaseModel):
    """What the console keeps between starts (read back typed; a bad file is as none)."""

    model_config = ConfigDict(extra="ignore")

    theme: str | None = Field(default=None, min_length=1, max_length=200)


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
    try:
        return ConsoleChoices.model_validate_json(raw).theme
    except ValidationError:
        return None


def save_theme(data_dir: Path, name: str) -> None:
    """Keep ``name`` as the theme of the next start (atomically: a crash leaves the old choice or the new one)."""
    from console.engine.atomic import atomic_write_json

    atomic_write_json(choices_path(data_dir), ConsoleChoices(theme=name).model_dump(), durable=False)


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
