"""Theme files: the shipped ones load, a bad one is refused with a reason, edits apply live."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.tui.commands import RecordingController
from console.tui.messages import ThemeFileChanged
from console.tui.themes import DEFAULT_THEME, ThemeError, load_theme_file, load_themes, themes_dir
from tests.tui.conftest import drive

REPO_THEMES = Path(__file__).resolve().parents[2] / "themes"


def test_the_shipped_themes_load():
    errors: list[str] = []
    themes = {t.name: t for t in load_themes(themes_dir(), errors)}
    assert errors == []
    assert themes_dir() == REPO_THEMES
    assert {"agent-dark", "agent-light", "agent-ansi"} <= set(themes)
    assert DEFAULT_THEME == "agent-dark" and themes["agent-dark"].dark
    assert not themes["agent-light"].dark
    assert themes["agent-ansi"].ansi and themes["agent-ansi"].primary.startswith("ansi_")


@pytest.mark.parametrize(("text", "problem"), [
    ('name = "x"\nprimary = ', "not valid TOML"),
    ('name = "x"\nprimary = "#123456"\nprimery = "#000000"\n', "key 'primery': unknown key"),
    ('name = "x"\n', "key 'primary': Field required"),
    ('name = "x"\nprimary = "#12345z"\n', "failed to parse '#12345z' as a color"),
    ('name = "x"\nprimary = "#123456"\ndark = "yes please"\n', "key 'dark'"),
])
def test_a_bad_theme_file_says_what_is_wrong(tmp_path, text, problem):
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ThemeError) as exc:
        load_theme_file(path)
    assert str(exc.value).startswith("bad.toml: ") and problem in str(exc.value)
    errors: list[str] = []
    assert load_themes(tmp_path, errors) == [] and len(errors) == 1


def _app(tmp_path, make_job, theme: str | None = None):
    from console.tui.app import ConsoleApp

    folder = tmp_path / "themes"
    folder.mkdir()
    for p in REPO_THEMES.glob("*.toml"):
        (folder / p.name).write_text(p.read_text(encoding="utf-8"), encoding="utf-8")
    app = ConsoleApp(controller=RecordingController(), paths=make_job("quickstart"), themes=folder, theme=theme,
                     watch=False, animations=False, keymap={})
    return app, folder


@pytest.mark.parametrize(("wanted", "used"), [("agent-light", "agent-light"), ("agent-ansi", "agent-ansi"),
                                               (None, DEFAULT_THEME), ("no-such-theme", DEFAULT_THEME)])
def test_the_theme_is_chosen_by_name_and_an_unknown_name_falls_back(tmp_path, make_job, wanted, used):
    app, _ = _app(tmp_path, make_job, theme=wanted)

    async def body(pilot):
        assert app.theme == used
        unknown = [n for n in app._notifications if "Unknown theme" in n.message]
        assert bool(unknown) == (wanted == "no-such-theme")

    drive(app, body)


def test_editing_the_current_theme_applies_live_and_a_broken_edit_keeps_it(tmp_path, make_job):
    app, folder = _app(tmp_path, make_job)
    path = folder / "agent-dark.toml"

    async def body(pilot):
        assert app.theme == "agent-dark"
        before = app.current_theme.primary
        path.write_text(path.read_text(encoding="utf-8").replace(before, "#ff00aa"), encoding="utf-8")
        app.post_message(ThemeFileChanged([path]))
        await pilot.pause()
        assert app.current_theme.primary == "#ff00aa"
        assert app.get_css_variables()["primary"].lower() == "#ff00aa"
        path.write_text("name = \"agent-dark\"\nprimary = [broken\n", encoding="utf-8")
        app.post_message(ThemeFileChanged([path]))
        await pilot.pause()
        assert app.theme == "agent-dark" and app.current_theme.primary == "#ff00aa"
        assert any("not valid TOML" in n.message for n in app._notifications)

    drive(app, body)


def test_every_theme_the_palette_offers_is_accepted_by_the_flag_and_the_config(tmp_path, make_job):
    """The palette offered about 20 themes, --theme and the config's theme took 3 (issue 33, point 9)."""
    from types import SimpleNamespace

    from console.cli.common import check_console_options
    from console.tui.themes import theme_names

    app, _ = _app(tmp_path, make_job)
    offered: list[str] = []

    async def body(pilot):
        offered.extend(app.available_themes)  # what the palette's theme picker lists

    drive(app, body)
    assert len(offered) > 3 and set(offered) <= set(theme_names())
    for name in offered:
        check_console_options(name, SimpleNamespace(keys={}, theme=DEFAULT_THEME))  # the flag
        check_console_options(None, SimpleNamespace(keys={}, theme=name))  # the config file's key
    with pytest.raises(ValueError, match="no such theme"):
        check_console_options("nope", SimpleNamespace(keys={}, theme=DEFAULT_THEME))


