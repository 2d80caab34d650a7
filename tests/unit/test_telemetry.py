"""console.telemetry without a collector: when it is on, what wins, what it imports when off, its record and scrubbing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.engine.job import JobError, JobPaths
from console.engine.seal import Seal
from console.settings import TelemetrySettings, load_settings
from console.telemetry import plan
from console.telemetry.record import TraceRecord, read_trace, record_path, write_trace
from console.telemetry.scrub import Scrubber
from tests.conftest import SAMPLES


def test_off_unless_an_endpoint_or_enabled_says_so() -> None:
    assert plan(TelemetrySettings(), {}) is None
    on = plan(TelemetrySettings(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert on is not None and on.traces_url is None and on.content is False  # the SDK reads the variable itself
    assert on.shown == "http://collector:4318"
    assert plan(TelemetrySettings(), {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}) is not None
    configured = plan(TelemetrySettings(endpoint="http://otel.example:4318/"), {})
    assert configured is not None
    assert (configured.traces_url, configured.metrics_url) == ("http://otel.example:4318/v1/traces",
                                                               "http://otel.example:4318/v1/metrics")
    default = plan(TelemetrySettings(enabled=True), {})
    assert default is not None and default.traces_url == "http://localhost:4318/v1/traces"


def test_the_standard_variables_win_and_off_means_off() -> None:
    settings = TelemetrySettings(endpoint="http://config:4318", headers={"x-api-key": "from-config-123"},
                                 service_name="from-config")
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=env%20secret1",
           "OTEL_SERVICE_NAME": "from-env", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    p = plan(settings, env)
    assert p is not None
    assert (p.traces_url, p.headers, p.service_name, p.protocol) == (None, None, "from-env", "grpc")
    assert "env secret1" in p.secrets and "env%20secret1" in p.secrets  # a header's value is a secret
    assert plan(TelemetrySettings(enabled=False), env) is None
    assert plan(settings, {**env, "OTEL_SDK_DISABLED": "true"}) is None


def test_the_config_file_takes_telemetry_and_refuses_a_bad_endpoint_without_repeating_it() -> None:
    config = Path(os.environ["AGENT_CONSOLE_CONFIG"])
    config.write_text('[telemetry]\nendpoint = "http://127.0.0.1:4318"\ncontent = true\nheaders = {a = "b"}\n')
    t = load_settings().telemetry
    assert (t.endpoint, t.content, t.headers) == ("http://127.0.0.1:4318", True, {"a": "b"})
    config.write_text('[telemetry]\nendpoint = "ftp://user:hunter2-token@host"\n')
    with pytest.raises(JobError) as err:
        load_settings()
    assert "telemetry.endpoint" in str(err.value) and "hunter2" not in str(err.value)
    config.write_text('[telemetry]\ncontent = "yes"\n')
    with pytest.raises(JobError, match="telemetry.content"):
        load_settings()


def test_a_job_toml_has_no_telemetry(tmp_path) -> None:
    from console.engine.job_config import load_job_config

    (tmp_path / "instructions.md").write_text("# x\n")
    (tmp_path / "job.toml").write_text('[telemetry]\nendpoint = "http://evil:4318"\ncontent = true\n')
    with pytest.raises(JobError, match="key 'telemetry': unknown key"):
        load_job_config(JobPaths(tmp_path))


PROBE = """
import atexit, sys
atexit.register(lambda: print("OTEL-LOADED" if any(m == "opentelemetry" or m.startswith("opentelemetry.")
                                                   for m in sys.modules) else "OTEL-ABSENT", file=sys.stderr))
sys.argv = ["agent-console", "run", sys.argv[1], "--headless", "--speed", "0", "--in-place"]
from console.cli import main
sys.exit(main())
"""


@pytest.mark.parametrize("on", [False, True])
def test_nothing_of_opentelemetry_is_imported_when_telemetry_is_off(tmp_path, on) -> None:
    import shutil

    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "quickstart", job)
    env = dict(os.environ)
    if on:  # the probe's control: with an endpoint (nobody listens there), the SDK is loaded
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", OTEL_EXPORTER_OTLP_TIMEOUT="1")
    proc = subprocess.run([sys.executable, "-c", PROBE, str(job)], capture_output=True, text=True, env=env,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert ("OTEL-LOADED" if on else "OTEL-ABSENT") in proc.stderr.splitlines()[-1]


def test_the_trace_record_is_believed_only_when_this_operator_sealed_it(tmp_path) -> None:
    paths = JobPaths(tmp_path / "job")
    paths.state.mkdir(parents=True)
    seal = Seal.of(Path(os.environ["AGENT_CONSOLE_DATA_DIR"]))
    record = TraceRecord(trace_id="ab" * 16, root_span_id="cd" * 8, started="2026-11-30T05:00:00Z")
    write_trace(paths, seal, record)
    assert read_trace(paths, seal) == record
    # A record shipped with a job folder (no seal, or another's): a new trace, never the one it names.
    doc = json.loads(record_path(paths).read_text())
    del doc["seal"]
    record_path(paths).write_text(json.dumps(doc))
    assert read_trace(paths, seal) is None
    record_path(paths).write_text("{not json")
    assert read_trace(paths, seal) is None


def test_scrubbing_takes_out_the_environments_secrets_and_key_shaped_text() -> None:
    s = Scrubber({"MY_SERVICE_TOKEN": "tok-1234567890", "HOME": "/home/op", "OPENAI_API_KEY": "abcdefgh12"},
                 extra=["header-secret-1"])
    text = s.text("a tok-1234567890 b abcdefgh12 c sk-proj-ABCDEF123 d header-secret-1 e /home/op")
    assert text == "a *** b *** c *** d *** e /home/op"
    assert len(s.text("x" * 10_000)) < 4200
