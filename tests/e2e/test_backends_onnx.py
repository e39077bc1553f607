"""ONNX Runtime backend end to end: graphs written with `onnx`, served, called with tritonclient."""

from __future__ import annotations

import concurrent.futures

import numpy as np
import onnx
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from onnx import TensorProto, helper
from tritonclient.utils import InferenceServerException

from openinfer.core.memory.gpus import visible_gpus
from tests.helpers import Server


def graph(nodes, inputs, outputs, opset: int = 13) -> bytes:
    model = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs), opset_imports=[helper.make_opsetid("", opset)]
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def add_sub(batch_dim="batch", width=4) -> bytes:
    """SUM = A + B, DIFF = A - B over [batch, width] floats."""
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [batch_dim, width]) for n in ("A", "B", "SUM", "DIFF")]
    return graph(
        [helper.make_node("Add", ["A", "B"], ["SUM"]), helper.make_node("Sub", ["A", "B"], ["DIFF"])],
        io[:2],
        io[2:],
    )


def write_onnx(repo, name: str, config: str | None, model: bytes) -> None:
    model_dir = repo / name
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.onnx").write_bytes(model)
    if config is not None:
        (model_dir / "config.pbtxt").write_text(config)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("onnx_repo")
    # No config.pbtxt at all: backend, tensors and max_batch_size come from the graph.
    write_onnx(repo, "auto", None, add_sub())
    write_onnx(
        repo,
        "tuned",
        """
name: "tuned"
platform: "onnxruntime_onnx"
max_batch_size: 2
input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 3 kind: KIND_CPU } ]
parameters [
  { key: "intra_op_thread_count" value: { string_value: "1" } },
  { key: "inter_op_thread_count" value: { string_value: "1" } },
  { key: "execution_mode" value: { string_value: "1" } }
]
""",
        add_sub(),
    )
    # Both dims symbolic: Add fails inside onnxruntime when the widths differ.
    write_onnx(repo, "loose", 'backend: "onnxruntime"\n', add_sub(width="w"))
    # Strings pass through an Identity graph.
    strings = [helper.make_tensor_value_info(n, TensorProto.STRING, ["batch", 2]) for n in ("TEXT", "ECHO")]
    write_onnx(repo, "strings", None, graph([helper.make_node("Identity", ["TEXT"], ["ECHO"])], strings[:1], strings[1:]))
    # Broken configurations, each UNAVAILABLE with its reason.
    fixed = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4]) for n in ("A", "B", "SUM", "DIFF")]
    fixed_graph = graph(
        [helper.make_node("Add", ["A", "B"], ["SUM"]), helper.make_node("Sub", ["A", "B"], ["DIFF"])], fixed[:2], fixed[2:]
    )
    write_onnx(repo, "unbatchable", 'platform: "onnxruntime_onnx"\nmax_batch_size: 8\n', fixed_graph)
    write_onnx(
        repo,
        "wrong_type",
        """
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "A" data_type: TYPE_INT32 dims: [ 4 ] }, { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] } ]
""",
        add_sub(),
    )
    write_onnx(
        repo, "on_gpu", 'platform: "onnxruntime_onnx"\ninstance_group [ { kind: KIND_GPU } ]\n', add_sub()
    )
    write_onnx(repo, "corrupt", 'platform: "onnxruntime_onnx"\n', b"not an onnx graph")
    srv = Server(repo, ["--strict-readiness", "false", "--exit-on-error=false"]).start(wait_for="ready")
    yield srv
    assert srv.stop() == 0, srv.log()


def ab(batch: int, width: int = 4) -> tuple[np.ndarray, np.ndarray]:
    a = np.arange(batch * width, dtype=np.float32).reshape(batch, width)
    return a, np.full((batch, width), 0.5, dtype=np.float32)


