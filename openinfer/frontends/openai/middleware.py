"""Raw ASGI middleware (no BaseHTTPMiddleware: bodies are counted chunk by chunk and client
disconnects still reach streaming responses).

Order, outermost first: body size limit -> access (restricted API groups, API keys) -> CORS ->
routes. An oversized unauthenticated request therefore gets 413, as in Triton.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from typing import Any

import orjson

from ..access import AccessPolicy
from .errors import envelope

log = logging.getLogger("openinfer.openai")

Scope = dict[str, Any]
ASGIApp = Callable[..., Any]


async def send_error(send: Callable, status: int, message: str, type_: str, code: str) -> None:
    body = orjson.dumps(envelope(message, type_, None, code))
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _too_large(limit: int) -> str:
    """The wording of Triton's OpenAI frontend documentation (its code says `Request size of N bytes`)."""
    return (
        f"Request content size exceeds the maximum allowed input size of {limit} bytes. "
        "Use --http-max-input-size to increase the limit."
    )


class BodySizeLimit:
    """Rejects bodies over `limit` bytes before any parsing; replays accepted bodies once."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = None
        for key, value in scope.get("headers", []):
            if key == b"content-length":
                declared = value.decode("latin-1").strip()
                break
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await send_error(send, 400, "Invalid Content-Length header: not an integer.",
                                 "invalid_request_error", "invalid_content_length")
                return
            if length < 0:
                await send_error(send, 400, "Invalid Content-Length header: must be non-negative.",
                                 "invalid_request_error", "invalid_content_length")
                return
            if length > self.limit:
                await send_error(send, 413, _too_large(self.limit), "invalid_request_error", "content_too_large")
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await send_error(send, 413, _too_large(self.limit), "invalid_request_error", "content_too_large")
                return
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        body = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([body], receive), send)


def _replay(messages: list[dict], receive: Callable) -> Callable:
    pending = list(messages)

    async def replayed() -> dict:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


#: (method, path prefix) -> API group, as Triton's `--openai-restricted-api` groups.
ROUTE_GROUPS: list[tuple[str, str, str]] = [
    ("POST", "/v1/chat/completions", "inference"),
    ("POST", "/v1/completions", "inference"),
    ("POST", "/v1/responses", "inference"),
    ("GET", "/v1/responses", "inference"),
    ("DELETE", "/v1/responses", "inference"),
    ("POST", "/tokenize", "inference"),
    ("POST", "/detokenize", "inference"),
    ("POST", "/v1/embeddings", "embedding"),
    ("GET", "/v1/models", "model-repository"),
    ("POST", "/v1/models/", "model-repository"),
    ("GET", "/metrics", "metrics"),
    ("GET", "/health", "health"),
]


def group_of(method: str, path: str) -> str | None:
    for route_method, prefix, group in ROUTE_GROUPS:
        if method == route_method and path.startswith(prefix):
            return group
    return None


class Access:
    """Restricted API groups (header key/value) and `Authorization: Bearer` API keys."""

    def __init__(self, app: ASGIApp, policy: AccessPolicy, api_keys: list[str]) -> None:
        self.app = app
        self.policy = policy
        self.api_keys = [k.encode() for k in api_keys]

    def _restriction(self, group: str | None):
        if group is None:
            return None
        found = self.policy.restriction(group)
        if found is None and group == "embedding":  # Triton puts embeddings under `inference`
            found = self.policy.restriction("inference")
        return found

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["method"] == "OPTIONS":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        path = scope["path"]
        restriction = self._restriction(group_of(scope["method"], path))
        if restriction is not None and not restriction.allows(headers.get(restriction.key.lower()) or None):
            await send_error(send, 401, f"This API is restricted, expecting header '{restriction.key}' with valid value",
                             "authentication_error", "invalid_auth")
            return
        if self.api_keys and (path.startswith("/v1/") or path in ("/tokenize", "/detokenize")):
            presented = headers.get("authorization", "")
            token = presented[7:].strip().encode() if presented[:7].lower() == "bearer " else b""
            if not any(hmac.compare_digest(token, key) for key in self.api_keys):
                await send_error(send, 401, "Invalid or missing API key: send 'Authorization: Bearer <key>'",
                                 "authentication_error", "invalid_api_key")
                return
        await self.app(scope, receive, send)


class Cors:
    """CORS for browsers (Triton's settings: credentials, any method and header, listed origins).

    Unlike Starlette's middleware it leaves requests without an `Origin` header untouched, so the
    per-chunk path of a streamed answer has no extra wrapper for API clients.
    """

    def __init__(self, app: ASGIApp, origins: list[str]) -> None:
        self.app = app
        self.any = "*" in origins
        self.origins = {o.encode("latin-1") for o in origins}

    def _allowed(self, origin: bytes) -> bool:
        return self.any or origin in self.origins

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        origin = None
        requested_method = requested_headers = None
        for key, value in scope.get("headers", []):
            if key == b"origin":
                origin = value
            elif key == b"access-control-request-method":
                requested_method = value
            elif key == b"access-control-request-headers":
                requested_headers = value
        if origin is None:
            await self.app(scope, receive, send)
            return
        allowed = self._allowed(origin)
        if scope["method"] == "OPTIONS" and requested_method is not None:
            headers = [(b"vary", b"Origin"), (b"content-length", b"2"), (b"content-type", b"text/plain")]
            if allowed:
                headers += [
                    (b"access-control-allow-origin", origin),
                    (b"access-control-allow-credentials", b"true"),
                    (b"access-control-allow-methods", b"DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"),
                    (b"access-control-max-age", b"600"),
                ]
                if requested_headers:
                    headers.append((b"access-control-allow-headers", requested_headers))
            await send({"type": "http.response.start", "status": 200 if allowed else 400, "headers": headers})
            await send({"type": "http.response.body", "body": b"OK"})
            return

        async def with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"vary", b"Origin"))
                if allowed:
                    headers += [(b"access-control-allow-origin", origin), (b"access-control-allow-credentials", b"true")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)
