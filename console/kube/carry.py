"""What a pod is given so that it runs the job with the settings this machine resolved for it.

The run's own settings (provider, model, limits, restart policy...) become the flags of the pod's ``run`` command,
as ``run``'s record (.console/launch.json) keeps them for every resume; the operator's other settings (thresholds,
retries, limits, prices, [notify]'s on_end and reminders...) become AGENT_CONSOLE_* variables, which the pod's
settings read as this machine's read its config file. job.toml travels with the job and wins over both as it does
here. What is secret (a store URL with a password, notification URLs, which carry tokens) goes into a Secret; a
provider key never leaves the cluster's own Secret, and a value of one found anywhere it would be shown is refused.
Which way each setting goes, or why it stays on this machine, is :data:`SETTINGS`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from console.engine.job_files import JobError
from console.engine.run_setting_specs import SPECS
from console.engine.url_secrets import url_secrets

STORE_ENV = "AGENT_CONSOLE_STORE"
NOTIFY_ENV = "AGENT_CONSOLE_NOTIFY_URLS"
TELEMETRY_ENV = "AGENT_CONSOLE_TELEMETRY"
# The OpenTelemetry SDK's own variables that shape a run's export (console.telemetry.plan reads them too).
OTEL_VARIABLES = ("OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                  "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TIMEOUT",
                  "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                  "OTEL_EXPORTER_OTLP_METRICS_HEADERS", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES")

# How each setting (console.settings.Settings, its tables' keys as "table.key") reaches a pod, decided one by one:
# a test fails for a field that has no decision here, so a new setting cannot be left behind silently. FLAG: a
# flag of the pod's `run` (kept by its launch.json for every resume); VARIABLE: an AGENT_CONSOLE_* variable of the
# pod (settings_env); SECRET: a variable read from the Secret NAME-config; CLUSTER: from the cluster's own Secret;
# LOCAL: this machine's only, and why. Every FLAG, VARIABLE and SECRET one is checked to resolve in the pod as here.
# The run settings' decisions are their table's (console.engine.run_setting_specs: its pod column); the others'
# (where this machine keeps its data, its keys, the console's looks, the tables) are made here.
FLAG, VARIABLE, SECRET, CLUSTER, LOCAL = "flag", "variable", "secret", "cluster", "local"
RUN_SETTINGS: dict[str, tuple[str, str]] = {spec.config_key: (spec.pod, spec.pod_how) for spec in SPECS
                                            if spec.pod is not None and spec.config_key is not None}
SETTINGS: dict[str, tuple[str, str]] = {
    "data_dir": (LOCAL, "the pod's is /work/data, on its volume (AGENT_CONSOLE_DATA_DIR)"),
    "openai_api_key": (CLUSTER, "the Secret --secret names: a key never leaves this machine"),
    "anthropic_api_key": (CLUSTER, "the Secret --secret names: a key never leaves this machine"),
    "max_tokens_param": (VARIABLE, "AGENT_CONSOLE_MAX_TOKENS_PARAM"),
    **RUN_SETTINGS,
    "theme": (LOCAL, "the console's colours: a pod runs headless"),
    "keys": (LOCAL, "the console's key bindings: a pod runs headless"),
    "prices": (VARIABLE, "AGENT_CONSOLE_PRICES (JSON), when any"),
    # The caps the operator set, in AGENT_CONSOLE_SANDBOX_LIMITS (JSON); a cap left to its default is the pod's
    # own default (memory_mb, tmp_mb and shm_mb follow the memory of the machine that runs the commands).
    **{f"sandbox_limits.{key}": (VARIABLE, "AGENT_CONSOLE_SANDBOX_LIMITS, when set") for key in (
        "processes", "memory_mb", "cpu_seconds", "open_files", "file_size_mb", "tmp_mb", "shm_mb", "network",
        "read_only")},
    # What jobs may declare as MCP servers ([mcp]), in AGENT_CONSOLE_MCP (JSON), when the operator set it: a pod
    # must not allow what this machine forbids. The operator's servers go with it, their credentials not: only the
    # names of the variables that hold them (the pod's environment must have them, or such a server does not start).
    # A server's sampling keys (sampling, sampling_max_tokens, sampling_per_call) go with its entry: the pod's run
    # answers with its own model, counted in its own budget. Its elicitation keys (elicitation, elicitation_timeout,
    # elicitation_per_call) too: the pod's run asks its operator, who answers through the store (agent-console answer).
    **{f"mcp.{key}": (VARIABLE, "AGENT_CONSOLE_MCP, when set")
       for key in ("allow", "commands", "tool_search_share", "urls", "env", "servers")},
    "notify.on_end": (VARIABLE, "AGENT_CONSOLE_NOTIFY_ON_END"),
    "notify.remind_minutes": (VARIABLE, "AGENT_CONSOLE_NOTIFY_REMIND_MINUTES (JSON; [] keeps reminders off)"),
    # A link is checked by the serve of the machine whose folder the run is in: a pod's folder is on its volume,
    # so a link from a pod would answer nothing here (its notifications carry the shell's commands only).
    "serve.public_url": (LOCAL, "this machine's serve, for its own runs' action links"),
    "serve.link_ttl_hours": (LOCAL, "this machine's serve, for its own runs' action links"),
    # The run exports its telemetry from the pod as it would here (telemetry_env: the standard OTEL_* variables of
    # the submitting shell go too); the headers (a backend's API key) make the whole table a Secret's.
    **{f"telemetry.{key}": (VARIABLE, "AGENT_CONSOLE_TELEMETRY (JSON), when set and without headers") for key in (
        "enabled", "endpoint", "protocol", "service_name", "content", "export_timeout")},
    "telemetry.headers": (SECRET, "AGENT_CONSOLE_TELEMETRY (JSON, the whole table) in the Secret when it has "
                                  "headers"),
    # The fleet's daily budget holds a pod's run as it holds this machine's when the pod shares this machine's store:
    # its spend and the day's holds are the store's, and `agent-console budget --raise` here reaches it. A pod on
    # an embedded store (its volume's) is not given it: a hold there could be raised by nobody (settings_env).
    **{f"budgets.{key}": (VARIABLE, "AGENT_CONSOLE_BUDGETS (JSON), when set and the pod shares this machine's store")
       for key in ("daily_usd", "jobs", "timezone")},
    "kubernetes.ttl_after_finished": (LOCAL, "the submitting machine's: the Job's ttlSecondsAfterFinished"),
    # Checked where the job is submitted (resolve_run_settings): the URL it allowed reaches the pod as --base-url.
    "job_base_urls": (LOCAL, "checked by the submitting machine; the pod is given the URL as --base-url"),
    "store": (SECRET, "AGENT_CONSOLE_STORE: in the Secret when the URL holds a password, else a plain variable; "
                      "none: the embedded store on the pod's volume"),
}
# The plain variables of scalar settings (the tables' and [prices] have forms of their own: settings_env).
CARRIED = tuple(name for name, (how, _) in SETTINGS.items() if how == VARIABLE and "." not in name
                and name != "prices")
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENT_CONSOLE_OPENAI_API_KEY",
                 "AGENT_CONSOLE_ANTHROPIC_API_KEY")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "")


def store_url(settings: Any) -> str | None:
    """The store the pod records in: the settings' ``store`` when they have one, else $AGENT_CONSOLE_STORE; None
    (or empty): the embedded store, on the run's volume."""
    value = getattr(settings, "store", None)
    if value is not None and hasattr(value, "get_secret_value"):
        value = value.get_secret_value()
    if value is None:
        value = os.environ.get(STORE_ENV)
    value = str(value).strip() if value is not None else ""
    return value or None


