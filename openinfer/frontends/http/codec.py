"""KServe v2 JSON (+ binary tensor extension) <-> core requests and responses.

The hot path: orjson for the JSON, numpy straight from the parsed lists, and binary inputs
as zero-copy views over the request body.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson

from ...core import datatypes
from ...core.errors import InvalidArgumentError
from ...core.requests.inputs import check_consumed, negative_dimension
from ...core.requests.parameters import apply_reserved
from ...core.requests.requested_outputs import requested_output
from ...core.types import InferRequest, InferResponse, RequestedOutput, Tensor
from . import bulk_json

_ONE_OF = ("data", "binary_data_size", "shared_memory_region")


def loads(body: bytes | memoryview) -> Any:
    """Parse strict JSON: a body that is not JSON is the client's mistake (400).

    Unlike Triton, the literals NaN and Infinity are refused: they are not JSON, and a value
    that came in that way would go back out as a bare token that strict clients cannot read.
    Lone surrogates and invalid UTF-8 are refused for the same reason.
    """
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidArgumentError(f"failed to parse the request JSON buffer: {_reason(body, exc)}") from None


_NO_INPUTS = "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"


def loads_object(body: bytes | memoryview) -> dict[str, Any]:
    """A body that must be a JSON object (every v2 request body is one)."""
    doc = loads(body)
    if not isinstance(doc, dict):
        raise InvalidArgumentError("failed to parse the request JSON buffer: expected a JSON object")
    return doc


class _NonFinite(ValueError):
    pass


def _refuse_constant(token: str) -> Any:
    raise _NonFinite(token)


def _reason(body: bytes | memoryview, exc: Exception) -> str:
    """orjson's reason, or a plainer one for NaN/Infinity (only on the error path)."""
    try:
        json.loads(bytes(body), parse_constant=_refuse_constant)
    except _NonFinite as token:
        return f"'{token}' is not a JSON number (NaN and Infinity are not accepted in request JSON)"
    except (ValueError, RecursionError):
        pass
    return str(exc)


def _parameters(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"Unable to parse 'parameters' of {where}: expected a JSON object")
    for key, item in value.items():
        if not isinstance(item, (str, int, float, bool)):
            raise InvalidArgumentError(
                f"parameter '{key}' of {where} has an unsupported type; expected string, number or bool"
            )
    return value


def _shape(value: Any, name: str) -> tuple[int, ...]:
    if type(value) is not list:
        raise InvalidArgumentError("Unable to parse 'shape': attempt to access JSON non-array as array")
    for d in value:  # JSON integers are exactly int (bool is a subclass, and refused)
        if type(d) is not int or d < 0:
            break
    else:
        return tuple(value)
    if type(d) is int:
        raise negative_dimension(name)
    raise InvalidArgumentError(
        "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer"
    )


#: The numpy kinds JSON values may parse to, per datatype, and the word for the error.
_JSON_KINDS = {
    "BOOL": ("b", "boolean"),
    "FP32": ("iuf", "number"),
    "FP64": ("iuf", "number"),
}
_INTEGER = ("iu", "integer")


def _mismatch(name: str, shape: tuple[int, ...], count: int) -> InvalidArgumentError:
    # Data that does not fit the declared shape or type is the client's mistake: 400, where
    # Triton answers 500. Clients such as Flink's provider retry 5xx and look for "shape".
    return InvalidArgumentError(
        f"Unable to parse 'data': Shape does not match true shape of 'data' field for input "
        f"'{name}' (shape {list(shape)} holds {count} elements)"
    )


#: Triton's bound on the nesting of a tensor's JSON `data`.
_MAX_JSON_DEPTH = 100


