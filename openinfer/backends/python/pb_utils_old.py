"""`triton_python_backend_utils`: Triton's Python model API, as `model.py` files import it.

Inside a worker process this module is registered under Triton's name, so an unmodified
`import triton_python_backend_utils as pb_utils` finds it. The worker wires the module-level
hooks (`_bls_call`, `_response_channel`) before the model is imported.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core import datatypes

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2

#: Set around `execute` of a model running in the server process: an async (payload, decoupled)
#: -> response payloads callable that reaches the core on the server's own loop.
_in_process_bls: contextvars.ContextVar[Any] = contextvars.ContextVar("openinfer_in_process_bls")

# Hooks installed by the worker.
_bls_call: Any = None  # (request_payload, decoupled) -> iterator of response payloads
_response_channel: Any = None  # (request_key, response_payload | None, final) -> None
_model_name = ""
#: Keys of requests whose caller went away (filled by the worker's reader thread).
_cancelled: set[int] = set()


# ----------------------------------------------------------------------------- dtypes
def triton_string_to_numpy(triton_type_string: str) -> type:
    """`"TYPE_FP32"` -> `np.float32`; `TYPE_STRING` -> `np.object_`."""
    return datatypes.BY_CONFIG_NAME[triton_type_string].numpy.type


def numpy_to_triton_type(data_type: Any) -> str | None:
    try:
        return datatypes.protocol_of_array(np.empty(0, dtype=data_type))
    except Exception:
        return None


def triton_to_numpy_type(data_type: str) -> type:
    return datatypes.lookup(data_type).numpy.type


def serialize_byte_tensor(input_tensor: np.ndarray) -> np.ndarray:
    """Length-prefixed serialisation of a BYTES tensor, as a uint8 array (Triton's helper)."""
    return np.frombuffer(datatypes.serialize_bytes(np.asarray(input_tensor)), dtype=np.uint8)


def deserialize_bytes_tensor(encoded_tensor: bytes) -> np.ndarray:
    data = bytes(encoded_tensor)
    out = []
    offset = 0
    while offset < len(data):
        length = int.from_bytes(data[offset : offset + 4], "little")
        offset += 4
        out.append(data[offset : offset + length])
        offset += length
    return np.array(out, dtype=np.object_)


# ----------------------------------------------------------------------------- errors
class TritonError:
    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    _NAMES = {
        0: "UNKNOWN",
        1: "INTERNAL",
        2: "NOT_FOUND",
        3: "INVALID_ARG",
        4: "UNAVAILABLE",
        5: "UNSUPPORTED",
        6: "ALREADY_EXISTS",
        7: "CANCELLED",
    }

    def __init__(self, message: str, code: int = INTERNAL) -> None:
        self._message = message
        self._code = code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code

    def code_name(self) -> str:
        return self._NAMES.get(self._code, "INTERNAL")

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, {self.code_name()})"

    def __str__(self) -> str:
        return self._message


class TritonModelException(Exception):
    """Raised by BLS helpers when a called model fails."""


# ----------------------------------------------------------------------------- tensors
class Tensor:
    """A named tensor backed by a numpy array."""

    __slots__ = ("_array", "_datatype", "_name")

    def __init__(self, name: str, tensor: Any, dtype: str | None = None) -> None:
        array = tensor if type(tensor) is np.ndarray else np.asarray(tensor)
        datatype = dtype or datatypes.protocol_of_array(array)
        if datatype == "BYTES" and array.dtype.kind in ("U", "S"):
            array = datatypes.to_bytes_array(array)
        self._name = name
        self._array = array
        self._datatype = datatype

    @classmethod
    def _of_server(cls, name: str, array: np.ndarray, datatype: str) -> Tensor:
        """An input the server hands to `execute`: already an array of the stated datatype."""
        tensor = cls.__new__(cls)
        tensor._name, tensor._array, tensor._datatype = name, array, datatype
        return tensor

    def name(self) -> str:
        return self._name

    def as_numpy(self) -> np.ndarray:
        return self._array

    def triton_dtype(self) -> str:
        return self._datatype

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def is_cpu(self) -> bool:
        return True

    def to_dlpack(self) -> Any:
        return self._array.__dlpack__()

    @classmethod
    def from_dlpack(cls, name: str, capsule: Any) -> Tensor:
        if hasattr(capsule, "__dlpack__"):
            source = capsule
        else:  # a raw capsule: let torch read it when present
            import torch.utils.dlpack  # type: ignore[import-not-found]

            source = torch.utils.dlpack.from_dlpack(capsule)
        if hasattr(source, "detach"):
            return cls(name, source.detach().cpu().numpy())
        return cls(name, np.from_dlpack(source))

    def __repr__(self) -> str:
        return f"Tensor({self._name!r}, {self._datatype}, {list(self._array.shape)})"


