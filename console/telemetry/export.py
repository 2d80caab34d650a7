"""The OpenTelemetry SDK set up for one process of a run: OTLP exporters, a bounded queue, drops counted, an end that
does not wait past a bound.

Imported only when telemetry is on (console.telemetry.plan decided so). The providers are this run's own, never
the global ones (nothing else in the process reports through them), and never shut down at the interpreter's exit
by the SDK (its handler waits up to 30 s per provider): :meth:`Telemetry.close` ends them within the export timeout,
the exports still in flight left to their daemon threads.

A slow or dead collector: spans wait in the batch processor's bounded queue (the oldest dropped past it) and
metrics in the periodic reader, each export bounded by the timeout, on the SDK's threads; the run's thread only
appends to a deferred view (console.engine.events.feed). Failed exports are counted (by the exporters' wrappers)
and the first is said in one line (the ``say`` callback: the run's stderr, never an event, so the run's events are
those of a run without telemetry); at the end, one line with what did not get through. The SDK's own log lines go
nowhere (no traceback, no warning per failed batch): they only give the one line its reason.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import SpanContext, TraceFlags

from console.engine.clock import Clock, SystemClock
from console.engine.events import EventBase
from console.engine.job_files import JobPaths
from console.engine.seal import Seal
from console.engine.text import safe_text
from console.engine.url_secrets import scrub_url
from console.telemetry.fold import Instruments, TraceFold
from console.telemetry.plan import Plan
from console.telemetry.record import TraceRecord, read_trace, write_trace
from console.telemetry.scrub import Scrubber

# The batch processor's queue: past it the oldest spans are dropped (a run makes about 3 spans a turn: a dead
# collector's queue holds some 700 turns before the first drop). Exported every second, 512 at a time.
MAX_QUEUE = 2048
BATCH = 512
SCHEDULE_MS = 1000
METRIC_INTERVAL_MS = 15_000  # unless OTEL_METRIC_EXPORT_INTERVAL says otherwise
SDK_LOGGER = "opentelemetry"
# The process's end waits for the last exports at most plan.export_timeout, less once the collector has shown what it
# is: FAILED_WAIT after a failure or a slow export (an export in flight for SLOW seconds: a collector that accepts and
# never answers), REFUSED_WAIT once it refuses connections (the SDK would only wait out its back-off and fail again).
FAILED_WAIT = 1.0
SLOW = 1.0
REFUSED_WAIT = 0.1
REFUSED = "connection refused"
END_STEP = 0.02  # how often the end's wait looks again at what the collector has shown


class Failures:
    """What did not get through, counted; the first failure said once (``say``), its reason from the SDK's log."""

    def __init__(self, say: Callable[[str], None], shown: str, url_secret: str | None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._say = say
        self.shown = shown
        self._url = url_secret
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._in_flight: dict[int, float] = {}  # the exports being sent: when each began
        self._next = 0
        self._refused_at: float | None = None  # the SDK's latest word of a refused connection, unless one went since
        self._ok_at: float | None = None
        self.spans_sent = 0
        self.spans_failed = 0
        self.metric_exports = 0
        self.metric_failed = 0
        self.said = False
        self.reason = ""
        self.closing = False  # the run has ended: its last exports are being sent (a failure then is its end's)

    def sending(self) -> int:
        """An export begins (on the SDK's thread): a token for :meth:`sent`."""
        with self._lock:
            self._next += 1
            self._in_flight[self._next] = self._monotonic()
            return self._next

    def sent(self, token: int, ok: bool) -> None:
        with self._lock:
            self._in_flight.pop(token, None)
            if ok:
                self._ok_at = self._monotonic()

    def end_wait(self, most: float) -> float:
        """How long the process's end waits for its last exports (at most ``most``, the export timeout), from what
        the collector has shown so far: see FAILED_WAIT."""
        with self._lock:
            oldest = min(self._in_flight.values(), default=None)
            refused = self._refused_at is not None and (self._ok_at is None or self._ok_at < self._refused_at)
        if refused:  # and no export has got through since
            return min(REFUSED_WAIT, most)
        if self.said or self.reason or (oldest is not None and self._monotonic() - oldest >= SLOW):
            return min(FAILED_WAIT, most)
        return most

    def reason_from(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            try:
                text = record.getMessage()
            except Exception:  # a record whose arguments do not format: its template says enough
                text = str(record.msg)
            if self.reason and "due to timeout, max retries or shutdown" in text:
                return  # the SDK's last word on a batch: the cause it said before is the one worth saying
            self.reason = _cause(text) or safe_text(scrub_url(text, self._url), one_line=True, join=True, limit=160)
            if self.reason == REFUSED:
                with self._lock:
                    self._refused_at = self._monotonic()

    def failed(self, what: str) -> None:
        with self._lock:
            first, self.said = not self.said, True
        if first:
            why = f" ({self.reason})" if self.reason else ""
            off = ("turn telemetry off with [telemetry] enabled = false in the config file, or unset "
                   "OTEL_EXPORTER_OTLP_ENDPOINT")
            if self.closing:  # the run has ended: nothing goes on to count
                self._say(f"telemetry: as the run ended, the collector at {self.shown} did not take {what}{why} "
                          f"({off})")
            else:
                self._say(f"telemetry: the collector at {self.shown} did not take {what}{why}; the run goes on, "
                          f"what does not get through is counted ({off})")


_CODE = re.compile(r"\bcode: (\d{3})\b")


def _cause(text: str) -> str:
    """The SDK's log line as the operator's few words: what the collector did (not the transport's repr)."""
    if "Connection refused" in text or "Failed to establish" in text or "NewConnectionError" in text:
        return "connection refused"
    if "timed out" in text.lower() or "Timeout" in text:
        return "no answer in time"
    if "Name or service not known" in text or "NameResolutionError" in text:
        return "its host name does not resolve"
    if (code := _CODE.search(text)) is not None:
        return f"HTTP {code.group(1)}"
    return ""


class _Reasons(logging.Handler):
    def __init__(self, failures: Failures) -> None:
        super().__init__(logging.WARNING)
        self.failures = failures

    def emit(self, record: logging.LogRecord) -> None:
        self.failures.reason_from(record)


class CountedSpans(SpanExporter):
    """The OTLP span exporter, its results counted."""

    def __init__(self, inner: SpanExporter, failures: Failures) -> None:
        self.inner = inner
        self.failures = failures

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        token = self.failures.sending()
        result = SpanExportResult.FAILURE
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter's defect is a failed export, never the run's
            result = SpanExportResult.FAILURE
        finally:
            self.failures.sent(token, result is SpanExportResult.SUCCESS)
        if result is SpanExportResult.SUCCESS:
            self.failures.spans_sent += len(spans)
        else:
            self.failures.spans_failed += len(spans)
            self.failures.failed(f"{len(spans)} spans")
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class CountedMetrics(MetricExporter):
    """The OTLP metric exporter, its results counted (its temporality and aggregation are the inner one's)."""

    def __init__(self, inner: MetricExporter, failures: Failures) -> None:
        super().__init__(preferred_temporality=inner._preferred_temporality,
                         preferred_aggregation=inner._preferred_aggregation)
        self.inner = inner
        self.failures = failures

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        token = self.failures.sending()
        result = MetricExportResult.FAILURE
        try:
            result = self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        except Exception:
            result = MetricExportResult.FAILURE
        finally:
            self.failures.sent(token, result is MetricExportResult.SUCCESS)
        self.failures.metric_exports += 1
        if result is not MetricExportResult.SUCCESS:
            self.failures.metric_failed += 1
            self.failures.failed("the metrics")
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.inner.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.inner.shutdown(timeout_millis=timeout_millis, **kwargs)


class _Ended(SpanProcessor):
    """Counts the spans ended (what the exports should carry): the spans lost are those not sent."""

    def __init__(self) -> None:
        self.count = 0

    def on_end(self, span: ReadableSpan) -> None:
        self.count += 1


class _FirstIds(IdGenerator):
    """The run's first span gets the ids written in its record beforehand; every other span random ones."""

    def __init__(self, trace_id: int, span_id: int) -> None:
        self._first: tuple[int, int] | None = (trace_id, span_id)
        self._random = RandomIdGenerator()
        self._next_span: int | None = None

    def generate_trace_id(self) -> int:
        if self._first is not None:
            trace_id, self._next_span = self._first
            self._first = None
            return trace_id
        return self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        if self._next_span is not None:
            span_id, self._next_span = self._next_span, None
            return span_id
        return self._random.generate_span_id()


def _exporters(plan: Plan) -> tuple[SpanExporter, MetricExporter]:
    """The OTLP exporters of ``plan.protocol``; ValueError of one line when it is not one this install speaks."""
    if plan.protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return (OTLPSpanExporter(endpoint=plan.traces_url, headers=plan.headers, timeout=plan.timeout),
                OTLPMetricExporter(endpoint=plan.metrics_url, headers=plan.headers, timeout=plan.timeout))
    if plan.protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
                OTLPMetricExporter as GrpcMetrics,
            )
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcSpans,
            )
        except ImportError:
            raise ValueError("OTLP over gRPC needs the opentelemetry-exporter-otlp-proto-grpc package (pip install "
                             "it), or use http/protobuf (OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf)") from None
        base = plan.traces_url.rsplit("/v1/", 1)[0] if plan.traces_url else None
        headers = tuple(plan.headers.items()) if plan.headers is not None else None
        spans: SpanExporter = GrpcSpans(endpoint=base, headers=headers, timeout=plan.timeout)
        metrics: MetricExporter = GrpcMetrics(endpoint=base, headers=headers, timeout=plan.timeout)
        return spans, metrics
    raise ValueError(f"OTLP protocol {safe_text(plan.protocol, one_line=True, limit=40)!r} is not one this install "
                     "exports with: use http/protobuf (the default) or grpc")