def has_password(url: str) -> bool:
    try:
        parts = urlsplit(url)
        return bool(parts.password) or any(k.lower() in ("password", "sslpassword")
                                           for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    except ValueError:
        return True  # not parsed: treated as secret


def store_is_local(url: str) -> bool:
    """The URL names this machine (which a pod is not)."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    return host.lower() in LOCAL_HOSTS and "host=" not in url


def secret_values(settings: Any, store: str | None, notify: tuple[str, ...]) -> list[tuple[str, str]]:
    """(what it is, its value) of every secret this machine knows: none of them may reach a manifest, an argument,
    the job's archive or a line printed."""
    out: list[tuple[str, str]] = []
    for name in ("openai_api_key", "anthropic_api_key"):
        value = getattr(settings, name, None)
        if value is not None:
            out.append((f"the {name} setting (AGENT_CONSOLE_{name.upper()} or the config file)",
                        value.get_secret_value()))
    out += [(f"${name}", os.environ[name]) for name in KEY_VARIABLES if os.environ.get(name)]
    if store and has_password(store):
        out.append(("the store URL", store))
        try:
            password = urlsplit(store).password
        except ValueError:
            password = None
        if password:
            out.append(("the store URL's password", password))
    out += [("a notification URL", url) for url in notify]
    out += [("a [telemetry] header", v) for v in settings.telemetry.headers.values() if v.strip()]
    out += [(f"${name}", os.environ[name]) for name in OTEL_VARIABLES
            if name.endswith("_HEADERS") and os.environ.get(name, "").strip()]
    return out


def check_not_given(values: dict[str, Any], secrets: list[tuple[str, str]]) -> None:
    """JobError if a command-line value holds a secret's value (never repeating it)."""
    for flag, value in values.items():
        texts = [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
        for what, secret in secrets:
            if len(secret) >= 8 and any(secret in t for t in texts) and what != "a notification URL":
                raise JobError(f"--{flag.replace('_', '-')} holds the value of {what}: a key is never given on the "
                               "command line (it would be in the manifest and in ps); put it in a Secret and name "
                               "it with --secret")


def run_flags(rs: Any, unconfined: bool) -> list[str]:
    """The resolved run settings as the flags of the pod's ``run`` (what its launch record will hold)."""
    flags = ["--provider", rs.provider, "--model", rs.model]
    if rs.base_url:
        if has_password(rs.base_url) or url_secrets(rs.base_url):  # a user-info, or a key in the query
            raise JobError("the base URL holds a password or a key: it would be in the Job's manifest; give the "
                           "server a key through the Secret instead")
        flags += ["--base-url", rs.base_url]
    if rs.context_window_source in ("--context-window", "settings"):
        flags += ["--context-window", str(rs.context_window)]
    flags += ["--max-turns", str(rs.max_turns), "--max-restarts", str(rs.max_restarts),
              "--auto-restart" if rs.auto_restart else "--no-auto-restart", "--speed", repr(float(rs.speed))]
    if unconfined:
        flags.append("--unconfined")
    return flags


def settings_env(settings: Any) -> dict[str, str]:
    """The operator's settings that shape a run, as the variables the pod's settings read."""
    env: dict[str, str] = {}
    for name in CARRIED:
        value = getattr(settings, name)
        env[f"AGENT_CONSOLE_{name.upper()}"] = value if isinstance(value, str) else json.dumps(value)
    # Only the caps the operator set: the others' defaults are the machine's (its memory), the pod's own there.
    caps = settings.sandbox_limits.model_dump(exclude_unset=True)
    if caps:
        env["AGENT_CONSOLE_SANDBOX_LIMITS"] = json.dumps(caps, sort_keys=True)
    if mcp := settings.mcp.model_dump(exclude_unset=True):
        env["AGENT_CONSOLE_MCP"] = json.dumps(mcp, sort_keys=True)
    if (telemetry := settings.telemetry.model_dump(exclude_unset=True)) and not settings.telemetry.headers:
        env[TELEMETRY_ENV] = json.dumps(telemetry, sort_keys=True)
    if store_url(settings) and (budgets := settings.budgets.model_dump(exclude_unset=True)):
        env["AGENT_CONSOLE_BUDGETS"] = json.dumps(budgets, sort_keys=True)  # see SETTINGS: "budgets.daily_usd"
    if settings.prices:
        env["AGENT_CONSOLE_PRICES"] = json.dumps({k: v.model_dump(exclude_none=True)
                                                  for k, v in settings.prices.items()}, sort_keys=True)
    # Every key of [notify] but the URLs (the Secret's): the pod tells and reminds as a runner here would.
    from console.settings import NOTIFY_ENV as NOTIFY_VARIABLES

    env[NOTIFY_VARIABLES["on_end"]] = json.dumps(settings.notify.on_end)
    env[NOTIFY_VARIABLES["remind_minutes"]] = json.dumps(list(settings.notify.remind_minutes))
    return env


def telemetry_env(settings: Any, environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The pod's telemetry as it is here: (plain variables, the Secret's). ``[telemetry]`` with headers goes whole
    into the Secret (settings_env carries it plain without them); the submitting shell's standard ``OTEL_*``
    variables, which win over the config here, win there too: plain, but for the headers (a backend's key)."""
    env: dict[str, str] = {}
    secret: dict[str, str] = {}
    if settings.telemetry.headers:
        secret[TELEMETRY_ENV] = json.dumps(settings.telemetry.model_dump(exclude_unset=True), sort_keys=True)
    for name in OTEL_VARIABLES:
        if (text := environ.get(name, "")).strip():
            (secret if name.endswith("_HEADERS") else env)[name] = text
    return env, secret


def recorded_settings(rs: Any, settings: Any, budgets: dict[str, Any], store: str | None,
                      notify: tuple[str, ...], unconfined: bool) -> dict[str, Any]:
    """What the Job's annotation says it was submitted with (no secret: the store and channels by kind only)."""
    from console.engine.launch import kept_settings, shown_url

    # What the pod's launch record will keep (the table's), and where the window came from.
    return {**kept_settings(rs), "context_window_source": rs.context_window_source, "unconfined": unconfined,
            "budgets": budgets, "notify": [shown_url(u) for u in notify],
            "notify_on_end": settings.notify.on_end,
            "notify_remind_minutes": list(settings.notify.remind_minutes),
            "store": "embedded (on the volume)" if not store else
            ("shared (URL in the Secret)" if has_password(store) else "shared")}
