"""What a model may ask of the server: BLS, custom metrics and model loading.

One `ModelServices` per loaded model version answers both execution paths: a worker's `Call`
messages and an in-process model's direct calls reach the same methods, with the same checks
and Triton's messages.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ...core.errors import InvalidArgumentError, NotFoundError, OpenInferError, UnavailableError
from ...core.types import InferRequest, InferResponse
from . import convert
from .wire import WireRequest, WireResponse

if TYPE_CHECKING:
    from ...core.backend import ModelHost

log = logging.getLogger("openinfer.python")

#: Model log levels (pb_utils.LogLevel) as Python logging levels; VERBOSE shows with --log-verbose.
LOG_LEVELS = {0: logging.INFO, 1: logging.WARNING, 2: logging.ERROR, 3: logging.DEBUG}
_model_log = logging.getLogger("openinfer.python.model")


def model_log(level: int, message: str, filename: str, line: int) -> None:
    """A model's `pb_utils.Logger` line, in the server's log, named by the model's file and line."""
    python_level = LOG_LEVELS.get(level, logging.INFO)
    if not _model_log.isEnabledFor(python_level):
        return
    record = _model_log.makeRecord(f"{filename}:{line}" if filename else "model.py", python_level,
                                   filename, line, message, (), None)
    _model_log.handle(record)


def _bls_error(exc: Exception, request: InferRequest, host: ModelHost | None) -> Exception:
    """A BLS request refused before it ran, in the words of Triton's Python backend (which asks
    whether the model is ready before anything else). A model the repository lacks is named
    unknown, as Triton's current Python-backend QA expects (2.51 called it not ready)."""
    if isinstance(exc, OpenInferError) and exc.before_queue:
        why = exc.message
        unknown = isinstance(exc, NotFoundError)
        if not unknown and host is not None and not host.model_ready(request.model_name, request.model_version):
            why = f"Failed for execute the inference request. Model '{request.model_name}' is not ready."
        return type(exc)(f"Model {request.model_name} - Error when running inference: {why}")
    return exc


