"""Binary tensor data, classification, parameters, model configuration, statistics, compression
and the body limit, through tritonclient.http and tritonclient.grpc against the real server."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
import urllib.request
import zlib

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from tests.e2e import ext_models
from tests.helpers import Server, write_model

LIMIT = 1 << 20

COUNTED = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            if (data < 0).any():
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError("negative input", pb_utils.TritonError.INVALID_ARG)))
            else:
                responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", data)]))
        return responses
"""

AUTO = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.set_max_batch_size(2)
        config.add_input({"name": "X", "data_type": "TYPE_INT64", "dims": [3]})
        config.add_output({"name": "Y", "data_type": "TYPE_INT64", "dims": [3]})
        return config

    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]) for r in requests]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("data_repo")
    ext_models.add_sub(repo)
    ext_models.identity(repo, "identity_fp16", "TYPE_FP16")
    ext_models.identity(repo, "identity_bytes", "TYPE_STRING", max_batch=4)
    ext_models.classifier(repo, "classify_fp32", "TYPE_FP32", max_batch=4)
    ext_models.classifier(repo, "classify_int32", "TYPE_INT32")
    ext_models.params(repo)
    write_model(
        repo,
        "counted",
        ext_models.IDENTITY_CONFIG.format(name="counted", dtype="TYPE_FP32", max_batch=4),
        COUNTED,
    )
    write_model(repo, "auto", 'backend: "python"\n', AUTO)
    srv = Server(
        repo, [f"--http-max-input-size={LIMIT}", "--grpc-infer-response-compression-level=high"]
    ).start(wait_for="ready")
    yield srv
    assert srv.stop() == 0, srv.log()


@pytest.fixture(scope="module")
def http(server):
    return httpclient.InferenceServerClient(server.http_url)


@pytest.fixture(scope="module")
def grpc_client(server):
    return grpcclient.InferenceServerClient(server.grpc_url)


def _post(server, path: str, body: bytes, headers: dict | None = None) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(
        f"http://{server.http_url}{path}", data=body, headers=headers or {}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, dict(reply.headers), reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def _error(call) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as info:
        call()
    return info.value


# --------------------------------------------------------------------------- binary tensor data
def test_mixed_json_and_binary_request(server):
    a = np.array([1, 2, 3, 4], dtype=np.float32)
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "FP32",
                    "shape": [4],
                    "parameters": {"binary_data_size": 16},
                },
                {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [10, 20, 30, 40]},
            ],
            "outputs": [
                {"name": "OUTPUT0", "parameters": {"binary_data": True}},
                {"name": "OUTPUT1"},
            ],
        }
    ).encode()
    status, headers, body = _post(
        server,
        "/v2/models/add_sub/infer",
        header + a.tobytes(),
        {"Inference-Header-Content-Length": str(len(header))},
    )
    assert status == 200, body
    length = int(headers["inference-header-content-length"])
    assert headers["content-type"] == "application/octet-stream"
    doc = json.loads(body[:length])
    out0, out1 = doc["outputs"]
    assert out0 == {
        "name": "OUTPUT0",
        "datatype": "FP32",
        "shape": [4],
        "parameters": {"binary_data_size": 16},
    }
    assert np.frombuffer(body[length:], dtype=np.float32).tolist() == [11, 22, 33, 44]
    assert out1["data"] == [-9, -18, -27, -36]