def get_input_tensor_by_name(request: InferenceRequest, name: str) -> Tensor | None:
    for tensor in request._inputs:  # every model calls this for every input: no method calls
        if tensor._name == name:
            return tensor
    return None


def get_output_tensor_by_name(response: InferenceResponse, name: str) -> Tensor | None:
    for tensor in response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


def get_input_config_by_name(model_config: dict, name: str) -> dict | None:
    for item in model_config.get("input", []):
        if item.get("name") == name:
            return item
    return None


def get_output_config_by_name(model_config: dict, name: str) -> dict | None:
    for item in model_config.get("output", []):
        if item.get("name") == name:
            return item
    return None


# ----------------------------------------------------------------------------- responses
class InferenceResponse:
    __slots__ = ("_error", "_outputs", "_parameters")

    def __init__(
        self,
        output_tensors: list[Tensor] | None = None,
        error: TritonError | None = None,
        parameters: dict | str | None = None,
    ) -> None:
        self._outputs = list(output_tensors) if output_tensors else []
        self._error = error
        if not parameters:
            self._parameters: dict = {}
        elif isinstance(parameters, str):
            self._parameters = json.loads(parameters)
        else:
            self._parameters = dict(parameters)

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error

    def parameters(self) -> str:
        return json.dumps(self._parameters)


