"""Just enough HTTP/2 to send a gRPC call whose framing lies, which no gRPC client will do.

Headers go out as HPACK literals without indexing (no Huffman); what comes back is read as
frames, without decoding header blocks: tests look at frame types and flags.
"""

from __future__ import annotations

import socket
import struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE = 0, 1, 3, 4, 6, 7, 8
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _literal(name: str, value: str) -> bytes:
    def string(text: str) -> bytes:
        data = text.encode()
        assert len(data) < 127
        return bytes([len(data)]) + data

    return b"\x00" + string(name) + string(value)


def grpc_headers(path: str, authority: str) -> bytes:
    block = b"".join(
        _literal(k, v)
        for k, v in [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", authority),
                     ("content-type", "application/grpc"), ("te", "trailers")]
    )
    return frame(HEADERS, END_HEADERS, 1, block)


def read_frame(sock: socket.socket) -> tuple[int, int, int, bytes]:
    head = _exactly(sock, 9)
    length = int.from_bytes(head[:3], "big")
    kind, flags = head[3], head[4]
    stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
    return kind, flags, stream, _exactly(sock, length)


def _exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return data


def call_ends(sock: socket.socket, stream: int = 1) -> str:
    """Read until the call on `stream` ends; how it ended: "trailers", "reset" or "goaway"."""
    while True:
        kind, flags, sid, payload = read_frame(sock)
        if kind == SETTINGS and not flags & ACK:
            sock.sendall(frame(SETTINGS, ACK, 0))
        elif kind == PING and not flags & ACK:
            sock.sendall(frame(PING, ACK, 0, payload))
        elif kind == HEADERS and sid == stream and flags & END_STREAM:
            return "trailers"
        elif kind == RST_STREAM and sid == stream:
            return "reset"
        elif kind == GOAWAY:
            return "goaway"
