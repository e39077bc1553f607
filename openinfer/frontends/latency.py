"""`--metrics-config` and the per-request latency observations it switches on.

Triton's summaries (`summary_latencies=true`, quantiles from `summary_quantiles`) and its
first-response histogram (`histogram_latencies=true`) need every request's latency, not only
the sums `ModelStats` keeps: a `LatencyObserver` attached to each model version's statistics
collects them, and the metrics endpoint reads them at scrape time.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ..core.observability.stats import ExecutionTiming, ModelStats

SUMMARIES = (
    (
        "nv_inference_request_summary_us",
        "Summary of inference request duration in microseconds (includes cached requests)",
    ),
    (
        "nv_inference_queue_summary_us",
        "Summary of inference queuing duration in microseconds (includes cached requests)",
    ),
    (
        "nv_inference_compute_input_summary_us",
        "Summary of compute input duration in microseconds (does not include cached requests)",
    ),
    (
        "nv_inference_compute_infer_summary_us",
        "Summary of compute inference duration in microseconds (does not include cached requests)",
    ),
    (
        "nv_inference_compute_output_summary_us",
        "Summary of inference compute output duration in microseconds (does not include cached requests)",
    ),
)
HISTOGRAM_BUCKETS_MS = (100.0, 500.0, 2000.0, 5000.0)
_DEFAULT_QUANTILES = ((0.5, 0.05), (0.9, 0.01), (0.95, 0.001), (0.99, 0.001), (0.999, 0.001))
_SUMMARY_MAX_AGE_S = 60.0  # prometheus-cpp's default sliding window
_SUMMARY_MAX_SAMPLES = 10_000



@dataclass
class MetricsConfig:
    """`--metrics-config <key>=<value>` (Triton's keys and defaults)."""

    counter_latencies: bool = True
    summary_latencies: bool = False
    histogram_latencies: bool = False
    summary_quantiles: tuple[tuple[float, float], ...] = _DEFAULT_QUANTILES

    @classmethod
    def parse(cls, specs: list[str]) -> MetricsConfig:
        config = cls()
        for spec in specs:
            key, eq, value = spec.partition("=")
            key, value = key.strip(), value.strip().strip('"')
            if not eq:
                raise ValueError(f"--metrics-config '{spec}' must look like <setting>=<value>")
            if key in ("counter_latencies", "summary_latencies", "histogram_latencies"):
                if value.lower() not in ("true", "false", "1", "0", "on", "off"):
                    raise ValueError(f"--metrics-config {key} expects true or false, got '{value}'")
                setattr(config, key, value.lower() in ("true", "1", "on"))
            elif key == "summary_quantiles":
                try:
                    pairs = [item.split(":") for item in value.split(",") if item]
                    config.summary_quantiles = tuple((float(q), float(e)) for q, e in pairs)
                except ValueError:
                    raise ValueError(
                        f"--metrics-config summary_quantiles expects '<quantile>:<error>,...', got '{value}'"
                    ) from None
            else:
                raise ValueError(f"unknown --metrics-config setting '{key}'")
        return config


class LatencyObserver:
    """Recent per-request latencies of one model version (summaries) and first-response buckets."""

    def __init__(self, config: MetricsConfig) -> None:
        self.config = config
        self.lock = threading.Lock()
        self.windows: dict[str, deque[tuple[float, float]]] = {
            name: deque(maxlen=_SUMMARY_MAX_SAMPLES) for name, _ in SUMMARIES
        }
        self.totals: dict[str, list[float]] = {name: [0.0, 0] for name, _ in SUMMARIES}
        self.buckets = [0] * len(HISTOGRAM_BUCKETS_MS)
        self.histogram_sum = 0.0
        self.histogram_count = 0

    def _observe(self, name: str, value_us: float, count: int = 1) -> None:
        now = time.monotonic()
        window = self.windows[name]
        total = self.totals[name]
        for _ in range(count):
            window.append((now, value_us))
        total[0] += value_us * count
        total[1] += count

    def request(self, ok: bool, total_ns: int, queue_ns: int, first_response_ns: int) -> None:
        if not ok:
            return
        with self.lock:
            if self.config.summary_latencies:
                self._observe("nv_inference_request_summary_us", total_ns / 1000)
                self._observe("nv_inference_queue_summary_us", queue_ns / 1000)
            if self.config.histogram_latencies:
                ms = first_response_ns / 1e6
                index = bisect.bisect_left(HISTOGRAM_BUCKETS_MS, ms)
                if index < len(self.buckets):
                    self.buckets[index] += 1
                self.histogram_sum += ms
                self.histogram_count += 1

    def execution(self, request_count: int, timing: ExecutionTiming) -> None:
        if not self.config.summary_latencies:
            return
        with self.lock:
            self._observe(
                "nv_inference_compute_input_summary_us",
                timing.compute_input_ns / 1000,
                request_count,
            )
            self._observe(
                "nv_inference_compute_infer_summary_us",
                timing.compute_infer_ns / 1000,
                request_count,
            )
            self._observe(
                "nv_inference_compute_output_summary_us",
                timing.compute_output_ns / 1000,
                request_count,
            )

    def quantiles(self, name: str) -> tuple[list[tuple[float, float]], float, int]:
        """(quantile, value) over the last minute, plus the running sum and count."""
        cutoff = time.monotonic() - _SUMMARY_MAX_AGE_S
        with self.lock:
            window = self.windows[name]
            while window and window[0][0] < cutoff:
                window.popleft()
            values = sorted(v for _, v in window)
            total, count = self.totals[name]
        out = []
        for q, _error in self.config.summary_quantiles:
            value = values[min(int(q * len(values)), len(values) - 1)] if values else float("nan")
            out.append((q, value))
        return out, total, int(count)


def latency_observers(config: MetricsConfig) -> Callable[[ModelStats], LatencyObserver] | None:
    """What builds each model version's observer when the summaries or the histogram are on
    (the server hands it to every version it loads); None when neither is."""
    if config.summary_latencies or config.histogram_latencies:
        return lambda _stats: LatencyObserver(config)
    return None
