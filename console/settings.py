"""Operator settings: defaults < config file (TOML) < env vars < job.toml < command-line flags.

The config file lives at ``$AGENT_CONSOLE_CONFIG`` or the platform's user
config folder (``~/.config/agent-console/config.toml`` on Linux). Env vars
are ``AGENT_CONSOLE_<FIELD>``, e.g. ``AGENT_CONSOLE_PROVIDER=openai``.

The config file's values are strictly typed like job.toml's (``auto_restart = "yes"`` is an error naming
the key); env vars are strings and keep pydantic-settings' parsing (``AGENT_CONSOLE_AUTO_RESTART=false``).
A config file that cannot be used is a :class:`JobError` of one line naming it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, Strict, ValidationError, create_model, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from console.engine.job import (
    JobError,
    ModelPrice,
    format_validation_error,
    one_line,
    parse_config_toml,
    read_config_text,
    validate_base_url,
)
from console.engine.run_setting_check import check_fields, setting_field
from console.engine.run_setting_specs import SPECS
from console.engine.tools.limits import SandboxCaps, WorldError, resolve_world
from console.engine.tools.mcp_config import McpCaps, url_allowed, url_problem
from console.engine.url_secrets import shown_url

# Where the settings file and the data dir are, defined once (console.locations reads them without pydantic).
from console.locations import APP_NAME as APP_NAME
from console.locations import DEFAULT_THEME, Locations, default_data_dir
from console.locations import config_path as config_path
from console.providers import registry
from console.providers.token_limit import MaxTokensParam
from console.zone import use_timezone, zone_problem

if TYPE_CHECKING:  # imported where a run is resolved: `jobs` and the operator's commands start without them
    from console.engine.job_config import JobConfig
    from console.engine.run_settings import RunSettings
    from console.engine.store import Store


class ConfigFileSource(PydanticBaseSettingsSource):
    """The config file, read safely and typed strictly.

    The file is read like job.toml (a directory, FIFO, a file over 1 MiB, not UTF-8, bad or too deeply
    nested TOML: a JobError of one line naming the file), then its values are validated against a strict
    copy of the Settings fields, so ``auto_restart = "yes"``, ``max_turns = "10"`` or ``speed = true`` are
    errors naming the key, as in job.toml. Env vars keep pydantic-settings' string parsing
    (``AGENT_CONSOLE_SPEED=0``, ``AGENT_CONSOLE_AUTO_RESTART=false``)."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path) -> None:
        super().__init__(settings_cls)
        self.path = path

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the whole file at once

    def __call__(self) -> dict[str, Any]:
        text = read_config_text(self.path, "the settings file")
        if text is None:
            if os.environ.get("AGENT_CONSOLE_CONFIG"):
                # Named on purpose: a typo in the variable must not silently run with no settings at all.
                raise JobError(f"AGENT_CONSOLE_CONFIG names {one_line(str(self.path), 0)}, which does not exist: "
                               "create it (an empty file is the defaults) or unset the variable")
            return {}
        data = parse_config_toml(text, self.path, "the settings file")
        shown = f"{one_line(str(self.path), 0)} (the settings file)"
        try:
            checked = _file_model(self.settings_cls).model_validate(data)
        except ValidationError as exc:
            raise JobError(format_validation_error(shown, exc, settings_keys, data=data, model=self.settings_cls)) \
                from None
        except RecursionError:
            raise JobError(f"{shown}: values nested too deeply") from None
        # A table as the keys it sets (not a model): a variable for one of its keys (AGENT_CONSOLE_NOTIFY_URLS)
        # is merged into it, key by key, instead of replacing the whole table with its defaults.
        values: dict[str, Any] = {}
        for name in checked.model_fields_set:
            value = getattr(checked, name)
            values[name] = value.model_dump(exclude_unset=True) if isinstance(value, BaseModel) else value
        if values.get("base_url") is not None:
            try:
                validate_base_url(values["base_url"])
            except ValueError as exc:
                raise JobError(f"{shown}: key 'base_url': {exc}") from None
        return values


