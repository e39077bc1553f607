"""`--trace-config mode=opentelemetry`: spans reach a real OTLP/HTTP endpoint with Triton's names,
attributes and parent links, from a client's W3C traceparent (HTTP header, gRPC metadata) down
through an ensemble's composing models and a BLS call."""

from __future__ import annotations

import os
import secrets
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.helpers import Server, write_model
from tests.storage.emulators import ADD_CONFIG, ADD_MODEL

pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk is not installed (the otel extra)")
pytest.importorskip("opentelemetry.proto", reason="opentelemetry-proto is not installed (the test extra)")

from tests.otlp_receiver import OtlpReceiver, Span

pytestmark = pytest.mark.timeout(240)

ENSEMBLE = """
name: "twice"
platform: "ensemble"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
ensemble_scheduling { step [
  { model_name: "add" model_version: -1 input_map { key: "INPUT0" value: "INPUT0" } output_map { key: "OUTPUT0" value: "MID" } },
  { model_name: "add_more" model_version: -1 input_map { key: "INPUT0" value: "MID" } output_map { key: "OUTPUT0" value: "OUTPUT0" } }
] }
"""

BLS = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            call = pb_utils.InferenceRequest(
                model_name="add", requested_output_names=["OUTPUT0"],
                inputs=[pb_utils.get_input_tensor_by_name(request, "INPUT0")], trace=request.trace())
            answer = pb_utils.get_output_tensor_by_name(call.exec(), "OUTPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", answer)]))
        return out
