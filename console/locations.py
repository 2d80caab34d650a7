"""Where the operator's things are: the settings file, the data dir (the runs' folders, the jobs store, the keys)
and the jobs store's URL, as the settings say them (console.settings: defaults < config file < env vars), with the
two options a console reads (its theme and its [keys]).

:func:`read_locations` reads just those, without pydantic: ``agent-console jobs`` lists the runs in a tenth of the
CPU that building the settings' models takes (benchmarks/cli_start.py), and ``attach`` and the fleet view start
without them (benchmarks/tui.py). It answers only when it is sure it reads them as
:class:`console.settings.Settings` would; otherwise (a key the settings do not know, anywhere in the file; one of
its values of the wrong kind; a file that is not there, not readable or not TOML) it answers None and the caller
loads the whole settings, whose error names what is wrong. The other keys' values are not checked here: the
commands that use them (run, resume, serve...) check them and name any that is wrong.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

if TYPE_CHECKING:
    from console.engine.store import Store

APP_NAME = "agent-console"
ENV_PREFIX = "AGENT_CONSOLE_"
DEFAULT_THEME = "agent-dark"

# The settings file's keys, by table ("": the top level; "prices.*": each table under [prices]; "mcp.servers[]":
# each [[mcp.servers]]): Settings' fields and those of its tables' models (tests/unit/test_locations.py derives
# them from the models and holds this equal). A key outside them (a typo: `data-dir`, `[notify] url`) leaves the
# answer to the whole settings, whose error names it: `jobs` stays as strict about a misspelt key as `run`.
SETTINGS_TABLES: dict[str, frozenset[str]] = {k: frozenset(v.split()) for k, v in {
    "": "anthropic_api_key auto_restart base_url budgets carryover_turns compact_at context_window data_dir "
        "file_index hard_threshold idle_timeout job_base_urls keys kubernetes max_job_mb max_restarts "
        "max_tokens_param max_turns "
        "max_write_mb mcp model notify openai_api_key prices provider requires_context retry_after_cap "
        "retry_total_wait sandbox_limits serve soft_threshold speed store summary telemetry theme turn_timeout "
        "unreachable_wait",
    "prices.*": "cache_write cached_input context_window input output",
    "sandbox_limits": "cpu_seconds file_size_mb memory_mb network open_files processes read_only shm_mb tmp_mb",
    "mcp": "allow commands env servers tool_search_share urls",
    "mcp.servers[]": "bearer_token_env_var command elicitation elicitation_per_call elicitation_timeout env "
                     "env_http_headers max_output_kb name network required sampling sampling_max_tokens "
                     "sampling_per_call timeout tools url",
    "notify": "on_end remind_minutes urls",
    "kubernetes": "ttl_after_finished",
    "serve": "link_ttl_hours public_url",
    "budgets": "daily_usd jobs timezone",
    "telemetry": "content enabled endpoint export_timeout headers protocol service_name",
}.items()}


def _known_keys(table: dict[str, object], path: str = "") -> bool:
    """Whether every key of ``table`` (the table at ``path``), and of the tables inside it that have fixed keys,
    is one the settings know, and each of those tables is written in its shape (a table, a table of tables, a list
    of tables: `[mcp.servers]` for `[[mcp.servers]]` is not). Other values of the wrong kind are the whole
    settings' to name."""
    if not set(table) <= SETTINGS_TABLES[path]:
        return False
    for key, value in table.items():
        inner = f"{path}.{key}" if path else key
        if inner in SETTINGS_TABLES and not (isinstance(value, dict) and _known_keys(value, inner)):
            return False
        if f"{inner}.*" in SETTINGS_TABLES and not (isinstance(value, dict) and all(
                isinstance(v, dict) and _known_keys(v, f"{inner}.*") for v in value.values())):
            return False
        if f"{inner}[]" in SETTINGS_TABLES and not (isinstance(value, list) and all(
                isinstance(v, dict) and _known_keys(v, f"{inner}[]") for v in value)):
            return False
    return True


def config_path() -> Path:
    """The operator's settings file: ``$AGENT_CONSOLE_CONFIG``, else the platform's user config folder's
    (``~/.config/agent-console/config.toml`` on Linux)."""
    env = os.environ.get("AGENT_CONSOLE_CONFIG")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME))