class NotifySettings(BaseModel):
    """``[notify]``: where the operator is told that a run needs them (console.notify): Apprise URLs (ntfy://,
    slack://, mailto://, json://...), checked when a run starts; ``on_end``: also one line when a run ends."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    urls: list[str] = Field(default_factory=list)
    on_end: bool = True
    # A need nobody answers is told again after these gaps (minutes; the last repeats; [] for none): see
    # console.notify.REMIND_MINUTES for why these. At most a week a gap, at least half a minute.
    remind_minutes: list[Annotated[float, Field(ge=0.5, le=7 * 24 * 60)]] = Field(
        default_factory=lambda: [15.0, 60.0, 240.0], max_length=20)


MAX_DAILY_USD = 1e9


class BudgetsSettings(BaseModel):
    """``[budgets]``: the fleet's daily spend limits (console.engine.guardrails.fleet): ``daily_usd`` for every run
    of the fleet together (this machine's, or every machine's with a shared store), ``[budgets.jobs]`` one per job
    name. Reached, every run in its scope pauses at its next turn boundary and the operator is asked once. The
    operator's config only: a job.toml has no [budgets] (a job folder is not trusted to lift the fleet's limits).
    ``AGENT_CONSOLE_BUDGETS_DAILY_USD`` overrides ``daily_usd``."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    daily_usd: float | None = Field(default=None, gt=0, le=MAX_DAILY_USD)
    jobs: dict[Annotated[str, Field(min_length=1, max_length=200)],
               Annotated[float, Field(gt=0, le=MAX_DAILY_USD)]] = Field(default_factory=dict, max_length=1000)
    # The zone of the fleet's days (an IANA name: "UTC", "Europe/Paris"); None: this machine's. Machines that share a
    # store must count the same day, or a raise on one lifts nothing on another: see use_timezone.
    timezone: str | None = Field(default=None, min_length=1, max_length=100)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, name: str | None) -> str | None:
        if name is not None and zone_problem(name) is not None:
            raise ValueError(zone_problem(name))
        return name


class KubernetesSettings(BaseModel):
    """``[kubernetes]``: what ``submit --kubernetes`` makes. ``ttl_after_finished``: seconds a finished Job (and its
    pods and logs) is kept before the cluster deletes it (its ttlSecondsAfterFinished; 0: at once); the volume claim,
    with the run's results, is kept."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    ttl_after_finished: int = Field(default=7 * 24 * 3600, ge=0, le=2**31 - 1)  # an int32 in the Job's spec


# What a public URL may hold in its path: it is written into the notifications' links and into ntfy's action
# header (whose fields are separated by "," and ";"), so nothing that needs quoting anywhere.
_URL_PATH = re.compile(r"^[A-Za-z0-9._~/-]*$")
MAX_LINK_TTL_HOURS = 30 * 24  # console.engine.action_links.MAX_TTL


def check_public_url(text: str, where: str = "") -> str:
    """``text`` as serve's public URL (the address browsers, and the notifications' links, use): http or https, a
    host, no user or password, no query or fragment, a plain path; without its trailing "/". A ValueError of one
    line naming ``where`` otherwise (the value is not repeated: a URL pasted into the wrong key may hold a token)."""
    from urllib.parse import urlsplit

    usage = "give the address browsers use to reach serve, such as https://console.example.org"
    where = f"{where}: " if where else ""
    try:
        parts = urlsplit(text.strip())
        if parts.port == 0:
            raise ValueError("port 0")
    except ValueError:
        raise ValueError(f"{where}not a URL; {usage}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{where}not an http:// or https:// URL with a host; {usage}")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise ValueError(f"{where}holds a user or password, which every link would carry; {usage}")
    if parts.query or parts.fragment or "?" in text or "#" in text:
        raise ValueError(f"{where}holds a query or a fragment; {usage}")
    if not _URL_PATH.match(parts.path) or not re.fullmatch(r"[A-Za-z0-9.:\[\]-]+", parts.netloc):
        raise ValueError(f"{where}holds characters a link cannot carry unquoted; {usage}")
    return f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")


class ServeSettings(BaseModel):
    """``[serve]``: the operator's web server (console.web) as the notifications' links name it: ``public_url``, the
    address a phone reaches it at (unset: notifications carry no links); ``link_ttl_hours``, how long a link holds.
    The operator's config only: a job.toml has no [serve] (a job folder is not trusted to choose where links go)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    public_url: str | None = None
    link_ttl_hours: float = Field(default=24.0, gt=0, le=MAX_LINK_TTL_HOURS)

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return check_public_url(value)


