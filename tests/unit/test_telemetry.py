"""console.telemetry without a collector: when it is on, what wins, what it imports when off, its record, scrubbing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    with pytest.raises(JobError, match=r"telemetry\.content"):
        load_settings()


def test_a_job_toml_has_no_telemetry(tmp_path) -> None:
    from console.engine.job_config import load_job_config

    (tmp_path / "instructions.md").write_text("# x\n")
    (tmp_path / "job.toml").write_text('[telemetry]\nendpoint = "http://evil:4318"\ncontent = true\n')
    with pytest.raises(JobError, match="'telemetry' is the operator's setting, in their config file"):
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
    # In another case (a job folder's name made a slug), and where two secrets overlap, hidden all the same.
    s = Scrubber({"MY_SERVICE_TOKEN": "tok-Secret-XYZ", "OTHER_SECRET": "Secret-XYZ-more"})
    assert s.text("invoke_agent job-tok-secret-xyz") == "invoke_agent job-***"
    assert s.text("a SECRET-XYZ-MORE b") == "a *** b"
    assert Scrubber({}).text("plain") == "plain"


def in_memory_fold() -> tuple[Any, Any, Any]:
    """A run's TraceFold over in-memory exporters: (the fold, its finished spans, its metric reader)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from console.telemetry.fold import Instruments, TraceFold

    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    meters = MeterProvider(metric_readers=[reader])
    fold = TraceFold(tracer_provider.get_tracer("t"), Instruments(meters.get_meter("t")), Scrubber({}),
                     content=False, run_id="abcde", job="quickstart")
    return fold, spans, reader


def test_the_fold_counts_needs_restarts_denials_and_tool_errors_from_the_events() -> None:
    from datetime import UTC, datetime, timedelta

    from console.engine import events as ev

    fold, spans, reader = in_memory_fold()
    t0 = datetime(2026, 11, 30, 5, 0, tzinfo=UTC)
    seq = iter(range(1, 100))

    def at(cls, s: float, session: int = 1, **kw):
        fold(cls(ts=t0 + timedelta(seconds=s), seq=next(seq), session=session, **kw))

    at(ev.SessionStarted, 0, provider="openai", model="gpt-x", reason="new")
    at(ev.TurnStarted, 1, turn=1)
    at(ev.AssistantMessage, 3, turn=1, text="secret plan", stop_reason="tool_use")
    at(ev.ToolCalled, 3, turn=1, call_id="c1", tool="run_tests", arguments="{}")
    at(ev.ToolResult, 5, turn=1, call_id="c1", tool="run_tests", ok=False, content="boom")
    at(ev.ToolDenied, 5, turn=1, call_id="c2", tool="write_file", policy="protect", reason="no")
    at(ev.TokenUsage, 6, turn=1, input_tokens=100, output_tokens=10, cost_usd=0.5, job_cost_usd=0.5)
    at(ev.NeedsOperator, 7, reason="stuck", message="looping")
    at(ev.SessionEnded, 8, reason="context_full", turns=1)
    at(ev.SessionStarted, 9, session=2, provider="openai", model="gpt-x", reason="restart")
    at(ev.RunEnded, 10, session=2, reason="stopped", outcome="incomplete", sessions=2, restarts=1)
    finished = {s.name: s for s in spans.get_finished_spans()}
    chat = finished["chat gpt-x"]
    assert (chat.start_time, chat.end_time) == (int((t0 + timedelta(seconds=1)).timestamp() * 1e9),
                                                int((t0 + timedelta(seconds=3)).timestamp() * 1e9))
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert "gen_ai.output.messages" not in chat.attributes  # no content unless opted in
    assert finished["execute_tool run_tests"].attributes["error.type"] == "tool_error"
    assert finished["execute_tool write_file"].attributes["agent_console.tool.denied"] is True
    run = finished["invoke_agent quickstart"]
    assert {k: run.attributes[f"agent_console.{k}"] for k in ("needs_you", "restarts", "denials", "tool_errors")} == {
        "needs_you": 1, "restarts": 1, "denials": 1, "tool_errors": 1}
    assert run.attributes["agent_console.outcome"] == "incomplete" and run.attributes["agent_console.cost_usd"] == 0.5
    data = reader.get_metrics_data()
    totals = {m.name: sum(p.value for p in m.data.data_points) for rm in data.resource_metrics
              for sm in rm.scope_metrics for m in sm.metrics if hasattr(m.data.data_points[0], "value")}
    assert {k: totals[k] for k in ("agent_console.needs_you", "agent_console.restarts", "agent_console.tool.denials",
                                   "agent_console.tool.errors", "agent_console.cost")} == {
        "agent_console.needs_you": 1, "agent_console.restarts": 1, "agent_console.tool.denials": 1,
        "agent_console.tool.errors": 1, "agent_console.cost": 0.5}


