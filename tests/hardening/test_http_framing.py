"""Responses leave whole and in order: pipelined requests, empty bodies and HEAD on one socket.

The HTTP listener holds a response's header block until its body is written (one send per
response); these check that nothing stays held when no body follows.
"""

from __future__ import annotations

import json
import socket

import pytest


def _read_responses(sock: socket.socket, count: int, heads: set[int]) -> list[tuple[int, bytes]]:
    """`count` responses off the socket; the ones at indexes in `heads` answer HEAD (no body)."""
    buffer = b""
    out: list[tuple[int, bytes]] = []
    while len(out) < count:
        while b"\r\n\r\n" not in buffer:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed after {len(out)} responses"
            buffer += chunk
        head, buffer = buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        fields = dict(line.lower().split(": ", 1) for line in lines[1:])
        length = 0 if len(out) in heads else int(fields.get("content-length", "0"))
        while len(buffer) < length:
            chunk = sock.recv(65536)
            assert chunk, "connection closed inside a body"
            buffer += chunk
        out.append((status, buffer[:length]))
        buffer = buffer[length:]
    return out


@pytest.fixture
def connection(example_server):
    host, port = example_server.http_url.rsplit(":", 1)
    with socket.create_connection((host.split("//")[-1], int(port)), timeout=10) as sock:
        yield sock


def test_pipelined_requests_are_answered_whole_and_in_order(connection):
    body = json.dumps({"inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]}).encode()
    requests = [
        b"GET /v2/health/ready HTTP/1.1\r\nhost: x\r\n\r\n",  # 200, empty body
        b"HEAD /v2/health/live HTTP/1.1\r\nhost: x\r\n\r\n",  # a head and no body
        b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nhost: x\r\ncontent-length: "
        + str(len(body)).encode() + b"\r\n\r\n" + body,
        b"GET /v2 HTTP/1.1\r\nhost: x\r\n\r\n",
    ]
    connection.sendall(b"".join(requests))
    answers = _read_responses(connection, len(requests), heads={1})
    assert answers[0] == (200, b"")
    assert answers[1][1] == b""
    status, infer = answers[2]
    assert status == 200 and json.loads(infer)["outputs"][0]["data"] == [1.0, 2.0, 3.0]
    assert answers[3][0] == 200 and json.loads(answers[3][1])["name"]


def test_head_alone_is_answered(connection):
    connection.sendall(b"HEAD /v2 HTTP/1.1\r\nhost: x\r\n\r\n")
    [(status, body)] = _read_responses(connection, 1, heads={0})
    assert status in (200, 405) and body == b""
    connection.sendall(b"GET /v2/health/live HTTP/1.1\r\nhost: x\r\n\r\n")
    assert _read_responses(connection, 1, heads=set()) == [(200, b"")]
