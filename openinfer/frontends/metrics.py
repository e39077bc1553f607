"""Prometheus metrics with Triton's names and labels, read from the core's statistics at scrape time.

Counters come straight from `ModelStats` (the statistics extension reads the same numbers).
`--metrics-config` turns the latency counters off (`counter_latencies=false`) or adds
summaries (`summary_latencies=true`, quantiles from `summary_quantiles`) and the
first-response histogram (`histogram_latencies=true`); those two need per-request
observations, which a `LatencyObserver` attached to each model's stats collects.
Labels are written sorted, as prometheus-cpp writes them, so Triton's dashboards match.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import Metric
from prometheus_client.samples import Sample

from ..core.observability.stats import ModelStats
from ..core.server import InferenceServer
from .gpu_metrics import GpuSampler
from .latency import HISTOGRAM_BUCKETS_MS, SUMMARIES, LatencyObserver, MetricsConfig

_LATENCY_COUNTERS = (
    (
        "nv_inference_request_duration_us",
        "Cumulative inference request duration in microseconds (includes cached requests)",
    ),
    (
        "nv_inference_queue_duration_us",
        "Cumulative inference queuing duration in microseconds (includes cached requests)",
    ),
    (
        "nv_inference_compute_input_duration_us",
        "Cumulative compute input duration in microseconds (does not include cached requests)",
    ),
    (
        "nv_inference_compute_infer_duration_us",
        "Cumulative compute inference duration in microseconds (does not include cached requests)",
    ),
    (
        "nv_inference_compute_output_duration_us",
        "Cumulative inference compute output duration in microseconds (does not include cached requests)",
    ),
)
#: Per model version, in the order they are printed.
_MODEL_FAMILIES = (
    ("nv_inference_request_success", "Number of successful inference requests, all batch sizes", "counter"),
    ("nv_inference_request_failure", "Number of failed inference requests, all batch sizes", "counter"),
    ("nv_inference_count", "Number of inferences performed (does not include cached requests)", "counter"),
    ("nv_inference_exec_count", "Number of model executions performed (does not include cached requests)", "counter"),
    (
        "nv_inference_pending_request_count",
        "Instantaneous number of pending requests awaiting execution per-model.",
        "gauge",
    ),
    ("nv_model_load_duration_secs", "Model load time in seconds", "gauge"),
)
#: Per model version with `response_cache.enable`.
_CACHE_FAMILIES = (
    ("nv_cache_num_hits_per_model", "Number of cache hits per model"),
    ("nv_cache_num_misses_per_model", "Number of cache misses per model"),
    ("nv_cache_hit_duration_per_model", "Total cache hit duration per model, in microseconds"),
    ("nv_cache_miss_duration_per_model", "Total cache miss (insert + lookup) duration per model, in microseconds"),
)
_HISTOGRAM = "nv_inference_first_response_histogram_ms"
def _labels(model, stats: ModelStats, **extra: str) -> dict[str, str]:
    labels = {"model": stats.name, "version": stats.version, **extra}
    if model.namespace:  # `--model-namespacing` only, as in Triton
        labels["namespace"] = model.namespace
    for key, value in model.config.metric_tags.items():
        labels[f"_{key}"] = value
    return dict(sorted(labels.items()))


def _family(name: str, doc: str, kind: str) -> Metric:
    return Metric(name, doc, kind)


class TritonCollector:
    """Turns every loaded model's stats into Triton's metric families."""

    def __init__(
        self, server: InferenceServer, config: MetricsConfig | None = None, cpu: bool = True
    ) -> None:
        self.server = server
        self.config = config or MetricsConfig()
        self.cpu = _CpuSampler() if cpu else None

    def collect(self) -> Iterator[Metric]:
        counters = {name: _family(name, doc, kind) for name, doc, kind in _MODEL_FAMILIES}
        latency = {name: _family(name, doc, "counter") for name, doc in _LATENCY_COUNTERS}
        summaries = {name: _family(name, doc, "summary") for name, doc in SUMMARIES}
        histogram = _family(_HISTOGRAM, "Duration from request to first response in milliseconds", "histogram")
        cache = {name: _family(name, doc, "counter") for name, doc in _CACHE_FAMILIES}
        for model in self.server.loaded_models():
            s = model.stats
            labels = _labels(model, s)
            for name, value in (
                ("nv_inference_request_success", s.success.count),
                ("nv_inference_count", s.inference_count),
                ("nv_inference_exec_count", s.execution_count),
                ("nv_inference_pending_request_count", model.inflight.count),
                ("nv_model_load_duration_secs", s.load_duration_s),
            ):
                counters[name].samples.append(Sample(name, labels, value))
            failure = counters["nv_inference_request_failure"]
            for reason, n in s.failures_by_reason.items():
                failure.samples.append(Sample(failure.name, _labels(model, s, reason=reason), n))
            if self.config.counter_latencies:
                durations = (s.success, s.queue, s.compute_input, s.compute_infer, s.compute_output)
                for (name, _), duration in zip(_LATENCY_COUNTERS, durations):
                    latency[name].samples.append(Sample(name, labels, duration.ns // 1000))
            observer = s.observer
            if isinstance(observer, LatencyObserver):
                if self.config.summary_latencies:
                    _add_summaries(summaries, observer, labels)
                if self.config.histogram_latencies:
                    _add_histogram(histogram, observer, labels)
            if model.config.response_cache.enable:
                values = (s.cache_hit.count, s.cache_miss.count, s.cache_hit.ns // 1000, s.cache_miss.ns // 1000)
                for (name, _), value in zip(_CACHE_FAMILIES, values):
                    cache[name].samples.append(Sample(name, labels, value))
        yield from counters.values()
        if self.config.counter_latencies:
            yield from latency.values()
        if self.config.summary_latencies:
            yield from summaries.values()
        if self.config.histogram_latencies:
            yield histogram
        yield from cache.values()
        if self.cpu is not None:
            yield from self.cpu.collect()


def _add_summaries(summaries: dict[str, Metric], observer: LatencyObserver, labels: dict[str, str]) -> None:
    """One model version's quantiles, sum and count for every summary family."""
    for name, _ in SUMMARIES:
        values, total, n = observer.quantiles(name)
        for q, value in values:
            summaries[name].samples.append(Sample(name, dict(sorted({**labels, "quantile": _fmt(q)}.items())), value))
        summaries[name].samples.append(Sample(name + "_sum", labels, total))
        summaries[name].samples.append(Sample(name + "_count", labels, n))