def test_a_failing_collector_is_said_once_with_its_cause_and_no_secret_of_its_url() -> None:
    import logging

    from console.telemetry.export import Failures

    said: list[str] = []
    failures = Failures(said.append, "http://***@collector:4318", "http://user:pa55word-xyz@collector:4318")
    failures.reason_from(logging.LogRecord("opentelemetry", logging.WARNING, "", 0, "Transient error %s", (
        "HTTPConnectionPool(host='collector'): Failed to establish a new connection: [Errno 111] Connection refused",),
        None))
    for _ in range(5):
        failures.failed("12 spans")
    assert len(said) == 1 and "(connection refused)" in said[0] and "pa55word" not in said[0]
    assert "; the run goes on, what does not get through is counted" in said[0]


def test_a_first_failure_at_the_runs_end_does_not_say_the_run_goes_on() -> None:
    """Found by hand: a short run's first export fails as it ends; the line said "the run goes on" under its end."""
    from console.telemetry.export import Failures

    said: list[str] = []
    failures = Failures(said.append, "http://127.0.0.1:9", None)
    failures.closing = True
    failures.failed("153 spans")
    assert said == ["telemetry: as the run ended, the collector at http://127.0.0.1:9 did not take 153 spans (turn "
                    "telemetry off with [telemetry] enabled = false in the config file, or unset "
                    "OTEL_EXPORTER_OTLP_ENDPOINT)"]
    assert "goes on" not in said[0]


def test_an_event_after_the_run_ended_makes_no_second_run_span() -> None:
    from datetime import UTC, datetime

    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from console.engine import events as ev
    from console.telemetry.fold import Instruments, TraceFold

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    fold = TraceFold(provider.get_tracer("t"), Instruments(MeterProvider().get_meter("t")), Scrubber({}),
                     content=False, run_id="abcde", job="j")
    ts = datetime(2026, 11, 30, tzinfo=UTC)
    fold(ev.SessionStarted(ts=ts, seq=1, session=1, provider="p", model="m"))
    fold(ev.RunEnded(ts=ts, seq=2, session=1, reason="completed", outcome="completed"))
    fold(ev.ErrorEvent(ts=ts, seq=3, session=1, message="a channel failed", where="notify"))
    fold.end_run(None)
    assert [s.name for s in spans.get_finished_spans()] == ["session 1", "invoke_agent j"]


