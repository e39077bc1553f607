"""Ensembles end to end: the example pipeline, concurrent steps, failing steps, explicit loading."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.helpers import Server, write_model

# ----------------------------------------------------------------------------- the example


def expected_pipeline(raw: np.ndarray) -> tuple[list[list[bytes]], np.ndarray]:
    """What examples/model_repository/pipeline computes, worked out independently."""
    features = (raw - np.array([10, 10, 10, 0], np.float32)) / np.array([5, 5, 5, 1], np.float32)
    weights = np.array([[4, 0, 0], [0, 4, 0], [0, 0, 4], [0.5, 0.5, 0.5]], np.float32)
    logits = features @ weights
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    names = [b"cat", b"dog", b"bird"]
    return [[names[i]] for i in probs.argmax(axis=1)], probs


RAW = np.array([[20, 10, 10, 0], [10, 22, 10, 3], [9, 10, 31, 1], [12, 11, 10, -2]], dtype=np.float32)


def test_example_pipeline_over_http(example_server):
    client = httpclient.InferenceServerClient(example_server.http_url)
    inputs = [httpclient.InferInput("RAW", list(RAW.shape), "FP32")]
    inputs[0].set_data_from_numpy(RAW)
    result = client.infer("pipeline", inputs)
    labels, probs = expected_pipeline(RAW)
    assert result.as_numpy("LABEL").tolist() == labels == [[b"cat"], [b"dog"], [b"bird"], [b"cat"]]
    np.testing.assert_allclose(result.as_numpy("PROBS"), probs, rtol=1e-5)
    np.testing.assert_allclose(result.as_numpy("SCORE")[:, 0], probs.max(axis=1), rtol=1e-5)
    metadata = client.get_model_metadata("pipeline")
    assert metadata["platform"] == "ensemble"
    assert [o["name"] for o in metadata["outputs"]] == ["LABEL", "SCORE", "PROBS"]
    assert client.get_model_config("pipeline")["instance_group"] == []


def test_an_ensemble_answers_with_the_requests_sequence_parameters_as_triton_does(example_server):
    client = httpclient.InferenceServerClient(example_server.http_url)
    inputs = [httpclient.InferInput("RAW", list(RAW.shape), "FP32")]
    inputs[0].set_data_from_numpy(RAW)
    response = client.infer("pipeline", inputs).get_response()
    assert response["parameters"] == {"sequence_id": 0, "sequence_start": False, "sequence_end": False}
    assert client.get_model_config("pipeline")["model_transaction_policy"] == {"decoupled": False}


def test_example_pipeline_over_grpc_counts_every_model(example_server):
    client = grpcclient.InferenceServerClient(example_server.grpc_url)
    names = ["pipeline", "preprocess", "classifier_onnx", "postprocess"]

    def successes() -> dict[str, int]:
        stats = client.get_inference_statistics(as_json=True)["model_stats"]
        return {s["name"]: int(s["inference_stats"]["success"].get("count", 0)) for s in stats if s["name"] in names}

    before = successes()
    for row in RAW:
        inputs = [grpcclient.InferInput("RAW", [1, 4], "FP32")]
        inputs[0].set_data_from_numpy(row.reshape(1, 4))
        result = client.infer("pipeline", inputs, outputs=[grpcclient.InferRequestedOutput("LABEL")])
        assert result.as_numpy("LABEL").tolist() == expected_pipeline(row.reshape(1, 4))[0]
        assert result.as_numpy("PROBS") is None
    after = successes()
    assert {name: after[name] - before.get(name, 0) for name in names} == dict.fromkeys(names, len(RAW))


# ----------------------------------------------------------------------------- built here

RENDEZVOUS = '''
import json, os, time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Meets its partner step: it answers only if both steps run at the same time."""

    def initialize(self, args):
        params = json.loads(args["model_config"])["parameters"]
        self.me = args["model_name"]
        self.partner = params["partner"]["string_value"]
        self.dir = params["dir"]["string_value"]
        self.scale = float(params["scale"]["string_value"])
        self.offset = float(params["offset"]["string_value"])

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            token = request.request_id() or "none"
            open(os.path.join(self.dir, f"{token}.{self.me}"), "w").close()
            partner = os.path.join(self.dir, f"{token}.{self.partner}")
            deadline = time.monotonic() + 30
            while not os.path.exists(partner) and time.monotonic() < deadline:
                time.sleep(0.005)
            if not os.path.exists(partner):
                responses.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError(f"{self.me} ran without {self.partner}")))
                continue
            y = (x * self.scale + self.offset).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", y)]))
        return responses
'''

COMBINE = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "B").as_numpy()
            if (a < -100).any():
                raise ValueError("combine refuses values below -100")
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", a + b)]))
        return out
'''

IO = """
name: "{name}"
backend: "python"
max_batch_size: 4
input [ {inputs} ]
output [ {{ name: "{output}" data_type: TYPE_FP32 dims: [ 1 ] }} ]
{extra}
"""


def param(key: str, value: str) -> str:
    return f'{{ key: "{key}" value: {{ string_value: "{value}" }} }}'


