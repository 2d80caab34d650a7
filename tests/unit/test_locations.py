"""console.locations: the data dir and the store's URL read without pydantic (what `jobs` needs) say what the whole
settings say, or nothing (None: the caller loads the whole settings, whose error names what is wrong)."""

from __future__ import annotations

import os
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from console.engine.job_files import JobError
from console.locations import SETTINGS_TABLES, read_locations
from console.settings import Settings, load_settings

URL = "postgresql://agent:pw@db.example:5432/runs"


def _tables(model: type[BaseModel], path: str = "", into: dict[str, frozenset[str]] | None = None,
            ) -> dict[str, frozenset[str]]:
    """The keys of each table the settings file may hold, derived from the models (as SETTINGS_TABLES names them)."""
    into = {} if into is None else into
    into[path] = frozenset(model.model_fields)

    def walk(annotation: Any, at: str) -> None:
        origin = typing.get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            _tables(annotation, at, into)
        elif origin in (typing.Union, types.UnionType):
            for arg in typing.get_args(annotation):
                walk(arg, at)
        elif origin is typing.Annotated:
            walk(typing.get_args(annotation)[0], at)
        elif origin is dict:
            walk(typing.get_args(annotation)[1], f"{at}.*")
        elif origin in (list, tuple) and typing.get_args(annotation):
            walk(typing.get_args(annotation)[0], f"{at}[]")

    for name, field in model.model_fields.items():
        walk(field.annotation, f"{path}.{name}" if path else name)
    return into


def test_the_keys_it_knows_are_the_settings_models_keys() -> None:
    assert _tables(Settings) == SETTINGS_TABLES


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config.toml"
    path.write_text("")
    monkeypatch.setenv("AGENT_CONSOLE_CONFIG", str(path))
    for name in ("AGENT_CONSOLE_DATA_DIR", "AGENT_CONSOLE_STORE"):
        monkeypatch.delenv(name, raising=False)
    return path


@pytest.mark.parametrize("text,env", [
    ("", {}),  # the platform's data dir (the test's HOME), the embedded store
    ('data_dir = "/srv/agents"\n', {}),
    ('data_dir = "/srv/agents"\n', {"AGENT_CONSOLE_DATA_DIR": "/tmp/elsewhere"}),  # a variable wins over the file
    ("", {"agent_console_data_dir": "/tmp/lower"}),  # a variable's name in any case, as pydantic-settings reads it
    (f'store = "{URL}"\n', {}),
    (f'store = "  {URL}  "\n', {}),  # spaces around it are not the URL's
    (f'store = "{URL}"\n', {"AGENT_CONSOLE_STORE": ""}),  # an empty variable: the embedded store
    ("", {"AGENT_CONSOLE_STORE": URL}),
    # A variable's value is taken as it is, as pydantic-settings takes it (no quotes, JSON, ~ or spaces undone).
    ("", {"AGENT_CONSOLE_DATA_DIR": '"/tmp/quoted"'}),
    ("", {"AGENT_CONSOLE_DATA_DIR": '["/tmp/json"]'}),
    ("", {"AGENT_CONSOLE_DATA_DIR": "~/tilde"}),
    ("", {"AGENT_CONSOLE_DATA_DIR": " /tmp/spaced \n"}),
    ('data_dir = "~/tilde"\n', {}),
    ('data_dir = "relative/runs"\n', {}),
    ('data_dir = "//tmp//caf\\u00e9/"\n', {}),
    ('"data_dir" = "/tmp/quoted-key"\n', {}),
    ("", {"AGENT_CONSOLE_DATA_DIR": "/tmp/upper", "agent_console_data_dir": "/tmp/lower"}),  # the last one set
    ('store = "mysql://h/db"\n', {"AGENT_CONSOLE_STORE": URL}),  # the file's store, a string, overridden
    (f'store = "{URL}"\n', {"AGENT_CONSOLE_STORE": "\u3000 "}),  # only (unicode) spaces: the embedded store
    # Names that only Unicode's upper case makes the variable's (long s, dotless i): pydantic-settings compares
    # names in lower case, and reads neither.
    ("", {"AGENT_CONSOLE_\u017fTORE": URL}),
    ("", {"AGENT_CONSOLE_DATA_D\u0131R": "/tmp/dotless"}),
    # A table's variable whose keys are known (its values are the commands' that use them to check).
    ("", {"AGENT_CONSOLE_NOTIFY": '{"urls": ["json://127.0.0.1:9/x"]}', "AGENT_CONSOLE_MCP": '{"servers": []}'}),
    ("", {"AGENT_CONSOLE_NOTIFY_URLS": "json://127.0.0.1:9/x"}),
    # The console's two: its theme (a variable wins) and its [keys].
    ('theme = "nord"\n[keys]\ncheckpoint = "ctrl+k"\nrewind = "ctrl+r,f5"\n', {}),
    ('theme = "nord"\n', {"AGENT_CONSOLE_THEME": "gruvbox"}),
    ("", {"agent_console_theme": ""}),  # empty: the console says no such theme, whichever read it
    # Other keys, of every kind: read past, not checked here.
    ('provider = "openai"\nspeed = 0.5\n[notify]\nurls = ["json://127.0.0.1:9/x"]\n[budgets]\ndaily_usd = 5.0\n'
     '[budgets.jobs]\nnightly = 2.0\n[prices."m"]\ninput = 1.0\noutput = 2.0\n[telemetry.headers]\nx-key = "k"\n'
     '[[mcp.servers]]\nname = "t"\ncommand = ["mcp-server-time"]\n[keys]\ncheckpoint = "ctrl+k"\n', {}),
])
def test_where_it_answers_it_says_what_the_whole_settings_say(config: Path, monkeypatch: pytest.MonkeyPatch,
                                                               text: str, env: dict[str, str]) -> None:
    config.write_text(text)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    light, whole = read_locations(), load_settings()
    assert light is not None
    assert (light.data_dir, light.store_url) == (whole.data_dir, whole.store_url)
    assert (light.runs_dir, light.store_path) == (whole.runs_dir, whole.store_path)
    assert (light.theme, light.keys) == (whole.theme, whole.keys)
    assert whole.locations == light


