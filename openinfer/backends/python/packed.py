"""The hot-path messages (`Execute`, `Executed`, `Respond`, `Cancel`) without pickle.

Pickling a one-request `Execute` costs about 40 µs and unpickling it 20 µs, nearly all of it in
numpy's reduce protocol and in looking up the named-tuple classes; the same message as a
`marshal`-ed tuple of builtins with the tensor bytes appended raw costs a few µs each way. So a
hot message travels as: a tag byte, the `marshal` length, the `marshal`-ed builtins (each tensor
as name, datatype, shape, dtype and where its bytes are), then the small tensors' bytes back to
back. A tensor of `SHM_THRESHOLD` bytes or more goes through the shared ring as before and its
descriptor takes the place of the byte count.

`marshal` format 4 is read by every Python since 3.4, so a worker on another interpreter (an
execution environment) reads it too. A message this codec cannot carry (a BYTES or BF16 tensor,
a parameter value that is not a builtin) raises `Unpackable` and is pickled instead.
"""

from __future__ import annotations

import marshal
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from .wire import Cancel, Execute, Executed, Respond, WireRequest, WireResponse

_LENGTH = struct.Struct("<I")
_NUMERIC = frozenset("biufc")  # bool, signed, unsigned, float, complex: raw bytes are the values
_EXECUTE, _EXECUTED, _RESPOND, _CANCEL = 1, 2, 3, 4


class Unpackable(Exception):
    """The message holds something only pickle carries."""


#: What parameters may hold: marshal would turn anything with a buffer (a numpy scalar) into
#: bytes without a word, so every value is checked to be one of these exactly.
_PLAIN = frozenset({str, int, float, bool})

_NAMES: dict[np.dtype, str] = {}
_DTYPES: dict[str, np.dtype] = {}


def _dtype_name(dtype: np.dtype) -> str:
    name = _NAMES.get(dtype)
    if name is None:
        if dtype.kind not in _NUMERIC:
            raise Unpackable(str(dtype))
        name = _NAMES[dtype] = dtype.str
    return name


def _dtype(name: str) -> np.dtype:
    dtype = _DTYPES.get(name)
    if dtype is None:
        dtype = _DTYPES[name] = np.dtype(name)
    return dtype


def _plain(value: Any) -> Any:
    if type(value) not in _PLAIN:
        raise Unpackable(repr(value))
    return value


def _parameters(parameters: dict) -> dict:
    if parameters:
        if type(parameters) is not dict:
            raise Unpackable("parameters")
        for key, value in parameters.items():
            if type(key) is not str or type(value) not in _PLAIN:
                raise Unpackable(f"parameter {key!r}")
    return parameters


class _Packer:
    """Collects one message's tensor bytes: small ones inline, large ones through `put_large`."""

    __slots__ = ("chunks", "echo", "put_large", "threshold")

    def __init__(self, put_large: Callable[[memoryview], str | None], threshold: int,
                 echo: Callable[[np.ndarray], str | None] | None = None) -> None:
        self.chunks: list[Any] = []
        self.put_large, self.threshold, self.echo = put_large, threshold, echo

    def tensors(self, tensors: list) -> list:
        out = []
        for name, datatype, array in tensors:
            if type(array) is not np.ndarray:
                raise Unpackable(name)
            dtype = _dtype_name(array.dtype)
            if datatype == "BF16":
                raise Unpackable(name)
            size = array.nbytes
            if size < self.threshold:
                self.chunks.append(array.tobytes())  # C order, whatever the array's strides
                where: int | str | None = size
            else:
                where = self.echo(array) if self.echo is not None else None
                if where is None:
                    if not array.flags.c_contiguous:
                        array = np.ascontiguousarray(array)
                    raw = memoryview(array.reshape(-1)).cast("B")
                    where = self.put_large(raw)
                    if where is None:  # no room in shared memory: inline after all
                        self.chunks.append(raw)
                        where = size
            out.append((name, datatype, array.shape, dtype, where))
        return out

    def response(self, response: WireResponse | None) -> tuple | None:
        if response is None:
            return None
        return (self.tensors(response.outputs), _parameters(response.parameters), response.error)


