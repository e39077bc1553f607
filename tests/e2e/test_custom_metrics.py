"""/metrics of a real `openinfer serve` with the custom-metrics registry wired in.

Models create custom families through the Python backend; until a model does, the endpoint
must print exactly the nv_* families, still parseable. (The test of a model creating metrics
lives with the Python backend's tests.)
"""

from __future__ import annotations

import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient
from onnx import TensorProto, helper
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import Server

CONFIG = """
platform: "onnxruntime_onnx"
max_batch_size: 0
instance_group [ { count: 1 kind: KIND_CPU } ]
"""


def _add_graph() -> bytes:
    tensors = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4]) for n in ("A", "B", "SUM")]
    graph = helper.make_graph([helper.make_node("Add", ["A", "B"], ["SUM"])], "add", tensors[:2], tensors[2:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("custom_metrics_repo")
    (repo / "adder" / "1").mkdir(parents=True)
    (repo / "adder" / "config.pbtxt").write_text(CONFIG)
    (repo / "adder" / "1" / "model.onnx").write_bytes(_add_graph())
    args = ["--metrics-config=summary_latencies=true", "--metrics-config=histogram_latencies=true"]
    srv = Server(repo, args).start(wait_for="ready")
    yield srv
    assert srv.stop() == 0, srv.log()


def test_metrics_still_parse_with_the_registry_wired_in(server):
    client = httpclient.InferenceServerClient(server.http_url)
    inputs = [httpclient.InferInput(n, [4], "FP32") for n in ("A", "B")]
    for tensor in inputs:
        tensor.set_data_from_numpy(np.ones(4, dtype=np.float32))
    for _ in range(2):
        client.infer("adder", inputs)
    text = urllib.request.urlopen(server.metrics_url, timeout=10).read().decode()

    assert text.endswith("\n")
    names = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
    assert len(names) == len(set(names)), "a family is printed twice"
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["nv_inference_request_success"].type == "counter"
    assert families["nv_inference_pending_request_count"].type == "gauge"
    assert families["nv_inference_request_summary_us"].type == "summary"
    assert families["nv_inference_first_response_histogram_ms"].type == "histogram"
    (success,) = families["nv_inference_request_success"].samples
    assert success.labels == {"model": "adder", "version": "1"} and success.value == 2
    assert all(name.startswith("nv_") for name in families), "no model created a family"
