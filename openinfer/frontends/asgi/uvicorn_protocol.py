"""uvicorn's httptools protocol with deadlines for slow clients and the fast transport adapter.

Deadlines (slow-loris): uvicorn only times out idle keep-alive connections, so a client that
trickles its headers, or stops in the middle of a body, would hold its connection (and the
request's buffers) forever. Here a request's headers must arrive within `timeout` seconds of
its first byte (of the connection, for a new one), and a body may not pause for longer than
`timeout`; otherwise the connection is closed.

Fast path: each request's scope carries a `FastTransport` (the adapter of `transport`) that
takes a body which arrived whole without a `receive` round, writes a whole response in one
vectored write, and is told by `connection_lost` when the client leaves, so a guarded handler
is cancelled without a watcher task. It relies on fields of uvicorn's request cycle that are
not public API: `uvicorn_compat` checks that they are there before this protocol is used.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from .transport import SCOPE_KEY, BodyTooLarge, Buffer, CancelOnDisconnect, Headers, Transport

log = logging.getLogger("openinfer.http")

DEFAULT_TIMEOUT_SECS = 30.0
#: A request body reaches the app in pieces of this size, or whole when smaller. uvicorn wakes
#: the app for every read (64 KiB) and pauses the socket past 64 KiB until the app has taken
#: it: a 700 KB JSON body cost a dozen wake-ups, pauses and copies. The apps read whole
#: bodies anyway (under `--http-max-input-size`), so they wait for the whole of a small one.
BODY_PIECE_BYTES = 1 << 20


class FastTransport(Transport):
    """The adapter on uvicorn's request cycle; falls back to ASGI messages where it must."""

    __slots__ = ("_writer", "cycle")

    def __init__(self, cycle: Any, writer: _WholeResponseWrites) -> None:
        super().__init__(cycle.scope, cycle.receive, cycle.send)
        self.cycle = cycle
        self._writer = writer

    async def read_body(self, limit: int) -> bytes | bytearray:
        cycle = self.cycle
        if cycle.more_body or cycle.waiting_for_100_continue or cycle.disconnected or cycle.response_complete:
            return await super().read_body(limit)
        # All of it is here already: no `receive` round, and the buffer it was gathered in is
        # handed over as it is (uvicorn's `receive` copies it into bytes).
        body = cycle.body
        cycle.body = bytearray()
        cycle.message_event.clear()
        cycle.flow.resume_reading()
        if len(body) > limit:
            raise BodyTooLarge()
        return body

    async def write_response(self, status: int, headers: Headers, body: bytes, tail: Sequence[Buffer] = ()) -> None:
        """What uvicorn's `send` does for the two messages of a response, less its checks of
        header names and values (ours are fixed or numbers) and the message dicts: at small
        sizes that is a tenth of a request's time. The head, the body and its tail go out in one
        vectored write. A stalled client or an access log takes the ASGI way."""
        cycle = self.cycle
        if cycle.response_started or cycle.flow.write_paused or cycle.access_log:
            await super().write_response(status, headers, body, tail)
            return
        if cycle.disconnected:
            return  # as uvicorn's `send`: nothing to write to
        parts = [STATUS_LINE[status]]
        for name, value in (*cycle.default_headers, *headers):
            parts += (name, b": ", value, b"\r\n")
        length = len(body) + sum(memoryview(piece).nbytes for piece in tail) if tail else len(body)
        parts.append(b"content-length: %d\r\n" % length)
        if not cycle.keep_alive:
            parts.append(b"connection: close\r\n")
        parts.append(b"\r\n")
        cycle.response_started = True
        cycle.waiting_for_100_continue = False
        transport = cycle.transport
        if length and self.scope["method"] != "HEAD":
            transport.writelines((b"".join(parts), body, *tail))
        else:
            transport.write(b"".join(parts))
        cycle.response_complete = True
        cycle.message_event.set()
        if not cycle.keep_alive:
            transport.close()
        cycle.on_response()

    def _guard_opened(self, guard: CancelOnDisconnect) -> None:
        # The connection's writer knows the guarded request, which is not always the
        # protocol's latest cycle (pipelined requests): `connection_lost` tells it, no watcher.
        self._guard = guard
        self._writer.guarded = self
        if self.cycle.disconnected:
            asyncio.get_running_loop().call_soon(guard.client_left)

    def _guard_closed(self, guard: CancelOnDisconnect) -> None:
        if self._guard is guard:
            self._guard = None
        if self._writer.guarded is self:
            self._writer.guarded = None

    def connection_lost(self) -> None:
        cycle, guard = self.cycle, self._guard
        if guard is None or cycle.response_complete:
            return
        cycle.disconnected = True  # uvicorn marks only the latest cycle so
        cycle.message_event.set()
        guard.client_left()

    def response_done(self) -> None:
        """The cycle's completion callback."""
        self.scope.pop(SCOPE_KEY, None)  # the cycle and its scope refer to each other only meanwhile
        self._writer.response_done()


