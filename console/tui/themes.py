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

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from textual.color import ColorParseError
from textual.theme import Theme

from console.tui.theme_choice import DEFAULT_THEME as DEFAULT_THEME  # where it was always imported from

THEME_SUFFIX = ".toml"


class ThemeError(Exception):
    """A theme file an operator must fix; the message names the file and the problem."""


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
    try:
        spec = ThemeFile.model_validate(data)
    except ValidationError as exc:
        raise ThemeError(f"{path.name}: {_describe(exc)}") from None
    fields = spec.model_dump()
    if spec.ansi:
        # Textual's widgets use these two in ANSI mode; a theme that forgets them must not break the app.
        fields["variables"] = {"ansi-background": "ansi_black", "ansi-foreground": "ansi_white", **spec.variables}
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