@pytest.mark.parametrize("text,env,named", [
    ('data-dir = "/srv/agents"\n', {}, "data-dir"),  # a typo: the runs are not where the operator thinks
    ('[notify]\nurl = "json://127.0.0.1:9/x"\n', {}, "notify.url"),  # a typo in a table
    ('[prices."m"]\ninput = 1.0\noutptu = 2.0\n', {}, "outptu"),  # in a table of each model
    ('[[mcp.servers]]\nname = "t"\ncomand = ["x"]\n', {}, "comand"),  # in one of a list of tables
    # A table written in another shape: `[mcp.servers]` for `[[mcp.servers]]`, a value for a table.
    ('[mcp.servers]\nname = "t"\ncomand = ["x"]\n', {}, "mcp.servers"),
    ("notify = 5\n", {}, "notify"),
    ('prices = {m = [1]}\n', {}, "prices.m"),
    ("data_dir = 5\n", {}, "data_dir"),
    ('store = "mysql://h/db"\n', {}, "postgresql://"),
    ("store = [1]\n", {}, "store"),
    ("data_dir = \n", {}, "not valid TOML"),
    ("", {"AGENT_CONSOLE_STORE": "sqlite:///x.db"}, "postgresql://"),
    ("", {"AGENT_CONSOLE_STORE": "null"}, "store"),
    ("", {"AGENT_CONSOLE_STORE": f'"{URL}"'}, "store"),
    # A table's variable is JSON to pydantic-settings, its keys checked as the file's: a typo there too.
    ("", {"AGENT_CONSOLE_MCP": '{"comands": []}'}, "mcp.comands"),
    ("", {"agent_console_notify": '{"url": "json://127.0.0.1:9/x"}'}, "notify.url"),
    ("", {"AGENT_CONSOLE_PRICES": '{"m": {"outptu": 1}}'}, "outptu"),
    ("", {"AGENT_CONSOLE_MCP": '{"servers": [{"name": "t", "comand": ["x"]}]}'}, "comand"),
    ("", {"AGENT_CONSOLE_SANDBOX_LIMITS": '{"netwrok": true'}, "sandbox_limits"),  # not JSON
    # A list's variable is JSON to pydantic-settings too (`jobs` listed past one that `run` refused).
    ("", {"AGENT_CONSOLE_JOB_BASE_URLS": "http://127.0.0.1:8080/v1"}, "job_base_urls"),
    ("", {"AGENT_CONSOLE_JOB_BASE_URLS": '["ftp://x"]'}, "job_base_urls"),
    ("", {"AGENT_CONSOLE_JOB_BASE_URLS": '["http://u:p@127.0.0.1/v1"]'}, "a prefix holds no user or password"),
    ("theme = 5\n", {}, "theme"),
    ("keys = 5\n", {}, "keys"),
    ("[keys]\ncheckpoint = 5\n", {}, "keys.checkpoint"),
    # The file's value of the wrong kind is refused even where a variable overrides it.
    ("theme = 5\n", {"AGENT_CONSOLE_THEME": "nord"}, "theme"),
    ("data_dir = 5\n", {"AGENT_CONSOLE_DATA_DIR": "/tmp/elsewhere"}, "data_dir"),
    ("store = [1]\n", {"AGENT_CONSOLE_STORE": URL}, "store"),
])
def test_where_it_is_not_sure_it_answers_nothing_and_the_whole_settings_name_the_fault(
        config: Path, monkeypatch: pytest.MonkeyPatch, text: str, env: dict[str, str], named: str) -> None:
    config.write_text(text)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert read_locations() is None
    with pytest.raises(JobError, match=named):
        load_settings()


