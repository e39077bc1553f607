"""A real OTLP/HTTP endpoint for tests: decodes each ExportTraceServiceRequest it receives."""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.helpers import free_port


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, Any]
    events: list[str]
    resource: dict[str, Any] = field(default_factory=dict)


def _value(any_value: Any) -> Any:
    return getattr(any_value, any_value.WhichOneof("value")) if any_value.WhichOneof("value") else None


class OtlpReceiver:
    """`POST /v1/traces` (protobuf, optionally gzip) on a free local port."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        self.port = free_port()
        self.spans: list[Span] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                message = ExportTraceServiceRequest()
                message.ParseFromString(body)
                receiver._collect(message)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def _collect(self, message: Any) -> None:
        found = []
        for resource_spans in message.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(Span(
                        span.name, span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(), span.kind,
                        {a.key: _value(a.value) for a in span.attributes}, [e.name for e in span.events], resource,
                    ))
        with self._lock:
            self.spans.extend(found)

    def trace(self, trace_id: str, count: int, timeout: float = 30) -> list[Span]:
        """The spans of one trace, once `count` of them have arrived."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                spans = [s for s in self.spans if s.trace_id == trace_id]
            if len(spans) >= count:
                return spans
            time.sleep(0.1)
        raise AssertionError(f"{len(spans)} of {count} spans of trace {trace_id} arrived: {spans}")

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