def _add_histogram(histogram: Metric, observer: LatencyObserver, labels: dict[str, str]) -> None:
    """One model version's cumulative first-response buckets, sum and count."""
    cumulative = 0
    for bound, n in zip(HISTOGRAM_BUCKETS_MS, observer.buckets):
        cumulative += n
        histogram.samples.append(
            Sample(_HISTOGRAM + "_bucket", dict(sorted({**labels, "le": _fmt(bound)}.items())), cumulative)
        )
    histogram.samples.append(
        Sample(_HISTOGRAM + "_bucket", dict(sorted({**labels, "le": "+Inf"}.items())), observer.histogram_count)
    )
    histogram.samples.append(Sample(_HISTOGRAM + "_sum", labels, observer.histogram_sum))
    histogram.samples.append(Sample(_HISTOGRAM + "_count", labels, observer.histogram_count))


def _fmt(value: float) -> str:
    return repr(int(value)) if float(value).is_integer() and value >= 1 else repr(value)


@dataclass
class _CpuSampler:
    """`--allow-cpu-metrics`: utilisation between scrapes and memory, from /proc (Linux)."""

    last: tuple[int, int] | None = None
    utilization: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def collect(self) -> Iterator[Metric]:
        try:
            with open("/proc/stat", encoding="ascii") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
            meminfo = {}
            with open("/proc/meminfo", encoding="ascii") as f:
                for line in f:
                    key, _, rest = line.partition(":")
                    meminfo[key] = int(rest.split()[0]) * 1024
        except (OSError, ValueError, IndexError):
            return
        idle, total = fields[3] + (fields[4] if len(fields) > 4 else 0), sum(fields)
        with self.lock:
            if self.last is not None and total > self.last[1]:
                busy = (total - self.last[1]) - (idle - self.last[0])
                self.utilization = max(0.0, min(1.0, busy / (total - self.last[1])))
            self.last = (idle, total)
            utilization = self.utilization
        mem_total = meminfo.get("MemTotal", 0)
        mem_used = mem_total - meminfo.get("MemAvailable", meminfo.get("MemFree", 0))
        for name, doc, value in (
            ("nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]", utilization),
            ("nv_cpu_memory_total_bytes", "CPU total memory (RAM), in bytes", mem_total),
            ("nv_cpu_memory_used_bytes", "CPU used memory (RAM), in bytes", mem_used),
        ):
            family = _family(name, doc, "gauge")
            family.samples.append(Sample(name, {}, value))
            yield family


def _number(value: float) -> str:
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(families: Iterator[Metric]) -> bytes:
    """Prometheus text exposition as prometheus-cpp writes it (no `_total` renaming, empty families left out)."""
    lines: list[str] = []
    for family in families:
        if not family.samples:
            continue
        lines.append(f"# HELP {family.name} {family.documentation}")
        lines.append(f"# TYPE {family.name} {family.type}")
        for sample in family.samples:
            labels = ",".join(f'{k}="{_escape(str(v))}"' for k, v in sample.labels.items())
            name = f"{sample.name}{{{labels}}}" if labels else sample.name
            lines.append(f"{name} {_number(sample.value)}")
    return ("\n".join(lines) + "\n").encode() if lines else b""


def metrics_app(
    server: InferenceServer,
    extra: list[Callable[[], Iterator[Metric]]] | None = None,
    config: MetricsConfig | None = None,
    cpu: bool = True,
    gpu: bool = True,
):
    """An ASGI app answering GET /metrics (any other GET path: empty 200, as Triton).

    `extra` are further collect functions (other frontends' metrics), rendered after Triton's;
    the families models created (`server.custom_metrics`) come last. `gpu` adds the per-GPU
    families where NVML finds a GPU (gpu_metrics.py).
    """
    collector = TritonCollector(server, config, cpu and os.path.exists("/proc/stat"))
    collectors = [collector.collect]
    gpus = GpuSampler.open() if gpu else None
    if gpus is not None:
        collectors.append(gpus.collect)
    collectors.extend(extra or [])
    custom = getattr(server, "custom_metrics", None)
    if custom is not None:  # models may not take the names this endpoint prints itself
        reserved = {family.name: family.type for family in collector.collect()}
        if gpus is not None:
            reserved.update((family.name, family.type) for family in gpus.collect())
        custom.reserve(reserved)

    def scrape() -> bytes:
        text = render(family for collect in collectors for family in collect())
        return text + custom.exposition().encode() if custom is not None else text

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
            status, body, ctype = 200, scrape(), b"text/plain; charset=utf-8"
        else:
            status, body, ctype = 200, b"", b"text/plain; charset=utf-8"
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", ctype), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app
