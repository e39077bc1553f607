"""Datatype helpers of Triton's module: config names, TRITONSERVER_DataType numbers, BYTES packing."""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from ....core import datatypes

#: `TYPE_*` config names to the numpy type a model uses for them.
TRITON_STRING_TO_NUMPY: dict[str, Any] = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}

#: TRITONSERVER_DataType numbers, in their enum's order (0 is TRITONSERVER_TYPE_INVALID).
_NUMBERED = (None, np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16,
             np.int32, np.int64, np.float16, np.float32, np.float64, np.object_)
_PROTOCOL_NAMES = (None, "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32",
                   "INT64", "FP16", "FP32", "FP64", "BYTES", "BF16")


def triton_string_to_numpy(triton_type_string: str) -> Any:
    return TRITON_STRING_TO_NUMPY[triton_type_string]


def triton_to_numpy_type(data_type: int | str) -> Any:
    """A TRITONSERVER_DataType number (or a protocol name such as "FP32") as a numpy type."""
    if isinstance(data_type, str):
        return datatypes.lookup(data_type).numpy.type
    if 0 < data_type < len(_NUMBERED):
        return _NUMBERED[data_type]
    return None


def numpy_to_triton_type(data_type: Any) -> int | None:
    """A numpy type as its TRITONSERVER_DataType number; None where Triton has none."""
    if data_type in (np.object_, np.bytes_):
        return 13
    for number, numpy_type in enumerate(_NUMBERED):
        if numpy_type is not None and data_type == numpy_type:
            return number
    return None


def protocol_name(number: int) -> str:
    return cast(str, _PROTOCOL_NAMES[number]) if 0 < number < len(_PROTOCOL_NAMES) else "INVALID"


def serialize_byte_tensor(input_tensor: np.ndarray) -> bytes | tuple | None:
    """A BYTES tensor as length-prefixed elements in row-major order, returned as Triton's
    helper returns them: `bytes`, `()` for an empty tensor, None for any other dtype."""
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype != np.object_ and input_tensor.dtype.type != np.bytes_:
        return None
    return datatypes.serialize_bytes(input_tensor)


def deserialize_bytes_tensor(encoded_tensor: bytes) -> np.ndarray:
    """The inverse of `serialize_byte_tensor`: a 1-D object array of `bytes`."""
    data = memoryview(bytes(encoded_tensor))
    out = []
    offset = 0
    while offset < len(data):
        length = int.from_bytes(data[offset : offset + 4], "little")
        offset += 4
        out.append(bytes(data[offset : offset + length]))
        offset += length
    return np.array(out, dtype=np.object_)
