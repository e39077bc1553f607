"""Handlers for the core v2 endpoints, model configuration, statistics and repository."""

from __future__ import annotations

import base64
from urllib.parse import unquote

from ...core import config as configs
from ...core import datatypes
from ...core.errors import InvalidArgumentError
from ...core.parameters import RESERVED
from ...core.protocols import Protocol
from ...core.types import InferRequest, Tensor
from . import extensions
from .app import TEXT, HttpApp, HttpRequest, HttpResponse, error_response, json_response
from .codec import decode_request, encode_response, loads_object
from .compression import choose_encoding, compress, decompress

# The version is read by the core (`core/versions.py`), as every frontend's is.
_MODEL = r"/v2/models/([^/]+)(?:/versions/([^/]+))?"


def _model_args(req: HttpRequest) -> tuple[str, str]:
    assert req.match is not None
    return unquote(req.match.group(1)), unquote(req.match.group(2) or "")


def _header_length(value: str | None, body_length: int) -> int | None:
    if value is None:
        return None
    try:
        length = int(value)
    except ValueError:
        raise InvalidArgumentError(f"Unable to parse Inference-Header-Content-Length, got: {value}") from None
    if length < 0 or length > body_length:
        raise InvalidArgumentError(
            f"inference header size should be in range (0, {body_length}), got: {value}"
        )
    return length