class TelemetrySettings(BaseModel):
    """``[telemetry]``: the run's traces and metrics over OTLP (console.telemetry). The operator's config only: a
    job.toml has no [telemetry] (a job folder must never turn it on, point it elsewhere or opt into its content).
    The standard ``OTEL_*`` variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``_HEADERS``, ``_PROTOCOL``, ``_TIMEOUT``,
    ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_SDK_DISABLED``) win over these keys, as the SDK
    reads them. ``enabled``: None, on when an endpoint is set (here or in the environment); false, off whatever the
    environment says. ``content``: prompt and result text in the spans (scrubbed of secrets); off by default."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    enabled: bool | None = None
    endpoint: str | None = None
    # Sent with every export (an API key for a hosted backend): never shown, never in an event.
    headers: dict[str, str] = Field(default_factory=dict)
    protocol: Literal["http/protobuf", "grpc"] = "http/protobuf"
    service_name: str = Field(default="agent-console", min_length=1, max_length=200)
    content: bool = False
    # Seconds one export may take (a slow collector): the run never waits on it; the process's end waits at most
    # this long for what is still queued.
    export_timeout: float = Field(default=5.0, gt=0, le=60)

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(value.strip())
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            # The value is not repeated: an endpoint may carry a token.
            raise ValueError("not an http:// or https:// URL with a host, such as http://localhost:4318")
        return value.strip()


NOTIFY_ENV = {"urls": "AGENT_CONSOLE_NOTIFY_URLS", "on_end": "AGENT_CONSOLE_NOTIFY_ON_END",
              "remind_minutes": "AGENT_CONSOLE_NOTIFY_REMIND_MINUTES"}
TRUE_WORDS, FALSE_WORDS = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def remind_minutes_env(raw: str) -> list[float]:
    """``AGENT_CONSOLE_NOTIFY_REMIND_MINUTES``: a JSON list (``[15, 60, 240]``; ``[]``: no reminders) or minutes
    separated by commas or spaces. A JobError of one line naming the variable otherwise; the value is never
    repeated (a URL pasted into the wrong variable carries a token)."""
    name, text = NOTIFY_ENV["remind_minutes"], raw.strip()
    usage = "expected minutes such as [15, 60, 240] (or 15,60,240), or [] for no reminders"
    try:
        items: Any = json.loads(text) if text.startswith("[") else [float(x) for x in re.split(r"[\s,]+", text)
                                                                    if x]
    except (ValueError, RecursionError):
        raise JobError(f"{name}: not a list of minutes; {usage}") from None
    if not items and text != "[]":
        raise JobError(f"{name}: empty; {usage}")
    try:
        return NotifySettings.model_validate({"remind_minutes": items}).remind_minutes
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        where = f"gap {first['loc'][1] + 1}: " if len(first["loc"]) > 1 and isinstance(first["loc"][1], int) else ""
        raise JobError(f"{name}: {where}{one_line(first['msg'], 120)}; {usage}") from None
    except RecursionError:
        raise JobError(f"{name}: nested too deeply; {usage}") from None


class NotifyEnvSource(PydanticBaseSettingsSource):
    """``AGENT_CONSOLE_NOTIFY_URLS`` (URLs separated by commas or spaces), ``AGENT_CONSOLE_NOTIFY_ON_END``
    (true/false) and ``AGENT_CONSOLE_NOTIFY_REMIND_MINUTES`` (:func:`remind_minutes_env`): each overrides its key
    of the config file's ``[notify]`` table (what a pod on Kubernetes is given: console.kube.carry). Likewise
    ``AGENT_CONSOLE_SERVE_PUBLIC_URL`` and ``AGENT_CONSOLE_SERVE_LINK_TTL_HOURS`` for ``[serve]``'s keys."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the variables at once

    def __call__(self) -> dict[str, Any]:
        env = {k.upper(): v for k, v in os.environ.items() if k.upper() in NOTIFY_ENV.values()}
        out: dict[str, Any] = {}
        if (raw := env.get(NOTIFY_ENV["urls"])) is not None:
            out["urls"] = [u for u in re.split(r"[\s,]+", raw) if u]
        if (raw := env.get(NOTIFY_ENV["on_end"])) is not None:
            word = raw.strip().lower()
            if word not in TRUE_WORDS | FALSE_WORDS:
                # The value is not repeated: a URL pasted into the wrong variable carries a token.
                raise JobError(f"{NOTIFY_ENV['on_end']}: expected true or false (the value given is not shown)")
            out["on_end"] = word in TRUE_WORDS
        if (raw := env.get(NOTIFY_ENV["remind_minutes"])) is not None:
            out["remind_minutes"] = remind_minutes_env(raw)
        serve: dict[str, Any] = {}
        for key, name in SERVE_ENV.items():
            if (raw := os.environ.get(name)) is not None:
                serve[key] = raw.strip() if key == "public_url" else _hours_env(name, raw)
        budgets: dict[str, Any] = {}
        if (raw := os.environ.get(BUDGETS_DAILY_ENV)) is not None:
            try:
                budgets["daily_usd"] = float(raw.strip())
            except ValueError:
                raise JobError(f"{BUDGETS_DAILY_ENV}: expected US dollars, such as 50") from None
        return {**({"notify": out} if out else {}), **({"serve": serve} if serve else {}),
                **({"budgets": budgets} if budgets else {})}


