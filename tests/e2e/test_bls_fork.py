"""BLS from processes the model forks (`multiprocessing.Pool`), as Triton's Python backend allows:
each child's calls reach the server and their answers come back to that child, while the
worker keeps serving; logs from a child reach the server's log."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.helpers import Server

TARGET = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() * 2)])
                for r in requests]
"""

FORKER = """
import multiprocessing

import numpy as np
import triton_python_backend_utils as pb_utils


def doubled(value):
    pb_utils.Logger.log_info(f"child asks for {value}")
    big = np.full(70000, value, dtype=np.float32)  # larger than a frame carries inline
    request = pb_utils.InferenceRequest(model_name="target", inputs=[pb_utils.Tensor("IN", big)],
                                        requested_output_names=["OUT"])
    response = request.exec()
    if response.has_error():
        return "error: " + response.error().message()
    out = pb_utils.get_output_tensor_by_name(response, "OUT").as_numpy()
    return float(out[0]) if (out == out[0]).all() and out.size == big.size else "wrong answer"


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().tolist()
            with multiprocessing.get_context("fork").Pool(3) as pool:
                answers = pool.map(doubled, values)
            if any(isinstance(a, str) for a in answers):
                raise pb_utils.TritonModelException(str(answers))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array(answers, np.float32))]))
        return responses
"""

STOPPABLE = """
import os
import signal
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        ready, started = os.pipe()
        child = os.fork()
        if child == 0:
            os.write(started, b"1")  # running its own code: past the fork
            time.sleep(30)
            os._exit(0)
        os.read(ready, 1)
        os.kill(child, signal.SIGTERM)  # what a pool's terminate() sends its workers
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done, status = os.waitpid(child, os.WNOHANG)
            if done:
                stopped = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
                break
            time.sleep(0.01)
        else:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            stopped = False
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([float(stopped)], np.float32))])
                for _ in requests]
"""

CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] }} ]
"""


def _model(repo: Path, name: str, source: str) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(CONFIG.format(name=name))
    (repo / name / "1" / "model.py").write_text(source)


@pytest.fixture
def server(tmp_path: Path):
    repo = tmp_path / "repo"
    _model(repo, "target", TARGET)
    _model(repo, "forker", FORKER)
    _model(repo, "stoppable", STOPPABLE)
    with Server(repo).start(wait_for="ready") as running:
        yield running


def test_children_of_a_model_make_bls_calls_and_log(server):
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("IN", [5], "FP32")
    tensor.set_data_from_numpy(np.arange(1, 6, dtype=np.float32))
    for _ in range(2):  # a second pool forks again from the same worker
        assert client.infer("forker", [tensor]).as_numpy("OUT").tolist() == [2, 4, 6, 8, 10]
    assert "child asks for 5.0" in server.log()
    direct = httpclient.InferInput("IN", [2], "FP32")
    direct.set_data_from_numpy(np.array([3, 4], np.float32))
    assert client.infer("target", [direct]).as_numpy("OUT").tolist() == [6, 8]


def test_a_child_of_a_model_stops_on_sigterm_though_the_worker_ignores_it(server):
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("IN", [1], "FP32")
    tensor.set_data_from_numpy(np.zeros(1, np.float32))
    assert client.infer("stoppable", [tensor]).as_numpy("OUT").tolist() == [1.0]
