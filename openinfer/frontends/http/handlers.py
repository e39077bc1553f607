"""Routes of the protocol's own endpoints: health, server and model metadata, readiness, infer.

The protocol extensions' routes are in `openinfer/extensions/<name>/http.py`; the composition
root hands their installers to `install`. Handlers are module-level functions of the app and
the request, so each can be imported and called alone.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from ...core.errors import InvalidArgumentError, OpenInferError
from ...core.observability import trace_context
from ...core.observability.failure_log import log_failure
from ...core.requests.parameters import forward_headers
from ...core.requests.protocols import Protocol
from ...core.requests.raw_input import raw_request
from ...core.types import InferRequest, InferResponse
from .app import TEXT, HttpApp, HttpRequest, HttpResponse, error_response, json_response
from .codec import decode_request, encode_response
from .compression import choose_encoding, compress, decompress
from .paths import MODEL, model_args


async def live(app: HttpApp, req: HttpRequest) -> HttpResponse:
    return HttpResponse(200 if app.server.live() else 400, b"", list(TEXT))


async def ready(app: HttpApp, req: HttpRequest) -> HttpResponse:
    return HttpResponse(200 if app.server.ready() else 400, b"", list(TEXT))


async def server_metadata(app: HttpApp, req: HttpRequest) -> HttpResponse:
    meta = app.server.metadata()
    return json_response({"name": meta.name, "version": meta.version, "extensions": meta.extensions})


async def model_ready(app: HttpApp, req: HttpRequest) -> HttpResponse:
    name, version = model_args(req)
    if not await app.server.model_readiness(name, version):  # unknown and unloaded too, as Triton
        return error_response(400, "Model version not ready")
    return HttpResponse(200, b"", list(TEXT))


async def model_metadata(app: HttpApp, req: HttpRequest) -> HttpResponse:
    name, version = model_args(req)
    meta = app.server.model_metadata(name, version)
    return json_response(
        {
            "name": meta.name,
            "versions": meta.versions,
            "platform": meta.platform,
            "inputs": [{"name": t.name, "datatype": t.datatype, "shape": t.shape} for t in meta.inputs],
            "outputs": [{"name": t.name, "datatype": t.datatype, "shape": t.shape} for t in meta.outputs],
        }
    )


async def infer(app: HttpApp, req: HttpRequest) -> HttpResponse:
    name, version = model_args(req)
    request: InferRequest | None = None
    try:
        try:
            request, binary_default = decode_infer(app, req, name, version)
        except InvalidArgumentError:
            app.server.model(name, version)  # as Triton: an unknown model is 404 whatever the body
            raise
        response = await app.server.infer(request, protocol=Protocol.HTTP)
    except OpenInferError as exc:
        log_failure(request.id if request is not None else exc.request_id, exc.message)
        raise
    return encode_infer(req, response, binary_default)


def decode_infer(app: HttpApp, req: HttpRequest, name: str, version: str) -> tuple[InferRequest, bool]:
    """The inference an infer request's body asks for, and whether its outputs default to binary."""
    body = decompress(req.body, req.headers.get("content-encoding"), app.options.max_input_size)
    header_length = _header_length(req.headers.get("inference-header-content-length"), len(body))
    if header_length == 0:
        request, binary_default = raw_request(app.server.model(name, version), body, version), True
    else:
        request, binary_default = decode_request(body, header_length, name, version)
    if app.forward is not None:
        forward_headers(app.forward, req.headers.items(), request)
    if app.server.trace.propagates_context:  # only OpenTelemetry spans have a client parent
        request.trace_parent = trace_context.carrier(req.headers)  # W3C traceparent / tracestate
    return request, binary_default


def encode_infer(req: HttpRequest, response: InferResponse, binary_default: bool) -> HttpResponse:
    """The answer to an infer request, compressed as its `Accept-Encoding` allows."""
    payload, blobs, json_length = encode_response(response, binary_default)
    headers = [(b"content-type", b"application/json" if json_length is None else b"application/octet-stream")]
    if json_length is not None:
        headers.append((b"inference-header-content-length", str(json_length).encode()))
    encoding = choose_encoding(req.headers.get("accept-encoding"))
    if encoding is not None:
        payload, blobs = compress(b"".join([payload, *blobs]), encoding), []
        headers.append((b"content-encoding", encoding.encode()))
    return HttpResponse(200, payload, headers, tail=blobs)


def install(app: HttpApp, extensions: Sequence[Callable[[HttpApp], None]] = ()) -> None:
    """The protocol's own routes, and those of the protocol extensions given (the composition
    root passes them: this frontend does not know which extensions exist)."""

    def add(pattern: str, methods: str, group: str, handler: Callable, **flags: bool) -> None:
        app.add_route(pattern, methods, group, functools.partial(handler, app), **flags)

    # Infer first: routes are tried in order, and it is the one that carries the load.
    add(MODEL + r"/infer", "POST", "inference", infer, raw_body=True, cancellable=True)
    add(r"/v2/health/live", "GET", "health", live)
    add(r"/v2/health/ready", "GET", "health", ready)
    add(r"/v2", "GET", "metadata", server_metadata)
    add(MODEL + r"/ready", "GET", "health", model_ready)
    for install_extension in extensions:  # before the model-metadata route, which would
        install_extension(app)  # take `/v2/models/stats` for a model named "stats"
    add(MODEL, "GET", "metadata", model_metadata)


def _header_length(value: str | None, body_length: int) -> int | None:
    """The JSON header's length; None: the whole body is JSON. 0 asks for a raw request, and so
    does an empty body without the header, as in Triton (the header's length defaults to the
    body's)."""
    if value is None:
        return None if body_length else 0
    try:
        length = int(value)
    except ValueError:
        raise InvalidArgumentError(f"Unable to parse Inference-Header-Content-Length, got: {value}") from None
    if length < 0 or length > body_length:
        raise InvalidArgumentError(f"inference header size should be in range (0, {body_length}), got: {value}")
    return length