BUDGETS_DAILY_ENV = "AGENT_CONSOLE_BUDGETS_DAILY_USD"
SERVE_ENV = {"public_url": "AGENT_CONSOLE_SERVE_PUBLIC_URL", "link_ttl_hours": "AGENT_CONSOLE_SERVE_LINK_TTL_HOURS"}


def _hours_env(name: str, raw: str) -> float:
    try:
        return float(raw.strip())
    except ValueError:
        raise JobError(f"{name}: expected hours, such as 24 (0 < hours <= {MAX_LINK_TTL_HOURS})") from None


_FILE_MODELS: dict[type, type[BaseModel]] = {}


def _file_model(settings_cls: type[BaseSettings]) -> type[BaseModel]:
    """A strict model with the fields (types, bounds) of ``settings_cls``, for the values of the config file.

    Paths and secrets are written as TOML strings, so those two fields stay lax (a str becomes a Path or a
    SecretStr; nothing else is accepted for them)."""
    if settings_cls not in _FILE_MODELS:
        fields: dict[str, Any] = {}
        for name, info in settings_cls.model_fields.items():
            metadata = list(info.metadata)  # the bounds: gt, ge, lt, le
            if any(t in str(info.annotation) for t in ("Path", "SecretStr")):
                metadata.append(Strict(False))
            annotation = Annotated[(info.annotation, *metadata)] if metadata else info.annotation
            fields[name] = (annotation, None)  # no defaults: only the keys the file sets are handed on
        _FILE_MODELS[settings_cls] = create_model(
            f"{settings_cls.__name__}File",
            __config__=ConfigDict(extra="forbid", strict=True, allow_inf_nan=False),
            **fields,
        )
    return _FILE_MODELS[settings_cls]


