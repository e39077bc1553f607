"""The one datatype table: protocol string <-> numpy <-> config TYPE_* <-> element size.

BYTES tensors live in memory as numpy object arrays of `bytes`; on the wire they are
length-prefixed (4-byte little-endian length, then the bytes), one element after another.
BF16 has no numpy type, so its tensors are held as uint16 bit patterns.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

from .errors import InvalidArgumentError, request_label


class DataType(NamedTuple):
    name: str  # protocol string, e.g. "FP32"
    config_name: str  # model config enum name, e.g. "TYPE_FP32"
    numpy: np.dtype  # in-memory dtype
    size: int  # bytes per element, 0 = variable (BYTES)


def _dt(name: str, config: str, np_type: type[np.generic], size: int) -> DataType:
    return DataType(name, config, np.dtype(np_type), size)


DATATYPES: dict[str, DataType] = {
    d.name: d
    for d in (
        _dt("BOOL", "TYPE_BOOL", np.bool_, 1),
        _dt("UINT8", "TYPE_UINT8", np.uint8, 1),
        _dt("UINT16", "TYPE_UINT16", np.uint16, 2),
        _dt("UINT32", "TYPE_UINT32", np.uint32, 4),
        _dt("UINT64", "TYPE_UINT64", np.uint64, 8),
        _dt("INT8", "TYPE_INT8", np.int8, 1),
        _dt("INT16", "TYPE_INT16", np.int16, 2),
        _dt("INT32", "TYPE_INT32", np.int32, 4),
        _dt("INT64", "TYPE_INT64", np.int64, 8),
        _dt("FP16", "TYPE_FP16", np.float16, 2),
        _dt("FP32", "TYPE_FP32", np.float32, 4),
        _dt("FP64", "TYPE_FP64", np.float64, 8),
        _dt("BYTES", "TYPE_STRING", np.object_, 0),
        _dt("BF16", "TYPE_BF16", np.uint16, 2),
    )
}
BY_CONFIG_NAME: dict[str, DataType] = {d.config_name: d for d in DATATYPES.values()}
_BY_NUMPY: dict[np.dtype, str] = {
    np.dtype(np.bool_): "BOOL",
    np.dtype(np.uint8): "UINT8",
    np.dtype(np.uint16): "UINT16",
    np.dtype(np.uint32): "UINT32",
    np.dtype(np.uint64): "UINT64",
    np.dtype(np.int8): "INT8",
    np.dtype(np.int16): "INT16",
    np.dtype(np.int32): "INT32",
    np.dtype(np.int64): "INT64",
    np.dtype(np.float16): "FP16",
    np.dtype(np.float32): "FP32",
    np.dtype(np.float64): "FP64",
    np.dtype(np.object_): "BYTES",
}


def lookup(name: str) -> DataType:
    """The datatype for a protocol string; unknown strings are a request error."""
    try:
        return DATATYPES[name]
    except (KeyError, TypeError):
        raise InvalidArgumentError(f"invalid datatype '{name}'") from None


def config_to_protocol(config_name: str) -> str:
    """`TYPE_STRING` -> `BYTES`, `TYPE_FP32` -> `FP32`."""
    return BY_CONFIG_NAME[config_name].name


def protocol_of_array(array: np.ndarray) -> str:
    """The protocol datatype a numpy array would be sent as."""
    kind = array.dtype
    name = _BY_NUMPY.get(kind)
    if name is not None:
        return name
    if kind.kind in ("S", "U"):
        return "BYTES"
    raise InvalidArgumentError(f"unsupported numpy dtype '{kind}'")


def element_count(shape: tuple[int, ...] | list[int]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count


_LEN = struct.Struct("<I")


def deserialize_bytes(buffer: bytes | memoryview, count: int, *, name: str = "") -> np.ndarray:
    """Split a length-prefixed BYTES buffer into `count` elements, checking every prefix."""
    view = memoryview(buffer)
    offset, total = 0, len(view)
    if count * 4 > total:  # every element needs its 4-byte prefix: refuse before allocating
        raise InvalidArgumentError(
            f"incomplete string length indicator for inference input '{name}': {count} elements "
            f"need at least {count * 4} bytes, but only {total} bytes available"
        )
    out = np.empty(count, dtype=np.object_)
    for i in range(count):
        if offset + 4 > total:
            raise InvalidArgumentError(
                f"incomplete string length indicator for inference input '{name}', "
                f"expecting 4 bytes but only {total - offset} bytes available"
            )
        (length,) = _LEN.unpack_from(view, offset)
        offset += 4
        if offset + length > total:
            raise InvalidArgumentError(
                f"incomplete string for inference input '{name}', expecting string of length "
                f"{length} but only {total - offset} bytes available"
            )
        out[i] = bytes(view[offset : offset + length])
        offset += length
    if offset != total:
        raise InvalidArgumentError(
            f"unexpected number of string elements {count + 1} for inference input '{name}', "
            f"expecting {count}"
        )
    return out


def _as_bytes(item: object) -> bytes:
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode("utf-8")
    if isinstance(item, (bytearray, memoryview, np.bytes_)):
        return bytes(item)
    return str(item).encode("utf-8")


def serialize_bytes(array: np.ndarray) -> bytes:
    """Length-prefix every element of a BYTES tensor, row-major."""
    parts: list[bytes] = []
    for item in array.reshape(-1):
        data = _as_bytes(item)
        parts.append(_LEN.pack(len(data)))
        parts.append(data)
    return b"".join(parts)


def to_bytes_array(array: np.ndarray) -> np.ndarray:
    """Normalise str/bytes numpy arrays into an object array of `bytes`."""
    if array.dtype == np.object_ and all(isinstance(x, bytes) for x in array.reshape(-1)):
        return array
    flat = np.empty(array.size, dtype=np.object_)
    for i, item in enumerate(array.reshape(-1)):
        flat[i] = _as_bytes(item)
    return flat.reshape(array.shape)


def tensor_byte_size(array: np.ndarray, datatype: str) -> int:
    """Bytes the tensor occupies in its binary wire form."""
    if datatype == "BYTES":
        return sum(4 + len(_as_bytes(x)) for x in array.reshape(-1))
    return int(array.nbytes)


def _little_endian(array: np.ndarray) -> np.ndarray:
    return array.astype(array.dtype.newbyteorder("<")) if array.dtype.byteorder == ">" else array


def to_wire_bytes(array: np.ndarray, datatype: str) -> bytes | memoryview:
    """The binary wire form of a tensor (little-endian, row-major)."""
    if datatype == "BYTES":
        return serialize_bytes(array)
    array = _little_endian(array if array.flags.c_contiguous else np.ascontiguousarray(array))
    return array.data.cast("B") if array.size else b""


def to_wire_copy(array: np.ndarray, datatype: str) -> bytes:
    """The binary wire form as a bytes object of its own (what a protobuf field takes)."""
    if datatype == "BYTES":
        return serialize_bytes(array)
    return _little_endian(array).tobytes()  # row-major, whatever the array's own layout


def byte_size_mismatch(name: str, model: str, expected: int, got: int, request_id: str = "") -> InvalidArgumentError:
    """Triton's refusal of a tensor whose data does not fill its shape (or overfills it)."""
    return InvalidArgumentError(
        f"{request_label(request_id)}input byte size mismatch for input '{name}' for model '{model}'. "
        f"Expected {expected}, got {got}"
    )


def from_wire_bytes(
    buffer: bytes | memoryview | bytearray,
    datatype: str,
    shape: tuple[int, ...],
    *,
    name: str = "",
    model: str = "",
    request_id: str = "",
) -> np.ndarray:
    """A numpy view (zero-copy where alignment allows) over a tensor's binary wire form."""
    dt = lookup(datatype)
    count = element_count(shape)
    if dt.size == 0:
        return deserialize_bytes(buffer, count, name=name).reshape(shape)
    expected = count * dt.size
    if len(buffer) != expected:
        raise byte_size_mismatch(name, model, expected, len(buffer), request_id)
    # One constructor call for the view and its shape: half of frombuffer-then-reshape.
    array = np.ndarray(shape, dt.numpy, buffer)
    if count and type(buffer) is not bytes and not array.flags.aligned:  # bytes' data is aligned
        array = array.copy()  # misaligned (e.g. after an odd-length JSON header): one aligned copy
    return array
