"""The transport adapter: what an app needs from the connection, under any ASGI server.

An app asks `transport_of(scope, receive, send)` for its request's adapter and then reads the
body with `read_body()`, writes a whole response with `write_response()` and makes a stretch of
its handler cancellable with `with transport.cancel_on_disconnect() as guard:`. A listener that
knows a faster way to do these (the uvicorn protocol in `uvicorn_protocol`) puts its own adapter
into the scope under `SCOPE_KEY` before the app runs; everywhere else the plain one here is made
and kept in the scope, so every layer of one request shares it.

The plain adapter speaks ASGI only: it reads through `receive`, writes through `send`, and
notices a client that leaves by watching `receive` for `http.disconnect` while a guard is open.
It talks to the connection below any middleware, so an app that writes through it must be the
outermost one (the KServe app is; the OpenAI app only uses its guard).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from types import TracebackType
from typing import Any

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]
Buffer = bytes | bytearray | memoryview

#: The one scope key: the request's transport adapter.
SCOPE_KEY = "openinfer.transport"


class BodyTooLarge(Exception):
    """The body is longer than the limit; what arrived of it has been read and dropped."""


class BodyIncomplete(Exception):
    """The client left before its body was complete."""


def transport_of(
    scope: MutableMapping[str, Any], receive: Receive, send: Send | None = None
) -> Transport:
    """The request's adapter: the listener's own, or a plain ASGI one kept in the scope."""
    transport = scope.get(SCOPE_KEY)
    if transport is None:
        transport = scope[SCOPE_KEY] = Transport(scope, receive, send)
    return transport


class CancelOnDisconnect:
    """While the block runs, a client that leaves cancels the task that entered it.

    The cancellation ends at the block: it is forgotten (Python 3.11+ counts them), the block's
    exception is swallowed and `left` is True, so the handler ends quietly. The cancel is only
    delivered while the task waits inside the block, never after it, so no stray cancellation
    reaches the code that writes the answer.
    """

    __slots__ = ("_active", "_task", "_transport", "left")

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._task: asyncio.Task[Any] | None = None
        self._active = False
        self.left = False

    def __enter__(self) -> CancelOnDisconnect:
        self._task = asyncio.current_task()
        self._active = True
        self._transport._guard_opened(self)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        self._active = False
        self._transport._guard_closed(self)
        if not self.left:
            return False
        task = self._task  # the one cancel asked for has been delivered: forget it
        if task is not None and hasattr(task, "uncancel"):
            task.uncancel()
        return kind is not None and issubclass(kind, asyncio.CancelledError)

    def client_left(self) -> None:
        """The connection is gone: cancel the waiting handler (once)."""
        task = self._task
        if not self._active or self.left or task is None or task.done() or task is asyncio.current_task():
            return
        self.left = True
        task.cancel()


class Transport:
    """The plain ASGI adapter; `uvicorn_protocol.FastTransport` keeps its interface."""

    __slots__ = ("_guard", "_left", "_watcher", "receive", "scope", "send")

    def __init__(
        self, scope: MutableMapping[str, Any], receive: Receive, send: Send | None
    ) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send
        self._left = False
        self._guard: CancelOnDisconnect | None = None
        self._watcher: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ body
    async def read_body(self, limit: int) -> bytes | bytearray:
        """The whole request body, the request's own buffer (a body in pieces is gathered in a
        bytearray, not copied again); `BodyTooLarge` past `limit` bytes (the rest is read and
        dropped, so the connection stays usable), `BodyIncomplete` when the client leaves."""
        message = await self.receive()
        if message["type"] == "http.disconnect":
            self._left = True
            raise BodyIncomplete()
        body = message.get("body", b"")
        if len(body) > limit:
            if message.get("more_body"):
                await self.discard_body()
            raise BodyTooLarge()
        if not message.get("more_body"):
            return body
        chunks = bytearray(body)  # one growing buffer: many tiny chunks cost no per-chunk objects
        while message.get("more_body"):
            message = await self.receive()
            if message["type"] == "http.disconnect":
                self._left = True
                raise BodyIncomplete()
            chunks += message.get("body", b"")
            if len(chunks) > limit:
                if message.get("more_body"):
                    await self.discard_body()
                raise BodyTooLarge()
        return chunks

    async def discard_body(self) -> None:
        """Read and drop what is left of the body (an answer that needs none of it)."""
        message: MutableMapping[str, Any] = {"more_body": True}
        while message.get("more_body"):
            message = await self.receive()
            if message.get("type") == "http.disconnect":
                self._left = True
                return

    # ------------------------------------------------------------------ response
    async def write_response(self, status: int, headers: Headers, body: bytes, tail: Sequence[Buffer] = ()) -> None:
        """A complete response with its content-length (`headers` must not carry one); `tail`:
        buffers whose bytes follow `body` (a binary tensor where it lies, not joined to it)."""
        send = self.send
        if send is None:
            raise RuntimeError("this transport was made without `send`")
        if tail:
            body = b"".join([body, *tail])
        await send({
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", b"%d" % len(body))],
        })
        await send({"type": "http.response.body", "body": body})

    # ------------------------------------------------------------------ cancellation
    def cancel_on_disconnect(self) -> CancelOnDisconnect:
        """A guard (`with`): the enclosed wait is cancelled if the client leaves meanwhile."""
        return CancelOnDisconnect(self)

    def _guard_opened(self, guard: CancelOnDisconnect) -> None:
        self._guard = guard
        if self._left:
            asyncio.get_running_loop().call_soon(guard.client_left)
        elif self._watcher is None:
            self._watcher = asyncio.ensure_future(self._watch())

    def _guard_closed(self, guard: CancelOnDisconnect) -> None:
        if self._guard is guard:
            self._guard = None
        watcher, self._watcher = self._watcher, None
        if watcher is not None and not watcher.done():
            watcher.cancel()

    async def _watch(self) -> None:
        """Wait for `http.disconnect` (once the body is read, nothing else comes)."""
        while (await self.receive())["type"] != "http.disconnect":
            pass
        self._left = True
        guard = self._guard
        if guard is not None:
            guard.client_left()