def pack(message: Any, put_large: Callable[[memoryview], str | None], threshold: int,
         echo: Callable[[np.ndarray], str | None] | None = None) -> list[Any] | None:
    """The message's packed parts (to be joined), or None for a type this codec does not carry.
    `echo` names where a large tensor already lies on the other side (None: it is copied);
    `put_large` where a large one was put (None: it travels inline, as a small one does)."""
    kind = type(message)
    packer = _Packer(put_large, threshold, echo if kind is Executed else None)
    if kind is Execute:
        body: tuple = (_EXECUTE, message.batch_id, [
            (r.key, r.model_name, r.model_version, r.id, packer.tensors(r.inputs), r.outputs,
             _parameters(r.parameters), _plain(r.correlation_id), r.flags, r.timeout, r.trace)
            for r in message.requests
        ])
    elif kind is Executed:
        responses = message.responses
        body = (_EXECUTED, message.batch_id,
                None if responses is None else [packer.response(r) for r in responses],
                message.timing, message.rescheduled, message.error)
    elif kind is Respond:
        body = (_RESPOND, message.key, packer.response(message.response), message.final)
    elif kind is Cancel:
        body = (_CANCEL, message.keys)
    else:
        return None
    try:
        meta = marshal.dumps(body, 4)
    except ValueError:  # something else that is not a builtin (the parameters are checked)
        raise Unpackable("not builtins") from None
    return [_LENGTH.pack(len(meta)), meta, *packer.chunks]


class _Unpacker:
    __slots__ = ("data", "offset", "take_large")

    def __init__(self, data: memoryview, offset: int, take_large: Callable[[str, np.dtype, tuple], np.ndarray]) -> None:
        self.data, self.offset, self.take_large = data, offset, take_large

    def tensors(self, packed: list) -> list:
        out = []
        for name, datatype, shape, dtype, where in packed:
            dtype = _dtype(dtype)
            if type(where) is int:
                start = self.offset
                self.offset = start + where
                buffer = bytearray(self.data[start : self.offset])  # writable, as pickle gave
                out.append((name, datatype, np.ndarray(shape, dtype, buffer)))
            else:
                out.append((name, datatype, self.take_large(where, dtype, shape)))
        return out

    def response(self, packed: tuple | None) -> WireResponse | None:
        if packed is None:
            return None
        outputs, parameters, error = packed
        return WireResponse(self.tensors(outputs), parameters, tuple(error) if error is not None else None)


def unpack(data: memoryview, take_large: Callable[[str, np.dtype, tuple], np.ndarray]) -> Any:
    """The message `pack` wrote (`data` starts at its marshal length)."""
    (length,) = _LENGTH.unpack_from(data, 0)
    body = marshal.loads(data[_LENGTH.size : _LENGTH.size + length])
    unpacker = _Unpacker(data, _LENGTH.size + length, take_large)
    tag = body[0]
    if tag == _EXECUTE:
        return Execute(body[1], [
            WireRequest(key, model, version, id_, unpacker.tensors(inputs), outputs, parameters,
                        correlation, flags, timeout, trace)
            for key, model, version, id_, inputs, outputs, parameters, correlation, flags, timeout, trace in body[2]
        ])
    if tag == _EXECUTED:
        responses = body[2]
        return Executed(body[1], None if responses is None else [unpacker.response(r) for r in responses],
                        body[3], body[4], body[5])
    if tag == _RESPOND:
        return Respond(body[1], unpacker.response(body[2]), body[3])
    if tag == _CANCEL:
        return Cancel(body[1])
    raise EOFError(f"unknown packed message tag {tag}")