def settings_keys(loc: tuple[Any, ...] = ()) -> str:
    """The keys the config file accepts where the unknown key ``loc`` is: its table's (``[notify]``: urls,
    on_end, ...) or the top level's."""
    model: Any = Settings
    table: list[str] = []
    for part in loc[:-1]:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        inner = field.annotation if field is not None else None
        if not (isinstance(inner, type) and issubclass(inner, BaseModel)):
            break
        model, table = inner, [*table, part]
    where = f"the keys of [{'.'.join(table)}]" if table else "the config file's keys"
    return f"{where}: " + ", ".join(sorted(model.model_fields))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENT_CONSOLE_", extra="forbid", allow_inf_nan=False)

    data_dir: Path = Field(default_factory=default_data_dir)
    provider: str = setting_field("provider")  # a provider registry name
    model: str | None = setting_field("model")
    base_url: str | None = setting_field("base_url")
    openai_api_key: SecretStr | None = None
    anthropic_api_key: SecretStr | None = None
    # The openai provider's name for the output limit: "auto" (by the host, then by the server's answer), or one
    # forced for a server that answers neither way (MaxTokensParam).
    max_tokens_param: MaxTokensParam = "auto"
    # Scripted model pacing: 1.0 looks alive in a demo, 0 is instant (tests, benchmarks).
    speed: float = setting_field("speed")
    # None: the model's window from the registry (or 128k for a model it does not know).
    context_window: int | None = setting_field("context_window")
    soft_threshold: float = setting_field("soft_threshold")
    hard_threshold: float = setting_field("hard_threshold")
    max_turns: int = setting_field("max_turns")
    # The most sessions a run may have, as seed 004 counts: a context full in session N >= max_restarts ends the
    # run (0 and 1: one session, no restart; 10: nine restarts at most).
    max_restarts: int = setting_field("max_restarts")
    auto_restart: bool = setting_field("auto_restart")
    # Whole turns (a reply with all its tool results) a context restart carries into the next session (seed 004).
    carryover_turns: int = setting_field("carryover_turns")
    # Seed 003: working memory in every prompt (on here; the seed's default is off), and the file catalogue with
    # its find_files tool (off: its spec costs tokens in every request). job.toml [context] overrides both.
    requires_context: bool = setting_field("requires_context")
    file_index: bool = setting_field("file_index")
    # In-place compaction (Context management in the README): once the conversation holds this many tokens that
    # masking cannot free beyond its last turns, it becomes a summary plus those turns. 0: never in place.
    compact_at: int = setting_field("compact_at")
    # The most one tool call may write, and the most the job folder may hold (MB); job.toml [limits] overrides.
    max_write_mb: float = setting_field("max_write_mb")
    max_job_mb: float = setting_field("max_job_mb")
    # How layers 4-5 are compacted at phase boundaries: facts only, or a summary written by the model.
    summary: Literal["deterministic", "llm"] = setting_field("summary")
    theme: str = DEFAULT_THEME
    # Console key remapping: binding id -> keys, e.g. {"checkpoint": "ctrl+k"} (see the console's help screen).
    keys: dict[str, str] = Field(default_factory=dict)
    # Prices and windows of models the registry does not know (or knows wrongly): [prices."MODEL"].
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    # Resilient turns: retry transient failures for up to this many seconds since the turn's first failure
    # (unreachable_wait while the server cannot be reached at all), then ask the operator; a stream with no
    # model output for idle_timeout seconds is a failure; a server's retry-after is honoured up to the cap.
    retry_total_wait: float = setting_field("retry_total_wait")
    unreachable_wait: float = setting_field("unreachable_wait")
    retry_after_cap: float = setting_field("retry_after_cap")
    idle_timeout: float = setting_field("idle_timeout")
    turn_timeout: float = setting_field("turn_timeout")
    # The most any job's [sandbox] may ask for its commands ([sandbox_limits] in the config file); without it, no
    # network and no extra path under the operator's home or the host's private folders (a job is not trusted).
    sandbox_limits: SandboxCaps = Field(default_factory=SandboxCaps)
    # What any job's [[mcp]] servers may be ([mcp] allow = false, commands = ["mcp-server-time", ...]); unset, any
    # server, run confined as the job's commands are.
    mcp: McpCaps = Field(default_factory=McpCaps)
    # Who is told when a run needs its operator ([notify] urls = [...], on_end; see NotifySettings).
    notify: NotifySettings = Field(default_factory=NotifySettings)
    # What submit --kubernetes makes ([kubernetes] ttl_after_finished = SECONDS; see KubernetesSettings).
    kubernetes: KubernetesSettings = Field(default_factory=KubernetesSettings)
    # Where serve is reached, for the notifications' action links ([serve] public_url, link_ttl_hours).
    serve: ServeSettings = Field(default_factory=ServeSettings)
    # The fleet's daily spend limits ([budgets] daily_usd, [budgets.jobs] NAME = usd; see BudgetsSettings).
    budgets: BudgetsSettings = Field(default_factory=BudgetsSettings)
    # The run's traces and metrics over OTLP ([telemetry] endpoint, content...; see TelemetrySettings).
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    # Where a job.toml's [model] base_url may point (prefixes, compared parsed: https://llm.example.org/v1); none by
    # default. A job folder may come from anyone: its base_url would receive the operator's API key. The operator's
    # own (base_url here, OPENAI_BASE_URL..., --base-url) needs no entry.
    job_base_urls: list[str] = Field(default_factory=list, max_length=256)
    # The jobs store: unset, the embedded one (jobs.db in the data dir); a postgresql:// URL, a PostgreSQL server
    # that every machine of a team points at (runs, events, commands). A secret: its password is never shown.
    store: SecretStr | None = None

    @field_validator("provider")
    @classmethod
    def _provider(cls, value: str) -> str:
        if value not in registry.PROVIDERS:
            raise ValueError(f"unknown provider '{value}' (choose {registry.choices()})")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, NotifyEnvSource(settings_cls), env_settings,
                ConfigFileSource(settings_cls, config_path()))

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else validate_base_url(value)

    @field_validator("job_base_urls")
    @classmethod
    def _job_urls(cls, value: list[str]) -> list[str]:
        from urllib.parse import urlsplit

        for i, url in enumerate(value):
            # Checked first: url_problem's own line for it speaks of an MCP server's credentials.
            if "@" in urlsplit(url).netloc:
                raise ValueError(f"entry {i}: a prefix holds no user or password (a job's base URL is compared with "
                                 "it by scheme, host, port and path)")
            if why := url_problem(url):
                raise ValueError(f"entry {i}: {why}")
        return value

    @field_validator("store")
    @classmethod
    def _store(cls, value: SecretStr | None) -> SecretStr | None:
        from console.engine.store.url import check_store_url

        if value is None or not value.get_secret_value().strip():
            return None  # AGENT_CONSOLE_STORE="" is the embedded store
        check_store_url(value.get_secret_value().strip())
        return SecretStr(value.get_secret_value().strip())

    @property
    def store_url(self) -> str | None:
        """The store's URL (None: the embedded store). Handed to the store only: never printed (shown_store_url)."""
        return self.store.get_secret_value() if self.store is not None else None

    @property
    def locations(self) -> Locations:
        """The data dir and the store's URL, with what is derived from them (console.locations: one definition)."""
        return Locations(self.data_dir, self.store_url, self.theme, dict(self.keys))

    def open_store(self, lenient: bool = False) -> Store:
        """The jobs store these settings name; StoreError (one line, no password) if a shared one cannot be used
        (``lenient``: a run's start, which goes on while its store is away), sqlite3.Error or OSError if the
        embedded one cannot."""
        return self.locations.open_store(lenient=lenient)

    @property
    def runs_dir(self) -> Path:
        return self.locations.runs_dir

    @property
    def store_path(self) -> Path:
        return self.locations.store_path