def http_inputs(a: np.ndarray, b: np.ndarray) -> list[httpclient.InferInput]:
    inputs = [httpclient.InferInput("A", list(a.shape), "FP32"), httpclient.InferInput("B", list(b.shape), "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b, binary_data=False)
    return inputs


def test_config_is_auto_completed_from_the_graph(server):
    client = httpclient.InferenceServerClient(server.http_url)
    config = client.get_model_config("auto")
    assert config["backend"] == "onnxruntime"
    assert config["max_batch_size"] == 4  # --backend-config default-max-batch-size default
    assert "dynamic_batching" in config
    assert [(t["name"], t["data_type"], t["dims"]) for t in config["input"]] == [
        ("A", "TYPE_FP32", [4]),
        ("B", "TYPE_FP32", [4]),
    ]
    assert [(t["name"], t["dims"]) for t in config["output"]] == [("SUM", [4]), ("DIFF", [4])]
    # Triton's default for CPU onnxruntime models: two instances.
    assert [(g["kind"], g["count"]) for g in config["instance_group"]] == [("KIND_CPU", 2)]
    assert (config["platform"], config["default_model_filename"]) == ("onnxruntime_onnx", "model.onnx")
    metadata = client.get_model_metadata("auto")
    assert metadata["platform"] == "onnxruntime_onnx"
    assert metadata["inputs"][0]["shape"] == [-1, 4]


def test_backend_only_config_reports_tritons_platform(server):
    """`backend: "onnxruntime"` alone: Triton fills `platform`, and metadata reports it."""
    http = httpclient.InferenceServerClient(server.http_url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    assert http.get_model_metadata("loose")["platform"] == "onnxruntime_onnx"
    assert grpc.get_model_metadata("loose").platform == "onnxruntime_onnx"
    config = http.get_model_config("loose")
    assert (config["backend"], config["platform"], config["default_model_filename"]) == (
        "onnxruntime",
        "onnxruntime_onnx",
        "model.onnx",
    )
    proto = grpc.get_model_config("loose").config
    assert (proto.backend, proto.platform) == ("onnxruntime", "onnxruntime_onnx")
    # `platform` alone: the backend is filled in as well.
    tuned = http.get_model_config("tuned")
    assert (tuned["backend"], tuned["platform"]) == ("onnxruntime", "onnxruntime_onnx")
    assert http.get_model_metadata("tuned")["platform"] == "onnxruntime_onnx"


def test_explicit_config_keeps_its_parameters_and_instances(server):
    config = httpclient.InferenceServerClient(server.http_url).get_model_config("tuned")
    assert config["parameters"]["intra_op_thread_count"]["string_value"] == "1"
    assert config["instance_group"][0]["count"] == 3
    assert [t["name"] for t in config["output"]] == ["SUM"]  # a subset of the graph's outputs


def test_infer_over_http_and_grpc(server):
    a, b = ab(3)
    result = httpclient.InferenceServerClient(server.http_url).infer("auto", http_inputs(a, b))
    np.testing.assert_array_equal(result.as_numpy("SUM"), a + b)
    np.testing.assert_array_equal(result.as_numpy("DIFF"), a - b)

    client = grpcclient.InferenceServerClient(server.grpc_url)
    inputs = [grpcclient.InferInput("A", [3, 4], "FP32"), grpcclient.InferInput("B", [3, 4], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    result = client.infer("auto", inputs, outputs=[grpcclient.InferRequestedOutput("DIFF")])
    np.testing.assert_array_equal(result.as_numpy("DIFF"), a - b)
    assert result.as_numpy("SUM") is None


def test_concurrent_requests_are_split_back_correctly(server):
    client = httpclient.InferenceServerClient(server.http_url, concurrency=8)
    before = client.get_inference_statistics("tuned")["model_stats"][0]["inference_count"]
    sizes = [1, 2, 1, 2, 2, 1, 1, 2] * 3
    arrays = []
    pending = []
    for index, size in enumerate(sizes):
        a = np.full((size, 4), index, dtype=np.float32)
        b = np.arange(size * 4, dtype=np.float32).reshape(size, 4)
        arrays.append(a + b)
        pending.append(client.async_infer("tuned", http_inputs(a, b)))
    for expected, request in zip(arrays, pending):
        np.testing.assert_array_equal(request.get_result().as_numpy("SUM"), expected)
    stats = client.get_inference_statistics("tuned")["model_stats"][0]
    assert stats["inference_count"] - before == sum(sizes)


def test_instance_spread_over_threads(server):
    """Three instances serve three callers at once (each returns the right answer)."""
    a, b = ab(2)

    def call(_: int) -> np.ndarray:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        inputs = [grpcclient.InferInput("A", [2, 4], "FP32"), grpcclient.InferInput("B", [2, 4], "FP32")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(b)
        return client.infer("tuned", inputs).as_numpy("SUM")

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        for result in pool.map(call, range(30)):
            np.testing.assert_array_equal(result, a + b)


def test_request_errors_use_tritons_messages(server):
    client = httpclient.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException) as info:
        client.infer("auto", http_inputs(*ab(5)))
    assert info.value.status() == "400"
    assert "inference request batch-size must be <= 4 for 'auto'" in info.value.message()
    with pytest.raises(InferenceServerException) as info:
        client.infer("auto", http_inputs(*ab(2, width=3)))
    assert "unexpected shape for input 'A' for model 'auto'. Expected [-1,4], got [2,3]" in info.value.message()


def test_onnxruntime_failures_are_translated(server):
    client = httpclient.InferenceServerClient(server.http_url)
    a = np.ones((1, 3), dtype=np.float32)
    b = np.ones((1, 5), dtype=np.float32)
    with pytest.raises(InferenceServerException) as info:
        client.infer("loose", http_inputs(a, b))
    assert info.value.message().startswith("onnx runtime error")
    assert info.value.status() in ("400", "500")
    # The server and the model keep serving.
    result = client.infer("loose", http_inputs(np.ones((1, 3), np.float32), np.ones((1, 3), np.float32)))
    np.testing.assert_array_equal(result.as_numpy("SUM"), np.full((1, 3), 2, np.float32))


def test_string_tensors_round_trip(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    text = np.array([[b"hello", "w\u00f6rld".encode()], [b"", b"onnx"]], dtype=np.object_)
    inputs = [grpcclient.InferInput("TEXT", [2, 2], "BYTES")]
    inputs[0].set_data_from_numpy(text)
    result = client.infer("strings", inputs)
    assert result.as_numpy("ECHO").tolist() == text.tolist()


def test_broken_models_are_unavailable_with_reasons(server):
    index = {row["name"]: row for row in httpclient.InferenceServerClient(server.http_url).get_model_repository_index()}
    assert index["auto"]["state"] == "READY"
    assert index["unbatchable"]["state"] == "UNAVAILABLE"
    assert (
        "autofill failed for model 'unbatchable': model does not support batching while non-zero "
        "max_batch_size is specified" in index["unbatchable"]["reason"]
    )
    assert index["wrong_type"]["state"] == "UNAVAILABLE"
    assert "unexpected datatype TYPE_FP32 for inference input 'A', expecting TYPE_INT32" in index["wrong_type"]["reason"]
    assert index["corrupt"]["state"] == "UNAVAILABLE"
    assert "onnx runtime error" in index["corrupt"]["reason"]
    assert index["on_gpu"]["state"] == "UNAVAILABLE"
    if not visible_gpus():
        assert "has kind KIND_GPU but no GPUs are available" in index["on_gpu"]["reason"]
    else:  # a GPU machine with the CPU build of onnxruntime
        assert "CUDAExecutionProvider" in index["on_gpu"]["reason"]
