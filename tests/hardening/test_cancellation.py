"""A client that leaves cancels its work instead of having it finished for nobody.

Over HTTP and gRPC: a running request sees `is_cancelled()` turn true and stops; a request
still queued behind it is never executed. A decoupled stream closed by its client stops its
model's sender. Each model writes what happened to a log, which the tests read.
"""

from __future__ import annotations

import json
import queue
import socket

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.hardening import models
from tests.hardening.oracle import healthy_grpc, healthy_http, wait_until
from tests.helpers import Server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = models.copy_examples(tmp_path_factory.mktemp("cancel") / "repo", ("add_sub",))
    models.write_slow(repo)
    models.write_slow(repo, "slow_batched", batching=True)
    models.write_stream(repo)
    server = Server(repo).start(wait_for="ready")
    yield server
    assert server.stop() == 0, server.log()


def metric(server: Server, name: str, model: str, extra: str = "") -> float:
    for line in httpx.get(server.metrics_url).text.splitlines():
        if line.startswith(name + "{") and f'model="{model}"' in line and extra in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def http_request(port: int, request_id: str, seconds: float) -> socket.socket:
    body = json.dumps({"id": request_id, "inputs": [{"name": "IN", "datatype": "FP32", "shape": [1], "data": [seconds]}]}).encode()
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
    return sock


def finish_quick_one(server: Server, request_id: str) -> None:
    """A short request after the cancelled ones: once it is answered, the worker has been past
    every earlier request in its queue."""
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("IN", [1], "FP32")
    tensor.set_data_from_numpy(np.array([0], np.float32))
    assert client.infer("slow", [tensor], request_id=request_id).as_numpy("OUT").tolist() == [0]


def test_http_disconnect_cancels_running_and_queued_requests(server):
    model_dir = server.repository / "slow"
    canceled = metric(server, "nv_inference_request_failure", "slow", 'reason="CANCELED"')
    running = http_request(server.http_port, "A", 60)
    wait_until(lambda: "start A" in models.events(model_dir))
    queued = http_request(server.http_port, "B", 60)  # one instance: B waits behind A
    wait_until(lambda: metric(server, "nv_inference_pending_request_count", "slow") >= 2)
    queued.close()
    running.close()
    wait_until(lambda: "cancelled A" in models.events(model_dir))
    finish_quick_one(server, "C")
    log = models.events(model_dir)
    assert "start B" not in log and "done A" not in log, log
    assert metric(server, "nv_inference_request_failure", "slow", 'reason="CANCELED"') == canceled + 2
    healthy_http(server.http_url)


def test_grpc_cancel_cancels_running_and_queued_requests(server):
    model_dir = server.repository / "slow"
    client = grpcclient.InferenceServerClient(server.grpc_url)
    calls = []
    for request_id in ("GA", "GB"):
        tensor = grpcclient.InferInput("IN", [1], "FP32")
        tensor.set_data_from_numpy(np.array([60], np.float32))
        calls.append(client.async_infer("slow", [tensor], callback=lambda result, error: None, request_id=request_id))
        if request_id == "GA":
            wait_until(lambda: "start GA" in models.events(model_dir))
    wait_until(lambda: metric(server, "nv_inference_pending_request_count", "slow") >= 2)
    for call in reversed(calls):
        call.cancel()
    wait_until(lambda: "cancelled GA" in models.events(model_dir))
    finish_quick_one(server, "GC")
    log = models.events(model_dir)
    assert "start GB" not in log and "done GA" not in log, log
    healthy_grpc(server.grpc_url)


def test_a_request_cancelled_in_the_batcher_queue_is_never_executed(server):
    model_dir = server.repository / "slow_batched"
    client = grpcclient.InferenceServerClient(server.grpc_url)
    calls = {}
    for request_id, seconds in (("QA", 1.0), ("QB", 60.0)):
        tensor = grpcclient.InferInput("IN", [1, 1], "FP32")
        tensor.set_data_from_numpy(np.array([[seconds]], np.float32))
        calls[request_id] = client.async_infer("slow_batched", [tensor], callback=lambda result, error: None,
                                               request_id=request_id)
        if request_id == "QA":
            wait_until(lambda: "start QA" in models.events(model_dir))
    wait_until(lambda: metric(server, "nv_inference_pending_request_count", "slow_batched") >= 2)
    calls["QB"].cancel()  # QB waits in the batcher while QA runs
    wait_until(lambda: "done QA" in models.events(model_dir))
    tensor = grpcclient.InferInput("IN", [1, 1], "FP32")
    tensor.set_data_from_numpy(np.array([[0]], np.float32))
    assert client.infer("slow_batched", [tensor], request_id="QC").as_numpy("OUT").tolist() == [[0]]
    assert "start QB" not in models.events(model_dir), models.events(model_dir)


def test_closing_a_stream_stops_the_decoupled_model(server):
    model_dir = server.repository / "stream"
    client = grpcclient.InferenceServerClient(server.grpc_url)
    answers: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    tensor = grpcclient.InferInput("IN", [1], "FP32")
    tensor.set_data_from_numpy(np.array([3000], np.float32))  # a minute of responses
    client.async_stream_infer("stream", [tensor], request_id="S1")
    for expected in range(3):
        result, error = answers.get(timeout=30)
        assert error is None and result.as_numpy("OUT").tolist() == [expected]
    client.stop_stream(cancel_requests=True)
    wait_until(lambda: any(line.startswith("cancelled S1 after") for line in models.events(model_dir)))
    assert "done S1" not in models.events(model_dir)
    # A new stream on the same model runs to completion.
    client = grpcclient.InferenceServerClient(server.grpc_url)
    answers = queue.Queue()
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    tensor.set_data_from_numpy(np.array([3], np.float32))
    client.async_stream_infer("stream", [tensor], request_id="S2")
    values = [int(answers.get(timeout=30)[0].as_numpy("OUT")[0]) for _ in range(3)]
    client.stop_stream()
    assert values == [0, 1, 2]
    wait_until(lambda: "done S2" in models.events(model_dir))
    assert metric(server, "nv_inference_request_failure", "stream", 'reason="CANCELED"') >= 1