def _json_data(data: Any, datatype: str, shape: tuple[int, ...], name: str, model: str) -> np.ndarray:
    try:
        return _json_array(data, datatype, shape, name, model)
    except InvalidArgumentError:
        depth, inner = 0, data
        while type(inner) is list and inner and depth < _MAX_JSON_DEPTH:  # measured on failure only
            inner, depth = inner[0], depth + 1
        if depth >= _MAX_JSON_DEPTH:
            raise InvalidArgumentError(
                f"JSON nesting depth exceeds maximum allowed limit ({_MAX_JSON_DEPTH})"
            ) from None
        raise


def _holds_no_values(data: Any) -> bool:
    """Whether `data` is null, or lists holding only nulls and lists of them: what a client
    sends for an empty tensor (Flink's provider writes a NULL array row as `[null]`)."""
    pending = [data]
    while pending:
        item = pending.pop()
        if type(item) is list:
            pending.extend(item)
        elif item is not None:
            return False
    return True


def _json_array(data: Any, datatype: str, shape: tuple[int, ...], name: str, model: str) -> np.ndarray:
    dt = datatypes.lookup(datatype)
    count = datatypes.element_count(shape)
    if count == 0 and type(data) is not np.ndarray and _holds_no_values(data):
        return np.empty(shape, dt.numpy)  # an empty tensor: no value was sent, none is dropped
    if datatype == "BYTES":
        return _json_bytes(data, shape, count, name)
    if datatype in ("FP16", "BF16"):
        raise InvalidArgumentError(
            f"receiving {datatype} data via JSON is not supported. Please use the binary data format "
            f"for input {name}"
        )
    try:
        if type(data) is np.ndarray:
            array = data
        else:
            array = np.array(data if type(data) is list else [data])
        if array.size != count:
            raise _mismatch(name, shape, count)
        kind = array.dtype.kind
        if datatype == "UINT64" and kind in "fO":
            array, kind = _uint64_array(data), "u"  # values past int64 make numpy pick float64
        if count:
            kinds, expected = _JSON_KINDS.get(datatype, _INTEGER)
            if kind not in kinds:
                raise InvalidArgumentError(f"attempt to access JSON non-{expected} as {expected} in input '{name}'")
        if array.dtype != dt.numpy:
            array = array.astype(dt.numpy)
        return array.reshape(shape)
    except (ValueError, TypeError, OverflowError):
        raise _mismatch(name, shape, count) from None


def _json_bytes(data: Any, shape: tuple[int, ...], count: int, name: str) -> np.ndarray:
    try:
        flat = np.array(data if isinstance(data, (list, np.ndarray)) else [data], dtype=np.object_).reshape(-1)
    except (ValueError, TypeError):
        raise _mismatch(name, shape, count) from None
    if flat.size != count:
        raise _mismatch(name, shape, count)
    out = np.empty(flat.size, dtype=np.object_)
    for i, item in enumerate(flat):
        if not isinstance(item, str):
            raise InvalidArgumentError(f"attempt to access JSON non-string as string in input '{name}'")
        out[i] = item.encode("utf-8")
    return out.reshape(shape)


def _uint64_array(data: list) -> np.ndarray:
    flat = np.array(data, dtype=np.object_).reshape(-1)
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in flat):
        raise InvalidArgumentError("attempt to access JSON non-unsigned-integer as unsigned-integer")
    return np.array(flat.tolist(), dtype=np.uint64)


def decode_request(
    body: bytes | memoryview,
    header_length: int | None,
    model_name: str,
    model_version: str,
) -> tuple[InferRequest, bool]:
    """A core request from an infer body; also returns the `binary_data_output` default.

    An input in shared memory is left without data (its parameters name the region): the core
    reads it when it admits the request."""
    view = memoryview(body)
    json_part = view if header_length is None else view[:header_length]
    doc = bulk_json.parse(json_part)
    if doc is None:
        doc = loads(json_part)
    if not isinstance(doc, dict):  # Triton looks for 'inputs' in it
        raise InvalidArgumentError(_NO_INPUTS)
    request = InferRequest(model_name=model_name, model_version=model_version)
    rid = doc.get("id")
    if rid is not None:
        if not isinstance(rid, str):
            raise InvalidArgumentError("Unable to parse 'id': attempt to access JSON non-string as string")
        request.id = rid
    try:
        return _decode_fields(doc, view, header_length, model_name, request)
    except InvalidArgumentError as exc:
        exc.request_id = rid  # for the failed request's log line
        raise


