"""Per model-version counters in nanoseconds: the statistics extension and Prometheus both read these."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(slots=True)
class Duration:
    count: int = 0
    ns: int = 0

    def add(self, ns: int, count: int = 1) -> None:
        self.count += count
        self.ns += ns



@dataclass(slots=True)
class BatchStats:
    compute_input: Duration = field(default_factory=Duration)
    compute_infer: Duration = field(default_factory=Duration)
    compute_output: Duration = field(default_factory=Duration)


@dataclass(slots=True)
class ExecutionTiming:
    """What a backend reports for one `execute` call (nanoseconds).

    `start_ns`: when the backend began the batch, where it first waited out of the scheduler's
    sight (in a worker's queue, behind the batches sent before it); 0 where it began at once.
    It is read on `time.perf_counter_ns`'s clock, CLOCK_MONOTONIC, which every process on the
    machine shares. The wait counts as queue time, as it would in Triton's scheduler queue."""

    compute_input_ns: int = 0
    compute_infer_ns: int = 0
    compute_output_ns: int = 0
    start_ns: int = 0


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
    failures_by_reason: dict[str, int] = field(
        default_factory=lambda: {"REJECTED": 0, "CANCELED": 0, "BACKEND": 0, "OTHER": 0}
    )
    load_duration_s: float = 0.0
    #: Per-request latency observer for Prometheus summaries and histograms; None when off.
    observer: Any = None

    # Execution counters. `record_execution` runs for every batch, so it only bumps one row of
    # `_executions` per (batch size, request count): [executions, input ns, infer ns, output ns].
    # The statistics' sums are derived from those rows when they are read (the properties below).
    _executions: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    #: What failed requests gave back of their batch's compute time (counts and ns, negative).
    _compute_given_back: list[int] = field(default_factory=lambda: [0, 0, 0, 0])

    def record_execution(self, batch_size: int, request_count: int, timing: ExecutionTiming) -> None:
        """One `execute` call of `request_count` requests holding `batch_size` inferences."""
        row = self._executions.get((batch_size, request_count))
        if row is None:
            row = self._executions[(batch_size, request_count)] = [0, 0, 0, 0]
        row[0] += 1
        row[1] += timing.compute_input_ns
        row[2] += timing.compute_infer_ns
        row[3] += timing.compute_output_ns
        if self.observer is not None:
            self.observer.execution(request_count, timing)

    @property
    def execution_count(self) -> int:
        return sum(row[0] for row in self._executions.values())

    @property
    def inference_count(self) -> int:
        return sum(row[0] * batch_size for (batch_size, _), row in self._executions.items())

    def _compute(self, column: int) -> Duration:
        """Per-request compute time: every request of a batch spent the batch's time (Triton
        reports it per request), less what failed requests gave back."""
        given_back = self._compute_given_back
        total = Duration(given_back[0], given_back[column])
        for (_, request_count), row in self._executions.items():
            total.add(row[column] * request_count, row[0] * request_count)
        return total

    @property
    def compute_input(self) -> Duration:
        return self._compute(1)

    @property
    def compute_infer(self) -> Duration:
        return self._compute(2)

    @property
    def compute_output(self) -> Duration:
        return self._compute(3)

    @property
    def batches(self) -> dict[int, BatchStats]:
        """Compute time per execution, by batch size."""
        batches: dict[int, BatchStats] = {}
        for (batch_size, _), row in self._executions.items():
            batch = batches.get(batch_size)
            if batch is None:
                batch = batches[batch_size] = BatchStats()
            batch.compute_input.add(row[1], row[0])
            batch.compute_infer.add(row[2], row[0])
            batch.compute_output.add(row[3], row[0])
        return batches

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
            given_back = self._compute_given_back
            given_back[0] -= 1
            given_back[1] -= compute.compute_input_ns
            given_back[2] -= compute.compute_infer_ns
            given_back[3] -= compute.compute_output_ns
        if self.observer is not None:
            self.observer.request(ok, total_ns, queue_ns, first_response_ns or total_ns)
        if ok:
            self.success.add(total_ns)
            self.queue.add(queue_ns)
        else:
            self.fail.add(total_ns)
            self.failures_by_reason[reason] = self.failures_by_reason.get(reason, 0) + 1

    def snapshot(self) -> ModelStatistics:
        """The counters as they stand, for the statistics extension."""
        inference = InferenceStatistics(*(_counted(getattr(self, key)) for key in INFERENCE_KEYS))
        batches = tuple(
            BatchStatistics(size, _counted(b.compute_input), _counted(b.compute_infer), _counted(b.compute_output))
            for size, b in sorted(self.batches.items())
        )
        return ModelStatistics(
            self.name, self.version, self.last_inference_ms, self.inference_count, self.execution_count,
            inference, batches,
        )


@dataclass(frozen=True, slots=True)
class Counted:
    """A count and the nanoseconds it took, as read at one moment."""

    count: int
    ns: int


def _counted(duration: Duration) -> Counted:
    return Counted(duration.count, duration.ns)


@dataclass(frozen=True, slots=True)
class InferenceStatistics:
    """Per-request times; fields in the order of Triton's `inference_stats`."""

    success: Counted
    fail: Counted
    queue: Counted
    compute_input: Counted
    compute_infer: Counted
    compute_output: Counted
    cache_hit: Counted
    cache_miss: Counted


#: Triton's `inference_stats` keys, in its order.
INFERENCE_KEYS = tuple(f.name for f in fields(InferenceStatistics))


@dataclass(frozen=True, slots=True)
class BatchStatistics:
    """Per-execution compute times of one batch size."""

    batch_size: int
    compute_input: Counted
    compute_infer: Counted
    compute_output: Counted


@dataclass(frozen=True, slots=True)
class ModelStatistics:
    """One model version's statistics at one moment: what both frontends report."""

    name: str
    version: str
    last_inference: int
    inference_count: int
    execution_count: int
    inference: InferenceStatistics
    batches: tuple[BatchStatistics, ...]

    def as_json(self) -> dict[str, Any]:
        """Triton's `model_stats[]` entry, keys in Triton's order."""
        return {
            "name": self.name,
            "version": self.version,
            "last_inference": self.last_inference,
            "inference_count": self.inference_count,
            "execution_count": self.execution_count,
            "inference_stats": {key: _as_json(getattr(self.inference, key)) for key in INFERENCE_KEYS},
            "response_stats": {},
            "batch_stats": [
                {
                    "batch_size": b.batch_size,
                    "compute_input": _as_json(b.compute_input),
                    "compute_infer": _as_json(b.compute_infer),
                    "compute_output": _as_json(b.compute_output),
                }
                for b in self.batches
            ],
            "memory_usage": [],
        }


def _as_json(counted: Counted) -> dict[str, int]:
    return {"count": counted.count, "ns": counted.ns}


def record_compute(requests: Any, start_ns: int, timing: ExecutionTiming) -> None:
    """Schedulers call this after each execution: every request keeps its batch's timing (for the
    statistics of failed requests) and sampled requests get their trace's compute timestamps."""
    end_ns = 0
    for request in requests:
        request.compute = timing
        if request.trace is not None:
            end_ns = end_ns or time.perf_counter_ns()
            request.trace.compute(start_ns, timing, end_ns)