# Every run setting of the config file (a top-level key; [notify]'s are NotifySettings') is a field of Settings with
# the table's type, bounds and default: a setting added to one and not the other fails here, at import.
check_fields(Settings, [s.name for s in SPECS if s.config_key == s.name])


def load_settings(**overrides: Any) -> Settings:
    """Load settings; a bad config file or env var becomes a :class:`JobError` naming the key. The operator's
    ``[budgets] timezone`` becomes the process's (:func:`use_timezone`)."""
    try:
        settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
        use_timezone(settings.budgets.timezone)
        return settings
    except JobError:
        raise  # the config file itself: already one line naming it
    except ValidationError as exc:
        raise JobError(format_validation_error(f"settings ({config_path()} or AGENT_CONSOLE_*)", exc,
                                               settings_keys)) from None
    except Exception as exc:  # e.g. an env var holding JSON that does not parse (AGENT_CONSOLE_KEYS)
        raise JobError(f"settings ({config_path()} or AGENT_CONSOLE_*): {one_line(str(exc))}") from None


def _model_for(settings: Settings, job: JobConfig, flags: dict[str, Any],
               job_toml: str = "job.toml") -> tuple[str, str]:
    """(provider, model): the provider from the highest layer that names one (settings < job.toml < flags);
    a model name counts only if it was given at or above the layer that chose the provider, so switching
    the provider anywhere brings that provider's default model, never another provider's name."""
    provider, model = settings.provider, settings.model
    for p, m in ((job.model.provider, job.model.name), (flags.get("provider"), flags.get("model"))):
        if p is not None and p != provider:
            provider, model = p, None
        if m is not None:
            model = m
    if provider not in registry.PROVIDERS:
        where = "--provider" if flags.get("provider") == provider else f"{job_toml}: key 'model.provider'"
        raise JobError(f"{where}: unknown provider '{provider}' (choose {registry.choices()})")
    return provider, model or registry.PROVIDERS[provider].default_model


