"""An OTLP/HTTP receiver on loopback for tests: decodes what real OTLP exporters post."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


@dataclass
class Received:
    traces: list[ExportTraceServiceRequest] = field(default_factory=list)
    metrics: list[ExportMetricsServiceRequest] = field(default_factory=list)
    logs: list[ExportLogsServiceRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def spans(self) -> list[tuple[dict[str, object], object]]:
        """(resource attributes, span) for every received span."""
        with self.lock:
            out = []
            for request in self.traces:
                for rs in request.resource_spans:
                    resource = {kv.key: kv.value.string_value for kv in rs.resource.attributes}
                    out.extend((resource, span) for ss in rs.scope_spans for span in ss.spans)
            return out

    def log_records(self) -> list[object]:
        """Every received log record."""
        with self.lock:
            return [
                record
                for request in self.logs
                for rl in request.resource_logs
                for sl in rl.scope_logs
                for record in sl.log_records
            ]

    def metric_points(self, name: str) -> list[tuple[dict[str, object], float]]:
        """(attributes, value) of the latest export's points of a sum metric."""
        with self.lock:
            for request in reversed(self.metrics):
                points = [
                    ({kv.key: _value(kv.value) for kv in p.attributes}, p.as_int or p.as_double)
                    for rm in request.resource_metrics
                    for sm in rm.scope_metrics
                    for m in sm.metrics
                    if m.name == name
                    for p in m.sum.data_points
                ]
                if points:
                    return points
        return []


def _value(value: object) -> object:
    kind = value.WhichOneof("value")  # type: ignore[attr-defined]
    return getattr(value, kind) if kind else None


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, Received]]:
    """Yields (endpoint, received); the server listens on a free loopback port until the block ends."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path == "/v1/traces":
                message: object = ExportTraceServiceRequest.FromString(body)
                with received.lock:
                    received.traces.append(message)  # type: ignore[arg-type]
            elif self.path == "/v1/logs":
                with received.lock:
                    received.logs.append(ExportLogsServiceRequest.FromString(body))
            elif self.path == "/v1/metrics":
                with received.lock:
                    received.metrics.append(ExportMetricsServiceRequest.FromString(body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
