"""An OTLP receiver on 127.0.0.1 for the telemetry tests (OTLP/HTTP, or OTLP/gRPC with ``protocol="grpc"``), built on
the official ``opentelemetry-proto`` messages and services.

The OpenTelemetry Collector cannot be installed here (it ships as a Go binary; no package index this machine reaches
has one), so this stands in for it, strictly: only ``POST /v1/traces`` and ``POST /v1/metrics``, only
``Content-Type: application/x-protobuf`` (gzip or not), and a body that does not parse as the signal's
Export*ServiceRequest is refused with 400, as the Collector's receiver does. What it took is kept as the parsed
messages. ``mode``: "ok" answers 200 with an empty Export*ServiceResponse; "hang" accepts the connection and the
request and never answers (a collector that is stuck); :func:`closed_port` is a port nobody listens on.
"""

from __future__ import annotations

import contextlib
import gzip
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SIGNALS: dict[str, tuple[Any, Any]] = {
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse),
    "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse),
}


class Receiver:
    def __init__(self, mode: str = "ok", protocol: str = "http/protobuf") -> None:
        self.mode = mode
        self.protocol = protocol
        # gRPC: the metadata (headers) each export came with, to check what a backend's key reached.
        self.metadata: list[dict[str, str]] = []
        self.grpc: Any = None
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.refused: list[str] = []
        self.requests = 0
        self._release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _answer(self, code: int, body: bytes = b"", ctype: str = "text/plain") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                receiver.requests += 1
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if receiver.mode == "hang":
                    receiver._release.wait(120)  # never answers while the test runs
                    return
                signal = SIGNALS.get(self.path)
                if signal is None:
                    receiver.refused.append(f"path {self.path}")
                    return self._answer(404, b"not found")
                if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/x-protobuf":
                    receiver.refused.append(f"content-type {self.headers.get('Content-Type')}")
                    return self._answer(415, b"unsupported media type")
                try:
                    if self.headers.get("Content-Encoding", "").lower() == "gzip":
                        body = gzip.decompress(body)
                    message = signal[0]()
                    message.ParseFromString(body)
                    if message.FindInitializationErrors():
                        raise DecodeError("incomplete message")
                except (DecodeError, OSError, EOFError) as exc:
                    receiver.refused.append(f"body: {exc}")
                    return self._answer(400, b"bad request")
                (receiver.traces if self.path == "/v1/traces" else receiver.metrics).append(message)
                self._answer(200, signal[1]().SerializeToString(), "application/x-protobuf")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        if protocol == "grpc":
            self.server.server_close()  # the HTTP one is not used: the port is the gRPC server's
            self.grpc, self._grpc_port = self._grpc_server()

    def _grpc_server(self) -> tuple[Any, int]:
        """OTLP/gRPC as the Collector's receiver serves it: the official services of ``opentelemetry-proto``
        (grpcio parses each request as its Export*ServiceRequest and refuses one that does not)."""
        from concurrent import futures

        import grpc
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc as metrics_grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc as trace_grpc

        receiver = self

        def took(kept: list[Any], request: Any, context: Any, answer: Any) -> Any:
            receiver.requests += 1
            receiver.metadata.append({k: v for k, v in context.invocation_metadata() if isinstance(v, str)})
            if receiver.mode == "hang":
                receiver._release.wait(120)
            kept.append(request)
            return answer()

        class Traces(trace_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                return took(receiver.traces, request, context, ExportTraceServiceResponse)

        class Metrics(metrics_grpc.MetricsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                return took(receiver.metrics, request, context, ExportMetricsServiceResponse)

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_grpc.add_TraceServiceServicer_to_server(Traces(), server)
        metrics_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        return server, port

    @property
    def endpoint(self) -> str:
        port = self._grpc_port if self.grpc is not None else self.server.server_address[1]
        return f"http://127.0.0.1:{port}"

    def __enter__(self) -> Receiver:
        if self.grpc is not None:
            self.grpc.start()
        else:
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        if self.grpc is not None:
            self.grpc.stop(grace=None)
            return
        self.server.shutdown()
        self.server.server_close()

    # -- what it took ----------------------------------------------------------------------------------------------
    def spans(self) -> list[Any]:
        return [span for req in self.traces for rs in req.resource_spans for ss in rs.scope_spans
                for span in ss.spans]

    def resources(self) -> list[dict[str, Any]]:
        return [attrs(rs.resource.attributes) for req in self.traces for rs in req.resource_spans]

    def last_sum(self, name: str, by: dict[str, Any] | None = None) -> float:
        """A cumulative counter's (or histogram's sum's) value at its last export, over the attribute sets matching
        ``by``: the run's total (one process)."""
        latest: dict[tuple[Any, ...], float] = {}
        for req in self.metrics:
            for rm in req.resource_metrics:
                for sm in rm.scope_metrics:
                    for metric in sm.metrics:
                        if metric.name != name:
                            continue
                        kind = metric.WhichOneof("data")
                        points = getattr(metric, kind).data_points
                        for p in points:
                            a = attrs(p.attributes)
                            if by and any(a.get(k) != v for k, v in by.items()):
                                continue
                            key = tuple(sorted(a.items()))
                            if kind == "sum":
                                latest[key] = p.as_double if p.WhichOneof("value") == "as_double" else p.as_int
                            elif kind == "histogram":
                                latest[key] = p.sum
        return sum(latest.values())

    def metric_names(self) -> set[str]:
        return {m.name for req in self.metrics for rm in req.resource_metrics for sm in rm.scope_metrics
                for m in sm.metrics}


def value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: value(kv.value) for kv in kvs}


def all_strings(receiver: Receiver) -> Iterator[str]:
    """Every string any span, span event, resource or metric data point carries (names and attribute values)."""
    def walk(x: Any) -> Iterator[str]:
        if isinstance(x, str):
            yield x
        elif isinstance(x, list):
            for y in x:
                yield from walk(y)
        elif isinstance(x, dict):
            for k, y in x.items():
                yield k
                yield from walk(y)

    for span in receiver.spans():
        yield span.name
        yield from walk(attrs(span.attributes))
        for event in span.events:
            yield event.name
            yield from walk(attrs(event.attributes))
    for r in receiver.resources():
        yield from walk(r)
    for req in receiver.metrics:
        for rm in req.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    for p in getattr(metric, metric.WhichOneof("data")).data_points:
                        yield from walk(attrs(p.attributes))


def closed_port() -> int:
    """A port on 127.0.0.1 nobody listens on (bound, then closed)."""
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