class Telemetry:
    """One process's telemetry: subscribe it to the run's events (deferred, no text), :meth:`close` at the end."""

    def __init__(self, plan: Plan, paths: JobPaths, seal: Seal, *, run_id: str, job: str,
                 say: Callable[[str], None], environ: Mapping[str, str] | None = None,
                 clock: Clock | None = None, hidden: Sequence[str] = ()) -> None:
        environ = os.environ if environ is None else environ
        self.plan = plan
        self.say = say
        self.clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._broken = False
        self.failures = Failures(say, plan.shown, next((environ.get(v) for v in (
            "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") if environ.get(v)), None))
        self._quiet_sdk()
        span_exporter, metric_exporter = _exporters(plan)
        record = read_trace(paths, seal)
        parent: SpanContext | None = None
        if record is None:
            record = TraceRecord(trace_id=f"{RandomIdGenerator().generate_trace_id():032x}",
                                 root_span_id=f"{secrets.randbits(64) or 1:016x}", started=self.clock.now())
        else:
            record = record.model_copy(update={"processes": record.processes + 1})
            parent = SpanContext(int(record.trace_id, 16), int(record.root_span_id, 16), is_remote=True,
                                 trace_flags=TraceFlags(TraceFlags.SAMPLED))
        if record.processes == 1:
            record = record.model_copy(update={"root_ended": False})
        write_trace(paths, seal, record)  # before any span leaves: a resume after a kill finds the trace
        self.record = record
        self._paths, self._seal = paths, seal
        # The first process was killed before its run span ended (that span never left): this one sends a stand-in
        # with its ids, so the trace has the parent every later run span names.
        stand_in = parent is not None and record.root_ended is False
        resource = Resource.create({"service.name": plan.service_name, "host.name": socket.gethostname(),
                                    "agent_console.run.id": run_id})
        ids = _FirstIds(int(record.trace_id, 16), int(record.root_span_id, 16)) if parent is None or stand_in \
            else None
        self.tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False,
                                              id_generator=ids if ids is not None else RandomIdGenerator())
        self.processor = BatchSpanProcessor(CountedSpans(span_exporter, self.failures), max_queue_size=MAX_QUEUE,
                                            schedule_delay_millis=SCHEDULE_MS, max_export_batch_size=BATCH)
        self.ended = _Ended()
        self.tracer_provider.add_span_processor(self.ended)
        self.tracer_provider.add_span_processor(self.processor)
        interval = None if environ.get("OTEL_METRIC_EXPORT_INTERVAL", "").strip() else METRIC_INTERVAL_MS
        self.reader = PeriodicExportingMetricReader(CountedMetrics(metric_exporter, self.failures),
                                                    export_interval_millis=interval,
                                                    export_timeout_millis=plan.export_timeout * 1000)
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[self.reader], shutdown_on_exit=False)
        scrub = Scrubber(environ, [*plan.secrets, *hidden])
        self.fold = TraceFold(self.tracer_provider.get_tracer("agent_console"),
                              Instruments(self.meter_provider.get_meter("agent_console")), scrub,
                              content=plan.content, run_id=run_id, job=job, parent=parent)
        if stand_in:
            self.fold.stand_in(record.started, self.clock.now())
            self._root_ended()

    def _root_ended(self) -> None:
        """The record says the span root_span_id names has ended (no later process sends it again)."""
        if self.record.root_ended is False:
            self.record = self.record.model_copy(update={"root_ended": True})
            with contextlib.suppress(OSError):  # the folder gone: nobody resumes it
                write_trace(self._paths, self._seal, self.record)

    def _quiet_sdk(self) -> None:
        """The SDK's log lines (a warning per failed batch, a traceback for an exporter's error) reach no stream:
        they give the one line :class:`Failures` says its reason."""
        log = logging.getLogger(SDK_LOGGER)
        log.propagate = False
        for handler in list(log.handlers):
            if isinstance(handler, _Reasons):
                log.removeHandler(handler)
        log.addHandler(_Reasons(self.failures))

    def __call__(self, event: EventBase) -> None:
        with self._lock:
            if self._broken:
                return
            try:
                self.fold(event)
            except Exception as exc:  # telemetry never stops the run: it stops itself, said once
                self._broken = True
                self.say(f"telemetry: stopped on an internal error ({type(exc).__name__}: "
                         f"{safe_text(str(exc), one_line=True, limit=160)}); the run goes on without it")

    @property
    def trace_id(self) -> str:
        return self.record.trace_id

    def close(self) -> None:
        """End the run span if no run_ended did, then flush and shut down, waiting at most the export timeout;
        one line if anything did not get through."""
        with self._lock, contextlib.suppress(Exception):  # a fold that broke: its spans are what they are
            self.fold.end_run(None)
            if self.fold.root_ended:  # the first process's run span (the root), ended here or at run_ended
                self._root_ended()
        self.failures.closing = True
        threads = [threading.Thread(target=self._shutdown, args=(fn,), daemon=True, name=f"otel-{name}")
                   for name, fn in (("traces", self.tracer_provider.shutdown),
                                    ("metrics", lambda: self.meter_provider.shutdown(
                                        timeout_millis=self.plan.export_timeout * 1000)))]
        for t in threads:
            t.start()
        # Waited in steps: what the collector shows meanwhile (a refused connection, an export stuck) shortens it.
        # Real time, not the run's clock: what is waited on are the SDK's threads and the collector.
        began = time.monotonic()
        while any(t.is_alive() for t in threads):
            left = began + self.failures.end_wait(self.plan.export_timeout) - time.monotonic()
            if left <= 0:
                break
            next(t for t in threads if t.is_alive()).join(min(END_STEP, left))
        f = self.failures
        ended = self.ended.count
        lost = max(0, ended - f.spans_sent)
        metrics_stuck = threads[1].is_alive()  # its last export had no answer within the bound
        if lost or f.metric_failed or metrics_stuck:
            parts = [f"{lost} of {ended} spans"] if lost else []
            if f.metric_failed:
                parts.append(f"{f.metric_failed} of {f.metric_exports} metric exports")
            if metrics_stuck:
                parts.append(f"the last metrics ({f.reason or 'no answer in time'})")
            self.say(f"telemetry: {' and '.join(parts)} did not reach the collector at {f.shown}")

    @staticmethod
    def _shutdown(fn: Callable[[], object]) -> None:
        try:
            fn()
        except Exception:  # an exporter's failure at the end: counted already, never a traceback
            return