def test_binary_and_json_through_the_clients(http, grpc_client):
    a, b = np.arange(4, dtype=np.float32), np.full(4, 0.5, dtype=np.float32)
    inputs = [
        httpclient.InferInput("INPUT0", [4], "FP32"),
        httpclient.InferInput("INPUT1", [4], "FP32"),
    ]
    inputs[0].set_data_from_numpy(a, binary_data=True)
    inputs[1].set_data_from_numpy(b, binary_data=False)
    outputs = [
        httpclient.InferRequestedOutput("OUTPUT0", binary_data=True),
        httpclient.InferRequestedOutput("OUTPUT1", binary_data=False),
    ]
    result = http.infer("add_sub", inputs, outputs=outputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    assert "data" in result.get_output("OUTPUT1") and "data" not in result.get_output("OUTPUT0")

    words = np.array([[b"zero"], [b""], ["\u00e9t\u00e9".encode()]], dtype=np.object_)
    for client, module in ((http, httpclient), (grpc_client, grpcclient)):
        tensor = module.InferInput("INPUT0", [3, 1], "BYTES")
        tensor.set_data_from_numpy(words)
        assert (
            client.infer("identity_bytes", [tensor]).as_numpy("OUTPUT0").tolist() == words.tolist()
        )
    half = np.array([0.5, -2.25, 65504], dtype=np.float16)
    for client, module in ((http, httpclient), (grpc_client, grpcclient)):
        tensor = module.InferInput("INPUT0", [3], "FP16")
        tensor.set_data_from_numpy(half)
        np.testing.assert_array_equal(
            client.infer("identity_fp16", [tensor]).as_numpy("OUTPUT0"), half
        )


def test_raw_binary_request(server):
    status, headers, body = _post(
        server,
        "/v2/models/identity_fp16/infer",
        np.arange(6, dtype=np.float16).tobytes(),
        {"Inference-Header-Content-Length": "0"},
    )
    assert status == 200, body
    length = int(headers["inference-header-content-length"])
    assert json.loads(body[:length])["outputs"][0]["shape"] == [6]
    assert np.frombuffer(body[length:], dtype=np.float16).tolist() == list(range(6))


def test_binary_framing_errors(server, http):
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "FP32",
                    "shape": [4],
                    "parameters": {"binary_data_size": 16},
                },
                {
                    "name": "INPUT1",
                    "datatype": "FP32",
                    "shape": [4],
                    "parameters": {"binary_data_size": 16},
                },
            ]
        }
    ).encode()
    h = {"Inference-Header-Content-Length": str(len(header))}
    cases = [
        (header + bytes(40), h, 400, "unexpected additional input data for model 'add_sub'"),
        (
            header + bytes(20),
            h,
            400,
            "unexpected size for input 'INPUT1', expecting 12 additional bytes for model 'add_sub'",  # 4 of 16 sent
        ),
        (
            header + bytes(32),
            {"Inference-Header-Content-Length": "99999"},
            400,
            f"inference header size should be in range (0, {len(header) + 32}), got: 99999",
        ),
        (
            header + bytes(32),
            {"Inference-Header-Content-Length": "abc"},
            400,
            "Unable to parse Inference-Header-Content-Length, got: abc",
        ),
    ]
    for body, headers, status, message in cases:
        got_status, _, got = _post(server, "/v2/models/add_sub/infer", body, headers)
        assert (got_status, json.loads(got)) == (status, {"error": message})
    fp16 = json.dumps(
        {"inputs": [{"name": "INPUT0", "datatype": "FP16", "shape": [1], "data": [1.0]}]}
    ).encode()
    status, _, got = _post(server, "/v2/models/identity_fp16/infer", fp16)
    assert (status, json.loads(got)["error"]) == (
        400,
        "receiving FP16 data via JSON is not supported. Please use the binary data format for input INPUT0",
    )
    tensor = httpclient.InferInput("INPUT0", [1], "FP16")
    tensor.set_data_from_numpy(np.ones(1, dtype=np.float16))
    err = _error(
        lambda: http.infer(
            "identity_fp16",
            [tensor],
            outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=False)],
        )
    )
    assert "sending FP16 data via JSON is not supported" in err.message()
    assert http.is_server_live()


# --------------------------------------------------------------------------------- classification
def test_classification_batched_and_unbatched(http, grpc_client):
    scores = np.array([[0.1, 0.9, 0.3, 0.7, 0.2], [5, 4, 3, 2, 1]], dtype=np.float32)
    expected = [
        ["0.900000:1:dog", "0.700000:3", "0.300000:2:bird"],
        ["5.000000:0:cat", "4.000000:1:dog", "3.000000:2:bird"],
    ]
    tensor = httpclient.InferInput("INPUT0", [2, 5], "FP32")
    tensor.set_data_from_numpy(scores)
    as_json = http.infer(
        "classify_fp32",
        [tensor],
        outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=False, class_count=3)],
    )
    assert as_json.get_output("OUTPUT0")["datatype"] == "BYTES" and as_json.get_output("OUTPUT0")[
        "shape"
    ] == [2, 3]
    assert as_json.as_numpy("OUTPUT0").tolist() == expected
    as_binary = http.infer(
        "classify_fp32",
        [tensor],
        outputs=[httpclient.InferRequestedOutput("OUTPUT0", class_count=3)],
    )
    assert as_binary.as_numpy("OUTPUT0").tolist() == [[s.encode() for s in row] for row in expected]
    gtensor = grpcclient.InferInput("INPUT0", [2, 5], "FP32")
    gtensor.set_data_from_numpy(scores)
    via_grpc = grpc_client.infer(
        "classify_fp32",
        [gtensor],
        outputs=[grpcclient.InferRequestedOutput("OUTPUT0", class_count=3)],
    )
    assert via_grpc.as_numpy("OUTPUT0").tolist() == [[s.encode() for s in row] for row in expected]

    ints = np.array([3, 9, 7, 1, 5], dtype=np.int32)
    tensor = httpclient.InferInput("INPUT0", [5], "INT32")
    tensor.set_data_from_numpy(ints)
    result = http.infer(
        "classify_int32",
        [tensor],
        outputs=[httpclient.InferRequestedOutput("OUTPUT0", class_count=10)],
    )
    assert result.get_output("OUTPUT0")["shape"] == [5]  # k is capped at the class count
    assert result.as_numpy("OUTPUT0").tolist() == [
        b"9:1:dog",
        b"7:2:bird",
        b"5:4:fish",
        b"3:0:cat",
        b"1:3",
    ]


