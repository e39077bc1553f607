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

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

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
#: Scope key: the request's uvicorn cycle, for `write_whole`.
CYCLE = "openinfer.cycle"


def write_whole(scope: dict, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> bool:
    """Write a complete response (head and body) to the connection in one go; False when the
    app must use ASGI `send` instead (another server, a stalled client, an access log).

    What uvicorn's `send` does for the two messages of a response, less its checks of header
    names and values (ours are fixed or numbers) and the message dicts: at small sizes that is
    a tenth of a request's time.
    """
    cycle = scope.get(CYCLE)
    if cycle is None or cycle.response_started or cycle.flow.write_paused or cycle.access_log:
        return False
    if cycle.disconnected:
        return True  # as uvicorn's `send`: nothing to write to
    parts = [STATUS_LINE[status]]
    for name, value in (*cycle.default_headers, *headers):
        parts += (name, b": ", value, b"\r\n")
    parts.append(b"content-length: %d\r\n" % len(body))
    if not cycle.keep_alive:
        parts.append(b"connection: close\r\n")
    parts.append(b"\r\n")
    cycle.response_started = True
    cycle.waiting_for_100_continue = False
    transport = cycle.transport
    if body and scope["method"] != "HEAD":
        transport.writelines((b"".join(parts), body))
    else:
        transport.write(b"".join(parts))
    cycle.response_complete = True
    cycle.message_event.set()
    if not cycle.keep_alive:
        transport.close()
    cycle.on_response()
    return True


def take_body(scope: dict) -> bytes | None:
    """The request's whole body when all of it has arrived (what ASGI `receive` would return,
    without the message); None when the app must `receive` it."""
    cycle = scope.get(CYCLE)
    if (
        cycle is None
        or cycle.more_body
        or cycle.waiting_for_100_continue
        or cycle.disconnected
        or cycle.response_complete
    ):
        return None
    body = bytes(cycle.body)
    cycle.body = bytearray()
    cycle.message_event.clear()
    cycle.flow.resume_reading()
    return body


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

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._transport, name)


def protocol_class(timeout: float = DEFAULT_TIMEOUT_SECS) -> type[asyncio.Protocol]:
    """An httptools protocol class whose connections obey `timeout` (seconds, > 0)."""

    class SlowClientGuard(HttpToolsProtocol):
        # The deadline is a time, checked by one timer per connection that re-arms itself only
        # while a deadline is set: setting and clearing it for every request costs no timer.
        _due: float | None = None
        _timer: asyncio.TimerHandle | None = None
        _task: asyncio.Task | None = None
        _writer: _WholeResponseWrites | None = None

        def _start_asgi_task(self, cycle, app) -> None:  # type: ignore[no-untyped-def]
            # As uvicorn does, keeping the task: a lost connection cancels it (no watcher
            # task per request needed for that).
            task = self.loop.create_task(cycle.run_asgi(app))
            task.add_done_callback(self.tasks.discard)
            self.tasks.add(task)
            self._task = task

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
                scope = cycle.scope
                scope[CYCLE] = cycle

                def response_done() -> None:
                    scope.pop(CYCLE, None)  # the cycle and its scope refer to each other only meanwhile
                    writer.response_done()

                cycle.transport, cycle.on_response = writer, response_done
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
            cycle, task = self.cycle, self._task
            if cycle is not None:
                cycle.scope.pop(CYCLE, None)
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