def _decode_fields(
    doc: dict, view: memoryview, header_length: int | None, model_name: str, request: InferRequest
) -> tuple[InferRequest, bool]:
    """Everything of an infer body after its id."""
    binary_default = False
    if "parameters" in doc:
        params = dict(_parameters(doc["parameters"], "the request"))
        binary_default = params.pop("binary_data_output", False)
        if not isinstance(binary_default, bool):
            raise InvalidArgumentError(
                "Unable to parse 'binary_data_output': attempt to access JSON non-boolean as boolean")
        request.parameters = params
        apply_reserved(request)

    inputs = doc.get("inputs")
    if not isinstance(inputs, list):
        raise InvalidArgumentError(_NO_INPUTS if inputs is None else "Unable to parse 'inputs': attempt to access JSON "
                                   "non-array as array")
    offset = header_length or 0
    for item in inputs:
        tensor, offset = _decode_input(item, view, offset, header_length, model_name, request.id)
        request.inputs.append(tensor)
    if header_length is not None:
        check_consumed(offset, len(view), model_name)

    outputs = doc.get("outputs")
    if outputs is not None:
        if not isinstance(outputs, list):
            raise InvalidArgumentError("Unable to parse 'outputs': expected a JSON array")
        if outputs:  # an empty list asks for nothing in particular: every output, as in Triton
            request.outputs = [_requested_output(o) for o in outputs]
    return request, binary_default


def _decode_input(
    item: Any, view: memoryview, offset: int, header_length: int | None, model_name: str, request_id: str
) -> tuple[Tensor, int]:
    """One element of `inputs`, and where the next binary input starts in the body."""
    if not isinstance(item, dict):
        raise InvalidArgumentError("Unable to parse 'inputs': expected JSON objects")
    name = item.get("name")
    datatype = item.get("datatype")
    if not isinstance(name, str):
        raise InvalidArgumentError("Unable to parse 'name': attempt to access JSON non-string as string")
    if not isinstance(datatype, str):
        raise InvalidArgumentError("Unable to parse 'datatype': attempt to access JSON non-string as string")
    if datatype not in datatypes.DATATYPES:
        raise InvalidArgumentError(f"invalid datatype for input {name}")
    shape = _shape(item.get("shape"), name)
    tparams = _parameters(item["parameters"], f"input '{name}'") if "parameters" in item else {}
    if tparams:
        present = [k for k in _ONE_OF if (k in item if k == "data" else k in tparams)]
    else:
        present = ["data"] if "data" in item else []
    if len(present) != 1:
        got = "But no field is set" if not present else "But set " + " ".join(f"'{p}'" for p in present)
        raise InvalidArgumentError(
            "Input must set only one of the following fields: 'data', 'binary_data_size' in "
            f"'parameters', 'shared_memory_region' in 'parameters'. {got}"
        )
    which = present[0]
    if which == "data":
        array = _json_data(item["data"], datatype, shape, name, model_name)
    elif which == "binary_data_size":
        size = tparams["binary_data_size"]
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise InvalidArgumentError(f"'binary_data_size' of input '{name}' must be an unsigned integer")
        if header_length is None or offset + size > len(view):
            missing = size - max(len(view) - offset, 0) if header_length is not None else size
            raise InvalidArgumentError(
                f"unexpected size for input '{name}', expecting {missing} additional bytes for model "
                f"'{model_name}'"
            )
        array = datatypes.from_wire_bytes(view[offset : offset + size], datatype, shape, name=name, model=model_name,
                                          request_id=request_id)
        offset += size
    else:
        array = None  # in shared memory: the core reads it at admission
    if "binary_data_size" in tparams:
        tparams = {k: v for k, v in tparams.items() if k != "binary_data_size"}
    return Tensor(name, datatype, shape, array, tparams), offset


