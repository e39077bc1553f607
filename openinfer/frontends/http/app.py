"""The KServe v2 HTTP frontend as a bare ASGI application.

No web framework sits on the infer path: a regex router in Triton's shape, bodies read once,
orjson in and out. Every error becomes `{"error": "..."}` with the status from the core's table.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ...core.errors import InvalidArgumentError, OpenInferError, status_of
from ...core.requests.parameters import forward_pattern
from ...core.server import InferenceServer
from ..access import AccessPolicy
from ..asgi.transport import BodyIncomplete, BodyTooLarge, Buffer, Transport, transport_of
from .compression import UnsupportedEncodingError, decompress

log = logging.getLogger("openinfer.http")

JSON = [(b"content-type", b"application/json")]
TEXT = [(b"content-type", b"text/plain")]


@dataclass(slots=True)
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes | bytearray  # a bytearray only on a raw-body route (infer), bytes elsewhere
    match: re.Match[str] | None = None


@dataclass(slots=True)
class HttpResponse:
    status: int = 200
    body: bytes = b""
    headers: list[tuple[bytes, bytes]] = field(default_factory=lambda: list(JSON))
    #: A streaming answer (server-sent events): writes itself through the request's transport.
    stream: Callable[[Transport], Awaitable[None]] | None = None
    #: Buffers whose bytes follow `body` (binary tensors), written where they lie.
    tail: Sequence[Buffer] = ()


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


@dataclass(slots=True)
class Route:
    pattern: re.Pattern[str]
    methods: frozenset[str]
    group: str | None  # restricted-API group
    handler: Handler
    raw_body: bool = False  # handler decompresses itself (infer)
    cancellable: bool = False  # a client that disconnects cancels the handler (and its work)


def json_response(value: Any, status: int = 200) -> HttpResponse:
    return HttpResponse(status, orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY))


def error_response(status: int, message: str) -> HttpResponse:
    return HttpResponse(status, orjson.dumps({"error": message}))


@dataclass
class HttpOptions:
    max_input_size: int = 64 * 1024 * 1024
    access: AccessPolicy = field(default_factory=AccessPolicy)
    header_forward_pattern: str | None = None


def _too_large(declared: str, limit: int, header_length: str | None) -> InvalidArgumentError:
    """A body over `--http-max-input-size`, in the words Triton uses for its kind: a raw tensor
    (header length 0), a binary-data request, or a JSON one (every other route too)."""
    advice = "Use --http-max-input-size to increase the limit."
    if header_length == "0":
        return InvalidArgumentError(
            f"Raw input has a byte_size ({declared} bytes) that exceeds the maximum allowed value of {limit} bytes. "
            + advice
        )
    what = "request JSON" if header_length is None else "request"
    return InvalidArgumentError(
        f"{what} size of {declared} bytes exceeds the maximum allowed input size of {limit} bytes. {advice}"
    )


def _over_limit(limit: int) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"request size of more than {limit} bytes exceeds the maximum allowed input size of "
        f"{limit} bytes. Use --http-max-input-size to increase the limit."
    )


class HttpApp:
    """ASGI app: routes, restricted groups, body limits and the error envelope."""

    def __init__(self, server: InferenceServer, options: HttpOptions | None = None) -> None:
        self.server = server
        self.options = options or HttpOptions()
        self.routes: list[Route] = []
        self.forward = forward_pattern(self.options.header_forward_pattern)

    def add_route(
        self, pattern: str, methods: str | tuple[str, ...], group: str | None, handler: Handler, *,
        raw_body: bool = False, cancellable: bool = False,
    ) -> None:
        names = (methods,) if isinstance(methods, str) else methods
        self.routes.append(Route(re.compile(pattern + "$"), frozenset(names), group, handler, raw_body, cancellable))

    # ------------------------------------------------------------------ ASGI
    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind != "http":
            return
        transport = transport_of(scope, receive, send)
        path: str = scope["path"]
        for route in self.routes:
            match = route.pattern.match(path)
            if match is not None:
                break
        else:
            await self._send(transport, error_response(404, "Not Found"))
            return
        # ASGI servers give header names lowercased.
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if route.group is not None:
            restriction = self.options.access.restriction(route.group)
            if restriction is not None and not restriction.allows(headers.get(restriction.key.lower())):
                await transport.discard_body()
                await self._send(
                    transport,
                    error_response(403, f"This API is restricted, expecting header '{restriction.key}'"),
                )
                return
        method = scope["method"]
        if method not in route.methods:
            await transport.discard_body()
            await self._send(transport, error_response(405, "Method Not Allowed"))
            return
        try:
            body = await self._read_body(transport, headers, route.raw_body)
            if not route.raw_body:
                body = decompress(body, headers.get("content-encoding"), self.options.max_input_size)
            work = route.handler(HttpRequest(method, path, headers, body, match))
            if route.cancellable:
                with transport.cancel_on_disconnect() as guard:
                    response = await work
                if guard.left:
                    return  # the client left; the core cancelled its request
            else:
                response = await work
        except OpenInferError as exc:
            response = error_response(exc.status.http, exc.message)
            if isinstance(exc, UnsupportedEncodingError):
                response.headers.append((b"accept-encoding", exc.accept_encoding))
        except Exception as exc:  # a bug must still answer in the protocol's format
            log.exception("unhandled error on %s %s", method, path)
            response = error_response(status_of(exc).http, f"internal error: {exc}")
        if response.stream is not None:
            await response.stream(transport)
            return
        await self._send(transport, response)

    async def _read_body(self, transport: Transport, headers: dict[str, str], binary: bool = False) -> bytes | bytearray:
        """The body; on a raw-body route the transport's own buffer, which may be a bytearray."""
        limit = self.options.max_input_size
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit and not headers.get("content-encoding"):
            await transport.discard_body()
            raise _too_large(declared, limit, headers.get("inference-header-content-length") if binary else None)
        # A body without a content-length (chunked) is held to the same limit as it arrives.
        try:
            body = await transport.read_body(limit)
        except BodyTooLarge:
            raise _over_limit(limit) from None
        except BodyIncomplete:
            raise InvalidArgumentError("client disconnected before the request body was complete") from None
        return body if binary or type(body) is bytes else bytes(body)

    @staticmethod
    async def _send(transport: Transport, response: HttpResponse) -> None:
        await transport.write_response(response.status, response.headers, response.body, response.tail)

    @staticmethod
    async def _lifespan(receive: Callable, send: Callable) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
