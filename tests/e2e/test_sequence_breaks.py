"""A request of a sequence either runs, or the sequence ends there: every later request of it
fails with Triton's missing-START error until a new START, instead of computing on state that
misses a step. A client that leaves while its request waits for a slot (an HTTP disconnect, a
gRPC cancel) and a worker that dies in mid-sequence both end it so."""

from __future__ import annotations

import json
import socket
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.hardening.oracle import wait_until
from tests.helpers import InProcessServer, write_model

CONFIG = """
backend: "python"
max_batch_size: 1
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "SUM" data_type: TYPE_INT32 dims: [ 1 ] } ]
sequence_batching {
  max_sequence_idle_microseconds: 600000000
  direct { }
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }
  ]
}
"""

#: One slot, one running sum in the worker; -1 makes the worker die.
MODEL = """
import os
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.total = 0

    def execute(self, requests):
        responses = []
        for request in requests:
            value = int(pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy()[0, 0])
            if value == -1:
                os._exit(1)
            if int(pb_utils.get_input_tensor_by_name(request, "START").as_numpy()[0, 0]):
                self.total = 0
            self.total += value
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", np.array([[self.total]], np.int32))]))
        return responses
"""

MISSING_START = "must specify the START flag on the first request of the sequence"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    write_model(repo, "one_slot", CONFIG, MODEL)
    with InProcessServer(repo) as running:
        yield running


def _tensor(module, value: int):
    tensor = module.InferInput("INPUT", [1, 1], "INT32")
    tensor.set_data_from_numpy(np.array([[value]], np.int32))
    return tensor


def _step(client, sequence: int, value: int, start: bool = False, end: bool = False) -> int:
    result = client.infer("one_slot", [_tensor(httpclient, value)], sequence_id=sequence,
                          sequence_start=start, sequence_end=end)
    return int(result.as_numpy("SUM")[0, 0])


def _failures(server: InProcessServer) -> int:
    with urllib.request.urlopen(f"http://{server.http_url}/v2/models/one_slot/stats") as reply:
        return json.loads(reply.read())["model_stats"][0]["inference_stats"]["fail"]["count"]


def _pending(server: InProcessServer) -> float:
    with urllib.request.urlopen(server.metrics_url) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith("nv_inference_pending_request_count{") and 'model="one_slot"' in line:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def _leave_http(server: InProcessServer, sequence: int, value: int) -> None:
    """A START sent over HTTP by a client that closes its connection once it waits."""
    body = json.dumps({"inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": [value]}],
                       "parameters": {"sequence_id": sequence, "sequence_start": True}}).encode()
    with socket.create_connection(("127.0.0.1", server.http_port)) as conn:
        conn.sendall(b"POST /v2/models/one_slot/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        wait_until(lambda: _pending(server) >= 1)


def _leave_grpc(server: InProcessServer, sequence: int, value: int) -> None:
    """A START sent over gRPC and cancelled by its client once it waits."""
    client = grpcclient.InferenceServerClient(server.grpc_url)
    call = client.async_infer("one_slot", [_tensor(grpcclient, value)], callback=lambda **_: None,
                              sequence_id=sequence, sequence_start=True)
    wait_until(lambda: _pending(server) >= 1)
    call.cancel()
    client.close()


@pytest.mark.parametrize("leave", [_leave_http, _leave_grpc], ids=["http-disconnect", "grpc-cancel"])
def test_a_start_dropped_while_it_waited_ends_its_sequence(server, leave):
    client = httpclient.InferenceServerClient(server.http_url)
    base = 1000 if leave is _leave_http else 2000
    holder, dropped = base + 1, base + 2
    assert _step(client, holder, 5, start=True) == 5  # holds the only slot
    failures = _failures(server)
    leave(server, dropped, 100)  # waits in the backlog behind the holder, then its client leaves
    wait_until(lambda: _failures(server) > failures)
    assert _step(client, holder, 1, end=True) == 6  # the slot is free: the dropped START's turn
    with pytest.raises(InferenceServerException) as error:
        _step(client, dropped, 7)  # never a sum built on the holder's state
    assert error.value.status() == "400"
    assert MISSING_START in error.value.message()
    assert _step(client, dropped, 3, start=True, end=True) == 3  # a new START begins it again


def test_a_worker_that_dies_in_mid_sequence_ends_the_sequence(server):
    client = httpclient.InferenceServerClient(server.http_url)
    assert _step(client, 3001, 5, start=True) == 5
    with pytest.raises(InferenceServerException):
        _step(client, 3001, -1)  # the worker dies with the sequence's sum
    with pytest.raises(InferenceServerException) as error:
        _step(client, 3001, 2)  # the new worker never saw the START
    assert error.value.status() == "400"
    assert MISSING_START in error.value.message()
    assert _step(client, 3001, 4, start=True, end=True) == 4