def _window(settings: Settings, job: JobConfig, flags: dict[str, Any], info: registry.ModelInfo | None,
            provider: str) -> tuple[int, str]:
    if flags.get("context_window"):
        return flags["context_window"], "--context-window"
    if job.context.window:
        return job.context.window, "job.toml"
    if settings.context_window:
        return settings.context_window, "settings"
    if info is not None and info.context_window:
        where = "registry" if info.source == "registry" else "[prices]"
        return info.context_window, f"{where}: {info.name}"
    if provider == "scripted":
        return registry.FALLBACK_WINDOW, "default"
    return registry.FALLBACK_WINDOW, "default (a model the registry does not know; set context_window)"


# Resolved above by rules of their own (the provider's default model, its endpoint, the window's sources).
CHOSEN_APART = ("provider", "model", "base_url", "context_window")


def layered_settings(settings: Settings, job: JobConfig) -> dict[str, Any]:
    """Every other run setting of the config file, job.toml's value winning where it sets one (the table's job
    key), by name: the run's settings before its flags."""
    out: dict[str, Any] = {}
    for spec in SPECS:
        if spec.config_key != spec.name or spec.name in CHOSEN_APART:
            continue
        value = getattr(getattr(job, spec.job[0]), spec.job[1]) if spec.job is not None else None
        out[spec.name] = value if value is not None else getattr(settings, spec.name)
    return out


