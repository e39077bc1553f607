"""`InferenceRequest`: a request `execute` receives, or one a model builds to call another
model through the server (business logic scripting, BLS)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np

from ..wire import WireRequest
from . import _host
from .errors import TritonError, TritonModelException, require, require_list_of
from .response import (
    InferenceResponse,
    InferenceResponseSender,
    ResponseIterator,
    parameters_json,
    response_of,
)
from .tensor import Tensor

TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2

TRITONSERVER_MEMORY_GPU = 0
TRITONSERVER_MEMORY_CPU = 1
_MEMORY_DEFAULT = 2


class PreferredMemory:
    """Where a BLS caller would like the outputs; every output here lives in CPU memory."""

    def __init__(self, preferred_memory_type: int, preferred_device_id: int = 0) -> None:
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = preferred_device_id


class InferenceTrace:
    """The trace a request belongs to; `get_context()` is the propagated trace context, if any."""

    def __init__(self, context: str | None = None) -> None:
        self._context = context

    def get_context(self) -> str | None:
        return self._context


def _model_name(name: Any) -> str:
    """Model names may come from a BYTES tensor: Triton's binding takes bytes as UTF-8 text."""
    if isinstance(name, (bytes, np.bytes_)):
        return bytes(name).decode("utf-8")
    if isinstance(name, str):
        return str(name)
    raise TypeError(f"model_name must be str or bytes, got {type(name).__name__}")


_REQUIRED = object()


class InferenceRequest:
    # Slots, as Triton's own (C++-backed) objects take no attributes beyond their own.
    __slots__ = (
        "_correlation_id", "_decoupled", "_flags", "_inputs", "_key", "_model_name",
        "_model_version", "_parameters", "_release_flags", "_request_id", "_requested", "_sender",
        "_served_by", "_timeout", "_trace",
    )

    def __init__(
        self,
        request_id: str = "",
        correlation_id: int | str = 0,
        inputs: list[Tensor] = _REQUIRED,  # type: ignore[assignment]
        requested_output_names: list[str] = _REQUIRED,  # type: ignore[assignment]
        model_name: str | bytes = _REQUIRED,  # type: ignore[assignment]
        model_version: int = -1,
        flags: int = 0,
        timeout: int = 0,
        preferred_memory: PreferredMemory | None = None,
        trace: InferenceTrace | None = None,
        parameters: dict | None = None,
    ) -> None:
        missing = [n for n, v in (("inputs", inputs), ("requested_output_names", requested_output_names),
                                  ("model_name", model_name)) if v is _REQUIRED]
        if missing:
            raise TypeError(f"InferenceRequest() missing required argument(s): {', '.join(missing)}")
        require(request_id, str, "request_id")
        require_list_of(inputs, Tensor, "inputs", TritonModelException)
        require_list_of(requested_output_names, str, "requested_output_names")
        for value, what in ((model_version, "model_version"), (flags, "flags"), (timeout, "timeout")):
            require(value, int, what)
        if correlation_id is None:
            raise TypeError("incompatible function arguments: correlation_id cannot be None")
        if not isinstance(correlation_id, (int, str)):
            raise TritonModelException("Correlation ID must be integer or string")
        self._set(
            _model_name(model_name),
            list(inputs),
            list(requested_output_names),
            correlation_id,
            str(request_id),
            int(flags),
            int(timeout),
            json.loads(parameters_json(parameters)),
            int(model_version),
        )
        self._trace: InferenceTrace | None = trace or InferenceTrace()

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
        key: int = -1,
        decoupled: bool = False,
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
        self._key = key
        self._decoupled = decoupled
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        self._trace = None
        # Whoever runs the model now: a thread the model starts later has no context to find it.
        self._served_by = _host.current()

    @classmethod
    def _of_wire(cls, wire: WireRequest, decoupled: bool) -> InferenceRequest:
        """A request the server hands to `execute`: its parts were checked and are not shared."""
        request = cls.__new__(cls)
        request._set(
            wire.model_name,
            [Tensor._of_server(n, a, d) for n, d, a in wire.inputs],
            wire.outputs,
            wire.correlation_id,
            wire.id,
            wire.flags,
            wire.timeout,
            wire.parameters,
            -1,
            wire.key,
            decoupled,
        )
        if wire.trace:
            request._trace = InferenceTrace(wire.trace)
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

    def set_flags(self, flags: int) -> None:
        self._flags = int(flags)

    def timeout(self) -> int:
        return self._timeout

    def requested_output_names(self) -> list[str]:
        return self._requested

    def parameters(self) -> str:
        return json.dumps(self._parameters)

    def model_name(self) -> str:
        return self._model_name

    def trace(self) -> InferenceTrace:
        return self._trace or InferenceTrace()

    def get_response_sender(self) -> InferenceResponseSender:
        if self._sender is None:
            self._sender = InferenceResponseSender(self._key, self._decoupled, self._served_by)
        return self._sender

    def is_cancelled(self) -> bool:
        return self._served_by.is_cancelled(self._key)

    def set_release_flags(self, flags: int) -> None:
        """`TRITONSERVER_REQUEST_RELEASE_RESCHEDULE` hands the request back to `execute` later."""
        self._release_flags = int(flags)

    # -- business logic scripting
    def _wire(self) -> WireRequest:
        version = "" if self._model_version in (-1, None) else str(self._model_version)
        return WireRequest(
            -1,
            self._model_name,
            version,
            self._request_id,
            [(t._name, t._datatype, t._array) for t in self._inputs],
            self._requested,
            self._parameters,
            self._correlation_id,
            self._flags,
            self._timeout,
            self._trace.get_context() if self._trace is not None else None,
        )

    def exec(self, decoupled: bool = False) -> InferenceResponse | ResponseIterator:
        """Run the request on another model through the server's core (no network hop)."""
        _host.require_execute()
        host = _host.current()
        if host.blocking_forbidden:
            raise TritonModelException(
                "a model running in the server process must use 'await request.async_exec()': "
                "exec() would block the server's event loop"
            )
        if decoupled:
            return ResponseIterator(host.stream("infer_stream", self._wire()))
        return _answer(host.call("infer", self._wire()))

    async def async_exec(self, decoupled: bool = False) -> InferenceResponse | ResponseIterator:
        _host.require_execute()
        host = _host.current()
        if host.blocking_forbidden:  # in the server process: await the core on its own loop
            if decoupled:
                answers = await host.call_async("infer_collect", self._wire())
                return ResponseIterator(_Replay(answers))
            return _answer(await host.call_async("infer", self._wire()))
        return await asyncio.get_running_loop().run_in_executor(None, self.exec, decoupled)


def _answer(payload: Any) -> InferenceResponse:
    return response_of(payload) if payload is not None else InferenceResponse(error=TritonError("no response"))


class _Replay:
    """Answers already collected, as a stream (nothing left to cancel)."""

    def __init__(self, answers: list) -> None:
        self._answers = answers

    def __iter__(self):
        return iter(self._answers)

    def cancel(self) -> None:
        pass
