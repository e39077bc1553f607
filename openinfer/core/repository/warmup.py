"""Model warm-up: the config's `model_warmup` samples run on every instance before READY.

Each sample names its inputs with zero data, random data or the contents of a file under
`<model>/warmup/`; `batch_size` (for batching models) stacks the sample that many times (a
sample of batch size 0, the default, is skipped, as Triton skips it) and `count` repeats it.
Samples go straight to each instance, bypassing the scheduler, so warm-up never shows in the
statistics. A failing sample fails the load with Triton's message.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ..._proto import model_config_pb2 as mc
from .. import datatypes
from ..backend import ModelInstance
from ..errors import InvalidArgumentError, OpenInferError
from ..model import LoadedModel
from ..requests.responses import StreamSender, UnarySender
from ..types import InferRequest, Tensor

log = logging.getLogger("openinfer.warmup")


def _sample_array(
    model: LoadedModel, name: str, spec: mc.ModelWarmup.Input, batch: int
) -> tuple[str, tuple[int, ...], np.ndarray]:
    dt = datatypes.BY_CONFIG_NAME[mc.DataType.Name(spec.data_type)]
    dims = tuple(int(d) for d in spec.dims)
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"warmup input '{name}' must have fixed dims, got {list(dims)}")
    count = datatypes.element_count(dims)
    which = spec.WhichOneof("input_data_type")
    if which == "input_data_file":
        path = Path(model.ctx.model_dir) / "warmup" / spec.input_data_file
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise InvalidArgumentError(f"unable to read warmup data file '{path}': {exc.strerror}") from None
        if dt.size == 0:
            sample = datatypes.deserialize_bytes(_prefix_of(raw, count, path), count, name=name)
        else:
            needed = count * dt.size
            if len(raw) < needed:
                raise InvalidArgumentError(
                    f"warmup setting expects {needed} bytes, but the data provided from "
                    f"{spec.input_data_file} only has {len(raw)} bytes"
                )
            sample = np.frombuffer(raw[:needed], dtype=dt.numpy).copy()
    elif which == "random_data" and dt.size != 0:
        sample = _random(dt.numpy, count)
    else:  # zero data; BYTES samples are empty strings, random ones too (as Triton does)
        sample = np.array([b""] * count, dtype=np.object_) if dt.size == 0 else np.zeros(count, dt.numpy)
    sample = sample.reshape(dims)
    if model.max_batch_size > 0:
        shape = (batch, *dims)
        array = np.broadcast_to(sample, shape).copy() if dt.size else np.stack([sample] * batch)
        return dt.name, shape, array
    return dt.name, dims, sample


def _prefix_of(raw: bytes, count: int, path: Path) -> bytes:
    """The first `count` length-prefixed strings of a warm-up file."""
    offset = 0
    for _ in range(count):
        if offset + 4 > len(raw):
            raise InvalidArgumentError(f"warmup data file '{path}' holds fewer than {count} strings")
        offset += 4 + int.from_bytes(raw[offset : offset + 4], "little")
    return raw[:offset]


def _random(dtype: np.dtype, count: int) -> np.ndarray:
    rng = np.random.default_rng()
    if dtype.kind == "f":
        return rng.random(count).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, count).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -128), min(info.max, 127), count, endpoint=True).astype(dtype)


def _samples(model: LoadedModel, sample: mc.ModelWarmup) -> tuple[list[Tensor], list[Tensor]]:
    """The sample's tensors: those the config declares, and the others."""
    batch = int(sample.batch_size)
    declared: list[Tensor] = []
    undeclared: list[Tensor] = []
    for name, spec in sample.inputs.items():
        datatype, shape, array = _sample_array(model, name, spec, batch)
        (declared if name in model.inputs else undeclared).append(Tensor(name, datatype, shape, array))
    return declared, undeclared


def _request(model: LoadedModel, declared: list[Tensor], undeclared: list[Tensor]) -> InferRequest:
    """Inputs the config declares are checked as a client's are, in Triton's words; the others
    (a sequence batcher's control or state inputs, say) reach the model unchecked, as in Triton.
    Like Triton's, the request has no id."""
    request = InferRequest(model_name=model.name, model_version=model.version_str)
    request.inputs = list(declared)
    model.validate(request)
    request.inputs = [*request.inputs, *undeclared]
    return request


async def _run_once(model: LoadedModel, instance: ModelInstance, request: InferRequest) -> None:
    if model.decoupled:
        stream = StreamSender(request)
        await instance.execute([request], [stream])
        async for response in stream:
            if response.error is not None:
                raise response.error
        return
    sender = UnarySender(request)
    await instance.execute([request], [sender])
    response = await sender.future
    if response.error is not None:
        raise response.error


async def run_warmup(model: LoadedModel) -> None:
    """Run every warm-up sample `count` times (at least once) on every instance. A sample the
    request checks refuse fails the load with the check's message alone, as in Triton; other
    failures name the sample."""
    for sample in model.config.model_warmup:
        if sample.batch_size == 0:  # Triton skips a sample of batch size 0 (the field's default)
            log.debug("skipping warmup sample '%s' of model '%s': its batch_size is 0", sample.name, model.name)
            continue
        try:
            declared, undeclared = _samples(model, sample)
        except OpenInferError as exc:
            raise InvalidArgumentError(f"failed to run warmup sample '{sample.name}': {exc.message}") from exc
        for instance in model.instances:
            for _ in range(max(int(sample.count), 1)):
                request = _request(model, declared, undeclared)
                try:
                    await _run_once(model, instance, request)
                except OpenInferError as exc:
                    raise InvalidArgumentError(f"failed to run warmup sample '{sample.name}': {exc.message}") from exc
                except Exception as exc:
                    raise InvalidArgumentError(f"failed to run warmup sample '{sample.name}': {exc}") from exc
