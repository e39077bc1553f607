"""The OpenAI-compatible ASGI app: FastAPI routes over the serving objects, one error envelope.

Bodies are parsed here with orjson and validated by the serving objects (so schema errors use
the OpenAI envelope with status 400, not FastAPI's 422 list). A client that goes away cancels
its generation: the generating handlers wait inside the transport adapter's
`cancel_on_disconnect` guard, which cancels them when the connection is lost.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from ... import __version__
from ...core.errors import OpenInferError
from ..asgi.transport import transport_of
from ..metrics import metrics_app
from .chat.serving import ChatServing
from .completion.serving import CompletionServing
from .context import FrontendContext
from .embedding.serving import EmbeddingServing
from .errors import envelope, error_bytes, invalid, unavailable
from .middleware import Access, BodySizeLimit, Cors
from .models import ModelsServing
from .responses.serving import ResponsesServing
from .responses.store import ResponseStore
from .sse import EventStream
from .tokenize import TokenizeServing

log = logging.getLogger("openinfer.openai")

_STATUS_TYPES = {401: "authentication_error", 404: "not_found_error", 405: "invalid_request_error"}


class ClientGone(Exception):
    """The client disconnected before the answer was ready."""


def _json(payload: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(payload), status_code=status, media_type="application/json")


async def _body(request: Request) -> Any:
    raw = await request.body()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise invalid(f"The request body is not valid JSON: {exc}", None, "invalid_json") from None


async def _until_disconnect(request: Request, work: Awaitable[Any]) -> Any:
    """Await `work`, cancelled if the client disconnects first. A stream is guarded again
    while it is sent (`EventStream`)."""
    with transport_of(request.scope, request.receive).cancel_on_disconnect():
        return await work
    raise ClientGone()  # reached only when the guard ended the wait because the client left


def _answer(result: dict[str, Any] | AsyncIterator[dict[str, Any]]) -> Response:
    if isinstance(result, dict):
        return _json(result)
    return EventStream(result)


def build_app(ctx: FrontendContext) -> Any:
    """The FastAPI app of the OpenAI API over one frontend context.

    Long because FastAPI declares routes and exception handlers as decorated closures over
    the app; each one is a line or two that hands the request to its serving object."""
    app = FastAPI(title="openinfer OpenAI-compatible API", version=__version__)
    chat = ChatServing(ctx)
    completions = CompletionServing(ctx)
    embeddings = EmbeddingServing(ctx)
    responses = ResponsesServing(chat, ResponseStore(ctx.options.responses_store_size))
    models = ModelsServing(ctx)
    tokens = TokenizeServing(ctx)
    metrics = metrics_app(ctx.server)
    server = ctx.server

    @app.exception_handler(OpenInferError)
    async def _core_error(request: Request, exc: OpenInferError) -> Response:
        status, body = error_bytes(exc)
        return Response(body, status_code=status, media_type="application/json")

    @app.exception_handler(ClientGone)
    async def _gone(request: Request, exc: ClientGone) -> Response:
        return Response(b"", status_code=499)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        kind = _STATUS_TYPES.get(exc.status_code, "invalid_request_error")
        return _json(envelope(str(exc.detail), kind, None, exc.status_code), exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Response:
        return _json(envelope(str(exc), "invalid_request_error", None, 400), 400)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        status, body = error_bytes(exc)
        return Response(body, status_code=status, media_type="application/json")

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return _answer(await _until_disconnect(request, chat.create(await _body(request))))

    @app.post("/v1/completions")
    async def text_completions(request: Request) -> Response:
        return _answer(await _until_disconnect(request, completions.create(await _body(request))))

    @app.post("/v1/responses")
    async def create_response(request: Request) -> Response:
        result = await _until_disconnect(request, responses.create(await _body(request)))
        return _json(result) if isinstance(result, dict) else EventStream(result, typed=True)

    @app.get("/v1/responses/{response_id}")
    async def get_response(response_id: str) -> Response:
        return _json(responses.get(response_id))

    @app.delete("/v1/responses/{response_id}")
    async def delete_response(response_id: str) -> Response:
        return _json(responses.delete(response_id))

    @app.post("/v1/embeddings")
    async def create_embeddings(request: Request) -> Response:
        return _json(await _until_disconnect(request, embeddings.create(await _body(request))))

    @app.get("/v1/models")
    async def list_models() -> Response:
        return _json(models.list())

    @app.get("/v1/models/{model_id}")
    async def get_model(model_id: str) -> Response:
        return _json(models.get(model_id))

    @app.post("/v1/models/{model_id}/load")
    async def load_model(model_id: str) -> Response:
        return _json(await models.load(model_id))

    @app.post("/v1/models/{model_id}/unload")
    async def unload_model(model_id: str) -> Response:
        return _json(await models.unload(model_id))

    @app.post("/tokenize")
    async def tokenize(request: Request) -> Response:
        return _json(await tokens.tokenize(await _body(request)))

    @app.post("/detokenize")
    async def detokenize(request: Request) -> Response:
        return _json(await tokens.detokenize(await _body(request)))

    @app.get("/health/ready")
    async def health_ready() -> Response:
        if not server.ready():
            raise unavailable("The server is not ready for inference requests.")
        return Response(b"", status_code=200)

    @app.get("/health")
    async def health() -> Response:
        if not server.live():
            raise unavailable("The server is not live.")
        return Response(b"", status_code=200)

    @app.get("/version")
    async def version() -> Response:
        return _json({"version": __version__})

    @app.get("/metrics")
    async def prometheus(request: Request) -> Response:
        captured: dict[str, Any] = {}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                captured["status"] = message["status"]
                captured["headers"] = dict(message["headers"])
            else:
                captured["body"] = captured.get("body", b"") + message.get("body", b"")

        await metrics({"type": "http", "method": "GET", "path": "/metrics", "headers": []}, request.receive, send)
        content_type = captured.get("headers", {}).get(b"content-type", b"text/plain").decode()
        return Response(captured.get("body", b""), status_code=captured.get("status", 200), media_type=content_type)

    options = ctx.options
    wrapped: Any = Cors(app, options.allowed_origins)
    wrapped = Access(wrapped, options.access, options.api_keys)
    return BodySizeLimit(wrapped, options.max_input_size)
