"""The dynamic batcher and the schedule-policy extension, end to end over HTTP and gRPC.

Python models report how many requests their `execute` call received, so the tests see
batching as the model sees it; queue limits, timeouts and priorities are exercised with a
model that holds its instance for a while.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.helpers import Server, write_model

BATCHED_CONFIG = """
backend: "python"
max_batch_size: 8
input { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }
output { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }
output { name: "BATCH" data_type: TYPE_INT32 dims: [ 1 ] }
output { name: "ORDER" data_type: TYPE_INT32 dims: [ 1 ] }
instance_group { kind: KIND_CPU count: 1 }
%s
"""

# Doubles its input; reports the number of requests in the execute call and a running
# execute counter; sleeps for the request's "sleep_ms" parameter to hold the instance.
BATCHED_MODEL = """
import itertools
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.calls = itertools.count(1)

    def execute(self, requests):
        order = next(self.calls)
        sleep_ms = max(json.loads(r.parameters()).get("sleep_ms", 0) for r in requests)
        time.sleep(sleep_ms / 1000)
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            rows = x.shape[0]
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT0", x * 2),
                pb_utils.Tensor("BATCH", np.full((rows, 1), len(requests), np.int32)),
                pb_utils.Tensor("ORDER", np.full((rows, 1), order, np.int32)),
            ]))
        return responses
"""

MODELS = {
    # Waits up to 10 s for a batch of 7, so the tests' four concurrent requests always meet.
    "batched": "dynamic_batching { preferred_batch_size: [ 7 ] max_queue_delay_microseconds: 10000000 }",
    "limited": "dynamic_batching { default_queue_policy { max_queue_size: 1 } }",
    "timed": "dynamic_batching { default_queue_policy { allow_timeout_override: true } }",
    "prioritized": "dynamic_batching { priority_levels: 2 default_priority_level: 2 }",
    "unbatched": "",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("batching_repo")
    for name, scheduling in MODELS.items():
        text = BATCHED_CONFIG % scheduling
        if name in ("limited", "timed", "prioritized"):
            text = text.replace("max_batch_size: 8", "max_batch_size: 1")
        write_model(repo, name, text, BATCHED_MODEL)
    write_model(
        repo,
        "bad_preferred",
        (BATCHED_CONFIG % "dynamic_batching { preferred_batch_size: [ 16 ] }"),
        BATCHED_MODEL,
    )
    # bad_preferred fails to load on purpose; the server keeps serving the other models.
    server = Server(repo, ["--exit-on-error=false"]).start(wait_for="live")
    yield server
    assert server.stop() == 0, server.log()


def _http_inputs(value: float, rows: int = 1):
    data = np.full((rows, 3), value, dtype=np.float32)
    tensor = httpclient.InferInput("INPUT0", list(data.shape), "FP32")
    tensor.set_data_from_numpy(data)
    return [tensor], data


def _grpc_inputs(value: float, rows: int = 1):
    data = np.full((rows, 3), value, dtype=np.float32)
    tensor = grpcclient.InferInput("INPUT0", list(data.shape), "FP32")
    tensor.set_data_from_numpy(data)
    return [tensor], data


def test_http_concurrent_requests_share_one_execute(server):
    client = httpclient.InferenceServerClient(server.http_url, concurrency=4)
    jobs = []
    for i, rows in enumerate((1, 2, 1, 3)):
        inputs, data = _http_inputs(float(i + 1), rows)
        jobs.append((client.async_infer("batched", inputs, request_id=f"h{i}"), data))
    for i, (job, data) in enumerate(jobs):
        result = job.get_result()
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data * 2)  # split back per request
        assert result.as_numpy("BATCH").reshape(-1).tolist() == [4] * data.shape[0]
        assert result.get_response()["id"] == f"h{i}"
    stats = client.get_inference_statistics("batched")["model_stats"][0]
    assert stats["execution_count"] == 1
    assert stats["inference_count"] == 7  # summed batch dimension of the four requests
    assert [b["batch_size"] for b in stats["batch_stats"]] == [7]
    assert stats["batch_stats"][0]["compute_infer"]["count"] == 1
    assert stats["inference_stats"]["success"]["count"] == 4
    client.close()


def test_grpc_concurrent_requests_share_one_execute(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    results: dict[int, object] = {}
    done = threading.Event()

    def callback(i):
        def record(result, error):
            results[i] = error or result
            if len(results) == 4:
                done.set()
        return record

    datas = []
    for i, rows in enumerate((3, 1, 2, 1)):
        inputs, data = _grpc_inputs(10.0 + i, rows)
        datas.append(data)
        client.async_infer("batched", inputs, callback(i), request_id=f"g{i}")
    assert done.wait(60)
    for i in range(4):
        result = results[i]
        assert not isinstance(result, Exception), result
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), datas[i] * 2)
        assert result.as_numpy("BATCH").reshape(-1).tolist() == [4] * datas[i].shape[0]
        assert result.get_response().id == f"g{i}"
    client.close()


def _background(protocol: str, server: Server, model: str, **kwargs):
    """Send one request from its own thread and client; the future holds its result."""

    def send():
        # geventhttpclient binds to the thread that creates the client: create it here
        client, make = _client(protocol, server)
        return client.infer(model, make(1.0)[0], **kwargs)

    pool = ThreadPoolExecutor(1)
    future = pool.submit(send)
    pool.shutdown(wait=False)
    return future


def _client(protocol: str, server: Server):
    if protocol == "http":
        return httpclient.InferenceServerClient(server.http_url), _http_inputs
    return grpcclient.InferenceServerClient(server.grpc_url), _grpc_inputs


def _wait_pending(server: Server, model: str, count: int) -> None:
    """Block until `count` requests of the model are inside the server (metrics gauge)."""
    pattern = re.compile(
        rf'^nv_inference_pending_request_count\{{model="{model}",version="1"\}} (\d+)', re.MULTILINE
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
        match = pattern.search(text)
        if match and int(match.group(1)) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"{model} never had {count} pending requests")


def _hold(protocol: str, server: Server, model: str, ms: int):
    """A request that keeps the model's only instance busy for `ms` milliseconds."""
    future = _background(protocol, server, model, parameters={"sleep_ms": ms})
    _wait_pending(server, model, 1)  # arrived, so the free instance has taken it
    return future


