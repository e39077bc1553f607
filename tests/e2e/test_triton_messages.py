"""Answers whose every word is Triton's, as `make conformance` compares them with Triton 2.51:
the request checks' messages, the binary extension's sizes, version routes and the default
instance group's name."""

from __future__ import annotations

import json

import grpc
import httpx
import pytest
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc

FOUR = [1.0, 2.0, 3.0, 4.0]


@pytest.fixture(scope="module")
def http(example_server):
    with httpx.Client(base_url=f"http://127.0.0.1:{example_server.http_port}", timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def stub(example_server):
    with grpc.insecure_channel(f"127.0.0.1:{example_server.grpc_port}") as channel:
        yield service_pb2_grpc.GRPCInferenceServiceStub(channel)


def _tensor(name: str, shape: list[int], data: list[float], datatype: str = "FP32") -> dict:
    return {"name": name, "datatype": datatype, "shape": shape, "data": data}


def _error(reply: httpx.Response) -> tuple[int, str]:
    return reply.status_code, reply.json()["error"]


def test_a_batching_models_shape_error_says_the_batch_dimension_comes_first(http):
    reply = http.post("/v2/models/identity_fp32/infer", json={"inputs": [_tensor("INPUT0", [4], FOUR)]})
    assert _error(reply) == (400, (
        "[request id: <id_unknown>] unexpected shape for input 'INPUT0' for model 'identity_fp32'. Expected "
        "[-1,-1], got [4]. NOTE: Setting a non-zero max_batch_size in the model config requires a batch "
        "dimension to be prepended to each input shape. If you want to specify the full shape including the "
        "batch dim in your input dims config, try setting max_batch_size to zero. See the model configuration "
        "docs for more info on max_batch_size."))
    reply = http.post("/v2/models/add_sub/infer",
                      json={"inputs": [_tensor("INPUT0", [2, 2], FOUR), _tensor("INPUT1", [4], FOUR)]})
    assert _error(reply) == (400, "[request id: <id_unknown>] unexpected shape for input 'INPUT0' for model "
                                  "'add_sub'. Expected [4], got [2,2]. ")


def test_unknown_tensor_names_carry_no_request_id(http, stub):
    reply = http.post("/v2/models/add_sub/infer",
                      json={"id": "r1", "inputs": [_tensor("INPUTX", [4], FOUR), _tensor("INPUT1", [4], FOUR)]})
    assert _error(reply) == (400, "unexpected inference input 'INPUTX' for model 'add_sub'")
    reply = http.post("/v2/models/add_sub/infer", json={
        "inputs": [_tensor("INPUT0", [4], FOUR), _tensor("INPUT1", [4], FOUR)], "outputs": [{"name": "OUTPUT9"}]})
    assert _error(reply) == (400, "unexpected inference output 'OUTPUT9' for model 'add_sub'")
    message = pb.ModelInferRequest(model_name="add_sub", outputs=[pb.ModelInferRequest.InferRequestedOutputTensor(
        name="OUTPUT9")])
    for name in ("INPUT0", "INPUT1"):
        message.inputs.add(name=name, datatype="FP32", shape=[4]).contents.fp32_contents.extend(FOUR)
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(message, timeout=30)
    assert info.value.details() == "unexpected inference output 'OUTPUT9' for model 'add_sub'"


def test_the_input_count_message_lists_names_as_triton_does(http):
    inputs = [_tensor(name, [4], FOUR) for name in ("INPUT0", "INPUT1", "INPUT2")]
    reply = http.post("/v2/models/add_sub/infer", json={"inputs": inputs})
    assert _error(reply) == (400, (
        "[request id: <id_unknown>] expected 2 inputs but got 3 inputs for model 'add_sub'. Got input(s) "
        "['INPUT0','INPUT1','INPUT2'], but missing required input(s) []. Please provide all required input(s)."))


def test_binary_input_sizes_name_the_missing_bytes_and_the_request(http, stub):
    doc = {"id": "r2", "inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [4], "parameters": {"binary_data_size": 16}},
        _tensor("INPUT1", [4], FOUR)]}
    header = json.dumps(doc).encode()
    headers = {"Inference-Header-Content-Length": str(len(header))}
    short = http.post("/v2/models/add_sub/infer", content=header + b"\0" * 4, headers=headers)
    assert _error(short) == (400, "unexpected size for input 'INPUT0', expecting 12 additional bytes for model "
                                  "'add_sub'")
    doc["inputs"][0]["parameters"]["binary_data_size"] = 8
    header = json.dumps(doc).encode()
    headers = {"Inference-Header-Content-Length": str(len(header))}
    wrong = http.post("/v2/models/add_sub/infer", content=header + b"\0" * 8, headers=headers)
    assert _error(wrong) == (400, "[request id: r2] input byte size mismatch for input 'INPUT0' for model "
                                  "'add_sub'. Expected 16, got 8")
    message = pb.ModelInferRequest(model_name="identity_fp32", raw_input_contents=[b"\0" * 8])
    message.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 4])
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(message, timeout=30)
    assert info.value.details() == ("[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for "
                                    "model 'identity_fp32'. Expected 16, got 8")


