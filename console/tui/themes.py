"""Theme files: one TOML file per theme in ``themes/``, registered as Textual themes.

A file holds the fields of :class:`textual.theme.Theme` (``name``, ``primary``,
``secondary``, ``accent``, ``foreground``, ``background``, ``surface``,
``panel``, ``boost``, ``warning``, ``error``, ``success``, ``dark``, ``ansi``,
``luminosity_spread``, ``text_alpha``) and an optional ``[variables]`` table.
A bad file never crashes the console: :func:`load_theme_file` raises
:class:`ThemeError` with the file, the key and what is wrong, and the caller
keeps the theme it had.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.color import ColorParseError
from textual.theme import Theme

from console.tui.theme_choice import DEFAULT_THEME as DEFAULT_THEME  # where it was always imported from

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

THEME_SUFFIX = ".toml"
# A theme file's keys (ThemeFile's fields): the text ones that may be left out, the flags, the shares in 0..1.
TEXT_KEYS = ("secondary", "accent", "foreground", "background", "surface", "panel", "boost", "warning", "error",
             "success")
FLAGS = {"dark": True, "ansi": False}
SHARES = {"luminosity_spread": 0.15, "text_alpha": 0.95}
THEME_KEYS = {"name", "primary", *TEXT_KEYS, *FLAGS, *SHARES, "variables"}


class ThemeError(Exception):
    """A theme file an operator must fix; the message names the file and the problem."""


@functools.cache
def theme_file_model() -> type[BaseModel]:
    """What a theme file holds, as a pydantic model: the judge of a file :func:`plain_theme` does not find plainly
    right (its errors name the key and what is wrong). Made when first needed: a console's start reads its theme
    files without pydantic (its import and a first model cost ~40 ms of CPU before a fleet's first frame, issue
    37)."""
    from pydantic import BaseModel, ConfigDict, Field

    class ThemeFile(BaseModel):
        model_config = ConfigDict(extra="forbid")

        name: str = Field(min_length=1)
        primary: str
        secondary: str | None = None
        accent: str | None = None
        foreground: str | None = None
        background: str | None = None
        surface: str | None = None
        panel: str | None = None
        boost: str | None = None
        warning: str | None = None
        error: str | None = None
        success: str | None = None
        dark: bool = True
        ansi: bool = False
        luminosity_spread: float = Field(default=0.15, ge=0, le=1)
        text_alpha: float = Field(default=0.95, ge=0, le=1)
        variables: dict[str, str] = Field(default_factory=dict)

    return ThemeFile


def plain_theme(data: dict[str, Any]) -> dict[str, Any] | None:
    """The fields of a theme file that is plainly right, each of its own type (text, a flag, a number in 0..1), as
    the model would give them (tests/tui/test_themes.py holds the two equal); None for any other: the model decides
    (it may take what it can convert, or name what is wrong)."""
    if not data.keys() <= THEME_KEYS:
        return None
    fields: dict[str, Any] = {"name": data.get("name"), "primary": data.get("primary")}
    if type(fields["name"]) is not str or not fields["name"] or type(fields["primary"]) is not str:
        return None
    for key in TEXT_KEYS:
        if (value := data.get(key)) is not None and type(value) is not str:
            return None
        fields[key] = value
    for key, default in FLAGS.items():
        if type(value := data.get(key, default)) is not bool:
            return None
        fields[key] = value
    for key, share in SHARES.items():
        if type(value := data.get(key, share)) not in (int, float) or not 0 <= value <= 1:
            return None
        fields[key] = float(value)
    variables = data.get("variables", {})
    if type(variables) is not dict or not all(type(k) is str and type(v) is str for k, v in variables.items()):
        return None
    fields["variables"] = dict(variables)
    return fields


def themes_dir() -> Path:
    """The repository's ``themes/`` folder, next to the ``console`` package.

    With an editable install ``__file__`` is the checkout itself, so this is the
    checkout's ``themes/``; ``$AGENT_CONSOLE_THEMES`` can point somewhere else.
    """
    env = os.environ.get("AGENT_CONSOLE_THEMES")
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[2] / "themes"


def user_themes_dir() -> Path:
    """Operator themes next to the config file (``~/.config/agent-console/themes``); they win on a name clash."""
    from console.locations import config_path

    return config_path().parent / "themes"


def _describe(exc: ValidationError) -> str:
    out = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        out.append(f"key '{key}': {msg}")
    return "; ".join(out)


def load_theme_file(path: Path) -> Theme:
    """Parse and check one theme file. Raises :class:`ThemeError` with a readable reason."""
    from console.engine.job_files import JobError, parse_config_toml, read_config_text

    # The same careful read as job.toml: a named pipe, a huge or deeply nested file is an error, not a hang.
    try:
        text = read_config_text(path)
        if text is None:
            raise ThemeError(f"{path.name}: no such file")
        data = parse_config_toml(text, path)
    except JobError as exc:
        raise ThemeError(str(exc).replace(str(path), path.name, 1)) from None
    fields = plain_theme(data)
    if fields is None:
        from pydantic import ValidationError

        try:
            fields = theme_file_model().model_validate(data).model_dump()
        except ValidationError as exc:
            raise ThemeError(f"{path.name}: {_describe(exc)}") from None
    if fields["ansi"]:
        # Textual's widgets use these two in ANSI mode; a theme that forgets them must not break the app.
        fields["variables"] = {"ansi-background": "ansi_black", "ansi-foreground": "ansi_white",
                               **fields["variables"]}
    theme = Theme(**fields)
    try:
        theme.to_color_system().generate()  # every colour must parse, before the app ever sees it
    except ColorParseError as exc:
        raise ThemeError(f"{path.name}: {exc}") from None
    except (ValueError, TypeError) as exc:
        raise ThemeError(f"{path.name}: {exc}") from None
    return theme


def load_themes(directory: Path | None = None, errors: list[str] | None = None) -> list[Theme]:
    """Every valid theme in ``directory`` (sorted by file name); problems go to ``errors``."""
    directory = directory or themes_dir()
    if not directory.is_dir():
        return []
    out: list[Theme] = []
    for path in sorted(directory.glob(f"*{THEME_SUFFIX}")):
        try:
            out.append(load_theme_file(path))
        except ThemeError as exc:
            if errors is not None:
                errors.append(str(exc))
    return out


def theme_names(errors: list[str] | None = None) -> list[str]:
    """Every theme the console's palette offers: Textual's own, the repository's and the operator's theme files.
    ``--theme`` and the config's ``theme`` take any of them."""
    from textual.theme import BUILTIN_THEMES

    names = set(BUILTIN_THEMES)
    for folder in (themes_dir(), user_themes_dir()):
        names |= {theme.name for theme in load_themes(folder, errors)}
    return sorted(names)
