"""Triton's generate extension: `POST /v2/models/{m}[/versions/{v}]/generate[_stream]`.

A JSON object in; top-level keys naming model inputs become tensors, and so do `parameters`
entries naming inputs (Triton's vLLM docs send `{"parameters": {"stream": false}}`); every other
key is a request parameter. Out comes one JSON object per response: `model_name`,
`model_version`, `id` when given, and each output by name (one element -> a scalar). The stream
variant answers in server-sent events; an error mid-stream is an `{"error": ...}` event.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any
from urllib.parse import unquote

import orjson

from ...core.errors import InvalidArgumentError, OpenInferError
from ...core.types import InferRequest, InferResponse
from ...features.contract import Feature
from ..asgi.transport import Transport
from ..json_tensors import json_value, make_tensor
from .app import HttpApp, HttpRequest, HttpResponse, json_response

log = logging.getLogger("openinfer.http")

_MODEL = r"/v2/models/([^/]+)(?:/versions/([0-9]+))?"


def _scalar_parameter(value: Any) -> bool | int | float | str:
    if isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value)


def to_request(server: Any, name: str, version: str, body: bytes, stream: bool) -> InferRequest:
    if not body.strip():
        raise InvalidArgumentError("generate request body must be a JSON object")
    try:
        doc = json.loads(body, object_pairs_hook=_KeyedObject.of)
    except (ValueError, RecursionError) as exc:
        raise InvalidArgumentError(f"failed to parse the request JSON buffer: {exc}") from None
    if not isinstance(doc, _KeyedObject):  # the hook makes every JSON object one
        raise InvalidArgumentError("generate request body must be a JSON object")
    model = server.model(name, version)
    for key in doc.repeated:  # Triton's words for an input given twice
        if key in model.inputs:
            raise InvalidArgumentError(f"input '{key}' already exists in request")
    batched = model.max_batch_size > 0
    request = InferRequest(model_name=name, model_version=version, id=str(doc.pop("id", "") or ""))
    parameters = doc.pop("parameters", None) or {}
    if not isinstance(parameters, dict):
        raise InvalidArgumentError("Expected JSON object for keyword: 'parameters'")
    values: dict[str, Any] = {}
    for key, value in doc.items():
        if key in model.inputs:
            values[key] = value
        else:
            request.parameters[key] = _scalar_parameter(value)
    for key, value in parameters.items():
        if key in model.inputs and key not in values:
            values[key] = value
        else:
            request.parameters[key] = _scalar_parameter(value)
    if stream and "stream" in model.inputs and "stream" not in values:
        values["stream"] = True
    for key, value in values.items():
        spec = model.inputs[key]
        _check_json_type(spec.datatype, value)
        request.inputs.append(make_tensor(key, spec.datatype, spec.dims, batched, value))
    return request


class _KeyedObject(dict):
    """A JSON object that remembers the keys it was given more than once (the last one wins)."""

    repeated: tuple[str, ...] = ()

    @classmethod
    def of(cls, pairs: list[tuple[str, Any]]) -> _KeyedObject:
        made = cls()
        repeated = []
        for key, value in pairs:
            if key in made:
                repeated.append(key)
            made[key] = value
        made.repeated = tuple(repeated)
        return made


def _check_json_type(datatype: str, value: Any) -> None:
    """Triton's generate takes a BYTES input from JSON strings and a BOOL one from booleans only."""
    for item in value if isinstance(value, list) else [value]:
        if datatype == "BYTES" and not isinstance(item, str):
            raise InvalidArgumentError("attempt to access JSON non-string as string")
        if datatype == "BOOL" and not isinstance(item, bool):
            raise InvalidArgumentError("attempt to access JSON non-boolean as boolean")


def to_json(response: InferResponse, request_id: str) -> dict[str, Any]:
    out: dict[str, Any] = {"model_name": response.model_name, "model_version": response.model_version}
    if request_id:
        out["id"] = request_id
    for tensor in response.outputs:
        if tensor.data is not None:
            out[tensor.name] = json_value(tensor.data)
    return out


def _has_data(response: InferResponse) -> bool:
    return bool(response.outputs)


def install(app: HttpApp, group: str | None = None) -> None:
    """The generate routes, in the `inference` group as Triton guards them."""
    server = app.server

    def args(req: HttpRequest) -> tuple[str, str]:
        assert req.match is not None
        return unquote(req.match.group(1)), req.match.group(2) or ""

    async def generate(req: HttpRequest) -> HttpResponse:
        name, version = args(req)
        request = to_request(server, name, version, req.body, stream=False)
        answers = []
        async for response in server.infer_stream(request):
            if response.error is not None:
                raise response.error
            if _has_data(response):
                answers.append(response)
        if len(answers) != 1:
            raise InvalidArgumentError(
                "generate expects model to produce exactly 1 response, use generate stream for model that "
                f"generates various number of responses (model '{name}' sent {len(answers)})"
            )
        return json_response(to_json(answers[0], request.id))

    async def generate_stream(req: HttpRequest) -> HttpResponse:
        name, version = args(req)
        request = to_request(server, name, version, req.body, stream=True)
        # Checked before the stream begins, so a bad request is a JSON error (as Triton answers),
        # not an event in a stream that already said 200.
        server.model(name, version).validate(request)
        return HttpResponse(200, b"", stream=_sse(server, request))

    app.add_route(_MODEL + r"/generate", "POST", "inference", generate, cancellable=True)
    app.add_route(_MODEL + r"/generate_stream", "POST", "inference", generate_stream)


async def _events(server: Any, request: InferRequest) -> AsyncGenerator[bytes, None]:
    try:
        async for response in server.infer_stream(request):
            if response.error is not None:
                raise response.error
            if _has_data(response):
                yield b"data: " + orjson.dumps(to_json(response, request.id)) + b"\n\n"
    except OpenInferError as exc:
        yield b"data: " + orjson.dumps({"error": exc.message}) + b"\n\n"


def _sse(server: Any, request: InferRequest) -> Callable[[Transport], Awaitable[None]]:
    """A streaming responder that stops the model when the client leaves."""

    async def respond(transport: Transport) -> None:
        send = transport.send
        assert send is not None
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")],
            }
        )
        stream = _events(server, request)
        try:
            with transport.cancel_on_disconnect() as guard:
                async for chunk in stream:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            await stream.aclose()  # ends the request in the core when the client left mid-stream
        if not guard.left:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    return respond


#: Triton's generate extension (not named in `GET /v2`, as Triton does not name it).
FEATURE = Feature(name="generate", http=install)