class InferenceResponseSender:
    """Sends the responses of one request of a decoupled model, from any thread."""

    __slots__ = ("_closed", "_key")

    def __init__(self, key: int) -> None:
        self._key = key
        self._closed = False

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        if self._closed:
            raise TritonModelException("Unable to send response. Response sender has been closed.")
        final = bool(flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        if response is None and not final:
            raise TritonModelException("Response must be set unless the FINAL flag is given.")
        _response_channel(self._key, response, final)
        if final:
            self._closed = True

    def is_cancelled(self) -> bool:
        return self._key in _cancelled


# ----------------------------------------------------------------------------- requests
class InferenceRequest:
    """A request given to `execute`, or one a model builds to call another model (BLS)."""

    # Slots, as Triton's own (C++-backed) objects take no attributes beyond their own.
    __slots__ = (
        "_correlation_id", "_flags", "_inputs", "_key", "_model_name", "_model_version",
        "_parameters", "_request_id", "_requested", "_sender", "_timeout",
    )

    def __init__(
        self,
        model_name: str = "",
        inputs: list[Tensor] | None = None,
        requested_output_names: list[str] | None = None,
        model_version: int = -1,
        correlation_id: int | str = 0,
        request_id: str = "",
        flags: int = 0,
        timeout: int = 0,
        preferred_memory: Any = None,
        trace: Any = None,
        parameters: dict | str | None = None,
        **_: Any,
    ) -> None:
        if isinstance(parameters, str):
            parameters = json.loads(parameters) if parameters else {}
        self._set(
            model_name,
            list(inputs or []),
            list(requested_output_names or []),
            correlation_id,
            request_id,
            flags,
            timeout,
            dict(parameters or {}),
            model_version,
        )

    def _set(
        self,
        model_name: str,
        inputs: list[Tensor],
        requested_output_names: list[str],
        correlation_id: int | str,
        request_id: str,
        flags: int,
        timeout: int,
        parameters: dict,
        model_version: int = -1,
    ) -> None:
        self._model_name = model_name
        self._inputs = inputs
        self._requested = requested_output_names
        self._model_version = model_version
        self._correlation_id = correlation_id
        self._request_id = request_id
        self._flags = flags
        self._timeout = timeout
        self._parameters = parameters
        self._sender: InferenceResponseSender | None = None
        self._key = -1

    @classmethod
    def _of_server(cls, *parts: Any) -> InferenceRequest:
        """A request the server hands to `execute` (`_set`'s arguments). Its parts were checked
        and are not shared, so they are taken as they are, without `__init__`'s copies."""
        request = cls.__new__(cls)
        request._set(*parts)
        return request

    # -- what a model reads
    def inputs(self) -> list[Tensor]:
        return self._inputs

    def request_id(self) -> str:
        return self._request_id

    def correlation_id(self) -> int | str:
        return self._correlation_id

    def flags(self) -> int:
        return self._flags

    def timeout(self) -> int:
        return self._timeout

    def requested_output_names(self) -> list[str]:
        return self._requested

    def parameters(self) -> str:
        return json.dumps(self._parameters)

    def model_name(self) -> str:
        return self._model_name

    def get_response_sender(self) -> InferenceResponseSender:
        if self._sender is None:
            self._sender = InferenceResponseSender(self._key)
        return self._sender

    def is_cancelled(self) -> bool:
        return self._key in _cancelled

    def set_release_flags(self, flags: int) -> None:
        pass

    # -- business logic scripting
    def _payload(self) -> dict:
        return {
            "model_name": self._model_name,
            "model_version": "" if self._model_version in (-1, None) else str(self._model_version),
            "id": self._request_id,
            "inputs": [(t.name(), t.triton_dtype(), t.as_numpy()) for t in self._inputs],
            "outputs": self._requested or None,
            "parameters": self._parameters,
            "correlation_id": self._correlation_id,
            "flags": self._flags,
            "timeout": self._timeout,
        }

    def exec(self, decoupled: bool = False) -> InferenceResponse | Iterator[InferenceResponse]:
        """Call another loaded model through the server's core (no network hop)."""
        if _bls_call is None:
            if _in_process_bls.get(None) is not None:
                raise TritonModelException(
                    "a model running in the server process must use 'await request.async_exec()': "
                    "exec() would block the server's event loop"
                )
            raise TritonModelException("BLS requests can only be made from inside execute()")
        results = (_to_response(p) for p in _bls_call(self._payload(), decoupled))
        if decoupled:
            return results
        responses = list(results)
        return responses[0] if responses else InferenceResponse(error=TritonError("no response"))

    async def async_exec(self, decoupled: bool = False) -> Any:
        in_process = _in_process_bls.get(None)
        if in_process is not None:
            responses = [_to_response(p) for p in await in_process(self._payload(), decoupled)]
            if decoupled:
                return _AsyncIter(responses)
            return responses[0] if responses else InferenceResponse(error=TritonError("no response"))
        loop = asyncio.get_running_loop()
        if decoupled:
            responses = await loop.run_in_executor(None, lambda: list(self.exec(decoupled=True)))
            return _AsyncIter(responses)
        return await loop.run_in_executor(None, self.exec)


class _AsyncIter:
    def __init__(self, items: list) -> None:
        self._items = iter(items)

    def __aiter__(self) -> _AsyncIter:
        return self

    async def __anext__(self) -> Any:
        try:
            return next(self._items)
        except StopIteration:
            raise StopAsyncIteration from None

    def __iter__(self):
        return self._items


def _to_response(payload: dict) -> InferenceResponse:
    error = payload.get("error")
    if error is not None:
        return InferenceResponse(error=TritonError(error[1], error[0]))
    outputs = [Tensor(name, array, datatype) for name, datatype, array in payload["outputs"]]
    return InferenceResponse(outputs, parameters=payload.get("parameters") or {})


# ----------------------------------------------------------------------------- logging
class LogLevel:
    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


class Logger:
    """Writes to the server's log stream with the model's name, like Triton's backend logger."""

    @staticmethod
    def log(message: str, level: int = LogLevel.INFO) -> None:
        tag = {0: "I", 1: "W", 2: "E", 3: "V"}.get(level, "I")
        stamp = time.strftime("%m%d %H:%M:%S")
        sys.stderr.write(f"{tag}{stamp} {_model_name}: {message}\n")
        sys.stderr.flush()

    @classmethod
    def log_info(cls, message: str) -> None:
        cls.log(message, LogLevel.INFO)

    @classmethod
    def log_warn(cls, message: str) -> None:
        cls.log(message, LogLevel.WARNING)

    @classmethod
    def log_error(cls, message: str) -> None:
        cls.log(message, LogLevel.ERROR)

    @classmethod
    def log_verbose(cls, message: str) -> None:
        cls.log(message, LogLevel.VERBOSE)


# ----------------------------------------------------------------------------- auto-complete
class ModelConfig:
    """The object `auto_complete_config` receives and returns."""

    def __init__(self, config: dict) -> None:
        self._config = config

    def as_dict(self) -> dict:
        return self._config

    def set_max_batch_size(self, max_batch_size: int) -> None:
        self._config["max_batch_size"] = int(max_batch_size)

    def set_dynamic_batching(self) -> None:
        self._config.setdefault("dynamic_batching", {})

    def set_model_transaction_policy(self, policy: dict) -> None:
        self._config["model_transaction_policy"] = dict(policy)

    def _add(self, kind: str, tensor: dict) -> None:
        for required in ("name", "data_type", "dims"):
            if required not in tensor:
                raise ValueError(f"{kind} '{tensor.get('name', '')}' in auto-complete is missing '{required}'")
        existing = self._config.setdefault(kind, [])
        for item in existing:
            if item.get("name") == tensor["name"]:
                item.update({k: v for k, v in tensor.items() if k not in item or not item[k]})
                return
        existing.append(dict(tensor))

    def add_input(self, input: dict) -> None:
        self._add("input", input)

    def add_output(self, output: dict) -> None:
        self._add("output", output)
