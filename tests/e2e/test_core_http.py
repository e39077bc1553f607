"""The core v2 protocol over HTTP, through tritonclient.http against the real server."""

from __future__ import annotations

import json
import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

DATATYPES = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BYTES": np.object_,
}


@pytest.fixture(scope="module")
def client(example_server):
    return httpclient.InferenceServerClient(example_server.http_url)


def _post(server, path, body: bytes, headers=None):
    req = urllib.request.Request(f"http://{server.http_url}{path}", data=body, headers=headers or {}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_health_and_metadata(client):
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("add_sub")
    assert client.is_model_ready("add_sub", "1")
    assert not client.is_model_ready("add_sub", "7")
    assert not client.is_model_ready("no_such_model")
    meta = client.get_server_metadata()
    assert meta["name"] == "triton" and meta["version"] == "2.73.0"
    assert "binary_tensor_data" in meta["extensions"]
    model = client.get_model_metadata("add_sub")
    assert model["platform"] == "python" and model["versions"] == ["1"]
    assert model["inputs"] == [
        {"name": "INPUT0", "datatype": "FP32", "shape": [4]},
        {"name": "INPUT1", "datatype": "FP32", "shape": [4]},
    ]
    batching = client.get_model_metadata("identity_fp32", "1")
    assert batching["inputs"][0]["shape"] == [-1, -1]


@pytest.mark.parametrize("binary", [False, True])
def test_add_sub(client, binary):
    a = np.array([1, 2, 3, 4], dtype=np.float32)
    b = np.array([0.5, 0.5, 2, 2], dtype=np.float32)
    inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_data_from_numpy(a, binary_data=binary)
    inputs[1].set_data_from_numpy(b, binary_data=not binary)
    outputs = [
        httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary),
        httpclient.InferRequestedOutput("OUTPUT1", binary_data=not binary),
    ]
    result = client.infer("add_sub", inputs, outputs=outputs, request_id="req-42")
    np.testing.assert_allclose(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_allclose(result.as_numpy("OUTPUT1"), a - b)
    response = result.get_response()
    assert response["id"] == "req-42"
    assert response["model_version"] == "1"


@pytest.mark.parametrize("datatype", list(DATATYPES))
def test_every_datatype_round_trips(client, datatype):
    name = "STRING" if datatype == "BYTES" else datatype
    if datatype == "BYTES":
        # JSON carries text; the binary form carries any bytes (checked below).
        data = np.array([b"alpha", b"", "\u00e9t\u00e9".encode(), b"tab\tnul"], dtype=np.object_)
    elif datatype == "BOOL":
        data = np.array([True, False, True], dtype=np.bool_)
    else:
        info = np.iinfo if np.dtype(DATATYPES[datatype]).kind in "iu" else np.finfo
        limits = info(DATATYPES[datatype])
        data = np.array([limits.min, 0, 1, limits.max], dtype=DATATYPES[datatype])
    binary = datatype in ("FP16",)  # FP16 cannot travel as JSON
    for use_binary in {binary, True}:
        tensor = httpclient.InferInput(f"INPUT_{name}", list(data.shape), datatype)
        tensor.set_data_from_numpy(data, binary_data=use_binary)
        out = httpclient.InferRequestedOutput(f"OUTPUT_{name}", binary_data=use_binary)
        result = client.infer("identity_any", [tensor], outputs=[out])
        got = result.as_numpy(f"OUTPUT_{name}")
        if datatype == "BYTES":
            # tritonclient hands JSON strings back as str and binary ones as bytes.
            assert [x if isinstance(x, bytes) else x.encode() for x in got] == list(data)
        else:
            np.testing.assert_array_equal(got, data)
            assert got.dtype == data.dtype


def test_arbitrary_bytes_binary_round_trip(client):
    data = np.array([[b"\x00\xff\xfe", b"", b"\x80" * 300]], dtype=np.object_)
    tensor = httpclient.InferInput("INPUT0", list(data.shape), "BYTES")
    tensor.set_data_from_numpy(data, binary_data=True)
    out = httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)
    got = client.infer("identity_bytes", [tensor], outputs=[out]).as_numpy("OUTPUT0")
    assert got.tolist() == data.tolist()


def test_bf16_binary_round_trip(example_server):
    """BF16 travels as raw 2-byte values (the binary extension), and comes back bit-exact."""
    bits = np.array([0x3F80, 0x4000, 0xC040], dtype=np.uint16)  # 1.0, 2.0, -3.0
    header = json.dumps(
        {
            "inputs": [{"name": "INPUT_BF16", "datatype": "BF16", "shape": [3], "parameters": {"binary_data_size": 6}}],
            "outputs": [{"name": "OUTPUT_BF16", "parameters": {"binary_data": True}}],
        }
    ).encode()
    status, body = _post(
        example_server,
        "/v2/models/identity_any/infer",
        header + bits.tobytes(),
        {"Inference-Header-Content-Length": str(len(header))},
    )
    assert status == 200
    doc_end = body.index(b"]}") + 2
    doc = json.loads(body[:doc_end])
    assert doc["outputs"][0]["datatype"] == "BF16"
    np.testing.assert_array_equal(np.frombuffer(body[doc_end:], dtype=np.uint16), bits)


