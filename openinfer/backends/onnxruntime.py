"""The ONNX Runtime backend (`backend: "onnxruntime"` / `platform: "onnxruntime_onnx"`).

One InferenceSession per instance, run in the instance's thread. The config is completed
from the model as Triton's onnxruntime backend does it: inputs and outputs from the graph,
and `max_batch_size` from `--backend-config default-max-batch-size` (4) when every input and
output has a variable first dimension. Session options come from the config's `parameters`
(`intra_op_thread_count`, `inter_op_thread_count`, `execution_mode`) and
`optimization.graph.level`. KIND_GPU instances use the CUDA execution provider on their
device and refuse to load when the installed onnxruntime has none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from onnxruntime.capi import onnxruntime_pybind11_state as ort_errors

from .._proto import model_config_pb2 as mc
from ..core import config as configs
from ..core.backend import Backend, InstanceSpec, ModelContext, ModelInstance
from ..core.errors import InternalError, InvalidArgumentError, OpenInferError
from .threaded import ThreadedInstance, config_type_name, parameter

log = logging.getLogger("openinfer.onnxruntime")

#: ONNX element type strings -> model config data types.
ONNX_TYPES: dict[str, int] = {
    "tensor(bool)": mc.TYPE_BOOL,
    "tensor(uint8)": mc.TYPE_UINT8,
    "tensor(uint16)": mc.TYPE_UINT16,
    "tensor(uint32)": mc.TYPE_UINT32,
    "tensor(uint64)": mc.TYPE_UINT64,
    "tensor(int8)": mc.TYPE_INT8,
    "tensor(int16)": mc.TYPE_INT16,
    "tensor(int32)": mc.TYPE_INT32,
    "tensor(int64)": mc.TYPE_INT64,
    "tensor(float16)": mc.TYPE_FP16,
    "tensor(float)": mc.TYPE_FP32,
    "tensor(double)": mc.TYPE_FP64,
    "tensor(string)": mc.TYPE_STRING,
    "tensor(bfloat16)": mc.TYPE_BF16,
}
DEFAULT_MAX_BATCH_SIZE = 4
_ORT_MESSAGE = re.compile(r"^\[ONNXRuntimeError\] : (\d+) : \w+ : ", re.DOTALL)
_INVALID = (ort_errors.InvalidArgument, ort_errors.InvalidGraph, ort_errors.InvalidProtobuf, ort_errors.NoModel, ort_errors.NoSuchFile)


@contextlib.contextmanager
def onnx_errors(context: str = "") -> Iterator[None]:
    """Translate onnxruntime's exceptions into core errors, once, at the backend boundary."""
    try:
        yield
    except OpenInferError:
        raise
    except Exception as exc:
        text = str(exc)
        match = _ORT_MESSAGE.match(text)
        message = f"onnx runtime error {match.group(1)}: {text[match.end():]}" if match else text
        if context:
            message = f"{context}: {message}"
        cls = InvalidArgumentError if isinstance(exc, _INVALID) else InternalError
        raise cls(message) from exc


def model_path(ctx: ModelContext) -> Path:
    path = ctx.version_dir / configs.model_file(ctx.config, "onnxruntime")
    if not path.exists():
        raise InvalidArgumentError(
            f"unable to find '{path}' for model '{ctx.name}' version {ctx.version}"
        )
    return path


def _dims(shape: list[Any]) -> list[int]:
    """ONNX shapes use strings or None for symbolic dimensions; the config uses -1."""
    return [d if isinstance(d, int) and d >= 0 else -1 for d in shape]


def _tensor_infos(nodes: list[Any]) -> dict[str, tuple[int, list[int]]]:
    infos = {}
    for node in nodes:
        if node.type not in ONNX_TYPES:
            raise InvalidArgumentError(f"unsupported ONNX type '{node.type}' for tensor '{node.name}'")
        infos[node.name] = (ONNX_TYPES[node.type], _dims(node.shape))
    return infos


