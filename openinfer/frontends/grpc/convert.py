"""Protobuf <-> core conversion for the gRPC frontend, in one place."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._proto import grpc_service_pb2 as pb
from ...core import datatypes
from ...core.errors import InvalidArgumentError
from ...core.requests.inputs import check_consumed, negative_dimension
from ...core.requests.parameters import apply_reserved
from ...core.requests.requested_outputs import requested_output
from ...core.types import InferRequest, InferResponse, RequestedOutput, Tensor
from .raw_inputs import RawInputsRequest
from .raw_tail import TAIL_FROM, TailedResponse

_CONTENTS_FIELD = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}
_WIRE_WIDTH = {"INT8": np.int32, "INT16": np.int32, "UINT8": np.uint32, "UINT16": np.uint32}
STREAM_TRITON_KEYS = frozenset({"triton_enable_empty_final_response"})


def param_value(param: pb.InferParameter) -> Any:
    which = param.WhichOneof("parameter_choice")
    return getattr(param, which) if which is not None else None


def set_param(target: pb.InferParameter, value: Any) -> None:
    if isinstance(value, bool):
        target.bool_param = value
    elif isinstance(value, int):
        target.int64_param = value
    elif isinstance(value, float):
        target.double_param = value
    elif isinstance(value, bytes):
        target.bytes_param = value
    else:
        target.string_param = str(value)


def _request_parameters(params: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, param in params.items():
        which = param.WhichOneof("parameter_choice")
        if which == "uint64_param" and key != "priority":
            raise InvalidArgumentError(
                f"invalid value type for '{key}' parameter, uint64_param is only supported for 'priority'"
            )
        out[key] = getattr(param, which) if which else None
    return out


def _typed_contents(
    tensor: pb.ModelInferRequest.InferInputTensor, shape: tuple[int, ...], model: str, request_id: str
) -> np.ndarray:
    field = _CONTENTS_FIELD.get(tensor.datatype)
    if field is None:
        raise InvalidArgumentError(
            f"unexpected explicit tensor data for input tensor '{tensor.name}' for model '{model}' of type "
            f"'{tensor.datatype}', {tensor.datatype} tensors must use raw_input_contents"
        )
    for other in set(_CONTENTS_FIELD.values()) - {field}:
        if len(getattr(tensor.contents, other)):
            raise InvalidArgumentError(
                f"unexpected explicit tensor data for input tensor '{tensor.name}' for model '{model}', "
                f"expected datatype '{tensor.datatype}'"
            )
    values = getattr(tensor.contents, field)
    if tensor.datatype == "BYTES":
        array = np.empty(len(values), dtype=np.object_)
        array[:] = list(values)
    else:
        dtype = datatypes.lookup(tensor.datatype).numpy
        wide = _WIRE_WIDTH.get(tensor.datatype)
        # INT8/INT16 (UINT8/UINT16) travel as 32-bit values: Triton keeps their low-order bytes.
        array = np.array(values, dtype=wide).astype(dtype) if wide else np.array(values, dtype=dtype)
    if array.size != datatypes.element_count(shape):
        if tensor.datatype != "BYTES":  # as Triton counts them: in bytes
            size = datatypes.lookup(tensor.datatype).size
            raise datatypes.byte_size_mismatch(tensor.name, model, datatypes.element_count(shape) * size,
                                               array.size * size, request_id)
        raise InvalidArgumentError(
            f"unexpected number of elements for input '{tensor.name}' for model '{model}'. "
            f"Expected {datatypes.element_count(shape)}, got {array.size}"
        )
    return array.reshape(shape)


def to_request(message: pb.ModelInferRequest | RawInputsRequest, *, stream: bool = False) -> InferRequest:
    """A core request; an input in shared memory is left without data for the core to read."""
    if type(message) is RawInputsRequest:
        message, raw = message.message, message.raw
    else:
        # Repeated fields are sliced, not iterated: upb's iteration ends in a formatted
        # IndexError, which costs more than the rest of a small request's conversion.
        raw = message.raw_input_contents[:]
    model = message.model_name
    request = InferRequest(model, message.model_version, message.id)
    if message.parameters:
        request.parameters = _request_parameters(message.parameters)
        apply_reserved(request, allowed_triton_keys=STREAM_TRITON_KEYS)
    inputs = message.inputs[:]
    if raw:
        for tensor in inputs:
            if tensor.HasField("contents"):
                raise InvalidArgumentError(
                    f"contents field must not be specified when using raw_input_contents for "
                    f"'{tensor.name}' for model '{model}'"
                )
    raw_index = 0
    tensors = []
    for tensor in inputs:
        name, datatype = tensor.name, tensor.datatype
        shape = tuple(tensor.shape[:])
        if shape and min(shape) < 0:
            raise negative_dimension(name)
        tparams = {k: param_value(v) for k, v in tensor.parameters.items()} if tensor.parameters else {}
        if "shared_memory_region" in tparams:
            datatypes.lookup(datatype)
            if tensor.HasField("contents"):
                raise InvalidArgumentError(
                    f"unexpected 'content' provided when using shared memory for input tensor '{tensor.name}' "
                    f"for model '{model}'"
                )
            array = None
        elif raw_index < len(raw):  # (with raw contents, no input has typed contents: checked above)
            array = datatypes.from_wire_bytes(raw[raw_index], datatype, shape, name=name, model=model,
                                              request_id=message.id)
            raw_index += 1
        else:
            datatypes.lookup(datatype)  # an unknown datatype is named before what its data lacks
            if not tensor.HasField("contents"):
                raise InvalidArgumentError(
                    f"unable to find data for input tensor '{name}' for model '{model}' in request."
                )
            array = _typed_contents(tensor, shape, model, message.id)
        tensors.append(Tensor(name, datatype, shape, array, tparams))
    request.inputs = tensors
    check_consumed(raw_index, len(raw), model)  # data sent for an input that does not exist
    outputs = message.outputs[:]
    if outputs:
        request.outputs = [_requested_output(o) for o in outputs]
    return request


def _requested_output(output: pb.ModelInferRequest.InferRequestedOutputTensor) -> RequestedOutput:
    params = {k: param_value(v) for k, v in output.parameters.items()} if output.parameters else {}
    return requested_output(output.name, params)


def to_response(response: InferResponse, *, tail: bool = False) -> pb.ModelInferResponse | TailedResponse:
    """The response message; with `tail`, large raw outputs stay outside it (`raw_tail`)."""
    # Fields are assigned one by one: upb's keyword constructors parse their arguments slower.
    message = pb.ModelInferResponse()
    message.model_name = response.model_name
    message.model_version = response.model_version
    if response.id:
        message.id = response.id
    if response.parameters:
        for key, value in response.parameters.items():
            set_param(message.parameters[key], value)
    add, size = message.outputs.add, 0
    for tensor in response.outputs:
        out = add()
        out.name = tensor.name
        out.datatype = tensor.datatype
        out.shape[:] = tensor.shape
        if tensor.parameters:
            for key, value in tensor.parameters.items():
                set_param(out.parameters[key], value)
        if tensor.data is not None:
            size += tensor.data.nbytes  # (a BYTES array's pointers: near enough to choose by)
    if tail and size >= TAIL_FROM:
        return TailedResponse(message, [_raw(t, datatypes.to_wire_bytes) for t in response.outputs])
    message.raw_output_contents.extend([_raw(t, datatypes.to_wire_copy) for t in response.outputs])
    return message


def _raw(tensor: Tensor, form: Any) -> bytes | memoryview:
    return b"" if tensor.data is None else form(tensor.data, tensor.datatype)
