"""JSON-ish values <-> core tensors shaped for a model's declared inputs.

Shared by the OpenAI frontend and the KServe `generate` routes: a scalar becomes one element in
whatever rank the model declares (`[1]`, `[1,1]` with a batch dimension), a list fills the
variable dimension, and BYTES take text (objects are sent as their JSON text).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..core import datatypes
from ..core.errors import InvalidArgumentError
from ..core.types import InferResponse, Tensor


def _element(value: Any, datatype: str) -> Any:
    if datatype == "BYTES":
        if isinstance(value, bytes):
            return value
        if isinstance(value, str):
            return value.encode("utf-8")
        return json.dumps(value, ensure_ascii=False).encode("utf-8")
    return value


def make_tensor(name: str, datatype: str, dims: tuple[int, ...], batched: bool, value: Any) -> Tensor:
    """A tensor for input `name` holding `value` (a scalar or a flat list)."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if datatype == "BYTES":
        array = np.empty(len(values), dtype=np.object_)
        for i, item in enumerate(values):
            array[i] = _element(item, datatype)
    else:
        try:
            array = np.asarray(values, dtype=datatypes.lookup(datatype).numpy)
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidArgumentError(f"input '{name}' expects {datatype} values: {exc}") from None
    count = len(values)
    shape = [1] * max(len(dims), 1)
    if count != 1:
        variable = [i for i, d in enumerate(dims) if d == -1]
        position = variable[0] if variable else len(shape) - 1
        shape[position] = count
    if batched:
        shape = [1, *shape]
    return Tensor(name, datatype, tuple(shape), array.reshape(shape))


def output_array(response: InferResponse, name: str) -> np.ndarray | None:
    for tensor in response.outputs:
        if tensor.name == name:
            return tensor.data
    return None


def as_text(item: Any) -> str:
    if isinstance(item, (bytes, bytearray, memoryview)):
        return bytes(item).decode("utf-8", errors="replace")
    return str(item)


def texts(array: np.ndarray) -> list[str]:
    return [as_text(item) for item in array.reshape(-1)]


def first_int(array: np.ndarray | None) -> int | None:
    if array is None or array.size == 0:
        return None
    return int(array.reshape(-1)[0])


def json_value(array: np.ndarray) -> Any:
    """An output as JSON: one element -> a scalar, several -> a list (text for BYTES)."""
    flat = array.reshape(-1)
    if array.dtype == np.object_:
        values: list[Any] = [as_text(item) for item in flat]
    else:
        values = flat.tolist()
    return values[0] if len(values) == 1 else values