def session_options(config: mc.ModelConfig) -> ort.SessionOptions:
    options = ort.SessionOptions()
    try:
        intra = int(parameter(config, "intra_op_thread_count", "0") or 0)
        inter = int(parameter(config, "inter_op_thread_count", "0") or 0)
        mode = int(parameter(config, "execution_mode", "0") or 0)
    except ValueError as exc:
        raise InvalidArgumentError(f"invalid onnxruntime parameter for model '{config.name}': {exc}") from None
    if mode not in (0, 1):
        raise InvalidArgumentError(
            "Invalid configuration value provided. Expected values for  execution_mode are 0 or 1 "
            f"but got {mode} ."
        )
    if intra > 0:
        options.intra_op_num_threads = intra
    if inter > 0:
        options.inter_op_num_threads = inter
    options.execution_mode = ort.ExecutionMode.ORT_PARALLEL if mode == 1 else ort.ExecutionMode.ORT_SEQUENTIAL
    level = config.optimization.graph.level if config.optimization.HasField("graph") else 0
    options.graph_optimization_level = {
        -1: ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        1: ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        2: ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    }.get(level, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    return options


def providers_for(ctx: ModelContext, spec: InstanceSpec | None) -> list[Any]:
    """CPU, or CUDA on the instance's device for KIND_GPU (an error when ORT has no CUDA)."""
    if spec is None or spec.kind != mc.ModelInstanceGroup.KIND_GPU:
        return ["CPUExecutionProvider"]
    available = ort.get_available_providers()
    if "CUDAExecutionProvider" not in available:
        raise InvalidArgumentError(
            f"instance group {spec.group.name} of model '{ctx.name}' has kind KIND_GPU, but the "
            f"installed onnxruntime has no CUDAExecutionProvider (available: {', '.join(available)}); "
            "install onnxruntime-gpu or use KIND_CPU"
        )
    return [("CUDAExecutionProvider", {"device_id": spec.device_id}), "CPUExecutionProvider"]


def open_session(ctx: ModelContext, spec: InstanceSpec | None) -> ort.InferenceSession:
    path = model_path(ctx)
    with onnx_errors(f"failed to load model '{ctx.name}'"):
        return ort.InferenceSession(
            str(path), sess_options=session_options(ctx.config), providers=providers_for(ctx, spec)
        )


class OnnxRuntimeInstance(ThreadedInstance):
    def __init__(self, ctx: ModelContext, spec: InstanceSpec, session: ort.InferenceSession) -> None:
        super().__init__(ctx, spec)
        self.session: ort.InferenceSession | None = session
        self._string_inputs = {t.name for t in ctx.config.input if t.data_type == mc.TYPE_STRING}

    def run(self, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        assert self.session is not None
        feed = {}
        for name, array in inputs.items():
            if name in self._string_inputs:  # ORT wants str elements for string tensors
                array = np.vectorize(_text, otypes=[np.object_])(array) if array.size else array
            feed[name] = array
        with onnx_errors():
            values = self.session.run(outputs, feed)
        return dict(zip(outputs, values))

    def close(self) -> None:
        self.session = None


def _text(item: object) -> str:
    return item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item)


def validate_against_model(ctx: ModelContext, session: ort.InferenceSession) -> None:
    """The config's tensors must exist in the graph with the same types (Triton's load checks)."""
    config = ctx.config
    for kind, tensors, nodes in (
        ("input", config.input, session.get_inputs()),
        ("output", config.output, session.get_outputs()),
    ):
        infos = _tensor_infos(nodes)
        for tensor in tensors:
            info = infos.get(tensor.name)
            if info is None:
                allowed = ", ".join(infos) or "<none>"
                raise InvalidArgumentError(
                    f"unable to load model '{ctx.name}', unexpected inference {kind} '{tensor.name}', "
                    f"allowed {kind}s are: {allowed}"
                )
            data_type, dims = info
            if data_type != tensor.data_type:
                raise InvalidArgumentError(
                    f"unable to load model '{ctx.name}', unexpected datatype "
                    f"{config_type_name(data_type)} for inference {kind} '{tensor.name}', expecting "
                    f"{config_type_name(tensor.data_type)}"
                )
            if tensor.HasField("reshape"):
                continue
            expected = ([-1] if config.max_batch_size > 0 else []) + [int(d) for d in tensor.dims]
            if len(dims) != len(expected) or any(
                m != -1 and c != -1 and m != c for m, c in zip(dims, expected)
            ):
                raise InvalidArgumentError(
                    f"model '{ctx.name}', tensor '{tensor.name}': the model expects {len(dims)} "
                    f"dimensions (shape {dims}) but the model configuration specifies "
                    f"{len(expected)} dimensions (shape {expected})"
                )


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"

    async def auto_complete(self, ctx: ModelContext) -> None:
        config = ctx.config
        if config.input and config.output:
            return
        session = await asyncio.to_thread(open_session, ctx, None)
        inputs = _tensor_infos(session.get_inputs())
        outputs = _tensor_infos(session.get_outputs())
        batchable = all(dims and dims[0] == -1 for _, dims in [*inputs.values(), *outputs.values()])
        if batchable:
            if config.max_batch_size == 0:
                try:
                    default = int(ctx.backend_config.get("default-max-batch-size", DEFAULT_MAX_BATCH_SIZE))
                except ValueError:
                    default = DEFAULT_MAX_BATCH_SIZE
                config.max_batch_size = max(default, 0)
                log.warning(
                    "autofilled max_batch_size to %d for model '%s' since batching is supported but "
                    "no max_batch_size is specified in model configuration",
                    config.max_batch_size,
                    ctx.name,
                )
            if config.max_batch_size > 1 and not (
                config.HasField("dynamic_batching") or config.HasField("sequence_batching")
            ):
                config.dynamic_batching.SetInParent()
        elif config.max_batch_size != 0:
            raise InvalidArgumentError(
                f"autofill failed for model '{ctx.name}': model does not support batching while "
                "non-zero max_batch_size is specified"
            )
        if not config.input:
            _fill(config.input, inputs, config.max_batch_size)
        if not config.output:
            _fill(config.output, outputs, config.max_batch_size)

    async def create_instance(self, ctx: ModelContext, spec: InstanceSpec) -> ModelInstance:
        if not ctx.config.input or not ctx.config.output:
            raise InvalidArgumentError(
                f"model '{ctx.name}' must list its inputs and outputs when auto-complete is disabled"
            )
        session = await asyncio.to_thread(open_session, ctx, spec)
        validate_against_model(ctx, session)
        return OnnxRuntimeInstance(ctx, spec, session)


def _fill(tensors: Any, infos: dict[str, tuple[int, list[int]]], max_batch_size: int) -> None:
    for name, (data_type, dims) in infos.items():
        tensor = tensors.add()
        tensor.name = name
        tensor.data_type = data_type
        kept = dims[1:] if max_batch_size > 0 else dims
        if kept:
            tensor.dims.extend(kept)
        else:  # a scalar (per batch item) is a [1] tensor reshaped to []
            tensor.dims.append(1)
            if max_batch_size > 0:
                tensor.reshape.SetInParent()
