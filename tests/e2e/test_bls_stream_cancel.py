"""A decoupled BLS stream hands over each response as it arrives, and its cancel() reaches the
called model while the caller keeps reading, as Triton's response iterator does."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.helpers import InProcessServer, write_model

WAITER_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
model_transaction_policy { decoupled: true }
"""

# Sends one response, then waits (at most 20 s) for its caller to cancel before it answers again:
# the caller can only cancel if it got the first response while the stream is still open.
WAITER = '''
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1], np.int32))]))
            deadline = time.monotonic() + 20
            while not request.is_cancelled() and time.monotonic() < deadline:
                time.sleep(0.01)
            if request.is_cancelled():
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(
                    "request has been cancelled", pb_utils.TritonError.CANCELLED)),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            else:
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([2], np.int32))]),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''

CALLER_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "REPORT" data_type: TYPE_STRING dims: [ 1 ] } ]
"""

CALLER = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            stream = pb_utils.InferenceRequest(
                model_name="waiter", inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
                requested_output_names=["OUT"]).exec(decoupled=True)
            seen = []
            for response in stream:
                if response.has_error():
                    seen.append(["error", response.error().code(), response.error().message()])
                    break
                seen.append(int(pb_utils.get_output_tensor_by_name(response, "OUT").as_numpy()[0]))
                stream.cancel()
            report = np.array([json.dumps(seen).encode()], dtype=np.object_)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("REPORT", report)]))
        return out
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("bls_cancel")
    write_model(repo, "waiter", WAITER_CONFIG, WAITER)
    write_model(repo, "caller", CALLER_CONFIG, CALLER)
    with InProcessServer(repo) as running:
        yield running


def test_cancel_after_the_first_response_reaches_the_callee(server):
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    tensor = httpclient.InferInput("IN", [1], "INT32")
    tensor.set_data_from_numpy(np.array([0], np.int32))
    seen = json.loads(client.infer("caller", [tensor]).as_numpy("REPORT")[0])
    # The first response arrived while the stream was open, the cancel reached the callee, and
    # the callee's CANCELLED error (code 7) came through the same stream.
    assert seen == [1, ["error", 7, "request has been cancelled"]]
