"""Triton's Python model API: unmodified model.py files, errors, crashes, hangs and restarts."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.helpers import Server, write_model

FP32_IO = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] }} ]
{extra}
"""

INTROSPECT = '''
import json, os
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.args = args
        pb_utils.Logger.log_info("introspect initialised")

    def execute(self, requests):
        responses = []
        for request in requests:
            info = {
                "pid": os.getpid(),
                "instance": self.args["model_instance_name"],
                "kind": self.args["model_instance_kind"],
                "version": self.args["model_version"],
                "repository": self.args["model_repository"],
                "id": request.request_id(),
                "params": json.loads(request.parameters()),
                "requested": request.requested_output_names(),
                "correlation_id": request.correlation_id(),
            }
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            text = np.array([json.dumps(info).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("OUT", data * 2), pb_utils.Tensor("INFO", text)],
                parameters={"answered_by": self.args["model_instance_name"]}))
        return responses
'''

FAULTY = '''
import os, time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            action = int(data[0]) if data.size else 0
            if action == 1:
                raise ValueError("the model raised on purpose")
            if action == 2:
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError("bad input value 2", pb_utils.TritonError.INVALID_ARG)))
                continue
            if action == 3:
                os._exit(3)
            if action == 4:
                time.sleep(60)
            if action == 5:
                return []
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUT", data)]))
        return responses
'''

AUTO = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({"name": "X", "data_type": "TYPE_INT32", "dims": [2]})
        auto_complete_model_config.add_output({"name": "Y", "data_type": "TYPE_INT32", "dims": [2]})
        auto_complete_model_config.set_max_batch_size(4)
        return auto_complete_model_config

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() + 1)])
                for r in requests]
