"""Per model-version counters in nanoseconds: the statistics extension and Prometheus both read these."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(slots=True)
class Duration:
    count: int = 0
    ns: int = 0

    def add(self, ns: int, count: int = 1) -> None:
        self.count += count
        self.ns += ns

    def as_dict(self) -> dict[str, int]:
        return {"count": self.count, "ns": self.ns}


@dataclass(slots=True)
class BatchStats:
    compute_input: Duration = field(default_factory=Duration)
    compute_infer: Duration = field(default_factory=Duration)
    compute_output: Duration = field(default_factory=Duration)


@dataclass(slots=True)
class ExecutionTiming:
    """What a backend reports for one `execute` call (nanoseconds)."""

    compute_input_ns: int = 0
    compute_infer_ns: int = 0
    compute_output_ns: int = 0


class _Summed:
    """A `ModelStats` counter (stored under `_<name>`) read after the logged executions are
    summed into it."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.stored = "_" + name

    def __get__(self, stats: Any, owner: type | None = None) -> Any:
        if stats is None:
            return self
        stats._sum()
        return getattr(stats, self.stored)


@dataclass
class ModelStats:
    """Counters for one (model, version), updated on the event loop only."""

    name: str
    version: str
    last_inference_ms: int = 0
    success: Duration = field(default_factory=Duration)
    fail: Duration = field(default_factory=Duration)
    queue: Duration = field(default_factory=Duration)
    cache_hit: Duration = field(default_factory=Duration)
    cache_miss: Duration = field(default_factory=Duration)
    pending: int = 0
    failures_by_reason: dict[str, int] = field(
        default_factory=lambda: {"REJECTED": 0, "CANCELED": 0, "BACKEND": 0, "OTHER": 0}
    )
    load_duration_s: float = 0.0
    #: Per-request latency observer for Prometheus summaries and histograms; None when off.
    observer: Any = None
    #: Builds `observer` for each new ModelStats; set once from `--metrics-config`.
    observer_factory: ClassVar[Callable[[ModelStats], Any] | None] = None

    # Execution counters. `record_execution` runs for every batch, so it only logs the batch;
    # the sums are made when they are read (the `_Summed` attributes below) or when the log is long.
    _inference_count: int = 0
    _execution_count: int = 0
    _compute_input: Duration = field(default_factory=Duration)
    _compute_infer: Duration = field(default_factory=Duration)
    _compute_output: Duration = field(default_factory=Duration)
    _batches: dict[int, BatchStats] = field(default_factory=dict)
    _unsummed: list[tuple[int, int, ExecutionTiming]] = field(default_factory=list)

    _SUM_EVERY: ClassVar[int] = 256

    def __post_init__(self) -> None:
        if ModelStats.observer_factory is not None:
            self.observer = ModelStats.observer_factory(self)

    inference_count: ClassVar[_Summed] = _Summed()
    execution_count: ClassVar[_Summed] = _Summed()
    compute_input: ClassVar[_Summed] = _Summed()
    compute_infer: ClassVar[_Summed] = _Summed()
    compute_output: ClassVar[_Summed] = _Summed()
    batches: ClassVar[_Summed] = _Summed()

    def record_execution(self, batch_size: int, request_count: int, timing: ExecutionTiming) -> None:
        """One `execute` call of `request_count` requests holding `batch_size` inferences."""
        unsummed = self._unsummed
        unsummed.append((batch_size, request_count, timing))
        if self.observer is not None:
            self.observer.execution(request_count, timing)
        if len(unsummed) >= self._SUM_EVERY:
            self._sum()

    def _sum(self) -> None:
        """Add the logged executions into the counters."""
        if not self._unsummed:
            return
        unsummed, self._unsummed = self._unsummed, []
        for batch_size, request_count, timing in unsummed:
            self._add_execution(batch_size, request_count, timing)

    def _add_execution(self, batch_size: int, request_count: int, timing: ExecutionTiming) -> None:
        self._execution_count += 1
        self._inference_count += batch_size
        # Every request of the batch spent the batch's compute time (Triton reports it per request).
        self._compute_input.add(timing.compute_input_ns * request_count, request_count)
        self._compute_infer.add(timing.compute_infer_ns * request_count, request_count)
        self._compute_output.add(timing.compute_output_ns * request_count, request_count)
        batch = self._batches.get(batch_size)
        if batch is None:
            batch = self._batches[batch_size] = BatchStats()
        batch.compute_input.add(timing.compute_input_ns)
        batch.compute_infer.add(timing.compute_infer_ns)
        batch.compute_output.add(timing.compute_output_ns)

    def record_request(
        self,
        ok: bool,
        total_ns: int,
        queue_ns: int,
        reason: str = "BACKEND",
        first_response_ns: int = 0,
        compute: ExecutionTiming | None = None,
    ) -> None:
        """A finished request; `compute` is the timing of the execution that ran it, if any."""
        self.last_inference_ms = time.time_ns() // 1_000_000
        if not ok and compute is not None:
            # Triton's compute counts cover successful requests only: give back this one's share.
            self._compute_input.add(-compute.compute_input_ns, -1)
            self._compute_infer.add(-compute.compute_infer_ns, -1)
            self._compute_output.add(-compute.compute_output_ns, -1)
        if self.observer is not None:
            self.observer.request(ok, total_ns, queue_ns, first_response_ns or total_ns)
        if ok:
            success, queue = self.success, self.queue
            success.count += 1
            success.ns += total_ns
            queue.count += 1
            queue.ns += queue_ns
        else:
            self.fail.add(total_ns)
            self.failures_by_reason[reason] = self.failures_by_reason.get(reason, 0) + 1

    def as_dict(self) -> dict:
        """Triton's `model_stats[]` entry, keys in Triton's order."""
        return {
            "name": self.name,
            "version": self.version,
            "last_inference": self.last_inference_ms,
            "inference_count": self.inference_count,
            "execution_count": self.execution_count,
            "inference_stats": {
                "success": self.success.as_dict(),
                "fail": self.fail.as_dict(),
                "queue": self.queue.as_dict(),
                "compute_input": self.compute_input.as_dict(),
                "compute_infer": self.compute_infer.as_dict(),
                "compute_output": self.compute_output.as_dict(),
                "cache_hit": self.cache_hit.as_dict(),
                "cache_miss": self.cache_miss.as_dict(),
            },
            "response_stats": {},
            "batch_stats": [
                {
                    "batch_size": size,
                    "compute_input": b.compute_input.as_dict(),
                    "compute_infer": b.compute_infer.as_dict(),
                    "compute_output": b.compute_output.as_dict(),
                }
                for size, b in sorted(self.batches.items())
            ],
            "memory_usage": [],
        }


def record_compute(requests: Any, start_ns: int, timing: ExecutionTiming) -> None:
    """Schedulers call this after each execution: every request keeps its batch's timing (for the
    statistics of failed requests) and sampled requests get their trace's compute timestamps."""
    end_ns = 0
    for request in requests:
        request.flags["compute"] = timing
        if request.trace is not None:
            end_ns = end_ns or time.perf_counter_ns()
            request.trace.compute(start_ns, timing, end_ns)
