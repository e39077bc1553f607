"""Large v2 infer bodies: numeric `data` arrays parsed straight into numpy.

orjson turns a JSON array of 65,536 numbers into as many Python floats, and numpy then reads
them back one by one; together that is most of the cost of a large JSON request. simdjson parses
lazily, so the document's small parts become Python objects while each tensor's numeric `data`
array is copied into a typed buffer without a Python object per element. The server reads
requests (`inputs`) this way; the load generator reads responses (`outputs`) the same way.

Anything unusual (a parse error, NaN tokens, booleans or strings in a numeric array, numbers
out of range) falls back to the ordinary parse, so errors read exactly as they always do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:
    import simdjson
except ImportError:  # optional speed-up; the orjson path serves every request without it
    simdjson = None  # type: ignore[assignment]

# Below this size orjson alone is faster than building simdjson's proxies.
MIN_BODY_BYTES = 32 * 1024

_FLOAT_TYPES = frozenset({"FP32", "FP64"})
_SIGNED_TYPES = frozenset({"INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32"})
_BUFFER_TYPES = {"d": np.float64, "i": np.int64, "u": np.uint64}


def parse(body: bytes | memoryview, tensors: str = "inputs") -> Any | None:
    """The parsed document with the numeric data of its `tensors` list (`inputs` of a request,
    `outputs` of a response) as flat numpy arrays, or None to fall back."""
    if simdjson is None or len(body) < MIN_BODY_BYTES:
        return None
    try:
        root = simdjson.Parser().parse(body)
    except (ValueError, RuntimeError):
        return None
    if not isinstance(root, simdjson.Object):
        return None
    # `items()` would turn every value into Python objects at once; look each key up instead.
    return {key: _tensors(root[key]) if key == tensors else _plain(root[key]) for key in root.keys()}


def _plain(value: Any) -> Any:
    if isinstance(value, simdjson.Object):
        return value.as_dict()
    if isinstance(value, simdjson.Array):
        return value.as_list()
    return value


def _tensors(value: Any) -> Any:
    if not isinstance(value, simdjson.Array):
        return _plain(value)
    return [_tensor(item) if isinstance(item, simdjson.Object) else _plain(item) for item in value]


def _tensor(item: Any) -> dict[str, Any]:
    datatype = item.get("datatype")
    out = {}
    for key in item.keys():
        value = item[key]
        if key == "data" and isinstance(value, simdjson.Array):
            out[key] = _numeric(value, datatype)
        else:
            out[key] = _plain(value)
    return out


def _numeric(array: Any, datatype: Any) -> Any:
    """A flat numpy array for a numeric tensor; the plain list whenever simdjson declines."""
    if datatype in _FLOAT_TYPES:
        kind = "d"
    elif datatype in _SIGNED_TYPES:
        kind = "i"
    elif datatype == "UINT64":
        kind = "u"
    else:
        return array.as_list()
    try:
        buffer = array.as_buffer(of_type=kind)
    except (TypeError, ValueError):
        return array.as_list()
    return np.frombuffer(buffer, dtype=_BUFFER_TYPES[kind])