def test_the_test_receiver_is_strict() -> None:
    import urllib.error
    import urllib.request

    from tests.otlp_receiver import Receiver

    def post(url: str, body: bytes, ctype: str) -> int:
        request = urllib.request.Request(url, data=body, headers={"Content-Type": ctype}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    with Receiver() as receiver:
        assert post(receiver.endpoint + "/v1/traces", b"\xff\xff\xff", "application/x-protobuf") == 400
        assert post(receiver.endpoint + "/v1/traces", b"", "application/json") == 415
        assert post(receiver.endpoint + "/v1/logs", b"", "application/x-protobuf") == 404
        assert post(receiver.endpoint + "/v1/traces", b"", "application/x-protobuf") == 200  # an empty request
    assert len(receiver.refused) == 3 and len(receiver.traces) == 1


def test_an_mcp_servers_sampling_is_counted_as_spend_and_is_no_chat_of_the_turns() -> None:
    from datetime import UTC, datetime, timedelta

    from console.engine import events as ev

    fold, spans, reader = in_memory_fold()
    t0 = datetime(2026, 11, 30, 5, 0, tzinfo=UTC)
    seq = iter(range(1, 100))

    def at(cls, s: float, **kw):
        fold(cls(ts=t0 + timedelta(seconds=s), seq=next(seq), session=1, **kw))

    at(ev.SessionStarted, 0, provider="openai", model="gpt-x", reason="new")
    at(ev.TurnStarted, 1, turn=1)
    at(ev.AssistantMessage, 3, turn=1, text="", stop_reason="tool_use")
    at(ev.ToolCalled, 3, turn=1, call_id="c1", tool="mcp__muse__idea", arguments="{}")
    at(ev.TokenUsage, 4, turn=0, input_tokens=40, output_tokens=5, cost_usd=0.25, job_cost_usd=0.25,
       source="mcp_sampling", mcp_server="muse", call_id="c1")
    at(ev.ToolResult, 5, turn=1, call_id="c1", tool="mcp__muse__idea", ok=True, content="idea")
    at(ev.TokenUsage, 6, turn=1, input_tokens=100, output_tokens=10, cost_usd=0.5, job_cost_usd=0.75)
    at(ev.RunEnded, 10, reason="stopped", outcome="incomplete", sessions=1, restarts=0)
    chat = {s.name: s for s in spans.get_finished_spans()}["chat gpt-x"]
    assert chat.attributes["gen_ai.usage.input_tokens"] == 100  # the turn's own, not the server's sampling
    data = reader.get_metrics_data()
    totals = {m.name: sum(p.value for p in m.data.data_points) for rm in data.resource_metrics
              for sm in rm.scope_metrics for m in sm.metrics if hasattr(m.data.data_points[0], "value")}
    assert totals["agent_console.cost"] == 0.75


def test_the_runs_end_waits_less_once_the_collector_has_shown_it_is_dead_or_stuck() -> None:
    """Found by a new operator's trial: with the collector's port closed, a 2 s run ended 3 s later (the end waited
    the whole export timeout while the SDK backed off between refused connections); with a collector that accepts
    and never answers, 5 s later. What the collector has shown by then shortens the wait."""
    import logging

    from console.telemetry.export import FAILED_WAIT, REFUSED_WAIT, SLOW, Failures

    now = [100.0]
    said: list[str] = []

    def fresh() -> Failures:
        return Failures(said.append, "http://127.0.0.1:4318", None, monotonic=lambda: now[0])

    healthy = fresh()
    token = healthy.sending()
    assert healthy.end_wait(5.0) == 5.0  # an export under way, nothing known against the collector: the whole bound
    healthy.sent(token, ok=True)
    assert healthy.end_wait(5.0) == 5.0

    stuck = fresh()
    stuck.sending()
    now[0] += SLOW - 0.01
    assert stuck.end_wait(5.0) == 5.0
    now[0] += 0.02  # an export in flight for SLOW seconds: a collector that accepts and never answers
    assert stuck.end_wait(5.0) == FAILED_WAIT
    assert stuck.end_wait(0.5) == 0.5  # never more than the operator's export_timeout

    failed = fresh()
    failed.failed("3 spans")
    assert failed.end_wait(5.0) == FAILED_WAIT

    refused = fresh()
    refused.reason_from(logging.LogRecord("opentelemetry", logging.WARNING, "", 0, "Transient error %s", (
        "HTTPConnectionPool(host='127.0.0.1', port=4318): Max retries exceeded (Caused by NewConnectionError("
        "'Failed to establish a new connection: [Errno 111] Connection refused'))",), None))
    assert refused.end_wait(5.0) == REFUSED_WAIT  # the SDK would only wait out its back-off and fail again
    now[0] += 1
    # It came back: its last exports are waited for, as for a collector that failed once.
    refused.sent(refused.sending(), ok=True)
    assert refused.end_wait(5.0) == FAILED_WAIT


def test_an_endpoint_variable_that_is_no_url_is_said_at_the_start_without_its_value() -> None:
    """Found by a new operator's trial: OTEL_EXPORTER_OTLP_ENDPOINT="not a url" was only said as the run ended ("the
    collector at not a url did not take the metrics")."""
    from console.telemetry.plan import bad_endpoint

    assert bad_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318"}, "http/protobuf") is None
    assert bad_endpoint({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://api.honeycomb.io/v1/traces"},
                        "http/protobuf") is None
    for value in ("not a url", "collector:4318", "http:///v1", "ftp://collector:4318", "http://[::1"):
        said = bad_endpoint({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": value}, "http/protobuf")
        assert said is not None and said.startswith("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT is not an http:// or https://")
        assert value not in said  # an endpoint may carry a token
    assert bad_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4317"}, "grpc") is None  # gRPC takes host:port
