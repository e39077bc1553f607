"""Server-sent events as OpenAI streams them: `data: <json>\\n\\n` ... `data: [DONE]\\n\\n`.

The Responses API streams typed events instead: each one named by an `event: <type>` line, and
the last one (`response.completed` and its kin) ends the stream, with no `[DONE]`.

An error after the stream has started cannot change the status code any more, so it is sent as
one `data: {"error": {...}}` event, followed by `[DONE]` like every other stream.

`EventStream` is a bare ASGI response, because its loop runs once per generated token: one
`send` per event. A client that leaves cancels the stream (the transport adapter's
`cancel_on_disconnect`); the cancellation closes the chunk generators, and closing them cancels
the request in the core.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, MutableMapping
from typing import Any

import orjson
from starlette.responses import Response

from ...core.errors import OpenInferError
from ..asgi.transport import transport_of
from .errors import error_payload

log = logging.getLogger("openinfer.openai")

DONE = b"data: [DONE]\n\n"
HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
#: What a stream's generators may raise mid-stream that becomes an error event (not a 500).
STREAM_ERRORS = (OpenInferError, ValueError, RuntimeError, KeyError, TypeError)


def event(payload: Any, name: str | None = None) -> bytes:
    head = b"event: " + name.encode() + b"\n" if name else b""
    return head + b"data: " + orjson.dumps(payload) + b"\n\n"


class EventStream(Response):
    """ASGI response: `chunks` as `data:` events, then `[DONE]` (a Starlette `Response` only so
    that FastAPI passes it through). `typed`: each event named by its `type`, and no `[DONE]`."""

    def __init__(self, chunks: AsyncIterator[dict[str, Any]], *, typed: bool = False) -> None:  # no body: not Response's
        self.chunks = chunks
        self.typed = typed
        self.background = None

    async def __call__(
        self, scope: MutableMapping[str, Any], receive: Callable, send: Callable
    ) -> None:
        chunks = self.chunks
        try:
            with transport_of(scope, receive).cancel_on_disconnect() as guard:
                await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
                try:
                    async for chunk in chunks:
                        body = event(chunk, chunk["type"] if self.typed else None)
                        await send({"type": "http.response.body", "body": body, "more_body": True})
                except STREAM_ERRORS as exc:
                    if not isinstance(exc, OpenInferError):
                        log.exception("error while streaming")
                    body = event(error_payload(exc)[1], "error" if self.typed else None)
                    await send({"type": "http.response.body", "body": body, "more_body": True})
            if not guard.left:
                await send({"type": "http.response.body", "body": b"" if self.typed else DONE, "more_body": False})
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]
