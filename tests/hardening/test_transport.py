"""The HTTP transport adapter, on the uvicorn fast path and on plain ASGI.

The fast path leans on uvicorn fields that are not public API: the first test fails as soon as
an installed uvicorn lacks one (or leaves the pinned range). The same KServe checks then run on
a server that uses the fast path and on one served through uvicorn's own h11 protocol, where
the apps only have ASGI `receive`/`send`: infer, the body limit (declared and chunked), and a
client that leaves cancelling its request.
"""

from __future__ import annotations

import json
import re
import socket

import numpy as np
import pytest
import tritonclient.http as httpclient

from openinfer.frontends.asgi.uvicorn_compat import PROTOCOL_ENV, TESTED, fast_path_problem
from tests.hardening import models
from tests.hardening.oracle import healthy_http, wait_until
from tests.helpers import ROOT, Server

LIMIT = 4096
SERVES_THROUGH = {
    "fast": "serves through the uvicorn fast path",
    "h11": "serves through plain ASGI on uvicorn's h11 protocol",
}


def test_installed_uvicorn_has_everything_the_fast_path_uses():
    assert fast_path_problem() is None
    pin = re.search(r'"uvicorn\[standard\]>=(\d+\.\d+),<(\d+\.\d+)"', (ROOT / "pyproject.toml").read_text())
    assert pin is not None
    low, high = pin.groups()
    assert (low, high) == tuple(f"{major}.{minor}" for major, minor in TESTED)


@pytest.fixture(scope="module", params=["fast", "h11"])
def server(request, tmp_path_factory):
    repo = models.copy_examples(tmp_path_factory.mktemp("transport") / "repo", ("add_sub",))
    models.write_slow(repo)
    env = {} if request.param == "fast" else {PROTOCOL_ENV: request.param}
    server = Server(repo, ["--log-verbose=1", f"--http-max-input-size={LIMIT}"], env=env)
    server.start(wait_for="ready")
    server.path = request.param
    yield server
    assert server.stop() == 0, server.log()


def exchange(port: int, raw: bytes) -> tuple[int, dict]:
    """One raw request on a fresh connection; the status and JSON body of its answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(raw)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < _length(answer):
            chunk = sock.recv(65536)
            assert chunk, answer
            answer += chunk
    head, body = answer.split(b"\r\n\r\n", 1)
    return int(head.split()[1]), json.loads(body)


def _length(answer: bytes) -> int:
    found = re.search(rb"content-length: (\d+)", answer.split(b"\r\n\r\n", 1)[0], re.IGNORECASE)
    return int(found.group(1)) if found else 0


def test_listener_reports_its_path(server):
    assert SERVES_THROUGH[server.path] in server.log()


def test_infer(server):
    client = httpclient.InferenceServerClient(server.http_url)
    inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_data_from_numpy(np.array([1, 2, 3, 4], np.float32))
    inputs[1].set_data_from_numpy(np.array([4, 3, 2, 1], np.float32))
    result = client.infer("add_sub", inputs)
    assert result.as_numpy("OUTPUT0").tolist() == [5, 5, 5, 5]
    assert result.as_numpy("OUTPUT1").tolist() == [-3, -1, 1, 3]
    # Binary inputs and outputs: the outputs follow the JSON as buffers of their own, written
    # in one vectored write on the fast path and joined into the body on plain ASGI.
    inputs[0].set_data_from_numpy(np.array([1, 2, 3, 4], np.float32), binary_data=True)
    inputs[1].set_data_from_numpy(np.array([4, 3, 2, 1], np.float32), binary_data=True)
    outputs = [httpclient.InferRequestedOutput(name, binary_data=True) for name in ("OUTPUT0", "OUTPUT1")]
    result = client.infer("add_sub", inputs, outputs=outputs)
    assert result.as_numpy("OUTPUT0").tolist() == [5, 5, 5, 5]
    assert result.as_numpy("OUTPUT1").tolist() == [-3, -1, 1, 3]
    assert [o["parameters"]["binary_data_size"] for o in result.get_response()["outputs"]] == [16, 16]


def test_body_limit(server):
    body = b" " * (LIMIT + 1)
    status, answer = exchange(server.http_port, b"POST /v2/models/add_sub/infer HTTP/1.1\r\nhost: x\r\n"
                              b"content-length: %d\r\n\r\n" % len(body) + body)
    assert status == 400
    assert answer["error"].startswith(f"request JSON size of {LIMIT + 1} bytes exceeds the maximum allowed input size")
    status, answer = exchange(server.http_port, b"POST /v2/models/add_sub/infer HTTP/1.1\r\nhost: x\r\n"
                              b"inference-header-content-length: 0\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
    assert status == 400  # a raw tensor body: Triton's words for that kind
    assert answer["error"].startswith(f"Raw input has a byte_size ({LIMIT + 1} bytes) that exceeds the maximum allowed value")
    chunks = b"".join(b"%x\r\n%s\r\n" % (1000, b" " * 1000) for _ in range(5)) + b"0\r\n\r\n"
    status, answer = exchange(server.http_port, b"POST /v2/models/add_sub/infer HTTP/1.1\r\nhost: x\r\n"
                              b"transfer-encoding: chunked\r\n\r\n" + chunks)
    assert status == 400
    assert answer["error"].startswith(f"request size of more than {LIMIT} bytes exceeds the maximum allowed input size")
    healthy_http(server.http_url)


def test_client_that_leaves_cancels_its_request(server):
    model_dir = server.repository / "slow"
    request_id = f"gone-{server.path}"
    body = json.dumps({"id": request_id, "inputs": [{"name": "IN", "datatype": "FP32", "shape": [1], "data": [60]}]}).encode()
    sock = socket.create_connection(("127.0.0.1", server.http_port))
    sock.sendall(b"POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    wait_until(lambda: f"start {request_id}" in models.events(model_dir))
    sock.close()
    wait_until(lambda: f"cancelled {request_id}" in models.events(model_dir))
    assert f"done {request_id}" not in models.events(model_dir)
    healthy_http(server.http_url)


def test_client_that_leaves_cancels_its_request_behind_a_pipelined_one(server):
    """The request being answered is not the connection's latest when another is pipelined."""
    model_dir = server.repository / "slow"
    first, second = f"piped-{server.path}-1", f"piped-{server.path}-2"
    raw = b""
    for request_id in (first, second):
        body = json.dumps({"id": request_id, "inputs": [{"name": "IN", "datatype": "FP32", "shape": [1], "data": [60]}]}).encode()
        raw += b"POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    sock = socket.create_connection(("127.0.0.1", server.http_port))
    sock.sendall(raw)
    wait_until(lambda: f"start {first}" in models.events(model_dir))
    sock.close()
    wait_until(lambda: f"cancelled {first}" in models.events(model_dir))
    log = models.events(model_dir)
    assert f"done {first}" not in log and f"start {second}" not in log, log
    healthy_http(server.http_url)