def _requested_output(item: Any) -> RequestedOutput:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise InvalidArgumentError("Unable to parse 'outputs': each output needs a string 'name'")
    name = item["name"]
    params = dict(_parameters(item.get("parameters"), f"output '{name}'"))
    if params.get("classification") == 0 and type(params["classification"]) is int:
        del params["classification"]  # Triton's HTTP frontend reads 0 as no classification
    return requested_output(name, params)


def _json_value(array: np.ndarray, datatype: str, name: str) -> Any:
    if datatype == "BYTES":
        try:
            return [x.decode("utf-8") if isinstance(x, (bytes, bytearray)) else str(x) for x in array.reshape(-1)]
        except UnicodeDecodeError:  # never altered in silence: the client asks for it as binary data
            raise InvalidArgumentError(
                f"output '{name}' holds bytes that are not UTF-8 text, which JSON cannot carry: request it "
                "with the binary data extension (\"binary_data\": true)"
            ) from None
    if datatype in ("FP16", "BF16"):
        raise InvalidArgumentError(
            f"sending {datatype} data via JSON is not supported. Please use the binary data format for "
            f"output {name}"
        )
    return array.reshape(-1)


def _dumps_nonfinite(doc: dict[str, Any]) -> bytes:
    """NaN and +-Infinity as the bare tokens Triton writes (orjson would write null)."""

    def default(value: Any) -> Any:
        if isinstance(value, (np.ndarray, np.generic)):
            return value.tolist()
        raise TypeError(f"cannot serialise {type(value).__name__}")

    return json.dumps(doc, default=default, separators=(",", ":")).encode()


_SCAN_LIMIT = 64 * 1024


def _wrote_nonfinite(header: bytes, floats: list[np.ndarray]) -> bool:
    """Whether orjson met a NaN or Infinity (it writes them as null; the document holds no other
    bare null): one scan of a small body, numpy over the arrays of a large one."""
    if len(header) <= _SCAN_LIMIT:
        return b"null" in header
    return any(not np.isfinite(a).all() for a in floats)


def encode_response(response: InferResponse, binary_default: bool) -> tuple[bytes, list[bytes | memoryview], int | None]:
    """The response's JSON, the binary outputs that follow it (where they lie, not joined:
    the transport writes them as they are) and, when there are any, the JSON's length."""
    requested = response.requested
    outputs = []
    blobs: list[bytes | memoryview] = []
    floats: list[np.ndarray] = []
    for tensor in response.outputs:
        entry: dict[str, Any] = {
            "name": tensor.name,
            "datatype": tensor.datatype,
            "shape": list(tensor.shape),
        }
        if tensor.parameters:
            entry["parameters"] = dict(tensor.parameters)
        if tensor.data is not None:
            wanted = requested.get(tensor.name) if requested else None
            binary = binary_default if wanted is None or wanted.binary is None else wanted.binary
            if binary:
                blob = datatypes.to_wire_bytes(tensor.data, tensor.datatype)
                entry.setdefault("parameters", {})["binary_data_size"] = len(blob) if not isinstance(blob, memoryview) else blob.nbytes
                blobs.append(blob)
            else:
                entry["data"] = data = _json_value(tensor.data, tensor.datatype, tensor.name)
                if isinstance(data, np.ndarray) and data.dtype.kind == "f":
                    floats.append(data)
        outputs.append(entry)
    doc: dict[str, Any] = {}
    if response.id:
        doc["id"] = response.id
    doc["model_name"] = response.model_name
    doc["model_version"] = response.model_version
    if response.parameters:
        doc["parameters"] = response.parameters
    doc["outputs"] = outputs
    header = orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)
    if floats and _wrote_nonfinite(header, floats):
        header = _dumps_nonfinite(doc)
    if not any(len(b) for b in blobs):
        return header, [], None
    return header, blobs, len(header)
