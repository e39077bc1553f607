"""The PyTorch backend (`backend: "pytorch"` / `platform: "pytorch_libtorch"`, `model.pt`).

A TorchScript module per instance on the instance group's device, run under
`torch.inference_mode()` in the instance's thread. Tensors are matched to `forward` the way
Triton's libtorch backend does it: by `forward`'s argument names when the config uses them,
else by the `NAME__<index>` convention (`INPUT__0`, `OUTPUT__1`), else in config order.
TorchScript carries no reliable signature, so the config must list inputs and outputs.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import torch

from .._proto import model_config_pb2 as mc
from ..core import config as configs
from ..core.backend import Backend, InstanceSpec, ModelContext, ModelInstance
from ..core.errors import InternalError, InvalidArgumentError, OpenInferError
from .threaded import ThreadedInstance, parameter

_INDEXED = re.compile(r"^.+__(\d+)$")
_TRUE = ("true", "1", "on", "yes")


@contextlib.contextmanager
def torch_errors(prefix: str, cls: type[OpenInferError] = InternalError) -> Iterator[None]:
    """Translate torch's exceptions into core errors, once, at the backend boundary."""
    try:
        yield
    except OpenInferError:
        raise
    except Exception as exc:
        raise cls(f"{prefix}: {exc}") from exc


def _order(names: list[str], what: str, model: str, arguments: list[str] | None = None) -> list[str] | dict[str, int]:
    """How config tensors map onto forward's arguments or results.

    Returns the argument names (keyword call) or name -> position.
    """
    if arguments is not None and names and all(n in arguments for n in names):
        return [n for n in arguments if n in names]
    indexed = [_INDEXED.match(n) for n in names]
    if names and all(indexed):
        positions = {n: int(m.group(1)) for n, m in zip(names, indexed)}  # type: ignore[union-attr]
        if len(set(positions.values())) != len(positions):
            raise InvalidArgumentError(
                f"model '{model}' has {what}s with duplicate indices in their '__<index>' names"
            )
        return positions
    return {n: i for i, n in enumerate(names)}


def _device(ctx: ModelContext, spec: InstanceSpec) -> torch.device:
    if spec.kind != mc.ModelInstanceGroup.KIND_GPU:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise InvalidArgumentError(
            f"instance group {spec.group.name} of model '{ctx.name}' has kind KIND_GPU, but the "
            "installed torch has no CUDA support; install a CUDA build of torch or use KIND_CPU"
        )
    return torch.device("cuda", spec.device_id)


def _configure_threads(config: mc.ModelConfig) -> None:
    """Triton's INTRA_OP/INTER_OP_THREAD_COUNT parameters (process-wide in torch)."""
    intra = parameter(config, "INTRA_OP_THREAD_COUNT")
    inter = parameter(config, "INTER_OP_THREAD_COUNT")
    try:
        if intra and int(intra) > 0:
            torch.set_num_threads(int(intra))
        if inter and int(inter) > 0:
            with contextlib.suppress(RuntimeError):  # only settable before parallel work starts
                torch.set_num_interop_threads(int(inter))
    except ValueError as exc:
        raise InvalidArgumentError(f"invalid thread count for model '{config.name}': {exc}") from None


def _to_torch(array: np.ndarray, data_type: int, device: torch.device) -> Any:
    if data_type == mc.TYPE_STRING:
        return [x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x) for x in array.reshape(-1)]
    if not array.flags.writeable or not array.flags.c_contiguous:
        array = np.array(array, copy=True, order="C")
    tensor = torch.from_numpy(array)
    if data_type == mc.TYPE_BF16:
        tensor = tensor.view(torch.bfloat16)
    return tensor.to(device) if device.type != "cpu" else tensor


