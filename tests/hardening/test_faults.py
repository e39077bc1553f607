"""Faulty models cost only their own requests: a model that raises, answers wrongly, hangs,
leaks or kills its process; a model that cannot load. After each fault the same model and
every other model answer correctly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.hardening import models
from tests.hardening.oracle import healthy_grpc, healthy_http, rss_mib
from tests.helpers import Server, write_model


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = models.copy_examples(tmp_path_factory.mktemp("faults") / "repo", ("add_sub",))
    models.write_faulty(repo)
    write_model(repo, "broken_init", models.ONE_FP32, models.BROKEN_INIT)
    write_model(repo, "broken_onnx", 'platform: "onnxruntime_onnx"\nmax_batch_size: 0\n'
                'input [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
                'output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n',
                files={"1/model.onnx": b"this is not an ONNX graph"})
    write_model(repo, "faulty_ensemble", """
        platform: "ensemble"
        max_batch_size: 0
        input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
        ensemble_scheduling { step [ {
          model_name: "faulty" model_version: -1
          input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "OUT" }
        } ] }
        """)
    server = Server(repo, ["--strict-readiness", "false", "--exit-on-error=false"]).start(wait_for="ready")
    yield server
    assert server.stop() == 0, server.log()


def call(url: str, mode: int, protocol=httpclient, model: str = "faulty"):
    client = protocol.InferenceServerClient(url)
    tensor = protocol.InferInput("IN", [1], "FP32")
    tensor.set_data_from_numpy(np.array([mode], np.float32))
    return client.infer(model, [tensor])


def after_fault(server: Server) -> None:
    """The faulty model itself and the others still answer."""
    assert call(server.http_url, 0).as_numpy("OUT").tolist() == [0]
    healthy_http(server.http_url)
    healthy_grpc(server.grpc_url)


ERRORS = [
    (1, "500", "RuntimeError: model exploded"),
    (2, "500", "Number of InferenceResponse objects do not match"),
    (7, "500", "InferenceResponse"),
    (8, "500", "returned no response for a request"),
    (12, "500", "complex128"),
    (13, "400", "declined"),
]


@pytest.mark.parametrize("mode,status,fragment", ERRORS, ids=["raises", "too-few-responses", "not-a-response",
                                                              "returns-none", "unsupported-dtype", "model-error"])
def test_model_errors_are_clear_and_cost_nothing_else(server, mode, status, fragment):
    with pytest.raises(InferenceServerException) as info:
        call(server.http_url, mode)
    assert info.value.status() == status, info.value
    assert fragment in info.value.message(), info.value.message()
    with pytest.raises(InferenceServerException) as info:
        call(server.grpc_url, mode, grpcclient)
    assert fragment in info.value.message()
    after_fault(server)


@pytest.mark.parametrize("protocol", [httpclient, grpcclient], ids=["http", "grpc"])
def test_outputs_unlike_the_config_reach_the_client_intact(server, protocol):
    """Python models may answer other dtypes or shapes than configured (as in Triton): what the
    model produced is what the client gets, and the frontends do not trip on it. An output the
    config does not name is dropped, as Triton drops it."""
    url = server.http_url if protocol is httpclient else server.grpc_url
    result = call(url, 3, protocol)
    assert result.as_numpy("OUT").dtype == np.float64 and result.as_numpy("OUT").tolist() == [1.5]
    result = call(url, 4, protocol)
    assert result.as_numpy("OUT").shape == (3, 2)
    result = call(url, 5, protocol)
    assert result.as_numpy("NOT_IN_CONFIG") is None and result.as_numpy("OUT") is None
    result = call(url, 6, protocol)
    assert result.as_numpy("OUT")[0].startswith(b"<object object")
    after_fault(server)


def test_a_failing_step_fails_its_ensemble_request_only(server):
    assert call(server.http_url, 0, model="faulty_ensemble").as_numpy("OUT").tolist() == [0]
    for protocol, url in ((httpclient, server.http_url), (grpcclient, server.grpc_url)):
        with pytest.raises(InferenceServerException) as info:
            call(url, 1, protocol, model="faulty_ensemble")
        assert "model exploded" in info.value.message()
    assert call(server.grpc_url, 0, grpcclient, model="faulty_ensemble").as_numpy("OUT").tolist() == [0]
    after_fault(server)


def test_hung_execute_is_cut_off_and_the_instance_restarts(server):
    with pytest.raises(InferenceServerException) as info:
        call(server.http_url, 9)
    assert info.value.status() == "503" and "did not finish within 2.0s" in info.value.message()
    after_fault(server)


@pytest.mark.parametrize("protocol", [httpclient, grpcclient], ids=["http", "grpc"])
def test_model_killing_its_own_process(server, protocol):
    url = server.http_url if protocol is httpclient else server.grpc_url
    with pytest.raises(InferenceServerException) as info:
        call(url, 10, protocol)
    assert info.value.message().endswith("Stub process 'faulty_0' is not healthy.")
    assert "is not healthy (exit code 3)" in server.log()
    after_fault(server)
    assert httpclient.InferenceServerClient(server.http_url).is_model_ready("faulty")


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out.extend(int(c) for c in text)
    return out


def _worker_of(server: Server, model: str) -> int:
    for child in _children(server.process.pid):
        try:
            arguments = Path(f"/proc/{child}/cmdline").read_text().split("\0")
            # The worker's last argument names its instance, as `ps` shows it.
            if "openinfer.backends.python.worker" in arguments and arguments[-2].startswith(f"{model}_"):
                return child
        except OSError:
            continue
    raise AssertionError(f"no worker process for {model}")


def test_a_leaking_model_grows_only_its_own_process(server):
    call(server.http_url, 0)
    worker = _worker_of(server, "faulty")
    server_before, worker_before = rss_mib(server.process.pid), rss_mib(worker)
    for _ in range(8):
        assert call(server.http_url, 11).as_numpy("OUT").tolist() == [11]
    assert rss_mib(worker) - worker_before > 100  # 8 x 16 MiB kept by the model
    assert rss_mib(server.process.pid) - server_before < 50
    after_fault(server)


def test_models_that_fail_to_load_are_unavailable_with_a_reason(server):
    client = httpclient.InferenceServerClient(server.http_url)
    index = {row["name"]: row for row in client.get_model_repository_index()}
    assert index["broken_init"]["state"] == "UNAVAILABLE"
    assert "cannot start: missing weights" in index["broken_init"]["reason"]
    assert index["broken_onnx"]["state"] == "UNAVAILABLE" and index["broken_onnx"]["reason"]
    for name in ("broken_init", "broken_onnx"):
        assert not client.is_model_ready(name)
        tensor = httpclient.InferInput("IN", [1], "FP32")
        tensor.set_data_from_numpy(np.array([1], np.float32))
        with pytest.raises(InferenceServerException) as info:
            client.infer(name, [tensor])
        assert info.value.status() in ("404", "503"), info.value
    assert index["faulty"]["state"] == "READY" and index["add_sub"]["state"] == "READY"
    after_fault(server)


def test_failures_are_counted_and_nothing_went_unhandled(server):
    stats = httpclient.InferenceServerClient(server.http_url).get_inference_statistics("faulty")
    inference = stats["model_stats"][0]["inference_stats"]
    assert inference["fail"]["count"] >= len(ERRORS) * 2 + 3  # + the hang + two kills (+ ensemble steps)
    assert inference["success"]["count"] > 0
    log = server.log()
    assert "unhandled error" not in log and "Traceback" not in log, log[-3000:]