def test_an_unknown_datatype_names_its_input(http):
    reply = http.post("/v2/models/add_sub/infer",
                      json={"inputs": [_tensor("INPUT0", [4], FOUR, "FP8"), _tensor("INPUT1", [4], FOUR)]})
    assert _error(reply) == (400, "invalid datatype for input INPUT0")


def test_a_version_that_is_not_a_number_is_an_unknown_path(http):
    assert _error(http.get("/v2/models/add_sub/versions/abc")) == (404, "Not Found")
    assert _error(http.get("/v2/models/add_sub/versions/-1/ready")) == (404, "Not Found")
    assert http.get("/v2/models/add_sub/versions/1").status_code == 200
    assert http.get("/v2/models/add_sub/versions/latest").status_code == 200  # an extension: see README


def test_the_instance_group_added_by_default_bears_the_models_name(http):
    assert http.get("/v2/models/identity_fp32/config").json()["instance_group"][0]["name"] == "identity_fp32"
    # Groups the config declares without a name are numbered.
    assert http.get("/v2/models/add_sub/config").json()["instance_group"][0]["name"] == "add_sub_0"


@pytest.mark.parametrize("body,message", [
    (b"[]", "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"),
    (b"{}", "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"),
    (b'{"inputs": {}}', "Unable to parse 'inputs': attempt to access JSON non-array as array"),
    (b'{"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": 4, "data": [1, 2, 3, 4]}]}',
     "Unable to parse 'shape': attempt to access JSON non-array as array"),
    (b'{"inputs": [], "parameters": {"binary_data_output": "yes"}}',
     "Unable to parse 'binary_data_output': attempt to access JSON non-boolean as boolean"),
    (b'{"inputs": [], "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": 1}}]}',
     "Unable to parse 'binary_data': attempt to access JSON non-boolean as boolean"),
    (b"", "[request id: <id_unknown>] Raw request must only have 1 input (found 1) to be deduced but got 2 "
          "inputs in 'add_sub' model configuration"),  # an empty body is a raw request, as in Triton
])
def test_malformed_infer_bodies_are_named_in_tritons_words(http, body, message):
    reply = http.post("/v2/models/add_sub/infer", content=body)
    assert _error(reply) == (400, message)  # Triton: 500 for all but the last (README)


def test_classification_zero_asks_for_none_over_http_and_is_refused_over_grpc(http, stub):
    doc = {"inputs": [_tensor("INPUT0", [4], FOUR), _tensor("INPUT1", [4], FOUR)],
           "outputs": [{"name": "OUTPUT0", "parameters": {"classification": 0}}]}
    reply = http.post("/v2/models/add_sub/infer", json=doc)
    assert reply.status_code == 200
    assert reply.json()["outputs"][0]["data"] == [2.0, 4.0, 6.0, 8.0]  # the values, not classes
    message = pb.ModelInferRequest(model_name="add_sub")
    for name in ("INPUT0", "INPUT1"):
        message.inputs.add(name=name, datatype="FP32", shape=[4]).contents.fp32_contents.extend(FOUR)
    message.outputs.add(name="OUTPUT0").parameters["classification"].int64_param = 0
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(message, timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details() == "invalid value for 'classification' parameter, expected >= 0"


def test_typed_grpc_contents_that_do_not_fill_the_shape_are_counted_in_bytes(stub):
    message = pb.ModelInferRequest(model_name="add_sub", id="r3")
    message.inputs.add(name="INPUT0", datatype="FP32", shape=[4]).contents.fp32_contents.extend([1.0, 2.0])
    message.inputs.add(name="INPUT1", datatype="FP32", shape=[4]).contents.fp32_contents.extend(FOUR)
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(message, timeout=30)
    assert info.value.details() == ("[request id: r3] input byte size mismatch for input 'INPUT0' for model "
                                    "'add_sub'. Expected 16, got 8")
