"""The settings of one v2 run, as parsed from perf_analyzer-style flags."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Options:
    model: str
    url: str = "localhost:8000"
    protocol: str = "http"  # http | grpc
    model_version: str = ""
    shapes: dict[str, list[int]] = field(default_factory=dict)
    input_data: str = "random"  # random | zero | path to a JSON file
    batch_size: int = 1
    concurrency: list[int] = field(default_factory=lambda: [1])
    request_rates: list[float] = field(default_factory=list)  # set: open-loop rate mode
    measurement_interval_ms: int = 5000
    stability_percentage: float = 10.0
    max_trials: int = 10
    request_count: int = 0  # > 0: send exactly this many per level instead of time windows
    warmup_ms: int = 500
    binary: bool = False  # HTTP binary tensor extension
    shared_memory: str = "none"  # none | system
    output_shm_size: int = 102400
    streaming: bool = False  # gRPC ModelStreamInfer
    sequence_length: int = 0  # > 0: send sequences of this length (sequence batcher)
    workers: int = 0  # 0: choose from concurrency and protocol
    validate_every: int = 1  # fully decode and check one response in N
    percentile: int = 0  # stability on this latency percentile instead of the average
    max_connections: int = 64  # per worker, rate mode
    timeout_s: float = 60.0


def parse_range(text: str, integer: bool = True) -> list[float]:
    """perf_analyzer's ``START:END:STEP`` (END and STEP optional) into a list of values."""
    parts = [p for p in text.split(":")]
    conv = int if integer else float
    start = conv(parts[0])
    end = conv(parts[1]) if len(parts) > 1 and parts[1] else start
    step = conv(parts[2]) if len(parts) > 2 and parts[2] else 1
    if step <= 0 or end < start:
        raise ValueError(f"bad range {text!r}: need START <= END and STEP > 0")
    values, v = [], start
    while v <= end + (1e-9 if not integer else 0):
        values.append(v)
        v += step
    return values
