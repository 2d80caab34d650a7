"""Whether a run exports telemetry, and where: the operator's ``[telemetry]`` and the standard ``OTEL_*`` variables.

Standard library only: a run with telemetry off imports nothing of OpenTelemetry (tests/unit/test_telemetry_plan.py
looks at a subprocess's sys.modules). The variables win over the config file's keys, as the SDK reads them: where one
is set, the SDK is left to read it (its parsing, its defaults) and the config's key is not passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from console.engine.url_secrets import shown_url

if TYPE_CHECKING:
    from console.settings import TelemetrySettings

ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
DEFAULT_ENDPOINT = "http://localhost:4318"  # OTLP/HTTP's, as the SDK's


@dataclass(frozen=True)
class Plan:
    """What the run's telemetry does. ``traces_url``/``metrics_url``/``headers``/``timeout``: None where the SDK
    reads its variable itself. ``shown``: the endpoint as an error line may show it (no user-info, no secret query
    value). ``secrets``: header values, never to appear in anything exported."""

    protocol: str
    service_name: str
    content: bool
    export_timeout: float
    shown: str
    traces_url: str | None = None
    metrics_url: str | None = None
    headers: dict[str, str] | None = None
    timeout: float | None = None
    secrets: tuple[str, ...] = field(default_factory=tuple)


def bad_endpoint(environ: Mapping[str, str], protocol: str) -> str | None:
    """The first endpoint variable that is not an http(s) URL with a host, as one line that does not repeat its value
    (an endpoint may carry a token); None when every one set is. The SDK would only fail at its first export, and a
    short run's first export is at its end: said at the start instead. The same rule as ``[telemetry] endpoint``,
    for OTLP over HTTP (over gRPC the SDK also takes a bare host:port)."""
    from urllib.parse import urlsplit

    if protocol != "http/protobuf":
        return None
    for name in ENDPOINT_VARS:
        value = environ.get(name, "").strip()
        if not value:
            continue
        try:
            parts = urlsplit(value)
            ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:
            ok = False
        if not ok:
            return f"{name} is not an http:// or https:// URL with a host, such as http://localhost:4318"
    return None


def _signal_url(base: str, signal: str) -> str:
    return f"{base.rstrip('/')}/v1/{signal}"


def plan(settings: TelemetrySettings, environ: Mapping[str, str]) -> Plan | None:
    """The run's telemetry, or None when it is off: ``OTEL_SDK_DISABLED=true``, ``[telemetry] enabled = false``, or
    no endpoint anywhere and not ``enabled = true``."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true" or settings.enabled is False:
        return None
    env_endpoint = next((environ[v].strip() for v in ENDPOINT_VARS if environ.get(v, "").strip()), "")
    if not (env_endpoint or settings.endpoint or settings.enabled):
        return None
    base = settings.endpoint or DEFAULT_ENDPOINT
    has = {v: bool(environ.get(v, "").strip()) for v in ENDPOINT_VARS}
    general = has["OTEL_EXPORTER_OTLP_ENDPOINT"]
    traces_url = None if general or has["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] else _signal_url(base, "traces")
    metrics_url = None if general or has["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] else _signal_url(base, "metrics")
    env_headers = environ.get("OTEL_EXPORTER_OTLP_HEADERS", "")
    headers = None if env_headers.strip() else dict(settings.headers)
    secrets = [v.strip() for v in (headers or {}).values()]
    for piece in env_headers.split(","):  # key=value,key2=value2 (the values percent-encoded): each a secret
        _key, eq, value = piece.partition("=")
        if eq and value.strip():
            from urllib.parse import unquote

            secrets += [value.strip(), unquote(value.strip())]
    protocol = (environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip() or settings.protocol).lower()
    timeout = None if environ.get("OTEL_EXPORTER_OTLP_TIMEOUT", "").strip() else settings.export_timeout
    service = environ.get("OTEL_SERVICE_NAME", "").strip() or settings.service_name
    return Plan(protocol=protocol, service_name=service, content=settings.content,
                export_timeout=settings.export_timeout, shown=shown_url(env_endpoint or base), traces_url=traces_url,
                metrics_url=metrics_url, headers=headers, timeout=timeout,
                secrets=tuple(sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)))