def _to_numpy(value: Any, name: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach()
        if value.device.type != "cpu":
            value = value.cpu()
        if value.dtype == torch.bfloat16:
            return value.view(torch.int16).numpy().view(np.uint16)
        return value.contiguous().numpy()
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, bytes)) for v in value):
        out = np.empty(len(value), dtype=np.object_)
        for i, item in enumerate(value):
            out[i] = item.encode("utf-8") if isinstance(item, str) else item
        return out
    raise InternalError(f"output '{name}' is a {type(value).__name__}, expected a tensor or a list of strings")


class PyTorchInstance(ThreadedInstance):
    def __init__(self, ctx: ModelContext, spec: InstanceSpec, module: Any, device: torch.device) -> None:
        super().__init__(ctx, spec)
        self.module = module
        self.device = device
        config = ctx.config
        self._types = {t.name: t.data_type for t in config.input}
        arguments = [a.name for a in module.forward.schema.arguments][1:]  # drop `self`
        self._inputs = _order([t.name for t in config.input], "input", ctx.name, arguments)
        # Without `arguments`, `_order` gives name -> position.
        self._output_positions = cast(
            "dict[str, int]", _order([t.name for t in config.output], "output", ctx.name)
        )
        self._inference_mode = parameter(config, "INFERENCE_MODE", "true").lower() in _TRUE

    def run(self, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        tensors = {n: _to_torch(a, self._types[n], self.device) for n, a in inputs.items()}
        guard = torch.inference_mode() if self._inference_mode else torch.no_grad()
        with torch_errors("PyTorch execute failure"), guard:
            if isinstance(self._inputs, list):
                result = self.module(**{n: tensors[n] for n in self._inputs if n in tensors})
            else:
                args: list[Any] = [None] * len(self._inputs)
                for name, position in self._inputs.items():
                    if position >= len(args):
                        raise InvalidArgumentError(f"input '{name}' has index {position} out of range")
                    args[position] = tensors.get(name)
                while args and args[-1] is None:  # omitted optional inputs at the end
                    args.pop()
                result = self.module(*args)
        return self._outputs_of(result, outputs)

    def _outputs_of(self, result: Any, wanted: list[str]) -> dict[str, np.ndarray]:
        if isinstance(result, dict):
            return {n: _to_numpy(result[n], n) for n in wanted if n in result}
        if isinstance(result, torch.Tensor) or (
            isinstance(result, list) and result and isinstance(result[0], str)
        ):
            result = (result,)
        if not isinstance(result, (list, tuple)):
            raise InternalError(
                f"model '{self.model_name}' returned a {type(result).__name__}; expected tensors"
            )
        produced = {}
        for name in wanted:
            position = self._output_positions[name]
            if position >= len(result):
                raise InternalError(
                    f"model '{self.model_name}' returned {len(result)} output(s), but output "
                    f"'{name}' expects index {position}"
                )
            produced[name] = _to_numpy(result[position], name)
        return produced

    def close(self) -> None:
        self.module = None


def _load(ctx: ModelContext, spec: InstanceSpec) -> PyTorchInstance:
    path = ctx.version_dir / configs.model_file(ctx.config, "pytorch")
    if not path.is_file():
        raise InvalidArgumentError(f"unable to find '{path}' for model '{ctx.name}' version {ctx.version}")
    device = _device(ctx, spec)
    _configure_threads(ctx.config)
    with torch_errors(f"failed to load model '{ctx.name}'", InvalidArgumentError):
        module = torch.jit.load(str(path), map_location=device)
        module.eval()
    if parameter(ctx.config, "DISABLE_OPTIMIZED_EXECUTION").lower() in _TRUE:
        torch._C._set_graph_executor_optimize(False)
    return PyTorchInstance(ctx, spec, module, device)


class PyTorchBackend(Backend):
    name = "pytorch"

    async def create_instance(self, ctx: ModelContext, spec: InstanceSpec) -> ModelInstance:
        if not ctx.config.input or not ctx.config.output:
            raise InvalidArgumentError(
                f"model '{ctx.name}' must list its inputs and outputs in config.pbtxt: TorchScript "
                "files do not carry a signature the server could complete them from"
            )
        return await asyncio.to_thread(_load, ctx, spec)
