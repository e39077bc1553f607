"""A small asyncio HTTP/1.1 client with keep-alive, standard library only.

PyFlink's Python workers ship no async HTTP client, and one request per row needs reused
connections to be fast, so this module implements just what inference calls need: one origin,
a pool of idle keep-alive connections, `Content-Length` and chunked bodies, gzip responses,
a per-attempt deadline and HTTPS. A connection taken from the idle pool that turns out to be
closed by the server is retried once on a fresh one (OkHttp's `retryOnConnectionFailure`).
"""

from __future__ import annotations

import asyncio
import gzip
import ssl
import zlib
from collections import deque
from dataclasses import dataclass
from urllib.parse import urlsplit

from openinfer.integrations.flink.errors import TritonNetworkError


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: dict[str, str]
    body: bytes


class _StaleConnection(Exception):
    """A reused connection closed before any byte of the response arrived."""


class HttpPool:
    """Keep-alive connections to one `scheme://host:port`, used from one event loop."""

    def __init__(self, origin: str, *, max_idle: int = 64) -> None:
        parts = urlsplit(origin)
        self.host = parts.hostname or "localhost"
        self.secure = parts.scheme == "https"
        self.port = parts.port or (443 if self.secure else 80)
        default_port = 443 if self.secure else 80
        self.host_header = self.host if self.port == default_port else f"{self.host}:{self.port}"
        if ":" in self.host and not self.host.startswith("["):
            self.host_header = f"[{self.host}]" + (
                "" if self.port == default_port else f":{self.port}"
            )
        self._ssl = ssl.create_default_context() if self.secure else None
        self._idle: deque[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = deque()
        self._max_idle = max_idle
        self.loop: asyncio.AbstractEventLoop | None = None

    async def request(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes | None,
        timeout: float,
    ) -> HttpResponse:
        """Send one request; raises `TritonNetworkError` for I/O failures and timeouts."""
        self.loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(self._request(method, target, headers, body), timeout)
        except asyncio.TimeoutError as exc:
            raise TritonNetworkError(
                f"request to {self.host_header}{target} timed out after {timeout:g}s"
            ) from exc
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            raise TritonNetworkError(
                f"Failed to connect to {self.host_header}{target}: {exc!r}. This may indicate "
                "network connectivity issues, DNS resolution failure, or server unavailability."
            ) from exc

    async def _request(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes | None
    ) -> HttpResponse:
        head = [f"{method} {target} HTTP/1.1", f"Host: {self.host_header}"]
        head += [f"{k}: {v}" for k, v in headers]
        head.append(f"Content-Length: {len(body or b'')}")
        message = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b"")
        while self._idle:
            reader, writer = self._idle.pop()
            if reader.at_eof() or writer.is_closing():
                writer.close()
                continue
            try:
                return await self._exchange(reader, writer, message, reused=True)
            except _StaleConnection:
                continue
        reader, writer = await asyncio.open_connection(self.host, self.port, ssl=self._ssl)
        return await self._exchange(reader, writer, message, reused=False)

    async def _exchange(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        message: bytes,
        *,
        reused: bool,
    ) -> HttpResponse:
        reusable = False
        try:
            writer.write(message)
            await writer.drain()
            try:
                status_line = await reader.readuntil(b"\r\n")
            except (asyncio.IncompleteReadError, ConnectionError) as exc:
                if reused:
                    raise _StaleConnection() from exc
                raise
            status, headers, keep = await _read_head(status_line, reader)
            body = await _read_body(reader, headers, keep)
            reusable = keep
            encoding = headers.get("content-encoding", "").lower()
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            return HttpResponse(status, headers, body)
        finally:
            if reusable and len(self._idle) < self._max_idle:
                self._idle.append((reader, writer))
            else:
                writer.close()

    def close(self) -> None:
        """Close idle connections (call from the pool's loop thread, or after it stopped)."""
        while self._idle:
            _, writer = self._idle.pop()
            try:
                writer.close()
            except RuntimeError:  # the loop is already closed: the socket goes with it
                pass


async def _read_head(
    status_line: bytes, reader: asyncio.StreamReader
) -> tuple[int, dict[str, str], bool]:
    parts = status_line.decode("latin-1").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise ValueError(f"malformed status line {status_line!r}")
    status = int(parts[1])
    headers: dict[str, str] = {}
    while True:
        line = await reader.readuntil(b"\r\n")
        if line == b"\r\n":
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    connection = headers.get("connection", "").lower()
    keep = parts[0] == "HTTP/1.1" and "close" not in connection
    return status, headers, keep


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str], keep: bool) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks: list[bytes] = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":
                    pass
                return b"".join(chunks)
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
    length = headers.get("content-length")
    if length is not None:
        return await reader.readexactly(int(length))
    if keep:
        return b""
    return await reader.read()