def test_the_theme_picked_in_the_palette_is_kept_for_the_next_start(tmp_path, make_job):
    from types import SimpleNamespace

    from console.tui.app import ConsoleApp
    from console.tui.theme_choice import CHOICE_FILE, chosen_theme, saved_theme

    data = tmp_path / "data"
    settings = SimpleNamespace(data_dir=data, theme="agent-light")  # the config's theme
    assert chosen_theme(None, settings) == "agent-light"  # nothing picked yet: the config's
    app = ConsoleApp(controller=RecordingController(), paths=make_job("quickstart"), theme="agent-light",
                     watch=False, animations=False, keymap={}, data_dir=data)

    async def body(pilot):
        await pilot.pause()
        assert not (data / CHOICE_FILE).exists()  # starting with a theme picks none
        app.theme = "nord"  # what the palette's theme picker does
        await pilot.pause()
        await pilot.pause()

    drive(app, body)
    assert saved_theme(data) == "nord"
    assert chosen_theme(None, settings) == "nord"  # the next start, without --theme
    assert chosen_theme("agent-ansi", settings) == "agent-ansi"  # the flag still wins
    (data / CHOICE_FILE).write_text('{"theme": 5}', encoding="utf-8")  # not ours: as none
    assert chosen_theme(None, settings) == "agent-light"
    assert not [p for p in data.iterdir() if p.name != CHOICE_FILE]  # no temp file left


def test_the_console_stylesheet_is_parsed_twice_not_three_times_before_the_first_frame(tmp_path, make_job,
                                                                                       monkeypatch):
    """The theme is chosen when the app is built: chosen on mount, its change had Textual parse the whole
    stylesheet (app.tcss, ~5 ms of CPU) a third time before the first frame (issue 37: the console's own cost)."""
    from textual.css import stylesheet

    parsed: list[str] = []
    real = stylesheet.parse

    def counting(scope, css, read_from, *args, **kwargs):
        if str(read_from[0]).endswith("app.tcss"):
            parsed.append(str(read_from[0]))
        return real(scope, css, read_from, *args, **kwargs)

    monkeypatch.setattr(stylesheet, "parse", counting)  # what a Stylesheet calls when its cache misses
    app, _ = _app(tmp_path, make_job, theme="agent-light")

    async def body(pilot):
        await pilot.pause()
        assert app.theme == "agent-light" and "-light-mode" in app.classes and "-theme-agent-light" in app.classes

    drive(app, body)
    assert 1 <= len(parsed) <= 2, parsed