class ModelServices:
    """The server's services for one loaded copy of a model version (`owner` names that copy,
    so the custom metrics it made are released with it)."""

    STREAMS = frozenset({"infer_stream"})

    def __init__(self, server: ModelHost | None, owner: str) -> None:
        self.server = server
        self.owner = owner
        self._unloads: set[asyncio.Task] = set()

    def _server(self) -> ModelHost:
        if self.server is None:
            raise UnavailableError("the model runs outside a server")
        return self.server

    # ------------------------------------------------------------------- BLS
    async def infer(self, wire: WireRequest) -> WireResponse:
        request = convert.core_request(wire)
        try:
            return convert.wire_response(await self._server().infer(request))
        except Exception as exc:
            return convert.wire_response(InferResponse(request.model_name, "", error=_bls_error(exc, request, self.server)))

    def infer_stream(self, wire: WireRequest) -> BlsStream:
        return BlsStream(self, convert.core_request(wire))

    async def _answers(self, request: InferRequest) -> AsyncIterator[tuple[WireResponse | None, bool]]:
        """Every response of a decoupled model as it arrives, each with whether it is the last;
        a stream that ends with a flag-only FINAL ends with (None, True)."""
        final = False
        try:
            async for response in self._server().infer_stream(request):
                final = response.final
                yield convert.wire_response(response), final
        except Exception as exc:
            yield convert.wire_response(InferResponse(request.model_name, "", error=_bls_error(exc, request, self.server))), True
            return
        if not final:
            yield None, True

    async def infer_collect(self, wire: WireRequest) -> list[tuple[WireResponse | None, bool]]:
        return [answer async for answer in self.infer_stream(wire)]

    @staticmethod
    def failed_answer(kind: str, error: Exception) -> Any:
        """A BLS call's answer when the real one cannot reach the model: an error response."""
        wire = WireResponse([], {}, convert.triton_error(error))
        return [(wire, True)] if kind == "infer_collect" else wire

    # --------------------------------------------------------- custom metrics
    def _metrics(self) -> Any:
        return self._server().custom_metrics

    def metric_family(self, name: str, description: str, kind: str) -> int:
        return self._metrics().create_family(self.owner, name, description, kind)

    def metric_create(self, family_id: int, labels: dict[str, str], buckets: list[float] | None) -> int:
        return self._metrics().create_metric(family_id, labels, buckets)

    def metric_increment(self, metric_id: int, value: float) -> None:
        self._metrics().increment(metric_id, value)

    def metric_set(self, metric_id: int, value: float) -> None:
        self._metrics().set(metric_id, value)

    def metric_observe(self, metric_id: int, value: float) -> None:
        self._metrics().observe(metric_id, value)

    def metric_value(self, metric_id: int) -> float:
        return self._metrics().value(metric_id)

    def metric_release(self, metric_id: int) -> None:
        self._metrics().release_metric(metric_id)

    def metric_family_release(self, family_id: int) -> None:
        self._metrics().release_family(family_id)

    # ---------------------------------------------------------- model loading
    async def load_model(self, name: str, config: str, files: dict[str, Any]) -> None:
        for path, content in files.items():
            if not isinstance(content, (bytes, bytearray)):
                raise InvalidArgumentError(
                    f"failed to load model '{name}', files should be a dictionary of file paths "
                    "and file contents"
                )
            files[path] = bytes(content)
        try:
            await self._server().load_model(name, config or None, files or None)
        except OpenInferError as exc:
            raise type(exc)(f"Failed to load model: {exc.message}") from None

    async def unload_model(self, name: str, unload_dependents: bool) -> None:
        """Start the unload and return at once, as Triton does: a model may unload itself."""
        server = self._server()
        try:
            server.check_explicit()
        except OpenInferError as exc:
            raise type(exc)(f"Failed to unload model: {exc.message}") from None
        task = asyncio.ensure_future(server.unload_model(name, unload_dependents))
        self._unloads.add(task)
        task.add_done_callback(self._unloads.discard)

    async def is_model_ready(self, name: str, version: str) -> bool:
        _check_version(version)
        return await self._server().model_readiness(name, version)

    def is_model_loaded(self, name: str, version: str) -> bool:
        """`is_model_ready` without asking the instances, for a caller that cannot wait
        (a model running on the server's own event loop)."""
        _check_version(version)
        return self._server().model_ready(name, version)

    # ----------------------------------------------------------------- dispatch
    async def handle(self, kind: str, args: tuple) -> Any:
        """A service by name (a worker's `Call`); raises OpenInferError for the model to see."""
        method = getattr(self, kind, None)
        if method is None or kind.startswith("_") or kind in ("handle", "stream"):
            raise InvalidArgumentError(f"unknown model service '{kind}'")
        result = method(*args)
        if asyncio.iscoroutine(result):
            result = await result
        return result

    def stream(self, kind: str, args: tuple) -> BlsStream:
        if kind not in self.STREAMS:
            raise InvalidArgumentError(f"unknown model stream '{kind}'")
        return getattr(self, kind)(*args)


class BlsStream:
    """A decoupled BLS call in flight: its answers as they come, and Triton's `cancel()`,
    which asks the called model to stop while what it still sends keeps arriving."""

    def __init__(self, services: ModelServices, request: InferRequest) -> None:
        self.services = services
        self.request = request

    def __aiter__(self) -> AsyncIterator[tuple[WireResponse | None, bool]]:
        return self.services._answers(self.request)

    def cancel(self) -> None:
        stop = self.request.state.ask_to_stop
        if stop is not None:
            stop()


def _check_version(version: str) -> None:
    """Triton's rule for the version string of `is_model_ready`: empty, or an integer > 0."""
    if not version:
        return
    try:
        number = int(version)
    except ValueError as exc:
        raise InvalidArgumentError(
            f"Failed to check model readiness: failed to get model version from specified "
            f"version string '{version}' (details: {exc}), version should be an integral value > 0"
        ) from None
    if number <= 0:
        raise InvalidArgumentError(
            f"Failed to check model readiness: failed to get model version from specified "
            f"version string '{version}', version should be an integral value > 0"
        )
