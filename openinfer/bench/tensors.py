"""Input tensors for a run: shapes from metadata and ``--shape``, data from ``--input-data``.

The bench is a client of any v2 server, so it keeps its own small datatype table instead of
importing the server's: a change inside the server must not change what the bench measures.
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import orjson

NUMPY: dict[str, Any] = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BF16": np.uint16,  # bit patterns: numpy has no bfloat16
    "BYTES": np.object_,
}


@dataclass(frozen=True)
class TensorSpec:
    """A model input or output as metadata describes it (-1 = variable dimension)."""

    name: str
    datatype: str
    shape: tuple[int, ...]


@dataclass
class Tensor:
    """One concrete tensor to send (or to expect back)."""

    name: str
    datatype: str
    array: np.ndarray

    @property
    def shape(self) -> list[int]:
        return list(self.array.shape)

    def raw(self) -> bytes:
        """The v2 binary layout: little-endian, C order; BYTES length-prefixed."""
        if self.datatype == "BYTES":
            return serialize_bytes(self.array)
        return np.ascontiguousarray(self.array, dtype=self.array.dtype.newbyteorder("<")).tobytes()

    @cached_property
    def raw_cached(self) -> bytes:
        """``raw()`` computed once: validation compares every response against it."""
        return self.raw()

    @cached_property
    def json_spellings(self) -> tuple[list[Any], ...]:
        """The lists a correct JSON answer parses to, as servers write it: each FP32 or FP16
        value as its double (Triton) or as the shortest decimal of the narrow value (orjson,
        numpy). Validation takes these without numpy; any other spelling is compared with it."""
        exact = self.json_data()
        if self.datatype not in ("FP32", "FP16"):
            return (exact,)
        shortest = [float(str(v)) for v in self.array.reshape(-1)]
        return (exact,) if shortest == exact else (exact, shortest)

    def json_data(self) -> list[Any]:
        """Flat list for the JSON ``data`` field."""
        flat = self.array.reshape(-1)
        if self.datatype == "BYTES":
            return [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in flat]
        return flat.tolist()


@dataclass
class DataSet:
    """Input rows to cycle through, with the outputs each row must produce when known."""

    inputs: list[list[Tensor]]
    expected: list[list[Tensor]] = field(default_factory=list)


def serialize_bytes(array: np.ndarray) -> bytes:
    parts = []
    for v in array.reshape(-1):
        b = v if isinstance(v, bytes) else str(v).encode()
        parts.append(struct.pack("<I", len(b)) + b)
    return b"".join(parts)


def deserialize_bytes(buf: bytes) -> list[bytes]:
    out, i = [], 0
    while i < len(buf):
        (n,) = struct.unpack_from("<I", buf, i)
        out.append(bytes(buf[i + 4 : i + 4 + n]))
        i += 4 + n
    return out


def parse_shapes(items: list[str]) -> dict[str, list[int]]:
    """``--shape NAME:D1,D2`` (perf_analyzer's form) into a dict."""
    shapes: dict[str, list[int]] = {}
    for item in items:
        name, sep, dims = item.rpartition(":")
        if not sep or not name:
            raise ValueError(f"--shape expects NAME:D1,D2,..., got {item!r}")
        shapes[name] = [int(d) for d in dims.split(",") if d.strip()]
    return shapes


def resolve_shape(
    spec: TensorSpec, user: list[int] | None, batch: int, batching: bool | None
) -> list[int]:
    """The full request shape of one input.

    With a batching model (``max_batch_size > 0``) metadata shows the batch dimension as the
    first -1 and ``--shape`` gives the rest, as with perf_analyzer. When the model's config is
    not available (servers without the config extension), a ``--shape`` one shorter than the
    metadata shape is read the same way.
    """
    meta = list(spec.shape)
    if batching is None:
        batching = user is not None and len(user) == len(meta) - 1 and bool(meta) and meta[0] == -1
    rest = meta[1:] if batching else meta
    dims = list(user) if user is not None else rest
    if len(dims) != len(rest):
        raise ValueError(
            f"input {spec.name!r}: shape {dims} does not match model shape {meta}"
            + (" (batch dimension excluded)" if batching else "")
        )
    for d, m in zip(dims, rest):
        if d < 0 or (m >= 0 and d != m):
            raise ValueError(
                f"input {spec.name!r} has variable or mismatched dimensions {meta}; "
                f"pass --shape {spec.name}:D1,D2,..."
            )
    return ([batch] if batching else []) + dims


def generate(spec: TensorSpec, shape: list[int], mode: str, seed: int = 0) -> Tensor:
    """Random or zero data, the same in every worker (seeded)."""
    dtype = NUMPY[spec.datatype]
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape)) if shape else 1
    if spec.datatype == "BYTES":
        if mode == "zero":
            vals = [b"0"] * n
        else:
            vals = [str(int(x)).encode() for x in rng.integers(0, 1 << 30, n)]
        arr = np.array(vals, dtype=np.object_).reshape(shape)
    elif mode == "zero":
        arr = np.zeros(shape, dtype=dtype)
    elif spec.datatype == "BOOL":
        arr = rng.integers(0, 2, shape).astype(np.bool_)
    elif np.issubdtype(dtype, np.floating):
        arr = rng.random(shape, dtype=np.float64).astype(dtype)
    else:
        info = np.iinfo(dtype)
        arr = rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)
    return Tensor(spec.name, spec.datatype, arr)


