"""A run's traces and metrics over OTLP (OpenTelemetry), as one more fold of its event stream.

Off unless the operator turns it on: the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or a signal's own endpoint) in
the environment, or ``[telemetry]`` in the operator's config file (console.settings.TelemetrySettings). A job folder
cannot turn it on, point it elsewhere or opt into its content: job.toml has no [telemetry].

This module decides, with the standard library only (:mod:`.plan`); nothing of OpenTelemetry is imported unless
telemetry is on (:func:`attach` imports :mod:`.export` then). The engine never imports any of it: the spans and
metrics are built by a subscriber of the run's events (:mod:`.fold`), from their timestamps, so the trace has the
event stream's true shape. A slow or dead collector costs the run nothing: the SDK's batch processor and periodic
reader queue a bounded amount and export on their own threads, with a short timeout; what does not get through is
counted and said once (:mod:`.export`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from console.telemetry.plan import Plan, bad_endpoint, plan

if TYPE_CHECKING:
    from console.engine.job_files import JobPaths
    from console.telemetry.export import Telemetry

__all__ = ["Plan", "attach", "plan"]


def attach(sup: Any, paths: JobPaths, say: Callable[[str], None]) -> Telemetry | None:
    """The run's telemetry, subscribed to its events (deferred: never the agent's time; no streamed text), or None
    when it is off. What keeps it from starting is said in one line and the run goes on without it."""
    import os

    from console.engine.job_files import JobError
    from console.settings import load_settings

    try:
        settings = load_settings()
    except JobError as exc:  # read when the run started, so sound: unless it changed since
        say(f"telemetry: not started: {exc}")
        return None
    chosen = plan(settings.telemetry, os.environ)
    if chosen is None:
        return None
    if (bad := bad_endpoint(os.environ, chosen.protocol)) is not None:
        say(f"telemetry: not started: {bad}; the run goes on without it")
        return None
    from console.engine.runs import job_name
    from console.engine.seal import Seal
    from console.engine.url_secrets import url_secrets
    from console.telemetry.export import Telemetry

    # The config file's secrets too (a key or a store password given there, not in the environment).
    secrets = [k.get_secret_value() for k in (settings.openai_api_key, settings.anthropic_api_key) if k is not None]
    secrets += url_secrets(settings.store_url)
    try:
        telemetry = Telemetry(chosen, paths, Seal.of(settings.data_dir), run_id=paths.run_id,
                              job=job_name(paths.root), say=say, clock=sup.clock, hidden=secrets)
    except (ValueError, OSError) as exc:
        say(f"telemetry: not started: {exc}; the run goes on without it")
        return None
    sup.subscribe(telemetry, deferred=True, text=False)
    return telemetry