def test_the_kept_theme_is_read_as_a_model_of_it_would_read_it():
    """console.tui.theme_choice reads its file without pydantic (the fleet's first frame imports none): what it
    makes of any bytes is what the model it replaced made of them (a bad file is as none)."""
    from pydantic import BaseModel, ConfigDict, Field, ValidationError

    from console.tui.theme_choice import read_choice

    class ConsoleChoices(BaseModel):  # the model the file was read with until 2026-12-01
        model_config = ConfigDict(extra="ignore")
        theme: str | None = Field(default=None, min_length=1, max_length=200)

    def by_model(raw: bytes) -> str | None:
        try:
            return ConsoleChoices.model_validate_json(raw).theme
        except ValidationError:
            return None

    cases = [b'{"theme": "nord"}', b'{"theme": null}', b"{}", b'{"other": 1}', b'{"theme": "nord", "x": [1, {}]}',
             b'{"theme": ""}', b'{"theme": "' + b"a" * 200 + b'"}', b'{"theme": "' + b"a" * 201 + b'"}',
             '{"theme": "é✓"}'.encode(), b'{"theme": 5}', b'{"theme": true}', b'{"theme": ["nord"]}',
             b'{"theme": {"n": 1}}', b'{"theme": "a", "theme": "b"}', b'["nord"]', b'"nord"', b"null", b"5", b"",
             b"   ", b"{", b"nord", b'\xef\xbb\xbf{"theme": "nord"}', b'{"theme": "\xff"}', b'{"theme": "\\u00e9"}',
             b'{"theme": "nord"} x', b' {"theme": "nord"}\n', b'{"theme": "a\\nb"}', b'{"x": NaN, "theme": "nord"}',
             b'{"theme": "nord", "x": 1e999}', b"[" * 5000 + b"]" * 5000, b'{"theme": "' + "é".encode() * 200 + b'"}',
             b'{"theme": "' + "é".encode() * 201 + b'"}', b'{"theme": "\\ud800"}']
    for raw in cases:
        assert read_choice(raw) == by_model(raw), raw


def test_a_theme_file_read_without_the_model_is_what_the_model_makes_of_it(tmp_path):
    """A console's start reads its theme files without pydantic when they are plainly right
    (console.tui.themes.plain_theme); whatever it takes is what the model makes of it, field for field, and any
    other file is the model's to take or to refuse with its own words (which name the key)."""
    from pydantic import ValidationError

    from console.tui.themes import load_theme_file, plain_theme, theme_file_model, themes_dir

    model = theme_file_model()
    whole = {"name": "t", "primary": "#112233", "secondary": "#223344", "accent": "#334455", "foreground": "#ffffff",
             "background": "#000000", "surface": "#111111", "panel": "#222222", "boost": "#333333",
             "warning": "#ffaa00", "error": "#ff0000", "success": "#00ff00", "dark": False, "ansi": True,
             "luminosity_spread": 0.2, "text_alpha": 1, "variables": {"block-cursor-foreground": "#ffffff"}}
    cases = [{"name": "t", "primary": "#112233"}, whole, {**whole, "luminosity_spread": 0, "text_alpha": 0.5}]
    odd = [("name", ""), ("name", 5), ("primary", None), ("accent", 3), ("dark", 1), ("dark", "yes"), ("ansi", 0),
           ("text_alpha", 1.5), ("text_alpha", -0.1), ("text_alpha", True), ("text_alpha", "0.5"),
           ("text_alpha", float("nan")), ("luminosity_spread", float("inf")), ("variables", []),
           ("variables", {"a": 1}), ("variables", {"a": None}), ("colour", "#fff")]
    cases += [{**whole, key: value} for key, value in odd]
    cases += [{k: v for k, v in whole.items() if k != "primary"}, {k: v for k, v in whole.items() if k != "name"}]
    import tomllib

    cases += [tomllib.loads(path.read_text(encoding="utf-8")) for path in sorted(themes_dir().glob("*.toml"))]
    taken = 0
    for data in cases:
        try:
            by_model = model.model_validate(data).model_dump()
        except ValidationError:
            by_model = None
        plain = plain_theme(data)
        if plain is not None:
            taken += 1
            assert plain == by_model and [type(v) for v in plain.values()] == [type(v) for v in by_model.values()]
    assert taken >= 3 + len(list(themes_dir().glob("*.toml")))  # the plain files and the repository's themes
    # A file the model refuses is refused with the model's words, naming the key.
    path = tmp_path / "bad.toml"
    path.write_text('name = "bad"\nprimary = "#112233"\ntext_alpha = 1.5\n', encoding="utf-8")
    with pytest.raises(ThemeError, match=r"bad.toml: key 'text_alpha': Input should be less than or equal to 1"):
        load_theme_file(path)
    path.write_text('name = "ok"\nprimary = "#112233"\ndark = 0\n', encoding="utf-8")  # the model converts it
    assert load_theme_file(path).dark is False
