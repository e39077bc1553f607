"""What the ONNX Runtime and PyTorch backends share: compute in a thread, batch along dim 0.

Both frameworks release the GIL while they compute, so an instance owns one worker thread
and the event loop only awaits it. A scheduler may hand an instance several requests at
once: requests whose non-batch shapes agree are concatenated along dim 0, run once and split
back by each request's batch size; the rest run one by one. Responses are sent from the
event loop, after the thread's work is awaited (senders are not thread-safe).
"""

from __future__ import annotations

import abc
import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .._proto import model_config_pb2 as mc
from ..core import datatypes
from ..core.backend import InstanceSpec, ModelContext, ModelInstance
from ..core.errors import InternalError, OpenInferError
from ..core.observability.stats import ExecutionTiming
from ..core.requests.responses import ResponseSender
from ..core.types import InferRequest, InferResponse, Tensor


def config_type_name(data_type: int) -> str:
    """`mc.TYPE_FP32` -> `"TYPE_FP32"`."""
    return mc.DataType.Name(data_type)


def parameter(config: mc.ModelConfig, key: str, default: str = "") -> str:
    """A config `parameters { key: ... value: { string_value: ... } }` entry."""
    return config.parameters[key].string_value if key in config.parameters else default


@dataclass(slots=True)
class _OutputSpec:
    name: str
    datatype: str  # protocol string
    numpy: np.dtype
    dims: tuple[int, ...]
    reshaped: bool


class ThreadedInstance(ModelInstance):
    """An instance whose `run` executes in its own thread, one batch at a time."""

    def __init__(self, ctx: ModelContext, spec: InstanceSpec) -> None:
        self.ctx = ctx
        self.spec = spec
        config = ctx.config
        self.model_name = ctx.name
        self.batching = config.max_batch_size > 0
        self._reshape_in = {
            t.name: tuple(int(d) for d in t.reshape.shape) for t in config.input if t.HasField("reshape")
        }
        self._outputs = {
            t.name: _OutputSpec(
                t.name,
                datatypes.config_to_protocol(config_type_name(t.data_type)),
                datatypes.BY_CONFIG_NAME[config_type_name(t.data_type)].numpy,
                tuple(int(d) for d in t.dims),
                t.HasField("reshape"),
            )
            for t in config.output
        }
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"openinfer-{spec.name}")

    # ------------------------------------------------------------ per framework
    @abc.abstractmethod
    def run(self, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        """Run the model once (in the instance thread); raise core errors, never foreign ones."""

    def close(self) -> None:
        """Release the framework's session or module (in the instance thread)."""

    # ------------------------------------------------------------------ seam
    async def execute(
        self, requests: list[InferRequest], senders: list[ResponseSender]
    ) -> ExecutionTiming:
        loop = asyncio.get_running_loop()
        results, timing = await loop.run_in_executor(self._executor, self._compute, requests)
        for request, sender, result in zip(requests, senders, results):
            if isinstance(result, Exception):
                sender.fail(result)
            else:
                sender.send(InferResponse(request.model_name, "", request.id, result), final=True)
        return timing

    async def stop(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self.close)
        finally:
            self._executor.shutdown(wait=False)

    # ------------------------------------------------------------- in thread
    def _compute(
        self, requests: list[InferRequest]
    ) -> tuple[list[list[Tensor] | Exception], ExecutionTiming]:
        timing = ExecutionTiming()
        results: list[list[Tensor] | Exception] = [[] for _ in requests]
        for group in self._groups(requests):
            try:
                outputs = self._run_group([requests[i] for i in group], timing)
            except OpenInferError as exc:
                for i in group:
                    results[i] = exc
                continue
            except Exception as exc:  # noqa: BLE001 (a bug must fail the requests, not the thread)
                error = InternalError(f"model '{self.model_name}' failed: {exc}")
                for i in group:
                    results[i] = error
                continue
            for i, tensors in zip(group, outputs):
                results[i] = tensors
        return results, timing

    def _groups(self, requests: list[InferRequest]) -> list[list[int]]:
        """Indices of requests that can share one run (same inputs and non-batch shapes)."""
        if len(requests) == 1:
            return [[0]]
        if not self.batching:
            return [[i] for i in range(len(requests))]
        groups: dict[tuple, list[int]] = {}
        for i, request in enumerate(requests):
            key = tuple(sorted((t.name, t.shape[1:]) for t in request.inputs))
            groups.setdefault(key, []).append(i)
        return list(groups.values())

    def _run_group(self, group: list[InferRequest], timing: ExecutionTiming) -> list[list[Tensor]]:
        started = time.perf_counter_ns()
        inputs: dict[str, np.ndarray] = {}
        for tensor in group[0].inputs:
            if len(group) == 1:
                array = tensor.data
            else:
                array = np.concatenate([r.input(tensor.name).data for r in group], axis=0)  # type: ignore[union-attr]
            assert array is not None
            shape = self._reshape_in.get(tensor.name)
            if shape is not None:
                lead = (array.shape[0],) if self.batching else ()
                array = array.reshape(lead + shape)
            inputs[tensor.name] = array
        wanted = self._requested(group)
        ready = time.perf_counter_ns()
        produced = self.run(inputs, wanted)
        ran = time.perf_counter_ns()
        sizes = [r.batch_size for r in group]
        total = sum(sizes)
        per_request: list[list[Tensor]] = [[] for _ in group]
        for name in wanted:
            array = self._check_output(name, produced.get(name), total)
            if len(group) == 1:
                parts = [array]
            else:
                parts = np.split(array, np.cumsum(sizes)[:-1], axis=0)
            spec = self._outputs[name]
            for slot, part in zip(per_request, parts):
                slot.append(Tensor(name, spec.datatype, tuple(part.shape), part))
        done = time.perf_counter_ns()
        timing.compute_input_ns += ready - started
        timing.compute_infer_ns += ran - ready
        timing.compute_output_ns += done - ran
        return per_request

    def _requested(self, group: list[InferRequest]) -> list[str]:
        """Every config output some request of the group asked for (all when one asked for all)."""
        names: set[str] = set()
        for request in group:
            if request.outputs is None:
                return list(self._outputs)
            names.update(o.name for o in request.outputs)
        return [name for name in self._outputs if name in names]

    def _check_output(self, name: str, array: np.ndarray | None, total: int) -> np.ndarray:
        spec = self._outputs[name]
        if array is None:
            raise InternalError(f"model '{self.model_name}' did not produce output '{name}'")
        if spec.datatype == "BYTES":
            if array.dtype != np.object_ or not all(isinstance(x, bytes) for x in array.reshape(-1)):
                array = datatypes.to_bytes_array(np.asarray(array))
        elif array.dtype != spec.numpy:
            actual = datatypes.protocol_of_array(array) if array.dtype.kind not in "OSU" else "BYTES"
            actual_config = datatypes.DATATYPES[actual].config_name
            raise InternalError(
                f"unexpected datatype {actual_config} for inference output '{name}', expecting "
                f"{datatypes.DATATYPES[spec.datatype].config_name}"
            )
        if spec.reshaped:
            lead = (array.shape[0],) if self.batching else ()
            array = array.reshape(lead + spec.dims)
        if self.batching and (array.ndim == 0 or array.shape[0] != total):
            raise InternalError(
                f"output '{name}' of model '{self.model_name}' has shape {list(array.shape)}, "
                f"but its first dimension must be the batch size {total}"
            )
        return array