def _check_job_base_url(settings: Settings, job: JobConfig, flags: dict[str, Any], provider: str,
                        job_toml: str) -> None:
    """JobError when the run would call job.toml's [model] base_url (with the operator's API key, where one is set)
    without the operator's word: not their own base URL (the config's, the provider's variable), not under one of
    ``job_base_urls``, and no --base-url given (which is theirs, and wins). The scripted model calls nothing."""
    url = job.model.base_url
    if url is None or flags.get("base_url") is not None or not registry.PROVIDERS[provider].key_variables:
        return
    own = [u for u in (settings.base_url, registry.env_base_url(provider)) if u]
    if url in own or url_allowed(url, [*own, *settings.job_base_urls]):
        return
    shown = shown_url(url)
    # What it would get: the key where one is set (the SDK reads its variable too); else still every request, made
    # from this machine to an address a job chose (one of its network's own services).
    keyed = (getattr(settings, f"{provider}_api_key", None) is not None
             or any(os.environ.get(v) for v in registry.PROVIDERS[provider].key_variables))
    what = f"your {provider} API key with every request" if keyed else "every request, from this machine"
    raise JobError(f"{job_toml}: [model] base_url {shown} is not a server the operator's config allows: the run "
                   f"would send it {what}. If you trust it, run with --base-url {shown}, or add it to "
                   f"job_base_urls in {config_path()}")


def resolve_run_settings(settings: Settings, job: JobConfig, *, job_toml: str = "job.toml",
                         **flags: Any) -> RunSettings:
    """The run's settings from its layers; ``job_toml``: the job file's path, as its errors name it."""
    from console.engine.run_settings import RunSettings

    provider, model = _model_for(settings, job, flags, job_toml)
    overrides = {name: entry.model_dump(exclude_none=True) for name, entry in settings.prices.items()}
    operators = registry.model_info(provider, model, overrides) if job.prices else None
    overrides.update({name: entry.model_dump(exclude_none=True) for name, entry in job.prices.items()})
    info = registry.model_info(provider, model, overrides)
    prices = info.prices if info is not None else None
    # The operator's price, where job.toml's says otherwise: the fleet's daily budget counts the higher cost (a
    # job folder, not trusted with [budgets], cannot make its runs cheaper to the fleet with a [prices] of 0).
    fleet_prices = operators.prices if operators is not None and operators.prices != prices else None
    window, window_source = _window(settings, job, flags, info, provider)
    unconfined = bool(flags.get("unconfined"))
    flags = {k: v for k, v in flags.items() if k not in ("provider", "model", "context_window", "unconfined")}
    layered = layered_settings(settings, job)
    max_job_mb = layered["max_job_mb"]
    try:
        # The data dir (every run, jobs.db) and the config folder (keys) stay hidden from every command, as do the
        # credentials of every home folder in an extra path (resolve_world finds them, against the real HOME).
        world = resolve_world(job.sandbox, settings.sandbox_limits, max_job_mb=max_job_mb, unconfined=unconfined,
                              hide=(str(settings.data_dir), str(config_path().parent)), config=str(config_path()))
    except WorldError as exc:
        raise JobError(f"{job_toml}: {exc}") from None
    _check_job_base_url(settings, job, flags, provider, job_toml)
    rs = RunSettings(
        provider=provider,
        model=model,
        base_url=job.model.base_url or settings.base_url or registry.env_base_url(provider),
        context_window=window,
        context_window_source=window_source,
        prices=prices,
        fleet_prices=fleet_prices,
        guardrails=job.guardrails,
        tools=tuple(job.tools),
        commands=world,
        **layered,
    ).with_overrides(**flags)
    if flags.get("base_url") is not None:
        try:
            validate_base_url(flags["base_url"])
        except ValueError as exc:
            raise JobError(f"--base-url {one_line(repr(shown_url(flags['base_url'])), 120)}: {exc}") from None
    if rs.soft_threshold >= rs.hard_threshold:
        raise JobError(
            f"soft_threshold ({rs.soft_threshold}) must be below hard_threshold ({rs.hard_threshold})"
        )
    return rs
