"""What a pod is given so that it runs the job with the settings this machine resolved for it.

The run's own settings (provider, model, limits, restart policy...) become the flags of the pod's ``run`` command,
as ``run``'s record (.console/launch.json) keeps them for every resume; the operator's other settings (thresholds,
retries, limits, prices...) become AGENT_CONSOLE_* variables, which the pod's settings read as this machine's read
its config file. job.toml travels with the job and wins over both as it does here. What is secret (a store URL with
a password, notification URLs, which carry tokens) goes into a Secret; a provider key never leaves the cluster's own
Secret, and a value of one found anywhere it would be shown is refused.
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from console.engine.job import JobError

STORE_ENV = "AGENT_CONSOLE_STORE"
NOTIFY_ENV = "AGENT_CONSOLE_NOTIFY_URLS"
# Settings (console.settings.Settings) carried as variables: the ones that shape a run and are no flag of `run`.
CARRIED = ("soft_threshold", "hard_threshold", "carryover_turns", "requires_context", "file_index", "compact_at",
           "max_write_mb", "max_job_mb", "summary", "max_tokens_param", "retry_total_wait", "unreachable_wait",
           "retry_after_cap", "idle_timeout", "turn_timeout")
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
        if has_password(rs.base_url):
            raise JobError("the base URL holds a password: it would be in the Job's manifest; give the server a "
                           "key through the Secret instead")
        flags += ["--base-url", rs.base_url]
    if rs.context_window_source in ("--context-window", "settings"):
        flags += ["--context-window", str(rs.context_window)]
    flags += ["--max-turns", str(rs.max_turns), "--max-restarts", str(rs.max_restarts),
              "--auto-restart" if rs.auto_restart else "--no-auto-restart", "--speed", f"{rs.speed:g}"]
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
    if settings.prices:
        env["AGENT_CONSOLE_PRICES"] = json.dumps({k: v.model_dump(exclude_none=True)
                                                  for k, v in settings.prices.items()}, sort_keys=True)
    env["AGENT_CONSOLE_NOTIFY_ON_END"] = json.dumps(settings.notify.on_end)
    return env


def recorded_settings(rs: Any, budgets: dict[str, Any], store: str | None, notify: tuple[str, ...],
                      unconfined: bool) -> dict[str, Any]:
    """What the Job's annotation says it was submitted with (no secret: the store and channels by kind only)."""
    from console.engine.launch import shown_url

    return {"provider": rs.provider, "model": rs.model, "base_url": rs.base_url,
            "context_window": rs.context_window, "context_window_source": rs.context_window_source,
            "max_turns": rs.max_turns, "max_restarts": rs.max_restarts, "auto_restart": rs.auto_restart,
            "carryover_turns": rs.carryover_turns, "requires_context": rs.requires_context,
            "file_index": rs.file_index, "compact_at": rs.compact_at, "speed": rs.speed, "unconfined": unconfined,
            "budgets": budgets, "notify": [shown_url(u) for u in notify],
            "store": "embedded (on the volume)" if not store else
            ("shared (URL in the Secret)" if has_password(store) else "shared")}
