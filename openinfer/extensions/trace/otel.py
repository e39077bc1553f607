"""Triton's OpenTelemetry trace mode: spans exported over OTLP/HTTP.

A traced request from a client is an `InferRequest` span (the W3C `traceparent` it came with,
if any, is its parent); under it one span per model named after the model, with Triton's
attributes (`triton.model_name`, `triton.model_version`, `triton.trace_id`,
`triton.trace_parent_id`, `triton.request_id`) and the REQUEST_START / QUEUE_START / REQUEST_END
events, and under that a `compute` span with the COMPUTE_* events. The composing models of an
ensemble, and the models a BLS model calls with `trace=request.trace()`, add their own model
and compute spans under the calling model's span. A request that brings a `traceparent` is
traced whatever the rate and count (Triton's rule); the others are sampled as in Triton mode.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ...core.observability.trace_context import ChildOf

log = logging.getLogger("openinfer.trace")

DEFAULT_URL = "http://localhost:4318/v1/traces"
SERVICE_NAME = "triton-inference-server"
_BSP = {"bsp_max_queue_size": 2048, "bsp_schedule_delay": 5000, "bsp_max_export_batch_size": 512}


@dataclass
class OtelConfig:
    """`--trace-config opentelemetry,<setting>=<value>` (url, resource, bsp_*)."""

    url: str = DEFAULT_URL
    resource: dict[str, str] = field(default_factory=dict)
    bsp: dict[str, int] = field(default_factory=lambda: dict(_BSP))

    def set(self, key: str, value: str) -> None:
        if key == "url":
            self.url = value
        elif key == "resource":
            name, eq, attribute = value.partition("=")
            if not eq or not name:
                raise ValueError(f"--trace-config opentelemetry,resource='{value}' must be <key>=<value>")
            self.resource[name] = attribute
        elif key in _BSP:
            try:
                self.bsp[key] = int(value)
            except ValueError:
                raise ValueError(f"--trace-config opentelemetry,{key}: '{value}' is not an integer") from None
        else:
            raise ValueError(f"unknown trace setting 'opentelemetry,{key}={value}'")


def split_specs(specs: Iterable[str]) -> tuple[list[str], OtelConfig | None]:
    """Take the OpenTelemetry part out of `--trace-config`: (the other specs, the config or None
    when the mode is not opentelemetry)."""
    rest: list[str] = []
    config = OtelConfig()
    mode = "triton"
    for spec in specs:
        head, eq, value = spec.partition("=")
        prefix, _, key = head.rpartition(",")
        if eq and prefix == "opentelemetry":
            config.set(key, value)
        elif eq and not prefix and key == "mode":
            if value not in ("triton", "opentelemetry"):
                raise ValueError(f"unknown trace mode '{value}' (triton, opentelemetry)")
            mode = value
        else:
            rest.append(spec)
    return rest, (config if mode == "opentelemetry" else None)


class OtelTracing:
    """The tracer provider and exporter of one server; hands out traces for sampled requests."""

    def __init__(self, config: OtelConfig) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import OTELResourceDetector, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        attributes: dict[str, Any] = {"service.name": SERVICE_NAME}
        attributes.update(OTELResourceDetector().detect().attributes)  # OTEL_RESOURCE_ATTRIBUTES
        attributes.update(config.resource)
        self.config = config
        self.provider = TracerProvider(resource=Resource.create(attributes))
        self.provider.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=config.url),
                max_queue_size=config.bsp["bsp_max_queue_size"],
                schedule_delay_millis=config.bsp["bsp_schedule_delay"],
                max_export_batch_size=min(config.bsp["bsp_max_export_batch_size"], config.bsp["bsp_max_queue_size"]),
            )
        )
        self.tracer = self.provider.get_tracer("triton-server")
        self.propagator = TraceContextTextMapPropagator()
        # Request timestamps are perf_counter_ns (monotonic); spans want the wall clock.
        self.offset_ns = time.time_ns() - time.perf_counter_ns()

    def start(self, trace_id: int, setting: Any, request: Any, model: Any) -> OtelTrace:
        return OtelTrace(self, trace_id, setting, request, model)

    def close(self) -> None:
        """Export what is queued and stop (server shutdown)."""
        self.provider.shutdown()  # an unreachable collector is logged by the exporter


class OtelTrace:
    """The spans of one request's model (and its `InferRequest` root when a client sent it)."""

    __slots__ = ("_closed", "_compute_off", "_lock", "id", "level", "parent_id", "root", "setting", "span", "tracing")

    def __init__(self, tracing: OtelTracing, trace_id: int, setting: Any, request: Any, model: Any) -> None:
        from opentelemetry import trace as api

        self.tracing = tracing
        self.id = trace_id
        self.setting = setting
        self.level = setting.level
        self._lock = threading.Lock()
        self._closed = False
        self._compute_off = getattr(model.config, "platform", "") == "ensemble"
        start = self._wall(request.arrival_ns)
        link = request.trace_parent
        if isinstance(link, ChildOf):
            self.root = None
            self.parent_id = link.parent_id
            context = tracing.propagator.extract(link.carrier)
        else:
            self.parent_id = 0
            remote = tracing.propagator.extract(link) if isinstance(link, dict) else None
            self.root = tracing.tracer.start_span(
                "InferRequest", context=remote, kind=api.SpanKind.SERVER, start_time=start
            )
            context = api.set_span_in_context(self.root)
        self.span = tracing.tracer.start_span(model.name, context=context, kind=api.SpanKind.SERVER, start_time=start)
        self.span.set_attribute("triton.model_name", model.name)
        self.span.set_attribute("triton.model_version", int(model.version))
        self.span.set_attribute("triton.trace_id", trace_id)
        self.span.set_attribute("triton.trace_parent_id", self.parent_id)
        if request.id:
            self.span.set_attribute("triton.request_id", request.id)

    def _wall(self, perf_ns: int | None) -> int:
        return (time.perf_counter_ns() if not perf_ns else perf_ns) + self.tracing.offset_ns

    def child(self) -> ChildOf:
        from opentelemetry import trace as api

        found: dict[str, str] = {}
        self.tracing.propagator.inject(found, context=api.set_span_in_context(self.span))
        return ChildOf(found, self.id)

    # The interface the core stamps (`core.observability.tracing.RequestTrace`).
    def stamp(self, name: str, ns: int | None = None) -> None:
        self.span.add_event(name, timestamp=self._wall(ns))

    def queued(self, request: Any) -> None:
        self.stamp("QUEUE_START")

    def responded(self, response: Any) -> None:
        if response.error is not None:
            from opentelemetry.trace import Status, StatusCode

            self.span.set_status(Status(StatusCode.ERROR, str(response.error)))

    def record_tensors(self, activity: str, tensors: Any) -> None:
        """Tensor tracing is Triton mode's alone (Triton logs that OpenTelemetry lacks it)."""

    def compute(self, start_ns: int, timing: Any, end_ns: int | None = None) -> None:
        if self._compute_off:
            return
        from opentelemetry import trace as api

        end = end_ns or time.perf_counter_ns()
        input_end = min(start_ns + timing.compute_input_ns, end)
        output_start = max(end - timing.compute_output_ns, input_end)
        span = self.tracing.tracer.start_span(
            "compute", context=api.set_span_in_context(self.span), kind=api.SpanKind.SERVER,
            start_time=self._wall(start_ns),
        )
        for name, ns in (("COMPUTE_START", start_ns), ("COMPUTE_INPUT_END", input_end),
                         ("COMPUTE_OUTPUT_START", output_start), ("COMPUTE_END", end)):
            span.add_event(name, timestamp=self._wall(ns))
        span.end(end_time=self._wall(end))

    def finish(self, end_ns: int | None = None) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        end = self._wall(end_ns)
        self.span.add_event("REQUEST_END", timestamp=end)
        self.span.end(end_time=end)
        if self.root is not None:
            self.root.end(end_time=end)


def sample(tracing: OtelTracing, setting: Any, ids: itertools.count[int], request: Any, model: Any) -> OtelTrace | None:
    """Triton's rule: a request with a propagated context (or a traced caller) is always traced;
    the others as the rate and count say."""
    from .record import OFF

    if setting.level == OFF:
        return None
    if request.trace_parent is None and not setting.take():
        return None
    trace = tracing.start(next(ids), setting, request, model)
    trace.stamp("REQUEST_START", request.arrival_ns)
    request.trace = trace
    return trace