def _tensor_from_json(spec: TensorSpec, value: Any, shape: list[int]) -> Tensor:
    dtype = NUMPY[spec.datatype]
    if isinstance(value, dict):
        if "shape" in value:
            given = list(value["shape"])
            # perf_analyzer's files leave out the batch dimension of batching models.
            shape = [shape[0]] + given if len(given) == len(shape) - 1 else given
        if "b64" in value:
            raw = base64.b64decode(value["b64"])
            if spec.datatype == "BYTES":
                arr = np.array(deserialize_bytes(raw), dtype=np.object_)
            else:
                arr = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).astype(dtype)
            return Tensor(spec.name, spec.datatype, arr.reshape(shape))
        value = value["content"]
    if spec.datatype == "BYTES":
        arr = np.array([v.encode() if isinstance(v, str) else v for v in _flatten(value)],
                       dtype=np.object_)
    else:
        arr = np.asarray(value, dtype=dtype).reshape(-1)
    if arr.size != int(np.prod(shape)):
        # A file may hold data for a variable-size input: trust its length on the last axis.
        if len(shape) >= 1 and arr.size % max(1, int(np.prod(shape[:-1]))) == 0:
            shape = shape[:-1] + [arr.size // max(1, int(np.prod(shape[:-1])))]
        else:
            raise ValueError(f"input data for {spec.name!r} has {arr.size} values, shape {shape}")
    return Tensor(spec.name, spec.datatype, arr.reshape(shape))


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, list):
        out: list[Any] = []
        for v in value:
            out.extend(_flatten(v))
        return out
    return [value]


def load_file(
    path: str | Path,
    inputs: list[TensorSpec],
    outputs: list[TensorSpec],
    shapes: dict[str, list[int]],
) -> DataSet:
    """perf_analyzer's JSON input file: ``{"data": [...], "validation_data": [...]}``.

    Each entry of ``data`` maps input names to a flat list, ``{"content": [...], "shape": [...]}``
    or ``{"b64": "..."}``; ``validation_data`` holds the outputs expected for the same entry.
    """
    doc = orjson.loads(Path(path).read_bytes())
    rows = doc.get("data") or []
    if rows and isinstance(rows[0], list):  # one list per stream: use them one after another
        rows = [r for stream in rows for r in stream]
    by_name = {s.name: s for s in inputs}
    out_by_name = {s.name: s for s in outputs}
    data = [
        [_tensor_from_json(by_name[n], v, shapes[n]) for n, v in row.items() if n in by_name]
        for row in rows
    ]
    expected = []
    for row in doc.get("validation_data") or []:
        exp = []
        for n, v in row.items():
            spec = out_by_name.get(n, TensorSpec(n, "FP32", ()))
            vals = v.get("content", v) if isinstance(v, dict) else v
            count = len(_flatten(vals)) if not (isinstance(v, dict) and "b64" in v) else -1
            shape = list(v["shape"]) if isinstance(v, dict) and "shape" in v else [count]
            exp.append(_tensor_from_json(spec, v, shape))
        expected.append(exp)
    if not data:
        raise ValueError(f"{path}: no 'data' entries")
    return DataSet(data, expected)
