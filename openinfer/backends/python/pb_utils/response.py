"""Responses: what `execute` returns, what a response sender sends, what BLS answers."""

from __future__ import annotations

import json
from typing import Any

from . import _host
from .errors import TritonError, TritonModelException, require, require_list_of
from .tensor import Tensor

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1


def parameters_json(parameters: Any) -> str:
    """Request and response parameters as Triton keeps them: a JSON object of bool/int/str.
    Only a dict (or None) is taken, as Triton's binding takes only those: JSON text, or an
    empty list, is refused rather than read."""
    if parameters is None:
        return "{}"
    if not isinstance(parameters, dict):
        raise TritonModelException(f"Expect dict, got {type(parameters)}")
    for key, value in parameters.items():
        if not isinstance(key, str):
            raise TritonModelException(f"Expect parameters keys to have type str, found type {type(key)}")
        if not isinstance(value, (bool, int, str)):
            raise TritonModelException(
                f"Expect parameters values to have type bool/int/str, found type {type(value)}"
            )
    return json.dumps(parameters)


class InferenceResponse:
    """The outputs (or the error) answering one request."""

    __slots__ = ("_error", "_outputs", "_parameters")

    def __init__(
        self,
        output_tensors: list[Tensor] | tuple[()] = (),
        error: TritonError | None = None,
        parameters: dict | None = None,
    ) -> None:
        self._outputs = list(require_list_of(output_tensors, Tensor, "output_tensors", TritonModelException)) if output_tensors != () else []
        if error is not None:
            require(error, TritonError, "error")
        self._error = error
        #: Kept as a dict (checked as Triton checks it); `parameters()` gives the JSON text.
        self._parameters: dict = json.loads(parameters_json(parameters)) if parameters is not None else {}

    @classmethod
    def _of_server(cls, outputs: list[Tensor], error: TritonError | None, parameters: dict) -> InferenceResponse:
        response = cls.__new__(cls)
        response._outputs, response._error, response._parameters = outputs, error, parameters
        return response

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error

    def parameters(self) -> str:
        return json.dumps(self._parameters)


class InferenceResponseSender:
    """Sends the responses of one request, from any thread, before or after `execute` returns.

    A decoupled model sends any number and then the FINAL flag; any other model sends exactly
    one response with it (or returns the response from `execute` instead)."""

    __slots__ = ("_closed", "_decoupled", "_host", "_key", "_sent")

    def __init__(self, key: int, decoupled: bool, host: _host.Host | None = None) -> None:
        # The request's host: threads the model starts to send from see no context.
        self._host = host if host is not None else _host.current()
        self._key = key
        self._decoupled = decoupled
        self._closed = False
        self._sent = 0

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        if flags not in (0, TRITONSERVER_RESPONSE_COMPLETE_FINAL):
            raise TritonModelException("Unable to send response. Unsupported flag provided.")
        if flags == 0 and response is None:
            raise TritonModelException(
                "Inference Response object must be provided when the response flags is set to zero."
            )
        self._count(response, flags)
        # A model that is not decoupled has one response: it ends the request on the server.
        final = bool(flags) or (response is not None and not self._decoupled)
        self._host.send_response(self._key, response, final)

    def _count(self, response: InferenceResponse | None, flags: int) -> None:
        """Triton's checks of what this request may still be sent."""
        if not self._decoupled:
            if response is not None and self._sent > 0:
                raise TritonModelException(
                    "Unable to send response. Non-decoupled model cannot send more than one response."
                )
            if response is None and flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL and self._sent == 0:
                raise TritonModelException(
                    "Unable to send response. Non-decoupled model cannot send complete final before "
                    "sending a response."
                )
        if self._closed:
            raise TritonModelException("Unable to send response. Response sender has been closed.")
        if flags == TRITONSERVER_RESPONSE_COMPLETE_FINAL:
            self._closed = True
        self._sent += 1

    def is_cancelled(self) -> bool:
        return self._host.is_cancelled(self._key)

    def _close(self) -> None:
        """The server ended the request (an error in `execute`): nothing more may be sent."""
        self._closed = True


class ResponseIterator:
    """The responses of a decoupled BLS call as they arrive; iterating again replays them.

    A stream that ends with a flag-only FINAL yields one last empty response, as Triton's does."""

    def __init__(self, stream: Any) -> None:
        self._source = stream
        self._stream = iter(stream)
        self._seen: list[InferenceResponse] = []
        self._finished = False
        self._index = 0
        # As Triton's exec(decoupled=True), wait for the first response before returning: an
        # `await async_exec(decoupled=True)` then comes back with it, off the event loop.
        try:
            self._pull()
        except StopIteration:
            self._finished = True
        self._index = 0

    def __iter__(self) -> ResponseIterator:
        if self._finished and self._index >= len(self._seen):
            self._index = 0
        return self

    def __next__(self) -> InferenceResponse:
        if self._index < len(self._seen):
            self._index += 1
            return self._seen[self._index - 1]
        if self._finished:
            raise StopIteration("Iteration is done for the responses.")
        try:
            response = self._pull()
        except StopIteration:
            self._finished = True
            raise
        self._index = len(self._seen)
        return response

    def _pull(self) -> InferenceResponse:
        """The next response from the stream (blocking until it arrives)."""
        payload, final = next(self._stream)
        response = response_of(payload) if payload is not None else InferenceResponse()
        self._finished = final
        self._seen.append(response)
        return response

    def cancel(self) -> None:
        """Ask the called model to stop; responses already on their way still arrive."""
        if not self._finished:
            self._source.cancel()

    def __aiter__(self) -> ResponseIterator:
        return self

    async def __anext__(self) -> InferenceResponse:
        import asyncio

        response = await asyncio.get_running_loop().run_in_executor(None, self._next_or_none)
        if response is None:
            raise StopAsyncIteration
        return response

    def _next_or_none(self) -> InferenceResponse | None:
        """`__next__` for a thread pool: StopIteration cannot cross into an asyncio future."""
        try:
            return self.__next__()
        except StopIteration:
            return None


def response_of(payload: Any) -> InferenceResponse:
    """A BLS answer from the wire (see `wire.WireResponse`) as the response a model reads."""
    if payload.error is not None:
        code, message = payload.error
        return InferenceResponse._of_server([], TritonError(message, code), payload.parameters or {})
    outputs = [Tensor._of_server(name, array, datatype) for name, datatype, array in payload.outputs]
    return InferenceResponse._of_server(outputs, None, payload.parameters or {})
