"""The model repository extension (index, load, unload, overrides) and poll mode, end to end."""

from __future__ import annotations

import json
import shutil
import threading
import time
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.e2e import ext_models
from tests.helpers import Server, write_model

SCALED = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() * FACTOR)])
            for r in requests]
"""


def _scaled(factor: int) -> str:
    return SCALED.replace("FACTOR", str(factor))


def _error(call) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as info:
        call()
    return info.value


def _post(server, path: str, body: bytes) -> tuple[int, bytes]:
    request = urllib.request.Request(f"http://{server.http_url}{path}", data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _fp32(client, module, model: str, values) -> np.ndarray:
    data = np.asarray(values, dtype=np.float32)
    tensor = module.InferInput("INPUT0", list(data.shape), "FP32")
    tensor.set_data_from_numpy(data)
    return client.infer(model, [tensor]).as_numpy("OUTPUT0")


# --------------------------------------------------------------------------------- explicit mode
@pytest.fixture(scope="module")
def explicit(tmp_path_factory):
    repo = tmp_path_factory.mktemp("explicit_repo")
    ext_models.identity(repo, "alpha")
    ext_models.identity(repo, "beta")
    ext_models.slow(repo)
    write_model(
        repo,
        "broken",
        'backend: "python"\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        "this is not a config\n",
        ext_models.IDENTITY,
    )
    srv = Server(repo, ["--model-control-mode=explicit", "--load-model=alpha", "--load-model=slow"])
    srv.start(wait_for="ready")
    yield srv
    assert srv.stop() == 0, srv.log()


@pytest.fixture(scope="module")
def http(explicit):
    return httpclient.InferenceServerClient(explicit.http_url)


@pytest.fixture(scope="module")
def grpc_client(explicit):
    return grpcclient.InferenceServerClient(explicit.grpc_url)


def test_index(explicit, http, grpc_client):
    index = http.get_model_repository_index()
    assert index == [
        {"name": "alpha", "version": "1", "state": "READY"},
        {"name": "beta"},
        {"name": "broken"},
        {"name": "slow", "version": "1", "state": "READY"},
    ]
    rows = [
        (m.name, m.version, m.state, m.reason)
        for m in grpc_client.get_model_repository_index().models
    ]
    assert rows == [
        ("alpha", "1", "READY", ""),
        ("beta", "", "", ""),
        ("broken", "", "", ""),
        ("slow", "1", "READY", ""),
    ]
    status, body = _post(explicit, "/v2/repository/index", b'{"ready": true}')
    assert status == 200 and [m["name"] for m in json.loads(body)] == ["alpha", "slow"]
    status, body = _post(explicit, "/v2/repository/index", b'{"ready": "yes"}')
    assert (status, json.loads(body)) == (
        400,
        {"error": "attempt to access JSON non-boolean as boolean"},
    )
    status, body = _post(explicit, "/v2/repository/elsewhere/index", b"")
    assert (status, json.loads(body)) == (
        501,
        {"error": "'repository_name' specification is not supported"},
    )


def test_load_and_unload(http, grpc_client):
    http.load_model("beta")
    assert http.is_model_ready("beta")
    assert _fp32(grpc_client, grpcclient, "beta", [1, 2]).tolist() == [1, 2]
    grpc_client.unload_model("beta")
    assert not http.is_model_ready("beta")
    assert {
        "name": "beta",
        "version": "1",
        "state": "UNAVAILABLE",
        "reason": "unloaded",
    } in http.get_model_repository_index()
    http.unload_model("never_heard_of")  # unloading what is not loaded succeeds, as in Triton
    grpc_client.load_model("beta")
    assert grpc_client.is_model_ready("beta")

    # A model the repository does not have is the client's mistake: 404 (Triton answers 500).
    err = _error(lambda: http.load_model("zzz"))
    assert (err.status(), err.message()) == (
        "404",
        "failed to load 'zzz', failed to poll from model repository",
    )
    err = _error(lambda: grpc_client.load_model("zzz"))
    assert (err.status(), err.message()) == (
        "StatusCode.NOT_FOUND",
        "failed to load 'zzz', failed to poll from model repository",
    )
    err = _error(lambda: grpc_client.load_model("broken"))
    assert err.status() == "StatusCode.INVALID_ARGUMENT" and err.message().startswith(
        "failed to load 'broken', failed to poll from model repository: failed to parse model configuration"
    )
    # As in Triton, a model whose poll failed gets no state: listed by name, unknown to requests,
    # and no reason for the server not to be ready.
    assert {"name": "broken"} in http.get_model_repository_index()
    err = _error(lambda: http.get_model_metadata("broken"))
    assert err.message() == "Request for unknown model: 'broken' is not found"
    assert http.is_server_live() and http.is_server_ready() and http.is_model_ready("alpha")


def test_unloaded_model_is_not_ready_without_an_error(explicit, http, grpc_client):
    """Triton's ModelReady: an unloaded, failed or unknown model answers "not ready" (gRPC
    `ready: false`, HTTP 400), the same rule on both protocols; a version that is not a number
    is an error (over HTTP such a path matches no route)."""
    http.load_model("beta")
    assert grpc_client.is_model_ready("beta") and grpc_client.is_model_ready("beta", "1")
    grpc_client.unload_model("beta")
    _error(lambda: grpc_client.load_model("broken"))
    for name, version in (("beta", ""), ("beta", "1"), ("broken", ""), ("never_heard_of", ""), ("beta", "7")):
        assert grpc_client.is_model_ready(name, version) is False, (name, version)
        path = f"/v2/models/{name}" + (f"/versions/{version}" if version else "") + "/ready"
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(f"http://{explicit.http_url}{path}", timeout=10)
        assert (info.value.code, json.loads(info.value.read())) == (400, {"error": "Model version not ready"})
        assert http.is_model_ready(name, version) is False
    err = _error(lambda: grpc_client.is_model_ready("beta", "one"))
    assert err.status() == "StatusCode.INVALID_ARGUMENT" and "version string 'one'" in err.message()
    http.load_model("beta")
    assert grpc_client.is_model_ready("beta") and http.is_model_ready("beta")


def test_config_and_file_overrides(http, grpc_client):
    config = json.dumps(
        {
            "backend": "python",
            "max_batch_size": 4,
            "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
            "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
        }
    )
    http.load_model("beta", config=config)
    assert http.get_model_config("beta")["max_batch_size"] == 4
    assert _fp32(http, httpclient, "beta", [[3, 4]]).tolist() == [[3, 4]]

    # Files only: the model comes entirely from the request (base64 over HTTP, bytes over gRPC).
    http.load_model("fresh_http", config=config, files={"file:1/model.py": _scaled(10).encode()})
    assert _fp32(http, httpclient, "fresh_http", [[1, 2]]).tolist() == [[10, 20]]
    grpc_client.load_model(
        "fresh_grpc", config=config, files={"file:1/model.py": _scaled(100).encode()}
    )
    assert _fp32(grpc_client, grpcclient, "fresh_grpc", [[1]]).tolist() == [[100]]
    # Loading changed files reloads the model.
    http.load_model("fresh_http", config=config, files={"file:1/model.py": _scaled(3).encode()})
    assert _fp32(http, httpclient, "fresh_http", [[1, 2]]).tolist() == [[3, 6]]

    err = _error(lambda: http.load_model("fresh_http", files={"file:1/model.py": b"x = 1"}))
    assert (err.status(), err.message()) == (  # Triton's prefix, then what was wrong
        "400",
        "failed to load 'fresh_http', failed to poll from model repository: "
        "Load parameter 'config' must be specified for model file override",
    )
    err = _error(
        lambda: http.load_model("evil", config=config, files={"file:../../escape.py": b"x = 1"})
    )
    assert err.status() == "400" and "must stay inside the model directory" in err.message()
    assert err.message().startswith("failed to load 'evil', failed to poll from model repository: ")
    err = _error(lambda: http.load_model("beta", config='{"max_batch_size": "lots"}'))
    assert err.status() == "400" and "Invalid config override" in err.message()
    assert http.is_model_ready("beta")  # a failed reload keeps the model serving
    # A configuration named otherwise than its model fails the poll, before any version loads.
    named = json.dumps({**json.loads(config), "name": "model{x}"})
    for client in (http, grpc_client):
        err = _error(lambda: client.load_model("renamed", config=named, files={"file:1/model.py": _scaled(2).encode()}))
        assert err.message() == (
            "failed to load 'renamed', failed to poll from model repository: unexpected directory "
            "name 'renamed' for model 'model{x}', directory name must equal model name"
        )
        assert err.status() in ("400", "StatusCode.INVALID_ARGUMENT")
    for name in ("fresh_http", "fresh_grpc"):
        http.unload_model(name)


def _pending(server, model: str) -> int:
    text = urllib.request.urlopen(server.metrics_url, timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(f'nv_inference_pending_request_count{{model="{model}"'):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def test_unload_waits_for_in_flight_requests(explicit, http):
    grpc_client = grpcclient.InferenceServerClient(explicit.grpc_url)
    tensor = grpcclient.InferInput("INPUT0", [1], "INT32")
    tensor.set_data_from_numpy(np.array([1500], dtype=np.int32))  # the model sleeps 1.5 s
    finished = threading.Event()
    outcome: dict = {}

    def callback(result, error):
        outcome.update(result=result, error=error)
        finished.set()

    grpc_client.async_infer("slow", [tensor], callback=callback)
    deadline = time.monotonic() + 30
    while _pending(explicit, "slow") == 0 and not finished.is_set() and time.monotonic() < deadline:
        time.sleep(0.05)
    unloaded = threading.Event()
    unloader = threading.Thread(target=lambda: (grpc_client.unload_model("slow"), unloaded.set()))
    unloader.start()
    while http.is_model_ready("slow") and not unloaded.is_set():
        time.sleep(0.02)
    # While "slow" drains, other models serve and new requests to "slow" are refused.
    assert _fp32(http, httpclient, "alpha", [7]).tolist() == [7]
    blocked = httpclient.InferInput("INPUT0", [1], "INT32")
    blocked.set_data_from_numpy(np.array([0], dtype=np.int32))
    assert _error(lambda: http.infer("slow", [blocked])).status() in ("404", "503")
    unloader.join(60)
    assert unloaded.is_set() and finished.is_set()  # the unload returned only after the request
    assert outcome["error"] is None and outcome["result"].as_numpy("OUTPUT0").tolist() == [1500]
    grpc_client.load_model("slow")
    grpc_client.close()


def test_load_refused_outside_explicit_mode(example_server):
    message = "explicit model load / unload is not allowed if polling is enabled"
    http = httpclient.InferenceServerClient(example_server.http_url)
    grpc_client = grpcclient.InferenceServerClient(example_server.grpc_url)
    for call, code in (
        (lambda: http.load_model("add_sub"), "503"),
        (lambda: http.unload_model("add_sub"), "503"),
        (lambda: grpc_client.load_model("add_sub"), "StatusCode.UNAVAILABLE"),
        (lambda: grpc_client.unload_model("add_sub"), "StatusCode.UNAVAILABLE"),
    ):
        err = _error(call)
        assert (err.status(), err.message()) == (code, message)
    assert http.is_model_ready("add_sub")


# ------------------------------------------------------------------------------------- poll mode
def _wait(condition, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    return condition()


def _state(client, name: str) -> tuple[str, str] | None:
    for row in client.get_model_repository_index():
        if row["name"] == name and "state" in row:
            return row["state"], row.get("reason", "")
    return None


def test_poll_mode_follows_the_repository(tmp_path):
    config = ext_models.IDENTITY_CONFIG.format(name="{name}", dtype="TYPE_FP32", max_batch=0)
    write_model(tmp_path, "p1", config.replace("{name}", "p1"), _scaled(2))
    with Server(tmp_path, ["--model-control-mode=poll", "--repository-poll-secs=0.2"]) as srv:
        http = httpclient.InferenceServerClient(srv.http_url)
        assert _fp32(http, httpclient, "p1", [1]).tolist() == [2]

        write_model(tmp_path, "p2", config.replace("{name}", "p2"), _scaled(5))  # added
        assert _wait(lambda: _state(http, "p2") == ("READY", ""))
        assert _fp32(http, httpclient, "p2", [1]).tolist() == [5]

        (tmp_path / "p1" / "1" / "model.py").write_text(_scaled(7))  # changed
        assert _wait(lambda: _fp32(http, httpclient, "p1", [1]).tolist() == [7])

        (tmp_path / "p1" / "config.pbtxt").write_text(
            "not a config at all"
        )  # broken: old one keeps serving
        assert _wait(lambda: "Poll failed for model directory 'p1'" in srv.log())
        assert http.is_model_ready("p1") and _fp32(http, httpclient, "p1", [1]).tolist() == [7]

        shutil.rmtree(tmp_path / "p2")  # removed
        assert _wait(lambda: _state(http, "p2") == ("UNAVAILABLE", "unloaded"))
        assert not http.is_model_ready("p2")
        err = _error(lambda: http.load_model("p1"))
        assert err.status() == "503"