'''


# Answers OUT and an output its config does not declare.
UNDECLARED = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([
            pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()),
            pb_utils.Tensor("EXTRA", np.ones([1], np.float32))]) for r in requests]
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("python_models")
    write_model(
        repo,
        "introspect",
        FP32_IO.format(
            name="introspect",
            extra='output [ { name: "INFO" data_type: TYPE_STRING dims: [ 1 ] } ]\n'
            "instance_group [ { count: 2 kind: KIND_CPU } ]",
        ).replace('output [ { name: "OUT"', 'output [ { name: "OUT"'),
        INTROSPECT,
    )
    write_model(
        repo,
        "faulty",
        FP32_IO.format(name="faulty", extra='parameters { key: "execute_timeout_secs" value { string_value: "2" } }'),
        FAULTY,
    )
    write_model(repo, "auto", 'backend: "python"\n', AUTO)
    write_model(repo, "undeclared", FP32_IO.format(name="undeclared", extra=""), UNDECLARED)
    write_model(repo, "broken_code", FP32_IO.format(name="broken_code", extra=""), "def oops(:\n")
    write_model(repo, "broken_config", "this is { not a config", None)
    write_model(repo, "broken_init", FP32_IO.format(name="broken_init", extra=""),
                "class TritonPythonModel:\n\n    def initialize(self, args):\n        raise ValueError('not today')\n")
    with Server(repo, ["--exit-on-error=false"]) as running:
        yield running


def _fp32(values, client=httpclient):
    tensor = client.InferInput("IN", [len(values)], "FP32")
    tensor.set_data_from_numpy(np.array(values, dtype=np.float32))
    return tensor


def test_broken_models_are_unavailable_with_reason_and_others_serve(server):
    client = httpclient.InferenceServerClient(server.http_url)
    index = {row["name"]: row for row in client.get_model_repository_index()}
    assert index["introspect"]["state"] == "READY"
    assert index["broken_code"]["state"] == "UNAVAILABLE"
    # The reasons are statuses as Triton writes them, in its stub's words.
    assert index["broken_code"]["reason"] == "Internal: SyntaxError: invalid syntax (model.py, line 1)"
    head, frames = index["broken_init"]["reason"].split("\n\nAt:\n")
    assert head == "Internal: ValueError: not today"
    assert frames.endswith("/broken_init/1/model.py(4): initialize\n")
    # A configuration that does not parse fails the poll: no state, the reason in the log.
    assert index["broken_config"] == {"name": "broken_config"}
    assert "Poll failed for model directory 'broken_config': failed to parse model configuration" in server.log()
    assert not client.is_server_ready()  # strict readiness, as Triton: broken_code is UNAVAILABLE
    assert client.is_server_live()
    assert "| broken_code" in server.log() and "UNAVAILABLE" in server.log()


def test_request_details_reach_the_model(server):
    client = httpclient.InferenceServerClient(server.http_url)
    result = client.infer(
        "introspect",
        [_fp32([1, 2])],
        request_id="abc",
        parameters={"temperature": 0.5, "mode": "fast", "flag": True, "count": 3},
        outputs=[httpclient.InferRequestedOutput("OUT"), httpclient.InferRequestedOutput("INFO")],
    )
    np.testing.assert_array_equal(result.as_numpy("OUT"), [2, 4])
    info = json.loads(result.as_numpy("INFO")[0])
    assert info["id"] == "abc"
    assert info["params"] == {"temperature": 0.5, "mode": "fast", "flag": True, "count": 3}
    assert sorted(info["requested"]) == ["INFO", "OUT"]
    assert info["kind"] == "CPU" and info["version"] == "1"
    assert info["repository"].endswith("introspect")
    assert result.get_response()["parameters"]["answered_by"] == info["instance"]


def test_each_instance_is_its_own_process(server):
    client = httpclient.InferenceServerClient(server.http_url, concurrency=8)
    pids = set()
    for _ in range(3):
        pending = [
            client.async_infer("introspect", [_fp32([1])], outputs=[httpclient.InferRequestedOutput("INFO")])
            for _ in range(8)
        ]
        pids |= {json.loads(p.get_result().as_numpy("INFO")[0])["pid"] for p in pending}
    assert len(pids) == 2


def test_auto_complete_config(server):
    client = httpclient.InferenceServerClient(server.http_url)
    config = client.get_model_config("auto")
    assert config["max_batch_size"] == 4
    assert [i["name"] for i in config["input"]] == ["X"]
    tensor = httpclient.InferInput("X", [1, 2], "INT32")
    tensor.set_data_from_numpy(np.array([[1, 2]], dtype=np.int32))
    np.testing.assert_array_equal(client.infer("auto", [tensor]).as_numpy("Y"), [[2, 3]])


@pytest.mark.parametrize("client", [httpclient, grpcclient])
def test_outputs_the_config_does_not_declare_are_dropped(server, client):
    url = server.http_url if client is httpclient else server.grpc_url
    result = client.InferenceServerClient(url).infer("undeclared", [_fp32([1.0, 2.0], client)])
    response = result.get_response()
    names = [o["name"] for o in response["outputs"]] if client is httpclient else [o.name for o in response.outputs]
    assert names == ["OUT"]  # as Triton: what the config does not declare never reaches the client


def test_model_errors_are_reported_and_server_carries_on(server):
    client = httpclient.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException) as err:
        client.infer("faulty", [_fp32([1])])
    assert err.value.status() == "500" and "the model raised on purpose" in err.value.message()
    with pytest.raises(InferenceServerException) as err:
        client.infer("faulty", [_fp32([2])])
    assert err.value.status() == "400" and "bad input value 2" in err.value.message()
    with pytest.raises(InferenceServerException) as err:
        client.infer("faulty", [_fp32([5])])
    assert "Number of InferenceResponse objects do not match" in err.value.message()
    np.testing.assert_array_equal(client.infer("faulty", [_fp32([0, 9])]).as_numpy("OUT"), [0, 9])


def test_crashing_process_fails_its_request_and_restarts(server):
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    other = grpcclient.InferenceServerClient(server.grpc_url)
    results = {}

    def call_other():
        results["other"] = other.infer("introspect", [_fp32([3], grpcclient)]).as_numpy("OUT")

    thread = threading.Thread(target=call_other)
    thread.start()
    with pytest.raises(InferenceServerException) as err:
        client.infer("faulty", [_fp32([3])])
    thread.join()
    assert err.value.status() == "500" and "is not healthy" in err.value.message()
    np.testing.assert_array_equal(results["other"], [6])
    # The instance comes back by itself.
    np.testing.assert_array_equal(client.infer("faulty", [_fp32([7])]).as_numpy("OUT"), [7])


def test_hung_execute_times_out_and_instance_recovers(server):
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=60)
    with pytest.raises(InferenceServerException) as err:
        client.infer("faulty", [_fp32([4])])
    assert err.value.status() == "503" and "did not finish within 2.0s" in err.value.message()
    np.testing.assert_array_equal(client.infer("faulty", [_fp32([8])]).as_numpy("OUT"), [8])