"""


@pytest.fixture(scope="module")
def receiver():
    endpoint = OtlpReceiver()
    yield endpoint
    endpoint.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory, receiver):
    repo = tmp_path_factory.mktemp("otel_repo")
    write_model(repo, "add", ADD_CONFIG.format(name="add"), ADD_MODEL.format(add=1))
    write_model(repo, "add_more", ADD_CONFIG.format(name="add_more"), ADD_MODEL.format(add=10))
    write_model(repo, "bls", ADD_CONFIG.format(name="bls"), BLS)
    write_model(repo, "twice", ENSEMBLE)
    (repo / "twice" / "1").mkdir(exist_ok=True)
    args = [
        "--trace-config", "mode=opentelemetry",
        "--trace-config", f"opentelemetry,url={receiver.url}",
        "--trace-config", "opentelemetry,resource=deployment.environment=test",
        "--trace-config", "opentelemetry,bsp_schedule_delay=100",
        "--trace-config", "level=TIMESTAMPS",
        "--trace-config", "rate=1",
    ]
    os.environ.pop("OTEL_RESOURCE_ATTRIBUTES", None)
    with Server(repo, args) as running:
        yield running


def _traceparent() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, f"00-{trace_id}-{span_id}-01"


def _input(module, data: np.ndarray):
    tensor = module.InferInput("INPUT0", [4], "FP32")
    tensor.set_data_from_numpy(data)
    return [tensor]


def _tree(spans: list[Span]) -> dict[str, Span]:
    by_id = {s.span_id: s for s in spans}
    assert len(by_id) == len(spans)
    return by_id


def _check_model_span(span: Span, parent: Span, model: str) -> None:
    assert span.name == model and span.parent_id == parent.span_id
    assert span.kind == 2  # SPAN_KIND_SERVER
    assert span.attributes["triton.model_name"] == model
    assert span.attributes["triton.model_version"] == 1
    assert span.attributes["triton.trace_id"] > 0
    assert {"REQUEST_START", "QUEUE_START", "REQUEST_END"} <= set(span.events)


def _compute_of(spans: list[Span], model_span: Span) -> Span:
    [compute] = [s for s in spans if s.parent_id == model_span.span_id and s.name == "compute"]
    assert compute.events == ["COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END"]
    return compute


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_client_traceparent_is_the_parent_of_the_request_model_and_compute_spans(server, receiver, protocol):
    trace_id, client_span, header = _traceparent()
    x = np.arange(4, dtype=np.float32)
    if protocol == "http":
        client = httpclient.InferenceServerClient(server.http_url)
        result = client.infer("add", _input(httpclient, x), headers={"traceparent": header}, request_id="r-7")
    else:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        result = client.infer("add", _input(grpcclient, x), headers={"traceparent": header}, request_id="r-7")
    assert result.as_numpy("OUTPUT0").tolist() == (x + 1).tolist()
    spans = receiver.trace(trace_id, 3)
    [root] = [s for s in spans if s.name == "InferRequest"]
    assert root.parent_id == client_span  # W3C context from the client
    [model] = [s for s in spans if s.name == "add"]
    _check_model_span(model, root, "add")
    assert model.attributes["triton.request_id"] == "r-7"
    assert model.attributes["triton.trace_parent_id"] == 0
    _compute_of(spans, model)
    assert root.resource["service.name"] == "triton-inference-server"
    assert root.resource["deployment.environment"] == "test"


def test_an_ensemble_has_a_span_per_composing_model_under_its_own(server, receiver):
    trace_id, _, header = _traceparent()
    client = httpclient.InferenceServerClient(server.http_url)
    x = np.zeros(4, dtype=np.float32)
    assert client.infer("twice", _input(httpclient, x), headers={"traceparent": header}).as_numpy("OUTPUT0").tolist() == [11] * 4
    spans = receiver.trace(trace_id, 6)  # root, ensemble, 2 x (model + compute)
    _tree(spans)
    [root] = [s for s in spans if s.name == "InferRequest"]
    [ensemble] = [s for s in spans if s.name == "twice"]
    _check_model_span(ensemble, root, "twice")
    assert not [s for s in spans if s.parent_id == ensemble.span_id and s.name == "compute"]
    for name in ("add", "add_more"):
        [step] = [s for s in spans if s.name == name]
        _check_model_span(step, ensemble, name)
        assert step.attributes["triton.trace_parent_id"] == ensemble.attributes["triton.trace_id"]
        _compute_of(spans, step)


def test_a_bls_call_with_the_request_trace_hangs_under_the_calling_model(server, receiver):
    trace_id, _, header = _traceparent()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    x = np.ones(4, dtype=np.float32)
    assert client.infer("bls", _input(grpcclient, x), headers={"traceparent": header}).as_numpy("OUTPUT0").tolist() == [2] * 4
    spans = receiver.trace(trace_id, 5)  # root, bls + compute, add + compute
    [root] = [s for s in spans if s.name == "InferRequest"]
    [bls] = [s for s in spans if s.name == "bls"]
    _check_model_span(bls, root, "bls")
    _compute_of(spans, bls)
    [child] = [s for s in spans if s.name == "add"]
    _check_model_span(child, bls, "add")
    _compute_of(spans, child)


def test_without_a_traceparent_the_rate_samples_and_a_new_trace_starts(server, receiver):
    client = httpclient.InferenceServerClient(server.http_url)
    before = {s.trace_id for s in receiver.spans}
    client.infer("add", _input(httpclient, np.zeros(4, dtype=np.float32)), request_id="fresh")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        fresh = [s for s in receiver.spans if s.trace_id not in before and s.attributes.get("triton.request_id") == "fresh"]
        if fresh:
            break
        time.sleep(0.1)
    [model] = fresh
    spans = receiver.trace(model.trace_id, 3)
    [root] = [s for s in spans if s.name == "InferRequest"]
    assert root.parent_id == "" and model.parent_id == root.span_id
    settings = client.get_trace_settings()
    assert settings["trace_mode"] == "opentelemetry"


def test_an_unknown_opentelemetry_setting_is_refused(tmp_path):
    import subprocess
    import sys

    from tests.helpers import ROOT

    result = subprocess.run(
        [sys.executable, "-m", "openinfer", "serve", "--model-repository", str(tmp_path),
         "--trace-config", "mode=opentelemetry", "--trace-config", "opentelemetry,colour=blue"],
        check=False, capture_output=True, text=True, cwd=ROOT, timeout=60,
    )
    assert result.returncode != 0 and "opentelemetry,colour=blue" in result.stderr