def install(app: HttpApp) -> None:
    server = app.server
    opts = app.options

    async def live(req: HttpRequest) -> HttpResponse:
        return HttpResponse(200 if server.live() else 400, b"", list(TEXT))

    async def ready(req: HttpRequest) -> HttpResponse:
        return HttpResponse(200 if server.ready() else 400, b"", list(TEXT))

    async def server_metadata(req: HttpRequest) -> HttpResponse:
        meta = server.metadata()
        return json_response({"name": meta.name, "version": meta.version, "extensions": meta.extensions})

    async def model_ready(req: HttpRequest) -> HttpResponse:
        name, version = _model_args(req)
        if not await server.model_readiness(name, version):  # unknown and unloaded too, as Triton
            return error_response(400, "Model version not ready")
        return HttpResponse(200, b"", list(TEXT))

    async def model_metadata(req: HttpRequest) -> HttpResponse:
        name, version = _model_args(req)
        meta = server.model_metadata(name, version)
        return json_response(
            {
                "name": meta.name,
                "versions": meta.versions,
                "platform": meta.platform,
                "inputs": [{"name": t.name, "datatype": t.datatype, "shape": t.shape} for t in meta.inputs],
                "outputs": [{"name": t.name, "datatype": t.datatype, "shape": t.shape} for t in meta.outputs],
            }
        )

    async def model_config(req: HttpRequest) -> HttpResponse:
        name, version = _model_args(req)
        return json_response(configs.config_to_json(server.model_config(name, version)))

    async def infer(req: HttpRequest) -> HttpResponse:
        name, version = _model_args(req)
        body = decompress(req.body, req.headers.get("content-encoding"), opts.max_input_size)
        header_length = _header_length(req.headers.get("inference-header-content-length"), len(body))
        if header_length == 0:
            request, binary_default = _raw_request(body, name, version), True
        else:
            request, binary_default = decode_request(body, header_length, name, version)
        if app.forward is not None:
            _forward_headers(app, req, request)
        response = await server.infer(request, protocol=Protocol.HTTP)
        payload, json_length = encode_response(response, binary_default)
        headers = [(b"content-type", b"application/json" if json_length is None else b"application/octet-stream")]
        if json_length is not None:
            headers.append((b"inference-header-content-length", str(json_length).encode()))
        encoding = choose_encoding(req.headers.get("accept-encoding"))
        if encoding is not None:
            payload = compress(payload, encoding)
            headers.append((b"content-encoding", encoding.encode()))
        return HttpResponse(200, payload, headers)

    def _raw_request(body: bytes, name: str, version: str) -> InferRequest:
        """Header length 0: the whole body is the data of the model's only input."""
        model = server.model(name, version)
        if len(model.inputs) != 1:
            raise InvalidArgumentError(
                f"Raw request must only have 1 input (found 1) to be deduced but got "
                f"{len(model.inputs)} inputs in '{name}' model configuration"
            )
        spec = next(iter(model.inputs.values()))
        dims = list(spec.dims)
        if spec.datatype == "BYTES":
            shape = [1]
        else:
            size = datatypes.lookup(spec.datatype).size
            known = datatypes.element_count([d for d in dims if d != -1])
            variable = dims.count(-1)
            if variable > 1:
                raise InvalidArgumentError(
                    f"Raw request for model '{name}' can have at most one variable-size dimension"
                )
            if variable == 1:
                dims[dims.index(-1)] = len(body) // size // max(known, 1)
            shape = dims
        if model.max_batch_size > 0:
            shape = [1, *shape]
        array = datatypes.from_wire_bytes(memoryview(body), spec.datatype, tuple(shape), name=spec.name, model=name)
        return InferRequest(model_name=name, model_version=version, inputs=[Tensor(spec.name, spec.datatype, tuple(shape), array)])

    async def model_stats(req: HttpRequest) -> HttpResponse:
        name, version = ("", "") if req.match is None or req.match.lastindex is None else _model_args(req)
        return json_response({"model_stats": server.statistics(name, version)})

    async def repository_index(req: HttpRequest) -> HttpResponse:
        ready = False
        if req.body.strip():
            value = loads_object(req.body).get("ready", False)
            if not isinstance(value, bool):
                raise InvalidArgumentError("Invalid value for 'ready': expected a boolean")
            ready = value
        return json_response(server.repository_index(ready, _repository_name(req)))

    async def repository_load(req: HttpRequest) -> HttpResponse:
        name = unquote(req.match.group(2))  # type: ignore[union-attr]
        parameters = _body_parameters(req.body)
        for key, value in parameters.items():  # file contents travel as base64 strings
            if key.startswith("file:") and isinstance(value, str):
                try:
                    parameters[key] = base64.b64decode(value, validate=True)
                except ValueError:
                    raise InvalidArgumentError(f"'{key}' must be base64-encoded file content") from None
        await server.load_request(name, parameters, _repository_name(req))
        return HttpResponse(200, b"")

    async def repository_unload(req: HttpRequest) -> HttpResponse:
        name = unquote(req.match.group(2))  # type: ignore[union-attr]
        await server.unload_request(name, _body_parameters(req.body), _repository_name(req))
        return HttpResponse(200, b"")

    # Infer first: routes are tried in order, and it is the one that carries the load.
    app.add_route(_MODEL + r"/infer", "POST", "inference", infer, raw_body=True, cancellable=True)
    app.add_route(r"/v2/health/live", "GET", "health", live)
    app.add_route(r"/v2/health/ready", "GET", "health", ready)
    app.add_route(r"/v2", "GET", "metadata", server_metadata)
    app.add_route(r"/v2/models/stats", "GET", "statistics", model_stats)
    app.add_route(_MODEL + r"/ready", "GET", "health", model_ready)
    app.add_route(_MODEL + r"/config", "GET", "model-config", model_config)
    app.add_route(_MODEL + r"/stats", "GET", "statistics", model_stats)
    app.add_route(_MODEL, "GET", "metadata", model_metadata)
    app.add_route(r"/v2/repository(?:/([^/]+))?/index", "POST", "model-repository", repository_index)
    app.add_route(r"/v2/repository(?:/([^/]+))?/models/([^/]+)/load", "POST", "model-repository", repository_load)
    app.add_route(r"/v2/repository(?:/([^/]+))?/models/([^/]+)/unload", "POST", "model-repository", repository_unload)
    extensions.install(app)  # shared memory, trace, logging


def _repository_name(req: HttpRequest) -> str:
    return unquote(req.match.group(1) or "") if req.match is not None else ""


def _body_parameters(body: bytes) -> dict:
    """The `parameters` object of a repository request body (an empty body has none)."""
    if not body.strip():
        return {}
    params = loads_object(body).get("parameters", {})
    if not isinstance(params, dict):
        raise InvalidArgumentError("Unable to parse 'parameters': expected a JSON object")
    return dict(params)


def _forward_headers(app: HttpApp, req: HttpRequest, request: InferRequest) -> None:
    for key, value in req.headers.items():
        if app.forward is not None and app.forward.search(key):
            if key in RESERVED or key.startswith("triton_"):
                raise InvalidArgumentError(f"Header '{key}' is reserved for Triton usage and cannot be forwarded.")
            request.parameters[key] = value