class _WholeResponseWrites:
    """A response's transport that holds its header block until the body is written.

    uvicorn writes a response's headers and its body separately: two sends, and two wake-ups
    of the client, of which a small response is mostly made. Holding a head that announces a
    content-length until the body follows sends the response in one vectored write. A stream
    (no content-length) and a 100 Continue go out at once as before.
    """

    __slots__ = ("_head", "_on_response", "_transport", "guarded")

    def __init__(self, transport: asyncio.Transport, on_response: Callable[[], None]) -> None:
        self._transport = transport
        self._head: bytes | None = None
        self._on_response = on_response
        #: the request whose handler waits in a disconnect guard, if any
        self.guarded: FastTransport | None = None

    def write(self, data: bytes) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.writelines((head, data))
        elif data.startswith(b"HTTP/1.1 ") and b"\r\ncontent-length: " in data:
            self._head = data
        else:
            self._transport.write(data)

    def writelines(self, data: tuple[bytes, ...]) -> None:
        self.flush()
        self._transport.writelines(data)

    def flush(self) -> None:
        """Send a held head whose response ends without a body write (HEAD, a failed handler)."""
        head, self._head = self._head, None
        if head is not None and not self._transport.is_closing():
            self._transport.write(head)

    def response_done(self) -> None:
        """The cycle's completion callback: nothing may stay held once a response is complete."""
        self.flush()
        self._on_response()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def protocol_class(timeout: float = DEFAULT_TIMEOUT_SECS) -> type[asyncio.Protocol]:
    """An httptools protocol class whose connections obey `timeout` (seconds, > 0) and whose
    requests carry a `FastTransport`. Long because it is the class itself, made per timeout
    (uvicorn takes a class, not an instance); each of its methods is short."""

    class SlowClientGuard(HttpToolsProtocol):
        # The deadline is a time, checked by one timer per connection that re-arms itself only
        # while a deadline is set: setting and clearing it for every request costs no timer.
        _due: float | None = None
        _timer: asyncio.TimerHandle | None = None
        _writer: _WholeResponseWrites | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._writer = _WholeResponseWrites(transport, self.on_response_complete)
            self._arm()  # a connection that never sends a request is dropped too

        def data_received(self, data: bytes) -> None:
            cycle = self.cycle
            if cycle is None or cycle.response_complete:
                if self._due is None:  # the first byte of the next request's headers
                    self._arm()
            elif cycle.more_body:
                self._arm()  # the body moved: a fresh pause allowance
            super().data_received(data)

        def on_body(self, body: bytes) -> None:
            cycle = self.cycle
            if cycle is None or cycle.response_complete or self.parser.should_upgrade():
                super().on_body(body)
                return
            cycle.body += body
            if len(cycle.body) >= BODY_PIECE_BYTES:
                self.flow.pause_reading()  # resumed when the app takes the piece
                cycle.message_event.set()

        def on_headers_complete(self) -> None:
            self._due = None
            super().on_headers_complete()
            cycle, writer = self.cycle, self._writer
            if cycle is not None and writer is not None:
                adapter = FastTransport(cycle, writer)
                cast("dict[str, Any]", cycle.scope)[SCOPE_KEY] = adapter
                cycle.transport = cast(asyncio.Transport, writer)
                cycle.on_response = adapter.response_done
                if cycle.more_body:
                    self._arm()

        def on_message_complete(self) -> None:
            self._due = None
            super().on_message_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._due = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            cycle, writer = self.cycle, self._writer
            super().connection_lost(exc)
            if cycle is not None:
                cast("dict[str, Any]", cycle.scope).pop(SCOPE_KEY, None)
            if writer is not None and writer.guarded is not None:
                writer.guarded.connection_lost()

        def _arm(self) -> None:
            self._due = due = self.loop.time() + timeout
            if self._timer is None:
                self._timer = self.loop.call_at(due, self._check)

        def _check(self) -> None:
            self._timer = None
            due = self._due
            if due is None:
                return  # nothing pending: the next deadline arms the timer again
            if self.loop.time() < due:
                self._timer = self.loop.call_at(due, self._check)
                return
            self._due = None
            if not self.transport.is_closing():
                log.debug("closing a connection that sent no complete request within %.0fs", timeout)
                self.transport.close()

    return SlowClientGuard
