"""The framed channel between a frontend process and the core process.

A message is a tuple behind a 4-byte length and a codec byte: marshal-ed when it holds only
builtins (requests and answers are packed so, `messages`), pickled otherwise (errors, the
frontend's configuration). Each side gathers what one
turn of its event loop produced and writes it as one `write`, so at high concurrency a crossing
is shared by many requests, the way a dynamic batch shares the worker hop. Tensors travel inside
the frame: the frontend path carries requests a client already sent over a socket, so one more
copy through a socketpair costs no more than the parse that produced it.
"""

from __future__ import annotations

import asyncio
import logging
import marshal
import pickle
import struct
from collections.abc import Callable
from typing import Any

log = logging.getLogger("openinfer.frontends")

_HEADER = struct.Struct("<IB")  # body length, codec
MARSHAL, PICKLE = 0, 1
#: Up to this many queued bytes are joined into one write; more go out as they are.
_JOIN_MAX = 64 * 1024
#: A frame's length is 32 bits; a message larger than this fails the request that made it.
FRAME_MAX = (1 << 32) - 1


def frame_parts(message: tuple) -> tuple[bytes, bytes]:
    """A message's frame header and body, apart: a large body is written without joining."""
    try:
        payload, codec = marshal.dumps(message), MARSHAL
    except ValueError:  # something other than builtins
        payload, codec = pickle.dumps(message, protocol=5), PICKLE
    if len(payload) > FRAME_MAX:
        raise ValueError(f"message of {len(payload)} bytes exceeds the channel's frame limit")
    return _HEADER.pack(len(payload), codec), payload


def frame(message: tuple) -> bytes:
    return b"".join(frame_parts(message))


class Frames:
    """Cuts a byte stream into messages."""

    def __init__(self) -> None:
        self._rest = bytearray()

    def feed(self, data: bytes) -> list[tuple]:
        buffer = self._rest
        buffer += data
        messages = []
        offset, total = 0, len(buffer)
        with memoryview(buffer) as view:
            while total - offset >= _HEADER.size:
                length, codec = _HEADER.unpack_from(view, offset)
                end = offset + _HEADER.size + length
                if end > total:
                    break
                with view[offset + _HEADER.size : end] as body:
                    messages.append(marshal.loads(body) if codec == MARSHAL else pickle.loads(body))
                offset = end
        del buffer[:offset]
        return messages


class Channel(asyncio.Protocol):
    """One end: `send` queues a message, the loop's next turn writes everything queued at once;
    `on_message` gets each message received, `on_lost` the end of the channel."""

    def __init__(self, on_message: Callable[[tuple], None], on_lost: Callable[[], None]) -> None:
        self._on_message = on_message
        self._on_lost = on_lost
        self._frames = Frames()
        self._queued: list[bytes] = []
        self._queued_bytes = 0
        self._transport: asyncio.Transport | None = None
        self.closed = False

    @classmethod
    async def over(cls, sock: Any, on_message: Callable[[tuple], None], on_lost: Callable[[], None]) -> Channel:
        """A channel over a connected socket (one end of a socketpair)."""
        loop = asyncio.get_running_loop()
        _, channel = await loop.connect_accepted_socket(lambda: cls(on_message, on_lost), sock)
        return channel

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        for message in self._frames.feed(data):
            try:
                self._on_message(message)
            except Exception:  # one bad message must not end the channel
                log.exception("frontend channel: message %r failed", message[:1])

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._on_lost()

    def send(self, message: tuple) -> None:
        if self.closed:
            return
        header, body = frame_parts(message)
        if not self._queued:
            asyncio.get_running_loop().call_soon(self._flush)
        self._queued += (header, body)
        self._queued_bytes += len(body)

    def _flush(self) -> None:
        queued, self._queued = self._queued, []
        size, self._queued_bytes = self._queued_bytes, 0
        if self._transport is None or self.closed:
            return
        if size > _JOIN_MAX:  # large tensors: written where they lie, not copied into one buffer
            self._transport.writelines(queued)
        else:  # one buffer, one system call
            self._transport.write(b"".join(queued))

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
