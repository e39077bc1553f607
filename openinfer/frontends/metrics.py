"""Prometheus metrics with Triton's names and labels, read from the core's statistics at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..core.server import InferenceServer

_COUNTERS = (
    ("nv_inference_request_success", "Number of successful inference requests, all batch sizes"),
    ("nv_inference_count", "Number of inferences performed (does not include cached requests)"),
    ("nv_inference_exec_count", "Number of model executions performed (does not include cached requests)"),
    ("nv_inference_request_duration_us", "Cumulative inference request duration in microseconds (includes cached requests)"),
    ("nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds (includes cached requests)"),
    ("nv_inference_compute_input_duration_us", "Cumulative compute input duration in microseconds (does not include cached requests)"),
    ("nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds (does not include cached requests)"),
    ("nv_inference_compute_output_duration_us", "Cumulative inference compute output duration in microseconds (does not include cached requests)"),
)


class TritonCollector:
    """Turns every loaded model's stats into Triton's metric families."""

    def __init__(self, server: InferenceServer) -> None:
        self.server = server

    def collect(self) -> Iterator[Metric]:
        labels = ["model", "version"]
        families = {name: CounterMetricFamily(name, doc, labels=labels) for name, doc in _COUNTERS}
        failure = CounterMetricFamily(
            "nv_inference_request_failure", "Number of failed inference requests, all batch sizes",
            labels=["model", "reason", "version"],
        )
        pending = GaugeMetricFamily(
            "nv_inference_pending_request_count",
            "Instantaneous number of pending requests awaiting execution per-model.", labels=labels,
        )
        load = GaugeMetricFamily("nv_model_load_duration_secs", "Model load time in seconds", labels=labels)
        hits = CounterMetricFamily("nv_cache_num_hits_per_model", "Number of cache hits per model", labels=labels)
        misses = CounterMetricFamily("nv_cache_num_misses_per_model", "Number of cache misses per model", labels=labels)
        for model in self.server.repository.loaded_models():
            s = model.stats
            key = [s.name, s.version]
            values = (
                s.success.count,
                s.inference_count,
                s.execution_count,
                (s.success.ns + s.fail.ns) // 1000,
                s.queue.ns // 1000,
                s.compute_input.ns // 1000,
                s.compute_infer.ns // 1000,
                s.compute_output.ns // 1000,
            )
            for (name, _), value in zip(_COUNTERS, values):
                families[name].add_metric(key, value)
            for reason, count in s.failures_by_reason.items():
                failure.add_metric([s.name, reason, s.version], count)
            pending.add_metric(key, s.pending)
            load.add_metric(key, s.load_duration_s)
            if model.config.response_cache.enable:
                hits.add_metric(key, s.cache_hit.count)
                misses.add_metric(key, s.cache_miss.count)
        yield families["nv_inference_request_success"]
        yield failure
        for name, _ in _COUNTERS[1:]:
            yield families[name]
        yield pending
        yield load
        yield hits
        yield misses


def metrics_app(server: InferenceServer, extra: list[Callable[[CollectorRegistry], None]] | None = None):
    """An ASGI app answering GET /metrics (any other GET path: empty 200, as Triton)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(TritonCollector(server))  # type: ignore[arg-type]
    for hook in extra or []:
        hook(registry)

    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                while True:
                    message = await receive()
                    if message["type"] == "lifespan.startup":
                        await send({"type": "lifespan.startup.complete"})
                    elif message["type"] == "lifespan.shutdown":
                        await send({"type": "lifespan.shutdown.complete"})
                        return
            return
        if scope["method"] != "GET":
            status, body, ctype = 405, b'{"error":"Method Not Allowed"}', b"application/json"
        elif scope["path"].rstrip("/") == "/metrics":
            status, body, ctype = 200, generate_latest(registry), b"text/plain; charset=utf-8"
        else:
            status, body, ctype = 200, b"", b"text/plain; charset=utf-8"
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", ctype), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    return app