def test_a_settings_file_named_but_missing_or_a_folder_leaves_the_answer_to_the_settings(
        config: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENT_CONSOLE_CONFIG", str(tmp_path / "nowhere.toml"))
    assert read_locations() is None
    with pytest.raises(JobError, match="does not exist"):
        load_settings()
    monkeypatch.setenv("AGENT_CONSOLE_CONFIG", str(tmp_path))
    assert read_locations() is None
    with pytest.raises(JobError, match="is a directory"):
        load_settings()


def test_jobs_lists_the_runs_whatever_another_key_says_and_run_names_that_key(
        config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `jobs` reads where the runs are, nothing else: a bad value elsewhere is for the commands that use it to name.
    from console.cli import main

    config.write_text('speed = "fast"\n')
    assert main(["jobs"]) == 0
    assert "no runs yet" in capsys.readouterr().out
    with pytest.raises(JobError, match="speed"):
        load_settings()


@pytest.mark.parametrize("make,named", [
    (lambda p: os.mkfifo(p), "FIFO"),  # never opened blocking: neither reader hangs
    (lambda p: p.write_text('data_dir = "/srv/a"\n' + "#" * (1 << 20)), "too large"),
    (lambda p: p.write_text('data_dir = "/srv/a"\ndata_dir = "/srv/b"\n'), "not valid TOML"),  # a key twice
    (lambda p: p.write_text('\ufeffdata_dir = "/srv/a"\n'), "not valid TOML"),  # a byte-order mark
    (lambda p: p.write_bytes(b'data_dir = "/srv/\xe9"\n'), "not UTF-8"),
    (lambda p: p.symlink_to(p), "cannot be read"),  # a link to itself
])
def test_a_settings_file_that_cannot_be_read_as_toml_leaves_the_answer_to_the_settings(
        config: Path, make: Any, named: str) -> None:
    config.unlink()
    make(config)
    assert read_locations() is None
    with pytest.raises(JobError, match=named):
        load_settings()


def test_a_variable_for_the_keys_is_merged_with_the_files_table_by_the_settings_which_read_it(
        config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pydantic-settings merges AGENT_CONSOLE_KEYS (JSON) into the file's [keys]: the light reader leaves that to it.
    config.write_text('[keys]\ncheckpoint = "ctrl+k"\n')
    monkeypatch.setenv("AGENT_CONSOLE_KEYS", '{"rewind": "f5"}')
    assert read_locations() is None
    assert load_settings().keys == {"checkpoint": "ctrl+k", "rewind": "f5"}
