"""Inference requests at the edges Triton answers in its own way: an empty tensor sent as
`[null]` (Flink's provider writes a NULL array row so), `"outputs": []`, a malformed body for
an unknown model, and the log line every failed request leaves at `--log-verbose 1`."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.helpers import ROOT, Server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    shutil.copytree(ROOT / "examples" / "model_repository" / "identity_fp32", repo / "identity_fp32")
    running = Server(repo, args=["--log-verbose", "1"]).start(wait_for="ready")
    yield running
    running.stop()


def _post(server: Server, model: str, doc: object) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"http://{server.http_url}/v2/models/{model}/infer", data=json.dumps(doc).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _input(shape: list[int], data: object) -> dict:
    return {"name": "INPUT0", "datatype": "FP32", "shape": shape, "data": data}


@pytest.mark.parametrize("data", [[None], [], [[None]], None], ids=["[null]", "[]", "[[null]]", "null"])
def test_an_empty_tensor_sent_as_nulls_is_an_empty_tensor(server, data):
    status, doc = _post(server, "identity_fp32", {"inputs": [_input([1, 0], data)]})
    assert status == 200, doc
    assert doc["outputs"] == [{"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 0], "data": []}]


def test_values_sent_for_an_empty_tensor_are_refused_not_dropped(server):
    status, doc = _post(server, "identity_fp32", {"inputs": [_input([1, 0], [1.0])]})
    assert status == 400
    assert "holds 0 elements" in doc["error"]


def test_a_null_where_a_value_belongs_is_refused(server):
    status, doc = _post(server, "identity_fp32", {"inputs": [_input([1, 1], [None])]})
    assert status == 400
    assert "non-number" in doc["error"]


def test_an_empty_outputs_list_asks_for_every_output(server):
    status, doc = _post(server, "identity_fp32", {"inputs": [_input([1, 2], [1.0, 2.0])], "outputs": []})
    assert status == 200
    assert doc["outputs"] == [{"name": "OUTPUT0", "datatype": "FP32", "shape": [1, 2], "data": [1.0, 2.0]}]


def test_an_unknown_model_is_404_whatever_the_body(server):
    status, doc = _post(server, "no_such_model", {})
    assert status == 404
    assert doc["error"] == "Request for unknown model: 'no_such_model' is not found"


def test_every_failed_request_is_logged_with_its_id_over_both_protocols(server):
    before = len(server.log())
    status, _ = _post(server, "identity_fp32", {"id": "flink-row-7", "inputs": [_input([1, 1], ["x"])]})
    assert status == 400
    status, _ = _post(server, "identity_fp32", {"inputs": "not a list"})
    assert status == 400
    client = grpcclient.InferenceServerClient(server.grpc_url)
    wrong = grpcclient.InferInput("INPUT0", [1, 2], "INT32")
    wrong.set_data_from_numpy(np.zeros((1, 2), np.int32))
    with pytest.raises(InferenceServerException):
        client.infer("identity_fp32", [wrong], request_id="grpc-call-3")
    client.close()
    log = server.log()[before:]
    assert "[request id: flink-row-7] Infer failed: attempt to access JSON non-number" in log
    assert "[request id: <id_unknown>] Infer failed: Unable to parse 'inputs'" in log
    assert ("[request id: grpc-call-3] Infer failed: inference input 'INPUT0' data-type is 'INT32', "
            "but model 'identity_fp32' expects 'FP32'") in log
    assert log.count("Infer failed") == 3