@dataclass(frozen=True)
class Locations:
    """The data dir and the store's URL (None: the embedded store), with what Settings derives from them; and the
    console's theme and key bindings (``[keys]``: binding id -> keys), as Settings has them."""

    data_dir: Path
    store_url: str | None
    theme: str = DEFAULT_THEME
    keys: dict[str, str] = field(default_factory=dict)

    @property
    def runs_dir(self) -> Path:
        return self.data_dir / "runs"

    @property
    def store_path(self) -> Path:
        return self.data_dir / "jobs.db"

    def open_store(self, lenient: bool = False) -> Store:
        """The jobs store they name; StoreError (one line, no password) if a shared one cannot be used (``lenient``:
        a run's start, which goes on while its store is away), sqlite3.Error or OSError if the embedded one
        cannot."""
        from console.engine.store import open_store

        return open_store(self.store_url, self.store_path, lenient=lenient)


# The settings' fields that are tables: pydantic-settings reads their variables (AGENT_CONSOLE_MCP) as JSON, whose
# keys the whole settings check as the file's.
TABLE_FIELDS = frozenset(path.split(".")[0].removesuffix("[]") for path in SETTINGS_TABLES if path)


def _variables() -> dict[str, str]:
    """The variables ``AGENT_CONSOLE_*`` by their field's name, their names' case ignored as pydantic-settings
    ignores it: in lower case (in upper case, a name with a long s or a dotless i would match too, which the
    settings never read), the last one set of names that differ only in case."""
    prefix = ENV_PREFIX.lower()
    return {k.lower().removeprefix(prefix): v for k, v in os.environ.items() if k.lower().startswith(prefix)}


def _known_tables(env: dict[str, str]) -> bool:
    """Whether every table's variable is a JSON object whose keys the settings know (else they name the fault)."""
    import json

    for name in TABLE_FIELDS & env.keys():
        try:
            value = json.loads(env[name])
        except (ValueError, RecursionError):
            return False
        if not isinstance(value, dict) or not _known_keys({name: value}):
            return False
    return True


def read_locations() -> Locations | None:
    """The data dir and store URL the settings name, or None when only the whole settings can say (see the
    module)."""
    from console.engine.job_files import JobError, parse_config_toml, read_config_text
    from console.zone import use_timezone, zone_problem

    path = config_path()
    try:
        text = read_config_text(path, "the settings file")
        data = parse_config_toml(text, path, "the settings file") if text is not None else None
    except JobError:
        return None
    if data is None and os.environ.get("AGENT_CONSOLE_CONFIG"):
        return None  # named but not there: the settings say so
    data = data or {}
    if not _known_keys(data):
        return None
    # The file's own values are checked even where a variable overrides them: the settings refuse the file then.
    if any(data.get(key) is not None and not isinstance(data[key], str) for key in ("data_dir", "store", "theme")):
        return None
    keys = data.get("keys", {})
    if not (isinstance(keys, dict) and all(isinstance(v, str) for v in keys.values())):
        return None
    env = _variables()
    # A variable for [keys] is JSON merged into the file's table by pydantic-settings, and one for a list
    # (job_base_urls) JSON the settings check: the settings read those.
    if not _known_tables(env) or "keys" in env or "job_base_urls" in env:
        return None
    # The operator's zone, as the settings would apply it (console.zone): `jobs` shows its times in it too. A
    # variable for [budgets], or a zone that is none, is the settings' to read and name.
    budgets = data.get("budgets", {})
    zone = budgets.get("timezone") if isinstance(budgets, dict) else None
    if "budgets" in env or (zone is not None and not (isinstance(zone, str) and zone_problem(zone) is None)):
        return None
    use_timezone(zone)
    theme = env.get("theme", data.get("theme", DEFAULT_THEME))
    data_dir: object = env.get("data_dir")
    if data_dir is None:
        data_dir = data.get("data_dir")
    store: object = env.get("store")
    if store is None:
        store = data.get("store")
    if data_dir is not None and (not isinstance(data_dir, str) or not data_dir or "\0" in data_dir):
        return None
    if store is not None and not isinstance(store, str):
        return None
    url = store.strip() if isinstance(store, str) else ""
    if url:
        from console.engine.store.url import check_store_url

        try:
            check_store_url(url)
        except ValueError:
            return None
    return Locations(Path(data_dir) if data_dir is not None else default_data_dir(), url or None, theme, dict(keys))
