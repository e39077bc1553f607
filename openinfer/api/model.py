"""`server.model(name)`: one model's metadata, config, readiness and inference, sync or async."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import config as configs
from ..core import datatypes
from ..core.requests.parameters import apply_reserved
from ..core.types import InferRequest, RequestedOutput, Tensor
from .responses import AsyncResponseIterator, InferenceResponse, ResponseIterator, pump

if TYPE_CHECKING:
    from .server import Server


def _tensor(name: str, value: Any) -> Tensor:
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    datatype = datatypes.protocol_of_array(array)
    if datatype == "BYTES":
        array = datatypes.to_bytes_array(array)
    return Tensor(name, datatype, tuple(int(d) for d in array.shape), array)


def build_request(name: str, version: str, inputs: Mapping[str, Any], parameters: Mapping[str, Any] | None,
                  requested_outputs: Iterable[str] | None, request_id: str) -> InferRequest:
    """A core request from numpy inputs; the reserved parameters (priority, timeout, sequence_*)
    take effect as they do over the wire."""
    request = InferRequest(
        model_name=name,
        model_version=version,
        id=request_id,
        inputs=[_tensor(key, value) for key, value in inputs.items()],
        outputs=None if requested_outputs is None else [RequestedOutput(o) for o in requested_outputs],
        parameters=dict(parameters or {}),
    )
    apply_reserved(request)
    return request


class Model:
    """A model of the repository, as `server.model(name, version)` returns it. `version` -1 means
    the server's choice (the newest ready version), as in Triton's API."""

    def __init__(self, server: Server, name: str, version: int = -1) -> None:
        self.server = server
        self.name = name
        self.version = version

    @property
    def _version(self) -> str:
        return "" if self.version in (-1, None) else str(self.version)

    def __repr__(self) -> str:
        return f"Model(name={self.name!r}, version={self.version})"

    # ------------------------------------------------------------------ about
    def ready(self) -> bool:
        return self.server._call(lambda core: core.model_readiness(self.name, self._version))

    def metadata(self) -> dict[str, Any]:
        """As `GET /v2/models/<name>` answers: name, versions, platform, inputs, outputs."""
        meta = self.server._sync(lambda core: core.model_metadata(self.name, self._version))

        def tensors(items: list) -> list[dict[str, Any]]:
            return [{"name": t.name, "datatype": t.datatype, "shape": list(t.shape)} for t in items]

        return {"name": meta.name, "versions": list(meta.versions), "platform": meta.platform,
                "inputs": tensors(meta.inputs), "outputs": tensors(meta.outputs)}

    def config(self) -> dict[str, Any]:
        """As `GET /v2/models/<name>/config` answers."""
        return self.server._sync(lambda core: configs.config_to_json(core.model_config(self.name, self._version)))

    def decoupled(self) -> bool:
        return bool(self.config().get("model_transaction_policy", {}).get("decoupled", False))

    # -------------------------------------------------------------- inference
    def infer(self, inputs: Mapping[str, Any], parameters: Mapping[str, Any] | None = None,
              requested_outputs: Iterable[str] | None = None, request_id: str = "",
              timeout: float | None = None) -> InferenceResponse | ResponseIterator:
        """One response for an ordinary model; for a decoupled model an iterator of its
        responses as they arrive. Safe to call from any thread, any number at once."""
        core = self.server._core_or_raise()
        loop = self.server._loop
        assert loop is not None  # `_core_or_raise` checked it
        request = build_request(self.name, self._version, inputs, parameters, requested_outputs, request_id)
        if not self.server._sync(lambda c: c.model(self.name, self._version).decoupled):
            return InferenceResponse.of(loop.run(core.infer(request), timeout))
        stream = ResponseIterator()
        future = loop.submit(pump(core.infer_stream(request), stream))
        stream._cancel = future.cancel
        return stream

    def async_infer(self, inputs: Mapping[str, Any], parameters: Mapping[str, Any] | None = None,
                    requested_outputs: Iterable[str] | None = None, request_id: str = "") -> AsyncInference:
        """For asyncio callers: `await model.async_infer(...)` gives the response of an ordinary
        model; `async for response in model.async_infer(...)` reads a decoupled model's stream
        (and works for ordinary models too, with one response)."""
        request = build_request(self.name, self._version, inputs, parameters, requested_outputs, request_id)
        return AsyncInference(self, request)


class AsyncInference:
    """Both awaitable and async-iterable, so one method serves both kinds of model."""

    def __init__(self, model: Model, request: InferRequest) -> None:
        self._model = model
        self._request = request
        self._iterator: AsyncResponseIterator | None = None

    def __await__(self):
        return self._single().__await__()

    async def _single(self) -> InferenceResponse:
        server = self._model.server
        core = server._core_or_raise()
        assert server._loop is not None  # `_core_or_raise` checked it
        future = server._loop.submit(core.infer(self._request))
        return InferenceResponse.of(await asyncio.wrap_future(future))

    def __aiter__(self) -> AsyncResponseIterator:
        if self._iterator is None:
            server = self._model.server
            core = server._core_or_raise()
            assert server._loop is not None  # `_core_or_raise` checked it
            self._iterator = AsyncResponseIterator(asyncio.get_running_loop())
            future = server._loop.submit(pump(core.infer_stream(self._request), self._iterator))
            self._iterator._cancel = future.cancel
        return self._iterator
