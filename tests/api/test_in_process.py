"""openinfer.Server: the server inside the test's process, through every method of the API."""

from __future__ import annotations

import asyncio
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

import openinfer
from openinfer.api import (
    InferenceResponse,
    InvalidArgumentError,
    NotFoundError,
    ResponseIterator,
    UnavailableError,
)
from tests.helpers import EXAMPLES, free_ports, write_model

IDENTITY = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())])
                for r in requests]
'''
IDENTITY_CONFIG = {
    "backend": "python",
    "max_batch_size": 0,
    "input": [{"name": "IN", "data_type": "TYPE_INT64", "dims": [-1]}],
    "output": [{"name": "OUT", "data_type": "TYPE_INT64", "dims": [-1]}],
}
A = np.array([1, 2, 3, 4], dtype=np.float32)
B = np.array([10, 20, 30, 40], dtype=np.float32)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    for name in ("add_sub", "identity_bytes", "repeat"):
        shutil.copytree(EXAMPLES / name, root / name)
    return root


@pytest.fixture(scope="module")
def server(repo):
    with openinfer.Server(model_repository=repo) as server:
        yield server


def test_server_state_and_models(server):
    assert server.live() and server.ready()
    assert server.metadata()["name"] == "triton"
    assert "model_repository" in server.metadata()["extensions"]
    models = server.models()
    assert set(models) == {("add_sub", 1), ("identity_bytes", 1), ("repeat", 1)}
    assert all(row["state"] == "READY" for row in models.values())


def test_model_metadata_config_ready(server):
    model = server.model("add_sub")
    assert model.ready()
    meta = model.metadata()
    assert meta["name"] == "add_sub" and meta["versions"] == ["1"]
    assert [t["name"] for t in meta["inputs"]] == ["INPUT0", "INPUT1"]
    assert meta["outputs"][0] == {"name": "OUTPUT0", "datatype": "FP32", "shape": [4]}
    config = model.config()
    assert config["backend"] == "python" and config["max_batch_size"] == 0
    assert not server.model("add_sub", 7).ready()  # a version the repository does not hold
    assert not server.model("nothing").ready()


def test_infer_returns_numpy_outputs(server):
    response = server.model("add_sub").infer(inputs={"INPUT0": A, "INPUT1": B}, request_id="r1")
    assert isinstance(response, InferenceResponse)
    assert (response.model_name, response.model_version, response.id) == ("add_sub", "1", "r1")
    np.testing.assert_array_equal(response.outputs["OUTPUT0"], A + B)
    np.testing.assert_array_equal(response.outputs["OUTPUT1"], A - B)


def test_requested_outputs_and_parameters(server):
    response = server.model("add_sub", 1).infer(
        inputs={"INPUT0": A, "INPUT1": B}, requested_outputs=["OUTPUT1"], parameters={"priority": 0, "tag": "x"}
    )
    assert list(response.outputs) == ["OUTPUT1"]
    np.testing.assert_array_equal(response.outputs["OUTPUT1"], A - B)


def test_strings_become_bytes(server):
    response = server.model("identity_bytes").infer(inputs={"INPUT0": np.array([["héllo", "world"]])})
    assert response.outputs["OUTPUT0"].tolist() == [["héllo".encode(), b"world"]]


def test_decoupled_model_is_an_iterator(server):
    stream = server.model("repeat").infer(inputs={"IN": np.array([5, 6, 7], dtype=np.int32)})
    assert isinstance(stream, ResponseIterator)
    got = [(int(r.outputs["OUT"][0]), int(r.outputs["IDX"][0])) for r in stream]
    assert got == [(5, 0), (6, 1), (7, 2)]


def test_decoupled_stream_closed_early_cancels(server):
    stream = server.model("repeat").infer(
        inputs={"IN": np.arange(50, dtype=np.int32), "DELAY_MS": np.array([20], dtype=np.uint32)})
    first = next(stream)
    assert int(first.outputs["OUT"][0]) == 0
    stream.close()
    assert list(stream) == []
    # the server keeps serving
    assert [int(r.outputs["OUT"][0]) for r in server.model("repeat").infer(inputs={"IN": np.array([1], np.int32)})] == [1]


def test_errors_are_the_cores(server):
    with pytest.raises(NotFoundError, match="unknown model"):
        server.model("nothing").infer(inputs={"X": A})
    with pytest.raises(InvalidArgumentError):
        server.model("add_sub").infer(inputs={"INPUT0": A})  # INPUT1 missing
    with pytest.raises(InvalidArgumentError):
        server.model("add_sub").infer(inputs={"INPUT0": A, "INPUT1": B}, parameters={"priority": -1})


def test_concurrent_calls_from_threads(server):
    model = server.model("add_sub")

    def call(i: int) -> None:
        a = np.full(4, i, dtype=np.float32)
        response = model.infer(inputs={"INPUT0": a, "INPUT1": B})
        np.testing.assert_array_equal(response.outputs["OUTPUT0"], a + B)
        stream = server.model("repeat").infer(inputs={"IN": np.array([i, i + 1], dtype=np.int32)})
        assert [int(r.outputs["OUT"][0]) for r in stream] == [i, i + 1]

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(call, range(40)))


async def test_async_infer_await_and_iterate(server):
    model = server.model("add_sub")
    responses = await asyncio.gather(*(
        model.async_infer(inputs={"INPUT0": np.full(4, i, np.float32), "INPUT1": B}) for i in range(10)))
    for i, response in enumerate(responses):
        np.testing.assert_array_equal(response.outputs["OUTPUT0"], np.full(4, i, np.float32) + B)
    streamed = [int(r.outputs["OUT"][0]) async for r in server.model("repeat").async_infer(
        inputs={"IN": np.array([3, 4], dtype=np.int32)})]
    assert streamed == [3, 4]
    with pytest.raises(NotFoundError):
        await server.model("nothing").async_infer(inputs={"X": A})


async def test_blocking_calls_inside_a_running_loop(server):
    """As in a notebook: the caller's loop is running, and the synchronous API still answers."""
    assert asyncio.get_running_loop().is_running()
    response = server.model("add_sub").infer(inputs={"INPUT0": A, "INPUT1": B})
    np.testing.assert_array_equal(response.outputs["OUTPUT1"], A - B)


def test_frontends_on_the_same_server(server):
    http_port, grpc_port, metrics_port, openai_port = free_ports(4)
    server.start_frontends(http_port=http_port, grpc_port=grpc_port, metrics_port=metrics_port, openai_port=openai_port)
    inputs = []
    for module, url in ((httpclient, f"127.0.0.1:{http_port}"), (grpcclient, f"127.0.0.1:{grpc_port}")):
        client = module.InferenceServerClient(url)
        assert client.is_server_ready()
        inputs = [module.InferInput("INPUT0", [4], "FP32"), module.InferInput("INPUT1", [4], "FP32")]
        inputs[0].set_data_from_numpy(A)
        inputs[1].set_data_from_numpy(B)
        np.testing.assert_array_equal(client.infer("add_sub", inputs).as_numpy("OUTPUT0"), A + B)
        client.close()
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as reply:
        assert 'nv_inference_request_success{model="add_sub",version="1"}' in reply.read().decode()
    models = httpx.get(f"http://127.0.0.1:{openai_port}/v1/models", timeout=30).json()
    assert {"add_sub", "repeat"} <= {m["id"] for m in models["data"]}


def test_explicit_mode_load_and_unload(tmp_path):
    write_model(tmp_path, "ident", "backend: \"python\"\n", IDENTITY)
    with openinfer.Server(model_repository=tmp_path, model_control_mode="explicit") as server:
        assert server.models() == {("ident", -1): {"name": "ident"}}  # in the repository, never loaded
        model = server.load("ident", config=IDENTITY_CONFIG)
        assert model.ready()
        assert model.config()["input"][0]["name"] == "IN"
        out = model.infer(inputs={"IN": np.array([7, 8], dtype=np.int64)})
        assert out.outputs["OUT"].tolist() == [7, 8]
        server.unload("ident")
        assert not server.model("ident").ready()
        assert server.models()[("ident", 1)]["state"] == "UNAVAILABLE"
        with pytest.raises(NotFoundError, match="has no available versions"):
            server.model("ident").infer(inputs={"IN": np.array([1], dtype=np.int64)})


def test_lifecycle_and_settings(tmp_path):
    with pytest.raises(TypeError, match="unknown setting 'strict_readyness'; did you mean strict_readiness"):
        openinfer.Server(model_repository=tmp_path, strict_readyness=False)
    with pytest.raises(ValueError, match="--load-model requires --model-control-mode=explicit"):
        openinfer.Server(model_repository=tmp_path, load_model=["x"]).start()
    server = openinfer.Server(model_repository=tmp_path)
    with pytest.raises(UnavailableError, match="not started"):
        server.models()
    server.start()
    assert server.ready() and server.models() == {}
    server.stop()
    assert not server.ready()
    server.stop()  # twice is harmless
    write_model(tmp_path, "broken", "backend: \"python\"\n", "raise RuntimeError('no')\n")
    with pytest.raises(UnavailableError, match="broken"):
        openinfer.Server(model_repository=tmp_path).start()
    with openinfer.Server(model_repository=tmp_path, exit_on_error=False, strict_readiness=False) as tolerant:
        assert tolerant.models()[("broken", 1)]["state"] == "UNAVAILABLE"
    # Under strict readiness that server never becomes ready, as Triton's would not: start returns
    # with it serving the other models instead of waiting for a readiness that cannot come.
    with openinfer.Server(model_repository=tmp_path, exit_on_error=False) as strict:
        assert not strict.ready() and strict.live()


def test_settings_are_read_by_the_command_lines_own_rules(tmp_path):
    """A keyword setting means what its flag means: "false" is false, not a true string."""
    write_model(tmp_path, "broken", "backend: \"python\"\n", "raise RuntimeError('no')\n")
    with openinfer.Server(model_repository=tmp_path, exit_on_error="false", strict_readiness="false") as server:
        assert server.ready()  # a failed model leaves a server without strict readiness ready
    with pytest.raises(ValueError, match="openinfer.Server: argument --strict-readiness: invalid boolean 'maybe'"):
        openinfer.Server(model_repository=tmp_path, strict_readiness="maybe")
    with pytest.raises(ValueError, match="argument --exit-timeout-secs: expected a number, got 'soon'"):
        openinfer.Server(model_repository=tmp_path, exit_timeout_secs="soon")


def test_one_server_used_from_many_threads_while_loading(tmp_path):
    """load() from one thread while others infer: each call is its own request on the core's loop."""
    write_model(tmp_path, "ident", "backend: \"python\"\n", IDENTITY)
    with openinfer.Server(model_repository=tmp_path, model_control_mode="explicit") as server:
        server.load("ident", config=IDENTITY_CONFIG)
        errors: list[BaseException] = []

        def hammer() -> None:
            try:
                for i in range(10):
                    assert server.model("ident").infer(inputs={"IN": np.array([i], np.int64)}).outputs["OUT"].tolist() == [i]
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for t in threads:
            t.start()
        server.models()
        for t in threads:
            t.join()
        assert errors == []