# ------------------------------------------------------------------------------------ parameters
def test_parameters_reach_the_model_and_come_back(http, grpc_client):
    sent = {"text": "x", "count": 3, "enabled": True, "scale": 1.5}
    for client, module in ((http, httpclient), (grpc_client, grpcclient)):
        tensor = module.InferInput("INPUT0", [1], "INT32")
        tensor.set_data_from_numpy(np.zeros(1, dtype=np.int32))
        result = client.infer("params", [tensor], parameters=sent)
        assert json.loads(result.as_numpy("OUTPUT0")[0]) == sent
        response = result.get_response()
        if module is httpclient:
            params = response["parameters"]
        else:
            params = {
                k: getattr(v, v.WhichOneof("parameter_choice"))
                for k, v in response.parameters.items()
            }
        # Response parameters of a Python model are bool/int/str, as Triton's API takes them.
        assert params == {"echo_count": 4, "flag": True, "label": "ok", "ratio": "0.5"}


def test_reserved_and_malformed_parameters(server):
    base = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1], "data": [0]}]}
    status, _, body = _post(
        server,
        "/v2/models/params/infer",
        json.dumps({**base, "parameters": {"triton_x": 1}}).encode(),
    )
    assert (status, json.loads(body)["error"]) == (
        400,
        "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.",
    )
    status, _, body = _post(
        server,
        "/v2/models/params/infer",
        json.dumps({**base, "parameters": {"obj": {"a": 1}}}).encode(),
    )
    assert status == 400
    with grpc.insecure_channel(server.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = service_pb2.ModelInferRequest(model_name="params")
        request.inputs.add(name="INPUT0", datatype="INT32", shape=[1])
        request.raw_input_contents.append(np.zeros(1, dtype=np.int32).tobytes())
        request.parameters["triton_secret"].bool_param = True
        with pytest.raises(grpc.RpcError) as info:
            stub.ModelInfer(request)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "Only the following keys starting with 'triton_' are allowed" in info.value.details()
        del request.parameters["triton_secret"]
        request.parameters["custom"].uint64_param = 7
        with pytest.raises(grpc.RpcError) as info:
            stub.ModelInfer(request)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# ---------------------------------------------------------------------------- model configuration
def test_model_configuration(http, grpc_client):
    config = http.get_model_config("classify_fp32")
    assert (
        config["name"] == "classify_fp32"
        and config["backend"] == "python"
        and config["max_batch_size"] == 4
    )
    assert config["input"][0]["dims"] == [5] and config["input"][0]["data_type"] == "TYPE_FP32"
    assert config["output"][0]["label_filename"] == "labels.txt"
    assert config["version_policy"] == {"latest": {"num_versions": 1}}
    assert config["instance_group"][0]["name"] == "classify_fp32"  # the default group, named as Triton names it
    assert (
        config["instance_group"][0]["kind"] == "KIND_CPU"
        and config["instance_group"][0]["count"] == 1
    )
    assert config["optimization"]["input_pinned_memory"] == {"enable": True}
    assert config["parameters"] == {} and config["model_warmup"] == [] and config["platform"] == ""
    assert http.get_model_config("classify_fp32", "1") == config
    proto = grpc_client.get_model_config("classify_fp32").config
    assert (proto.name, proto.max_batch_size, proto.output[0].label_filename) == (
        "classify_fp32",
        4,
        "labels.txt",
    )
    # Fields the model filled through auto_complete_config are part of the served config.
    auto = http.get_model_config("auto")
    assert auto["max_batch_size"] == 2
    assert [(t["name"], t["data_type"], t["dims"]) for t in auto["input"]] == [
        ("X", "TYPE_INT64", [3])
    ]
    assert [(t.name, list(t.dims)) for t in grpc_client.get_model_config("auto").config.output] == [
        ("Y", [3])
    ]
    err = _error(lambda: http.get_model_config("nope"))
    assert (err.status(), err.message()) == (
        "404",
        "Request for unknown model: 'nope' is not found",
    )
    err = _error(lambda: grpc_client.get_model_config("classify_fp32", "7"))
    assert err.status() == "StatusCode.NOT_FOUND"


# ------------------------------------------------------------------------------------ statistics
def test_statistics(http, grpc_client):
    started_ms = time.time_ns() // 1_000_000
    for batch in (1, 2, 2):
        tensor = httpclient.InferInput("INPUT0", [batch, 3], "FP32")
        tensor.set_data_from_numpy(np.ones((batch, 3), dtype=np.float32))
        http.infer("counted", [tensor])
    bad = grpcclient.InferInput("INPUT0", [1, 3], "FP32")
    bad.set_data_from_numpy(-np.ones((1, 3), dtype=np.float32))
    assert "negative input" in _error(lambda: grpc_client.infer("counted", [bad])).message()

    (stats,) = http.get_inference_statistics("counted")["model_stats"]
    assert (stats["name"], stats["version"]) == ("counted", "1")
    assert stats["inference_count"] == 5 + 1 and stats["execution_count"] == 4
    assert stats["last_inference"] >= started_ms
    inference = stats["inference_stats"]
    assert list(inference) == [
        "success",
        "fail",
        "queue",
        "compute_input",
        "compute_infer",
        "compute_output",
        "cache_hit",
        "cache_miss",
    ]
    assert inference["success"]["count"] == 3 and inference["fail"]["count"] == 1
    # queue and compute counts cover successful requests only, as in Triton
    assert inference["queue"]["count"] == 3 and inference["compute_infer"]["count"] == 3
    assert inference["success"]["ns"] > inference["compute_infer"]["ns"] / 4 > 0
    assert inference["cache_hit"] == {"count": 0, "ns": 0}
    assert [(b["batch_size"], b["compute_infer"]["count"]) for b in stats["batch_stats"]] == [
        (1, 2),
        (2, 2),
    ]

    (via_grpc,) = grpc_client.get_inference_statistics("counted", "1").model_stats
    assert (via_grpc.inference_count, via_grpc.execution_count) == (6, 4)
    assert via_grpc.inference_stats.success.count == 3 and via_grpc.inference_stats.fail.count == 1
    assert [b.batch_size for b in via_grpc.batch_stats] == [1, 2]
    every = {s["name"] for s in http.get_inference_statistics()["model_stats"]}
    assert {"counted", "add_sub", "params"} <= every

    err = _error(lambda: http.get_inference_statistics("nope"))
    assert (err.status(), err.message()) == ("400", "requested model 'nope' is not available")
    err = _error(lambda: grpc_client.get_inference_statistics("counted", "9"))
    assert (err.status(), err.message()) == (
        "StatusCode.INVALID_ARGUMENT",
        "requested model version is not available for model 'counted'",
    )


# ---------------------------------------------------------------------- compression and limits
def test_http_compression(server):
    a = np.arange(4, dtype=np.float32)
    for algorithm in ("gzip", "deflate"):
        client = httpclient.InferenceServerClient(server.http_url)
        inputs = [
            httpclient.InferInput("INPUT0", [4], "FP32"),
            httpclient.InferInput("INPUT1", [4], "FP32"),
        ]
        for tensor in inputs:
            tensor.set_data_from_numpy(a)
        result = client.infer(
            "add_sub",
            inputs,
            request_compression_algorithm=algorithm,
            response_compression_algorithm=algorithm,
        )
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a * 2)
    body = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "FP16",
                    "shape": [1],
                    "parameters": {"binary_data_size": 2},
                }
            ],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        }
    ).encode()
    headers = {
        "Content-Encoding": "gzip",
        "Inference-Header-Content-Length": str(len(body)),
        "Accept-Encoding": "deflate;q=0.5, gzip;q=0.9",
    }
    status, reply_headers, reply = _post(
        server, "/v2/models/identity_fp16/infer", gzip.compress(body + bytes(2)), headers
    )
    assert status == 200 and reply_headers["content-encoding"] == "gzip"
    length = int(reply_headers["inference-header-content-length"])
    assert json.loads(gzip.decompress(reply)[:length])["outputs"][0]["parameters"] == {
        "binary_data_size": 2
    }
    status, reply_headers, reply = _post(
        server, "/v2/models/add_sub/infer", b"{}", {"Content-Encoding": "br"}
    )
    assert (status, json.loads(reply)) == (415, {"error": "Unsupported compression type"})
    assert reply_headers.get("accept-encoding") == "gzip, deflate"
    for encoding in ("x-evil", "gzip, gzip"):
        status, reply_headers, reply = _post(
            server, "/v2/models/add_sub/infer", gzip.compress(b"{}"), {"Content-Encoding": encoding}
        )
        assert (status, reply_headers.get("accept-encoding")) == (415, "gzip, deflate"), reply
    status, reply_headers, _ = _post(
        server, "/v2/repository/index", b"", {"Accept-Encoding": "gzip"}
    )
    assert status == 200 and "content-encoding" not in {k.lower() for k in reply_headers}