def _rejected(server: Server, model: str) -> int:
    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()
    pattern = rf'^nv_inference_request_failure\{{model="{model}",reason="REJECTED",version="1"\}} (\d+)'
    return int(re.search(pattern, text, re.MULTILINE).group(1))


UNAVAILABLE = {"http": "503", "grpc": "StatusCode.UNAVAILABLE"}


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_full_queue_is_rejected_with_unavailable(server, protocol):
    rejected_before = _rejected(server, "limited")
    held = _hold(protocol, server, "limited", 2000)
    queued = _background(protocol, server, "limited")
    _wait_pending(server, "limited", 2)
    client, make = _client(protocol, server)
    with pytest.raises(InferenceServerException) as info:
        client.infer("limited", make(3.0)[0], request_id="over")
    assert info.value.status() == UNAVAILABLE[protocol]
    assert info.value.message() == "[request id: over] Exceeds maximum queue size"
    held.result(30)
    queued.result(30)
    # the server keeps serving, and the rejection is counted as REJECTED
    result = client.infer("limited", make(4.0)[0])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full((1, 3), 8.0, np.float32))
    assert _rejected(server, "limited") == rejected_before + 1


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_request_timeout_expires_in_the_queue(server, protocol):
    held = _hold(protocol, server, "timed", 2000)
    client, make = _client(protocol, server)
    with pytest.raises(InferenceServerException) as info:
        client.infer("timed", make(2.0)[0], request_id="slowpoke", timeout=50_000)
    assert info.value.message() == "[request id: slowpoke] Request timeout expired"
    assert info.value.status() == UNAVAILABLE[protocol]
    held.result(30)
    result = client.infer("timed", make(5.0)[0], timeout=5_000_000)  # a generous timeout is fine
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.full((1, 3), 10.0, np.float32))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_priority_requests_run_first(server, protocol):
    held = _hold(protocol, server, "prioritized", 2000)
    low = _background(protocol, server, "prioritized", priority=2)
    _wait_pending(server, "prioritized", 2)
    default = _background(protocol, server, "prioritized")
    _wait_pending(server, "prioritized", 3)
    high = _background(protocol, server, "prioritized", priority=1)
    _wait_pending(server, "prioritized", 4)
    held.result(30)
    low_order, default_order, high_order = (
        int(job.result(30).as_numpy("ORDER")[0, 0]) for job in (low, default, high)
    )
    # priority 1 jumps the queue; priority 2 and the default level (2) keep arrival order
    assert high_order < low_order < default_order


def test_without_dynamic_batching_each_request_runs_alone(server):
    client = httpclient.InferenceServerClient(server.http_url, concurrency=4)
    jobs = [client.async_infer("unbatched", _http_inputs(1.0)[0]) for _ in range(4)]
    assert [job.get_result().as_numpy("BATCH")[0, 0] for job in jobs] == [1, 1, 1, 1]


def test_bad_batching_config_makes_the_model_unavailable(server):
    client = httpclient.InferenceServerClient(server.http_url)
    index = {m["name"]: m for m in client.get_model_repository_index()}
    entry = index["bad_preferred"]
    assert entry["state"] == "UNAVAILABLE"
    assert "dynamic batching preferred size must be <= max batch size for bad_preferred" in entry["reason"]
    assert client.is_model_ready("batched")
