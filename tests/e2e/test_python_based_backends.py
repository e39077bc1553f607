"""Python-based backends: `backend: "<name>"` runs `<--backend-directory>/<name>/model.py`, as in
Triton's L0_backend_python/python_based_backends (models `add` with two versions and `sub` on one
`add_sub` backend, next to a plain Python model), plus tritonserver's memory-pool flags."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from openinfer.app.cli import serve_parser
from tests.helpers import EXAMPLES, ROOT, Server, write_model

BACKEND_MODEL = '''
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils
from add_sub_ops import apply  # a module beside this model.py: the backend folder is on sys.path


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        present = {t["name"] for t in config.as_dict().get("input", [])}
        for name in ("INPUT0", "INPUT1"):
            if name not in present:
                config.add_input({"name": name, "data_type": "TYPE_FP32", "dims": [4]})
        if not config.as_dict().get("output"):
            config.add_output({"name": "OUTPUT", "data_type": "TYPE_FP32", "dims": [4]})
            config.add_output({"name": "INFO", "data_type": "TYPE_STRING", "dims": [1]})
        return config

    def initialize(self, args):
        with open(os.path.join(pb_utils.get_model_dir(), "model.json")) as f:
            self.operation = json.load(f)["operation"]
        self.info = json.dumps({
            "args": {k: v for k, v in args.items() if k != "model_config"},
            "model_dir": pb_utils.get_model_dir(),
            "file": __file__,
            "module": __name__,
        })

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT", apply(self.operation, a, b).astype(np.float32)),
                pb_utils.Tensor("INFO", np.array([self.info.encode()], dtype=np.object_)),
            ]))
        return responses
'''
OPS = '''
def apply(operation, a, b):
    return a + b if operation == "add" else a - b
'''


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("python_based")
    backends, repo = root / "backends", root / "models"
    (backends / "add_sub").mkdir(parents=True)
    (backends / "add_sub" / "model.py").write_text(BACKEND_MODEL)
    (backends / "add_sub" / "add_sub_ops.py").write_text(OPS)
    for version in (1, 2):
        write_model(repo, "add", 'backend: "add_sub"\n', files={f"{version}/model.json": b'{ "operation": "add" }'})
    write_model(repo, "sub", 'backend: "add_sub"\n', files={"1/model.json": b'{ "operation": "sub" }'})
    write_model(repo, "add_sub", (EXAMPLES / "add_sub" / "config.pbtxt").read_text(),
                (EXAMPLES / "add_sub" / "1" / "model.py").read_text())
    write_model(repo, "unknown_backend", 'backend: "no_such_backend"\n', files={"1/model.json": b"{}"})
    server = Server(repo, args=[
        "--backend-directory", str(backends), "--model-control-mode=explicit",
        "--pinned-memory-pool-byte-size", "268435456", "--cuda-memory-pool-byte-size", "0:67108864",
    ]).start()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    # As Triton's test loads them: `add` with a config override keeping both versions.
    client.load_model("add", config='{"backend":"add_sub","version_policy":{"latest":{"num_versions":2}}}')
    client.load_model("sub")
    client.load_model("add_sub")
    yield server, client, repo
    client.close()
    assert server.stop() == 0, server.log()


def _infer(client, model, version="", outputs=("OUTPUT", "INFO")):
    a, b = np.random.rand(4).astype(np.float32), np.random.rand(4).astype(np.float32)
    inputs = [grpcclient.InferInput("INPUT0", [4], "FP32"), grpcclient.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    result = client.infer(model, inputs, model_version=version,
                          outputs=[grpcclient.InferRequestedOutput(n) for n in outputs])
    return a, b, result


def test_models_on_one_backend_run_its_model_py(setup):
    server, client, repo = setup
    for version in ("1", "2"):
        assert client.is_model_ready("add", version)
        a, b, result = _infer(client, "add", version)
        assert np.allclose(result.as_numpy("OUTPUT"), a + b)
        info = json.loads(result.as_numpy("INFO")[0])
        # Triton's args and get_model_dir(): the model's folder and version, not the backend's.
        assert info["args"]["model_repository"] == str(repo / "add")
        assert info["args"]["model_version"] == version
        assert info["args"]["model_name"] == "add"
        assert info["model_dir"] == str(repo / "add" / version)
        # The backend's model.py, imported as Triton's stub imports it: as module `model`.
        assert info["file"].endswith("/backends/add_sub/model.py") and info["module"] == "model"
    assert client.is_model_ready("sub")
    a, b, result = _infer(client, "sub")
    assert np.allclose(result.as_numpy("OUTPUT"), a - b)
    # auto_complete_config of the backend filled the config a bare `backend: "add_sub"` left empty.
    config = client.get_model_config("sub", as_json=True)["config"]
    assert config["backend"] == "add_sub"
    assert [i["name"] for i in config["input"]] == ["INPUT0", "INPUT1"]


def test_a_plain_python_model_still_runs_its_own_model_py(setup):
    _, client, _ = setup
    a, b, result = _infer(client, "add_sub", outputs=("OUTPUT0", "OUTPUT1"))
    assert np.allclose(result.as_numpy("OUTPUT0"), a + b)
    assert np.allclose(result.as_numpy("OUTPUT1"), a - b)


def test_an_unknown_backend_fails_the_load_in_tritons_words(setup):
    _, client, _ = setup
    with pytest.raises(InferenceServerException) as caught:
        client.load_model("unknown_backend")
    assert (
        "unable to find backend library for backend 'no_such_backend', try specifying runtime on the "
        "model configuration." in caught.value.message()
    )
    assert not client.is_model_ready("unknown_backend")


def test_backend_and_memory_flags_as_tritonserver_takes_them():
    args = serve_parser().parse_args(["--model-repository", "m"])
    assert args.backend_directory == "/opt/tritonserver/backends"
    assert args.pinned_memory_pool_byte_size == 1 << 28 and args.cuda_memory_pool_byte_size == []
    args = serve_parser().parse_args(["--model-repository", "m", "--cuda-memory-pool-byte-size", "0:1024",
                                      "--cuda-memory-pool-byte-size=1:2048"])
    assert args.cuda_memory_pool_byte_size == [(0, 1024), (1, 2048)]
    refused = subprocess.run(
        [sys.executable, "-m", "openinfer", "serve", "--model-repository", "m", "--cuda-memory-pool-byte-size", "1024"],
        capture_output=True, text=True, cwd=str(ROOT), timeout=60,
    )
    assert refused.returncode == 2
    assert (
        "Cannot parse pair option due to incorrect number of inputs.--<pair option> argument requires "
        "format <first>:<second>. Found: 1024" in refused.stderr
    )