def test_grpc_compression(grpc_client, server):
    a = np.arange(1024, dtype=np.float32).reshape(1, 1024)
    tensor = grpcclient.InferInput("INPUT0", [1, 1024], "FP32")
    tensor.set_data_from_numpy(np.zeros_like(a))
    for algorithm in ("gzip", "deflate"):
        tensor.set_data_from_numpy(a)
        result = grpc_client.infer("counted", [tensor], compression_algorithm=algorithm)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a)
    # The server compresses infer responses (--grpc-infer-response-compression-level=high): 16 KiB
    # of zeros cross the wire in far fewer bytes, counted by a TCP relay in front of the server.
    zeros = np.zeros((1, 4096), dtype=np.float32)
    with (
        _Relay(server.grpc_port) as relay,
        grpc.insecure_channel(f"127.0.0.1:{relay.port}") as channel,
    ):
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = service_pb2.ModelInferRequest(model_name="counted")
        request.inputs.add(name="INPUT0", datatype="FP32", shape=[1, 4096])
        request.raw_input_contents.append(zeros.tobytes())
        reply = stub.ModelInfer(request)
        assert reply.raw_output_contents[0] == zeros.tobytes()
        assert 0 < relay.downstream_bytes < zeros.nbytes // 4


class _Relay:
    """A TCP relay that counts the bytes the server sends back."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.downstream_bytes = 0
        self.threads: list[threading.Thread] = []

    def __enter__(self) -> _Relay:
        def accept() -> None:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self._pump(client, upstream, count=False)
            self._pump(upstream, client, count=True)

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        self.threads.append(thread)
        return self

    def _pump(self, source: socket.socket, sink: socket.socket, count: bool) -> None:
        def run() -> None:
            try:
                while data := source.recv(65536):
                    if count:
                        self.downstream_bytes += len(data)
                    sink.sendall(data)
            except OSError:
                pass
            finally:
                sink.close()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.threads.append(thread)

    def __exit__(self, *exc: object) -> None:
        self.listener.close()


def test_body_limit(server, http):
    big = json.dumps(
        {
            "inputs": [
                {"name": "INPUT0", "datatype": "FP32", "shape": [1, 300000], "data": [1.0] * 300000}
            ]
        }
    ).encode()
    assert len(big) > LIMIT
    status, _, body = _post(server, "/v2/models/counted/infer", big)
    message = json.loads(body)["error"]
    assert (
        status == 400
        and "exceeds the maximum allowed" in message
        and "--http-max-input-size" in message
    )
    status, _, body = _post(
        server, "/v2/models/counted/infer", gzip.compress(big), {"Content-Encoding": "gzip"}
    )
    assert status == 400 and "--http-max-input-size" in json.loads(body)["error"]
    status, _, body = _post(
        server, "/v2/models/counted/infer", zlib.compress(big), {"Content-Encoding": "deflate"}
    )
    assert status == 400
    tensor = httpclient.InferInput("INPUT0", [1, 1000], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 1000), dtype=np.float32))
    assert http.infer("counted", [tensor]).as_numpy("OUTPUT0").shape == (1, 1000)
