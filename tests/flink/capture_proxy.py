"""A recording reverse proxy: what a client really puts on the wire, byte for byte.

The Flink provider acceptance run puts this between the Java provider and the server under
test. Each request's method, path, headers (in the order and spelling sent), and body are kept
as received, then the request is forwarded unchanged and the server's answer relayed. A request
to `/__capture__/<label>` is not forwarded: it sets the label the following requests are filed
under, so a job can say which case it is running.
"""

from __future__ import annotations

import http.client
import socket
import socketserver
import threading
from dataclasses import dataclass, field
from typing import Any

CONTROL = "/__capture__/"


@dataclass
class Exchange:
    """One request as the client sent it and the status and body the server answered."""

    label: str
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes
    status: int = 0
    response: bytes = b""


@dataclass
class Recording:
    label: str = ""
    exchanges: list[Exchange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _read_request(stream: Any) -> tuple[str, str, list[tuple[str, str]], bytes] | None:
    line = stream.readline(65537)
    if not line:
        return None
    method, path, _ = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    headers: list[tuple[str, str]] = []
    while True:
        raw = stream.readline(65537).decode("latin-1").rstrip("\r\n")
        if not raw:
            break
        name, _, value = raw.partition(":")
        headers.append((name, value.strip()))
    length = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
    return method, path, headers, stream.read(length) if length else b""


class _Handler(socketserver.StreamRequestHandler):
    server: _ProxyServer

    def handle(self) -> None:
        upstream: http.client.HTTPConnection | None = None
        try:
            while True:
                request = _read_request(self.rfile)
                if request is None:
                    return
                method, path, headers, body = request
                if path.startswith(CONTROL):
                    with self.server.recording.lock:
                        self.server.recording.label = path[len(CONTROL):]
                    self._answer(204, [], b"")
                    continue
                exchange = Exchange(self.server.recording.label, method, path, headers, body)
                with self.server.recording.lock:
                    self.server.recording.exchanges.append(exchange)
                if upstream is None:
                    upstream = http.client.HTTPConnection(*self.server.target, timeout=120)
                upstream.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
                for name, value in headers:
                    upstream.putheader(name, value)
                upstream.endheaders(body)
                reply = upstream.getresponse()
                payload = reply.read()
                exchange.status, exchange.response = reply.status, payload
                kept = [
                    (k, v) for k, v in reply.getheaders()
                    if k.lower() not in ("content-length", "transfer-encoding", "connection")
                ]  # fmt: skip
                self._answer(reply.status, kept, payload)
        except (ConnectionError, socket.timeout, ValueError):
            return
        finally:
            if upstream is not None:
                upstream.close()

    def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        lines = [f"HTTP/1.1 {status} {http.client.responses.get(status, 'Status')}"]
        lines += [f"{k}: {v}" for k, v in headers]
        lines.append(f"Content-Length: {len(body)}")
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        self.wfile.flush()


class _ProxyServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, target: tuple[str, int]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.target = target
        self.recording = Recording()


class CaptureProxy:
    """`with CaptureProxy(port) as proxy:` forwards 127.0.0.1:proxy.port to 127.0.0.1:port."""

    def __init__(self, target_port: int) -> None:
        self._server = _ProxyServer(("127.0.0.1", target_port))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def exchanges(self) -> list[Exchange]:
        with self._server.recording.lock:
            return list(self._server.recording.exchanges)

    def __enter__(self) -> CaptureProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
