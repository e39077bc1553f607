"""A minimal keep-alive HTTP/1.1 client over asyncio streams.

A load generator spends most of its CPU in its HTTP client. Requests here are pre-encoded bytes
and a response is read as status line, a few headers and a Content-Length (or chunked) body, with
no per-request object graph; this costs a fraction of what httpx or aiohttp spend per request
(``benchmarks/client_cost.py`` measures the difference).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass


class HttpError(ConnectionError):
    """The peer closed the connection or sent something that is not HTTP/1.1."""


@dataclass
class Response:
    status: int
    headers: dict[bytes, bytes]  # lower-case names
    body: bytes


def encode_request(
    method: str,
    host: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> bytes:
    """The full request bytes, built once and sent many times."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class HttpConnection:
    """One persistent connection; one request at a time (HTTP/1.1 without pipelining)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(
            self.host, self.port, limit=1 << 20
        )

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def request(self, data: bytes) -> Response:
        """Send one request and read the whole response; reconnects once if the peer closed."""
        if self.writer is None:
            await self.open()
        try:
            return await self._exchange(data)
        except (HttpError, ConnectionError, asyncio.IncompleteReadError):
            self.close()
            await self.open()
            return await self._exchange(data)

    async def _exchange(self, data: bytes) -> Response:
        assert self.writer is not None and self.reader is not None
        self.writer.write(data)
        status, headers = await self._read_head()
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            body = b"".join([c async for c in self._chunks()])
        elif b"content-length" in headers:
            body = await self.reader.readexactly(int(headers[b"content-length"]))
        else:  # close-delimited
            body = await self.reader.read()
            self.close()
        if headers.get(b"connection", b"").lower() == b"close":
            self.close()
        return Response(status, headers, body)

    async def _read_head(self) -> tuple[int, dict[bytes, bytes]]:
        assert self.reader is not None
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            raise HttpError("connection closed by the server") from exc
        lines = head[:-4].split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise HttpError(f"not an HTTP/1.1 response: {lines[0][:80]!r}")
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            headers[k.strip().lower()] = v.strip()
        return int(parts[1]), headers

    async def _chunks(self) -> AsyncIterator[bytes]:
        assert self.reader is not None
        while True:
            size_line = await self.reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")  # trailers are not used by v2/OpenAI
                return
            chunk = await self.reader.readexactly(size + 2)
            yield chunk[:-2]

    async def stream(self, data: bytes) -> tuple[int, dict[bytes, bytes], AsyncIterator[bytes]]:
        """Send a request and return the body as it arrives (for server-sent events)."""
        if self.writer is None:
            await self.open()
        assert self.writer is not None and self.reader is not None
        self.writer.write(data)
        status, headers = await self._read_head()
        reader = self.reader

        async def body() -> AsyncIterator[bytes]:
            if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
                async for c in self._chunks():
                    yield c
            elif b"content-length" in headers:
                yield await reader.readexactly(int(headers[b"content-length"]))
            else:
                while chunk := await reader.read(65536):
                    yield chunk
                self.close()

        return status, headers, body()
