"""One sampled request's trace: its timestamps and, at level TENSORS, its tensors, kept as
Triton's JSON objects and handed to its setting's file when the request ends. `trace.py` holds
the settings, sampling and files."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core.types import InferRequest, Tensor
from ...core.observability.stats import ExecutionTiming

if TYPE_CHECKING:
    from .manager import TraceSetting

#: Trace levels, bits of a setting's `level`.
OFF = 0
TIMESTAMPS = 1
TENSORS = 2


class Trace:
    """The trace of one request: Triton's JSON objects, written when the request ends."""

    __slots__ = ("header", "id", "level", "setting", "stamps", "tensors")

    def __init__(
        self, trace_id: int, setting: TraceSetting, model: str, version: int, request_id: str
    ) -> None:
        self.id = trace_id
        self.setting = setting
        self.level = setting.level
        header = f'{{"id":{trace_id},"model_name":{json.dumps(model)},"model_version":{version}'
        if request_id:
            header += f',"request_id":{json.dumps(request_id)}'
        self.header = header + "}"
        self.stamps: list[tuple[int, str]] = []
        self.tensors: list[str] = []

    def stamp(self, name: str, ns: int | None = None) -> None:
        if self.level & TIMESTAMPS:
            self.stamps.append((time.perf_counter_ns() if ns is None else ns, name))

    def queued(self, request: InferRequest) -> None:
        """The request enters its model's scheduler."""
        self.stamp("QUEUE_START")
        self.record_tensors("TENSOR_QUEUE_INPUT", request.inputs)

    def responded(self, response: Any) -> None:
        """A response came back from the model."""
        self.stamp("INFER_RESPONSE_COMPLETE")
        if response.error is None:
            self.record_tensors("TENSOR_BACKEND_OUTPUT", response.outputs)

    def compute(self, start_ns: int, timing: ExecutionTiming, end_ns: int | None = None) -> None:
        """The compute timestamps of one execution: its real start and end, with the backend's
        input and output durations marking the inner two (transfers count as inference)."""
        if not self.level & TIMESTAMPS:
            return
        end = time.perf_counter_ns() if end_ns is None else end_ns
        input_end = min(start_ns + timing.compute_input_ns, end)
        output_start = max(end - timing.compute_output_ns, input_end)
        self.stamps.extend(
            (
                (start_ns, "COMPUTE_START"),
                (input_end, "COMPUTE_INPUT_END"),
                (output_start, "COMPUTE_OUTPUT_START"),
                (end, "COMPUTE_END"),
            )
        )

    def record_tensors(self, activity: str, tensors: list[Tensor]) -> None:
        if not self.level & TENSORS:
            return
        for tensor in tensors:
            if tensor.data is None:
                continue
            entry = {
                "name": tensor.name,
                "data": _tensor_text(tensor.data, tensor.datatype),
                "shape": ",".join(str(d) for d in tensor.shape),
                "dtype": tensor.datatype,
            }
            self.tensors.append(
                f'{{"id":{self.id},"activity":"{activity}","tensor":{json.dumps(entry, separators=(",", ":"))}}}'
            )

    def finish(self, end_ns: int | None = None) -> None:
        self.stamp("REQUEST_END", end_ns)
        parts = [self.header]
        parts.extend(
            f'{{"id":{self.id},"timestamps":[{{"name":"{name}","ns":{ns}}}]}}'
            for ns, name in sorted(self.stamps)
        )
        parts.extend(self.tensors)
        self.setting.write(",".join(parts))


def _tensor_text(array: np.ndarray, datatype: str) -> str:
    """Triton's TENSORS rendering: comma-separated values, C++ stream formatting for floats."""
    flat = array.reshape(-1)
    if datatype in ("FP16", "BF16"):
        return ""
    if datatype == "BYTES":
        return ",".join(
            '"'
            + (x.decode("utf-8", "replace") if isinstance(x, (bytes, bytearray)) else str(x))
            + '"'
            for x in flat
        )
    if datatype == "BOOL":
        return ",".join("1" if x else "0" for x in flat)
    if datatype in ("FP32", "FP64"):
        return ",".join(f"{float(x):g}" for x in flat)
    return ",".join(str(int(x)) for x in flat)
