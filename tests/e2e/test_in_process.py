"""Python models with `execution_mode: in_process`: same API, run on the server's event loop."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.helpers import EXAMPLES, Server, write_model

IN_PROCESS = 'parameters { key: "execution_mode" value { string_value: "in_process" } }'
IO = """
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

DOUBLER = '''
import os
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.pid = os.getpid()

    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            if data.size and data.flat[0] < 0:
                raise ValueError("negative input")
            responses.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor("OUTPUT0", data * 2)], parameters={"pid": self.pid}))
        return responses
'''

ASYNC_BLS = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            call = pb_utils.InferenceRequest(
                model_name="add_sub",
                inputs=[pb_utils.Tensor("INPUT0", data.reshape(-1)[:4]), pb_utils.Tensor("INPUT1", np.ones(4, np.float32))],
                requested_output_names=["OUTPUT0"])
            answer = await call.async_exec()
            if answer.has_error():
                raise pb_utils.TritonModelException(answer.error().message())
            out = pb_utils.get_output_tensor_by_name(answer, "OUTPUT0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", out.reshape(1, 4))]))
        return responses
'''

SYNC_BLS = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        call = pb_utils.InferenceRequest(model_name="add_sub", inputs=[], requested_output_names=["OUTPUT0"])
        call.exec()
        return []
'''

# A decoupled model in the server process: answers from a thread of its own, then FINAL.
COUNTDOWN = '''
import threading
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            sender = request.get_response_sender()

            def answer(data=data, sender=sender):
                for step in range(3):
                    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", data + step)]))
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

            threading.Thread(target=answer).start()
        return None
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("in_process")
    write_model(repo, "doubler", IO + IN_PROCESS + "\ndynamic_batching { }", DOUBLER)
    write_model(repo, "async_bls", IO + IN_PROCESS, ASYNC_BLS)
    write_model(repo, "sync_bls", IO + IN_PROCESS, SYNC_BLS)
    write_model(repo, "stream", IO.replace("max_batch_size: 8", "max_batch_size: 0")
                + IN_PROCESS + "\nmodel_transaction_policy { decoupled: true }", COUNTDOWN)
    write_model(repo, "add_sub", (EXAMPLES / "add_sub" / "config.pbtxt").read_text(),
                (EXAMPLES / "add_sub" / "1" / "model.py").read_text())
    with Server(repo) as running:
        yield running


def _tensor(module, values):
    data = np.array([values], dtype=np.float32)
    tensor = module.InferInput("INPUT0", list(data.shape), "FP32")
    tensor.set_data_from_numpy(data)
    return tensor


def test_runs_in_the_server_process_over_both_protocols(server):
    http = httpclient.InferenceServerClient(server.http_url)
    result = http.infer("doubler", [_tensor(httpclient, [1.0, 2.5])])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), [[2.0, 5.0]])
    assert result.get_response()["parameters"]["pid"] == server.process.pid
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    np.testing.assert_array_equal(grpc.infer("doubler", [_tensor(grpcclient, [3.0])]).as_numpy("OUTPUT0"), [[6.0]])
    stats = http.get_inference_statistics("doubler")["model_stats"][0]
    assert stats["inference_stats"]["success"]["count"] == 2


def test_errors_come_back_and_the_server_carries_on(server):
    http = httpclient.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException) as err:
        http.infer("doubler", [_tensor(httpclient, [-1.0])])
    assert err.value.status() == "500" and "ValueError: negative input" in err.value.message()
    with pytest.raises(InferenceServerException) as err:
        http.infer("sync_bls", [_tensor(httpclient, [1.0])])
    assert "must use 'await request.async_exec()'" in err.value.message()
    np.testing.assert_array_equal(http.infer("doubler", [_tensor(httpclient, [4.0])]).as_numpy("OUTPUT0"), [[8.0]])


def test_async_business_logic_scripting_reaches_a_process_model(server):
    http = httpclient.InferenceServerClient(server.http_url)
    result = http.infer("async_bls", [_tensor(httpclient, [1.0, 2.0, 3.0, 4.0])])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), [[2.0, 3.0, 4.0, 5.0]])


def test_decoupled_model_streams_from_its_own_thread(server):
    """A decoupled model in the server process answers through its response sender, from a
    thread it started, and the stream ends with its FINAL flag."""
    import queue

    answers: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    data = grpcclient.InferInput("INPUT0", [2], "FP32")
    data.set_data_from_numpy(np.array([1.0, 2.0], dtype=np.float32))
    client.async_stream_infer("stream", [data], enable_empty_final_response=True)
    received = []
    while True:
        result, error = answers.get(timeout=30)
        assert error is None, str(error)
        response = result.get_response()
        if response.outputs:
            received.append(result.as_numpy("OUTPUT0").tolist())
        if response.parameters["triton_final_response"].bool_param:
            break
    client.stop_stream()
    assert received == [[1.0, 2.0], [2.0, 3.0], [3.0, 4.0]]
