"""Isolation and recovery: a Python model process that dies takes down only what it held."""

from __future__ import annotations

import queue
import threading
from functools import partial

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.helpers import Server, write_model

MAGIC = -1  # the value that makes a model process exit

# Two instances, each its own process; the magic value kills the process that gets it.
PAIR = '''
import json, os
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            if x[0] == -1:
                os._exit(17)
            info = np.array([json.dumps({"pid": os.getpid()}).encode()], dtype=np.object_)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x * 2), pb_utils.Tensor("INFO", info)]))
        return out
'''

# Decoupled: streams values slowly from a thread; the magic value kills the process.
STREAMER = '''
import os, threading, time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            if x[0] == -1:
                os._exit(9)
            threading.Thread(target=self.stream, args=(request.get_response_sender(), int(x[0])),
                             daemon=True).start()
        return None

    def stream(self, sender, count):
        for i in range(count):
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], np.float32))]))
            time.sleep(0.02)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("isolation_repo")
    write_model(
        repo,
        "pair",
        """
        backend: "python"
        max_batch_size: 0
        input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "INFO" data_type: TYPE_STRING dims: [ 1 ] } ]
        instance_group [ { count: 2 kind: KIND_CPU } ]
        """,
        PAIR,
    )
    streamer_config = """
        backend: "python"
        max_batch_size: 0
        model_transaction_policy { decoupled: true }
        input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
        """
    write_model(repo, "streamer", streamer_config, STREAMER)
    write_model(repo, "bystander", streamer_config, STREAMER)
    srv = Server(repo).start(wait_for="ready")
    yield srv
    assert srv.stop() == 0, srv.log()


def value(v: float, client=httpclient):
    tensor = client.InferInput("IN", [1], "FP32")
    tensor.set_data_from_numpy(np.array([v], dtype=np.float32))
    return tensor


def test_crash_fails_only_what_the_process_held(server):
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
    outcomes: queue.Queue = queue.Queue()

    def traffic():
        own = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
        for _ in range(5):
            try:
                outcomes.put(("ok", own.infer("pair", [value(3)]).as_numpy("OUT").tolist()))
            except InferenceServerException as exc:
                outcomes.put(("error", exc.message()))

    threads = [threading.Thread(target=traffic) for _ in range(6)]
    for thread in threads:
        thread.start()
    with pytest.raises(InferenceServerException) as info:
        client.infer("pair", [value(MAGIC)])
    for thread in threads:
        thread.join()
    assert info.value.status() == "500"
    assert "Stub process 'pair_0_" in info.value.message()
    assert info.value.message().endswith("is not healthy.")
    assert "is not healthy (exit code 17)" in server.log()
    results = list(outcomes.queue)
    assert len(results) == 30
    failed = [detail for kind, detail in results if kind == "error"]
    # Requests the dead process held fail with the same clear error; every other one succeeds.
    assert all("is not healthy." in detail for detail in failed), failed
    assert [detail for kind, detail in results if kind == "ok"] == [[6]] * (30 - len(failed))
    assert len(failed) < 30
    # The instance is restarted; every request after the crash is answered.
    for _ in range(4):
        assert client.infer("pair", [value(4)]).as_numpy("OUT").tolist() == [8]
    assert client.is_model_ready("pair")
    stats = client.get_inference_statistics("pair")["model_stats"][0]["inference_stats"]
    assert stats["fail"]["count"] == 1 + len(failed)


def stream_collect(url: str, model: str, v: float, out: queue.Queue, started: threading.Event | None = None):
    """Run one decoupled request on its own stream; put ("value", x) / ("error", msg) / ("done",)."""
    client = grpcclient.InferenceServerClient(url)
    finished = threading.Event()

    def callback(result, error):
        if error is not None:
            out.put(("error", error.message()))
            finished.set()
            return
        response = result.get_response()
        if response.parameters["triton_final_response"].bool_param:
            out.put(("done",))
            finished.set()
            return
        out.put(("value", float(result.as_numpy("OUT")[0])))
        if started is not None:
            started.set()

    client.start_stream(callback=partial(callback))
    client.async_stream_infer(model, [value(v, grpcclient)], enable_empty_final_response=True)
    finished.wait(120)
    client.stop_stream()


def test_dying_decoupled_process_fails_its_open_streams_and_nothing_else(server):
    held: queue.Queue = queue.Queue()
    other: queue.Queue = queue.Queue()
    first_value = threading.Event()
    long_stream = threading.Thread(
        target=stream_collect, args=(server.grpc_url, "streamer", 3000, held, first_value)
    )
    bystander = threading.Thread(target=stream_collect, args=(server.grpc_url, "bystander", 40, other))
    long_stream.start()
    bystander.start()
    assert first_value.wait(60)
    crash: queue.Queue = queue.Queue()
    stream_collect(server.grpc_url, "streamer", MAGIC, crash)
    long_stream.join(120)
    bystander.join(120)
    crashed = list(crash.queue)
    assert crashed[-1][0] == "error" and "is not healthy" in crashed[-1][1]
    held_items = list(held.queue)
    # The stream the dead process held ends early, with the same clear error.
    assert held_items[-1][0] == "error" and "is not healthy" in held_items[-1][1]
    assert 0 < sum(1 for item in held_items if item[0] == "value") < 3000
    # The other model's stream never noticed.
    other_items = list(other.queue)
    assert [v for kind, *v in other_items if kind == "value"] == [[float(i)] for i in range(40)]
    assert other_items[-1] == ("done",)
    # And the restarted instance streams again.
    again: queue.Queue = queue.Queue()
    stream_collect(server.grpc_url, "streamer", 3, again)
    assert list(again.queue) == [("value", 0.0), ("value", 1.0), ("value", 2.0), ("done",)]
