"""uvicorn's httptools protocol with deadlines for slow clients (slow-loris).

uvicorn only times out idle keep-alive connections: a client that trickles its headers, or
stops in the middle of a body, holds its connection (and the request's buffers) forever.
Here a request's headers must arrive within `timeout` seconds of its first byte (of the
connection, for a new one), and a body may not pause for longer than `timeout`; otherwise the
connection is closed. Every HTTP listener (KServe, metrics, OpenAI) uses this protocol.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("openinfer.http")

DEFAULT_TIMEOUT_SECS = 30.0
#: A request body reaches the app in pieces of this size, or whole when smaller. uvicorn wakes
#: the app for every read (64 KiB) and pauses the socket past 64 KiB until the app has taken
#: it: a 700 KB JSON body cost a dozen wake-ups, pauses and copies. The app reads whole
#: bodies anyway (under `--http-max-input-size`), so it waits for the whole of a small one.
BODY_PIECE_BYTES = 1 << 20
#: Scope keys: an app sets the first while a disconnect should cancel its handler; the
#: protocol sets the second just before it cancels, so the app can tell why.
CANCEL_ON_DISCONNECT = "openinfer.cancel_on_disconnect"
DISCONNECTED = "openinfer.disconnected"


class _WholeResponseWrites:
    """A response's transport that holds its header block until the body is written.

    uvicorn writes a response's headers and its body separately: two sends, and two wake-ups
    of the client, of which a small response is mostly made. Holding a head that announces a
    content-length until the body follows sends the response in one vectored write. A stream
    (no content-length) and a 100 Continue go out at once as before.
    """

    __slots__ = ("_transport", "_head", "_on_response")

    def __init__(self, transport: asyncio.Transport, on_response: Callable[[], None]) -> None:
        self._transport = transport
        self._head: bytes | None = None
        self._on_response = on_response

    def write(self, data: bytes) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.writelines((head, data))
        elif data.startswith(b"HTTP/1.1 ") and b"\r\ncontent-length: " in data:
            self._head = data
        else:
            self._transport.write(data)

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

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._transport, name)


def protocol_class(timeout: float = DEFAULT_TIMEOUT_SECS) -> type[asyncio.Protocol]:
    """An httptools protocol class whose connections obey `timeout` (seconds, > 0)."""

    class SlowClientGuard(HttpToolsProtocol):
        _deadline: asyncio.TimerHandle | None = None
        _task: asyncio.Task | None = None

        def _start_asgi_task(self, cycle, app) -> None:  # type: ignore[no-untyped-def]
            # As uvicorn does, keeping the task: a lost connection cancels it (no watcher
            # task per request needed for that).
            task = self.loop.create_task(cycle.run_asgi(app))
            task.add_done_callback(self.tasks.discard)
            self.tasks.add(task)
            self._task = task

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()  # a connection that never sends a request is dropped too

        def data_received(self, data: bytes) -> None:
            cycle = self.cycle
            if cycle is None or cycle.response_complete:
                if self._deadline is None:  # the first byte of the next request's headers
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
            self._disarm()
            super().on_headers_complete()
            cycle = self.cycle
            if cycle is not None:
                writer = _WholeResponseWrites(self.transport, cycle.on_response)
                cycle.transport, cycle.on_response = writer, writer.response_done
                if cycle.more_body:
                    self._arm()

        def on_message_complete(self) -> None:
            self._disarm()
            super().on_message_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            cycle, task = self.cycle, self._task
            if (
                cycle is not None
                and task is not None
                and not task.done()
                and not cycle.response_complete
                and cycle.scope.get(CANCEL_ON_DISCONNECT)
            ):
                cycle.scope[DISCONNECTED] = True
                task.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(timeout, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                log.debug("closing a connection that sent no complete request within %.0fs", timeout)
                self.transport.close()

    return SlowClientGuard
