"""Response validation shared by every transport.

A response counts only if it is a success and carries every output the model declares, each with
a size consistent with its datatype and shape; when the input file has ``validation_data``, the
values must match too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .tensors import NUMPY, Tensor, TensorSpec, deserialize_bytes


class ValidationError(ValueError):
    """A response that must not be counted; the message says what was wrong."""


@dataclass
class Received:
    """One output as it came back: raw bytes (binary, gRPC, shared memory), or its JSON `data`
    (a list, or a flat numpy array when a large body was parsed straight into numpy)."""

    name: str
    datatype: str
    shape: list[int]
    raw: bytes | memoryview | None = None
    data: list[Any] | np.ndarray | None = None


def nbytes(rec: Received) -> int:
    """Bytes a fixed-width output of this shape occupies (shared memory reads)."""
    return _count(rec.shape) * np.dtype(NUMPY[rec.datatype]).itemsize


def _count(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _as_array(r: Received) -> np.ndarray:
    if r.datatype == "BYTES":
        if r.raw is not None:
            return np.array(deserialize_bytes(bytes(r.raw)), dtype=np.object_)
        vals = [v.encode() if isinstance(v, str) else v for v in (r.data or [])]
        return np.array(vals, dtype=np.object_)
    dtype = np.dtype(NUMPY[r.datatype])
    if r.raw is not None:
        return np.frombuffer(r.raw, dtype=dtype.newbyteorder("<"))
    return np.asarray(r.data, dtype=dtype).reshape(-1)


def check(
    outputs: list[Received],
    specs: list[TensorSpec],
    expected: list[Tensor] | None,
) -> None:
    """Raise :class:`ValidationError` unless ``outputs`` is a valid answer."""
    by_name = {o.name: o for o in outputs}
    for spec in specs:
        got = by_name.get(spec.name)
        if got is None:
            raise ValidationError(f"output {spec.name!r} missing from the response")
        if spec.datatype and got.datatype != spec.datatype:
            raise ValidationError(
                f"output {spec.name!r}: datatype {got.datatype}, model says {spec.datatype}"
            )
        n = _count(got.shape)
        if got.datatype != "BYTES":
            size = np.dtype(NUMPY[got.datatype]).itemsize
            if got.raw is not None:
                have = len(got.raw) // size
            else:
                have = len(got.data) if got.data is not None else 0
            if have != n:
                raise ValidationError(
                    f"output {spec.name!r}: shape {got.shape} but {have} elements"
                )
    for exp in expected or []:
        got = by_name.get(exp.name)
        if got is None:
            raise ValidationError(f"output {exp.name!r} missing from the response")
        # Fast paths first: identical bytes, or JSON numbers as a server spells them, need no
        # numpy (`np.allclose` costs a checked small answer about 80 µs more under load, which a
        # load generator must not charge one server's spelling and not another's).
        if got.raw is not None and bytes(got.raw) == exp.raw_cached:
            continue
        if type(got.data) is list and any(got.data == spelled for spelled in exp.json_spellings):
            continue
        want = exp.array.reshape(-1)
        have = _as_array(got)
        if have.shape != want.shape:
            raise ValidationError(
                f"output {exp.name!r}: {have.size} elements, expected {want.size}"
            )
        if want.dtype.kind == "f":
            ok = np.allclose(have.astype(np.float64), want.astype(np.float64), rtol=1e-6,
                             atol=0, equal_nan=True)
        else:
            ok = bool(np.array_equal(have, want))
        if not ok:
            raise ValidationError(f"output {exp.name!r} differs from validation_data")
