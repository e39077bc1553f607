"""The core v2 protocol over gRPC, through tritonclient.grpc against the real server."""

from __future__ import annotations

import queue

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from openinfer._proto import grpc_service_pb2 as pb
from openinfer._proto import health_pb2, health_pb2_grpc

from .test_core_http import DATATYPES


@pytest.fixture(scope="module")
def client(example_server):
    return grpcclient.InferenceServerClient(example_server.grpc_url)


def test_health_metadata_and_standard_health_service(example_server, client):
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("add_sub")
    assert client.is_model_ready("no_such_model") is False  # an answer, not an error, as Triton
    meta = client.get_server_metadata(as_json=True)
    assert meta["name"] == "triton" and "sequence" in meta["extensions"]
    model = client.get_model_metadata("identity_fp32", as_json=True)
    assert model["inputs"] == [{"name": "INPUT0", "datatype": "FP32", "shape": ["-1", "-1"]}]
    with grpc.insecure_channel(example_server.grpc_url) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


@pytest.mark.parametrize("datatype", [*DATATYPES, "BF16"])
def test_every_datatype_round_trips(client, datatype):
    name = "STRING" if datatype == "BYTES" else datatype
    if datatype == "BYTES":
        data = np.array([b"\x00\xff", b"", "\u00e9".encode(), b"x" * 1000], dtype=np.object_)
    elif datatype == "BOOL":
        data = np.array([True, False], dtype=np.bool_)
    elif datatype == "BF16":
        import ml_dtypes  # tritonclient's own BF16 type

        data = np.array([1.0, -2.5, 3.0], dtype=ml_dtypes.bfloat16)
    else:
        info = np.iinfo if np.dtype(DATATYPES[datatype]).kind in "iu" else np.finfo
        limits = info(DATATYPES[datatype])
        data = np.array([limits.min, 0, limits.max], dtype=DATATYPES[datatype])
    tensor = grpcclient.InferInput(f"INPUT_{name}", list(data.shape), datatype)
    tensor.set_data_from_numpy(data)
    result = client.infer("identity_any", [tensor], outputs=[grpcclient.InferRequestedOutput(f"OUTPUT_{name}")])
    got = result.as_numpy(f"OUTPUT_{name}")
    if datatype == "BYTES":
        assert got.tolist() == data.tolist()
    else:
        np.testing.assert_array_equal(got.view(np.uint8), data.view(np.uint8))


def test_add_sub_and_large_tensor(client):
    a = np.arange(4, dtype=np.float32)
    inputs = [grpcclient.InferInput("INPUT0", [4], "FP32"), grpcclient.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(a * 2)
    result = client.infer("add_sub", inputs, request_id="g1")
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a * 3)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), -a)
    assert result.get_response().id == "g1"
    # 4 MiB per tensor: past grpcio's default message limit, through /dev/shm to the worker.
    big = np.random.default_rng(0).random((1, 1 << 20), dtype=np.float32)
    tensor = grpcclient.InferInput("INPUT0", list(big.shape), "FP32")
    tensor.set_data_from_numpy(big)
    np.testing.assert_array_equal(client.infer("identity_fp32", [tensor]).as_numpy("OUTPUT0"), big)


def test_large_requests_with_several_raw_inputs_and_a_damaged_one(example_server, client):
    """Raw inputs past the split size are read where they lie in the request's bytes: each
    input keeps its own data, and a request cut short is refused as one that did not parse."""
    rng = np.random.default_rng(2)
    a, b = rng.random(65536, dtype=np.float32), rng.random(32768, dtype=np.float64)
    inputs = [grpcclient.InferInput("INPUT_FP32", [65536], "FP32"), grpcclient.InferInput("INPUT_FP64", [32768], "FP64")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    names = ["OUTPUT_FP32", "OUTPUT_FP64"]
    result = client.infer("identity_any", inputs, outputs=[grpcclient.InferRequestedOutput(n) for n in names])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT_FP32"), a)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT_FP64"), b)
    message = pb.ModelInferRequest(model_name="identity_fp32")
    message.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 65536])
    message.raw_input_contents.append(a.tobytes())
    with grpc.insecure_channel(example_server.grpc_url) as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")  # bytes in, bytes out
        with pytest.raises(grpc.RpcError) as err:
            call(message.SerializeToString()[:-100], timeout=30)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        answer = pb.ModelInferResponse.FromString(call(message.SerializeToString(), timeout=30))
    np.testing.assert_array_equal(np.frombuffer(answer.raw_output_contents[0], np.float32), a)


def test_stream_decoupled_model(client):
    responses: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        values = np.array([5, 6, 7, 8], dtype=np.int32)
        tensor = grpcclient.InferInput("IN", [4], "INT32")
        tensor.set_data_from_numpy(values)
        client.async_stream_infer("repeat", [tensor], request_id="r1", enable_empty_final_response=True)
        got, finals = [], []
        while True:
            result, error = responses.get(timeout=15)
            assert error is None, error
            final = result.get_response().parameters["triton_final_response"].bool_param
            if result.as_numpy("OUT") is not None:
                got.append(int(result.as_numpy("OUT")[0]))
            finals.append(final)
            if final:
                break
        assert got == [5, 6, 7, 8]
        assert finals[-1] is True and not any(finals[:-1])
        # An ordinary model on the same stream answers once, flagged final; errors come in band.
        a = np.ones(4, dtype=np.float32)
        inputs = [grpcclient.InferInput("INPUT0", [4], "FP32"), grpcclient.InferInput("INPUT1", [4], "FP32")]
        for t in inputs:
            t.set_data_from_numpy(a)
        client.async_stream_infer("add_sub", inputs, request_id="ok")
        client.async_stream_infer("add_sub", inputs[:1], request_id="bad")
        first, error = responses.get(timeout=15)
        assert error is None and first.get_response().id == "ok"
        assert first.get_response().parameters["triton_final_response"].bool_param
        second, error = responses.get(timeout=15)
        assert second is None and "missing required input" in error.message()
        # A large answer on the stream: its raw output follows the message on the wire.
        big = np.random.default_rng(1).random((1, 65536), dtype=np.float32)
        tensor = grpcclient.InferInput("INPUT0", list(big.shape), "FP32")
        tensor.set_data_from_numpy(big)
        client.async_stream_infer("identity_fp32", [tensor], request_id="big")
        result, error = responses.get(timeout=15)
        assert error is None and result.get_response().id == "big"
        assert result.get_response().parameters["triton_final_response"].bool_param
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), big)
    finally:
        client.stop_stream()


def test_errors_map_to_grpc_codes(client):
    tensor = grpcclient.InferInput("IN", [1], "INT32")
    tensor.set_data_from_numpy(np.array([1], dtype=np.int32))
    with pytest.raises(InferenceServerException) as err:
        client.infer("repeat", [tensor])
    assert err.value.status() == "StatusCode.UNIMPLEMENTED"
    assert "ModelInfer RPC doesn't support models with decoupled transaction policy" in err.value.message()
    with pytest.raises(InferenceServerException) as err:
        client.infer("add_sub", [tensor], model_version="abc")
    assert err.value.status() == "StatusCode.INVALID_ARGUMENT"
    with pytest.raises(InferenceServerException) as err:
        client.get_model_metadata("nope")
    assert err.value.status() == "StatusCode.NOT_FOUND"
    wrong = grpcclient.InferInput("INPUT0", [4], "FP64")
    wrong.set_data_from_numpy(np.ones(4))
    with pytest.raises(InferenceServerException) as err:
        client.infer("add_sub", [wrong])
    assert err.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert client.is_server_live()