DIAMOND = """
name: "diamond"
platform: "ensemble"
max_batch_size: 4
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "LEFT" data_type: TYPE_FP32 dims: [ 1 ] } ]
ensemble_scheduling {
  step [
    { model_name: "combine" model_version: -1
      input_map [ { key: "A" value: "LEFT" }, { key: "B" value: "RIGHT" } ]
      output_map { key: "SUM" value: "SUM" } },
    { model_name: "left" model_version: 1 input_map { key: "X" value: "IN" } output_map { key: "Y" value: "LEFT" } },
    { model_name: "right" model_version: -1 input_map { key: "X" value: "IN" } output_map { key: "Y" value: "RIGHT" } }
  ]
}
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    repo = tmp_path_factory.mktemp("ensemble_repo")
    meet = tmp_path_factory.mktemp("rendezvous")
    x_in = '{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }'
    for name, partner, scale, offset in (("left", "right", "1", "1"), ("right", "left", "10", "0")):
        extra = "parameters [ " + ", ".join(
            [param("partner", partner), param("dir", str(meet)), param("scale", scale), param("offset", offset)]
        ) + " ]"
        write_model(repo, name, IO.format(name=name, inputs=x_in, output="Y", extra=extra), RENDEZVOUS)
    ab = '{ name: "A" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "B" data_type: TYPE_FP32 dims: [ 1 ] }'
    write_model(repo, "combine", IO.format(name="combine", inputs=ab, output="SUM", extra=""), COMBINE)
    write_model(repo, "diamond", DIAMOND)
    write_model(
        repo,
        "unwritten",
        DIAMOND.replace('name: "diamond"', 'name: "unwritten"').replace(
            '{ name: "LEFT" data_type', '{ name: "NEVER" data_type'
        ),
    )
    write_model(
        repo,
        "needs_ghost",
        """
        platform: "ensemble"
        max_batch_size: 4
        input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
        ensemble_scheduling { step [ { model_name: "ghost" model_version: -1
          input_map { key: "X" value: "IN" } output_map { key: "Y" value: "OUT" } } ] }
        """,
    )
    return repo


@pytest.fixture(scope="module")
def server(repo):
    srv = Server(repo, ["--strict-readiness", "false", "--exit-on-error=false"]).start(wait_for="ready")
    yield srv
    assert srv.stop() == 0, srv.log()


def diamond_inputs(values: list[float]) -> list[httpclient.InferInput]:
    data = np.array(values, dtype=np.float32).reshape(-1, 1)
    inputs = [httpclient.InferInput("IN", list(data.shape), "FP32")]
    inputs[0].set_data_from_numpy(data)
    return inputs


def test_independent_steps_run_concurrently(server):
    client = httpclient.InferenceServerClient(server.http_url)
    # `left` and `right` each wait for the other; only concurrent steps can answer.
    result = client.infer("diamond", diamond_inputs([1, 2, 3]), request_id="req-1")
    x = np.array([[1], [2], [3]], np.float32)
    np.testing.assert_array_equal(result.as_numpy("SUM"), (x + 1) + 10 * x)
    np.testing.assert_array_equal(result.as_numpy("LEFT"), x + 1)


def test_many_requests_in_flight_through_one_ensemble(server):
    client = httpclient.InferenceServerClient(server.http_url, concurrency=6)
    pending = [
        (v, client.async_infer("diamond", diamond_inputs([v]), request_id=f"many-{v}")) for v in range(12)
    ]
    for v, request in pending:
        assert request.get_result().as_numpy("SUM").tolist() == [[(v + 1) + 10 * v]]


def test_failing_step_is_named(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    inputs = [grpcclient.InferInput("IN", [1, 1], "FP32")]
    inputs[0].set_data_from_numpy(np.array([[-500]], np.float32))
    with pytest.raises(InferenceServerException) as info:
        client.infer("diamond", inputs, request_id="fails")
    message = info.value.message()
    assert "in ensemble 'diamond', step 0 (model 'combine') failed" in message
    assert "combine refuses values below -100" in message
    # The ensemble keeps serving.
    inputs[0].set_data_from_numpy(np.array([[4]], np.float32))
    assert client.infer("diamond", inputs, request_id="after").as_numpy("SUM").tolist() == [[45]]


def test_ensemble_requests_are_validated_against_its_own_config(server):
    client = httpclient.InferenceServerClient(server.http_url)
    with pytest.raises(InferenceServerException) as info:
        client.infer("diamond", diamond_inputs([1, 2, 3, 4, 5]))
    assert "inference request batch-size must be <= 4 for 'diamond'" in info.value.message()


def test_statistics_cover_the_ensemble_and_each_step(server):
    client = httpclient.InferenceServerClient(server.http_url)

    def success(name: str) -> int:
        return client.get_inference_statistics(name)["model_stats"][0]["inference_stats"]["success"]["count"]

    before = {n: success(n) for n in ("diamond", "left", "right", "combine")}
    for v in range(3):
        client.infer("diamond", diamond_inputs([v, v]), request_id=f"stats-{v}")
    assert {n: success(n) - before[n] for n in before} == dict.fromkeys(before, 3)


def test_invalid_ensembles_are_unavailable(server):
    index = {r["name"]: r for r in httpclient.InferenceServerClient(server.http_url).get_model_repository_index()}
    assert index["diamond"]["state"] == "READY"
    assert "output 'NEVER' is not written by any step" in index["unwritten"]["reason"]
    assert "composing model 'ghost' is not available" in index["needs_ghost"]["reason"]


def test_explicit_load_brings_composing_models_and_unload_takes_them(repo):
    srv = Server(repo, ["--model-control-mode", "explicit"]).start(wait_for="ready")
    try:
        client = httpclient.InferenceServerClient(srv.http_url)
        assert not client.is_model_ready("combine")
        client.load_model("diamond")
        for name in ("diamond", "left", "right", "combine"):
            assert client.is_model_ready(name), name
        assert client.infer("diamond", diamond_inputs([2]), request_id="x").as_numpy("SUM").tolist() == [[23]]
        client.unload_model("diamond", unload_dependents=True)
        for name in ("diamond", "left", "right", "combine"):
            assert not client.is_model_ready(name), name
    finally:
        assert srv.stop() == 0, srv.log()