def test_nested_and_flat_json_and_parameters(example_server):
    body = {
        "id": "nested",
        "parameters": {"custom": "x"},
        "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [2, 3], "data": [[1, 2, 3], [4, 5, 6]]},
        ],
    }
    status, reply = _post(example_server, "/v2/models/identity_fp32/infer", json.dumps(body).encode())
    assert status == 200, reply
    doc = json.loads(reply)
    assert doc["id"] == "nested"
    assert doc["outputs"][0]["shape"] == [2, 3]
    assert doc["outputs"][0]["data"] == [1, 2, 3, 4, 5, 6]


def test_requested_output_subset(client):
    inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
    for tensor in inputs:
        tensor.set_data_from_numpy(np.ones(4, dtype=np.float32))
    result = client.infer("add_sub", inputs, outputs=[httpclient.InferRequestedOutput("OUTPUT1")])
    assert [o["name"] for o in result.get_response()["outputs"]] == ["OUTPUT1"]
    assert result.as_numpy("OUTPUT0") is None


def test_errors_have_triton_status_and_message(example_server, client):
    ones = httpclient.InferInput("INPUT0", [4], "FP32")
    ones.set_data_from_numpy(np.ones(4, dtype=np.float32))
    with pytest.raises(InferenceServerException) as err:
        client.infer("no_such_model", [ones])
    assert err.value.status() == "404"
    assert "Request for unknown model: 'no_such_model' is not found" in err.value.message()

    with pytest.raises(InferenceServerException) as err:
        client.infer("add_sub", [ones], model_version="9")
    assert err.value.status() == "404" and "version 9 is not found" in err.value.message()

    wrong_shape = httpclient.InferInput("INPUT0", [5], "FP32")
    wrong_shape.set_data_from_numpy(np.ones(5, dtype=np.float32))
    other = httpclient.InferInput("INPUT1", [4], "FP32")
    other.set_data_from_numpy(np.ones(4, dtype=np.float32))
    with pytest.raises(InferenceServerException) as err:
        client.infer("add_sub", [wrong_shape, other])
    assert err.value.status() == "400"
    assert "unexpected shape for input 'INPUT0' for model 'add_sub'. Expected [4], got [5]" in err.value.message()

    wrong_type = httpclient.InferInput("INPUT0", [4], "INT32")
    wrong_type.set_data_from_numpy(np.ones(4, dtype=np.int32))
    with pytest.raises(InferenceServerException) as err:
        client.infer("add_sub", [wrong_type, other])
    assert "data-type is 'INT32', but model 'add_sub' expects 'FP32'" in err.value.message()

    status, body = _post(example_server, "/v2/models/add_sub/infer", b"{not json")
    assert status == 400 and b"failed to parse the request JSON buffer" in body
    status, body = _post(example_server, "/v2/models/add_sub/infer", b'{"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2]}]}')
    assert status == 400 and b"Shape does not match" in body
    status, body = _post(example_server, "/v2/models/add_sub/infer", b'{"inputs": [{"name": "INPUT0", "datatype": "FP99", "shape": [1], "data": [1]}]}')
    assert status == 400 and b"invalid datatype for input INPUT0" in body  # Triton's words
    status, body = _post(example_server, "/v2/nothing/here", b"")
    assert status == 404 and json.loads(body) == {"error": "Not Found"}
    status, _ = _post(example_server, "/v2/health/live", b"")
    assert status == 405
    # Still serving after all of that.
    assert client.infer("add_sub", [ones, other]).as_numpy("OUTPUT0").tolist() == [2, 2, 2, 2]


def test_decoupled_model_refused_over_http(client):
    tensor = httpclient.InferInput("IN", [2], "INT32")
    tensor.set_data_from_numpy(np.array([1, 2], dtype=np.int32))
    with pytest.raises(InferenceServerException) as err:
        client.infer("repeat", [tensor])
    assert err.value.status() == "501"
    assert "HTTP end point doesn't support models with decoupled transaction policy" in err.value.message()


def test_batched_request(client):
    data = np.arange(24, dtype=np.float32).reshape(3, 8)
    tensor = httpclient.InferInput("INPUT0", list(data.shape), "FP32")
    tensor.set_data_from_numpy(data)
    np.testing.assert_array_equal(client.infer("identity_fp32", [tensor]).as_numpy("OUTPUT0"), data)
    too_big = np.zeros((9, 2), dtype=np.float32)
    tensor = httpclient.InferInput("INPUT0", list(too_big.shape), "FP32")
    tensor.set_data_from_numpy(too_big)
    with pytest.raises(InferenceServerException) as err:
        client.infer("identity_fp32", [tensor])
    assert "inference request batch-size must be <= 8 for 'identity_fp32'" in err.value.message()
