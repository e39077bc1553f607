"""PyTorch backend end to end: TorchScript modules scripted here, served, called with tritonclient."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from openinfer.core.memory.gpus import visible_gpus
from tests.helpers import Server, write_model

# torch 2.13 marks torch.jit.script deprecated; Triton's libtorch backend serves TorchScript.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")


class AddSub(torch.nn.Module):
    """Triton's INPUT__n / OUTPUT__n convention: positions, not names."""

    def forward(self, a: torch.Tensor, b: torch.Tensor):
        if bool((a < -1000).any()):
            raise RuntimeError("input below -1000")
        return a + b, a - b


class Scale(torch.nn.Module):
    """Inputs matched by forward's argument names; also reports whether autograd is off."""

    def forward(self, x: torch.Tensor, factor: torch.Tensor):
        grad = torch.tensor([torch.is_grad_enabled()])
        return x * factor, grad.expand(x.shape[0], 1)


class Tokens(torch.nn.Module):
    """A string input arrives as List[str]; the output is a tensor of lengths."""

    def forward(self, words: list[str]):
        return torch.tensor([len(w) for w in words], dtype=torch.int64).reshape(-1, 1)


def save(module: torch.nn.Module, path) -> bytes:
    torch.jit.script(module).save(str(path))
    return path.read_bytes()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("torch_repo")
    scratch = tmp_path_factory.mktemp("torch_scratch")
    write_model(
        repo,
        "add_sub_pt",
        """
        name: "add_sub_pt"
        platform: "pytorch_libtorch"
        max_batch_size: 8
        input [
          { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] },
          { name: "INPUT__1" data_type: TYPE_FP32 dims: [ 3 ] }
        ]
        output [
          { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 3 ] },
          { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] }
        ]
        instance_group [ { count: 2 kind: KIND_CPU } ]
        """,
        files={"1/model.pt": save(AddSub(), scratch / "add_sub.pt")},
    )
    write_model(
        repo,
        "scale_pt",
        """
        backend: "pytorch"
        max_batch_size: 4
        input [
          { name: "factor" data_type: TYPE_FP32 dims: [ 1 ] },
          { name: "x" data_type: TYPE_FP32 dims: [ 2 ] }
        ]
        output [
          { name: "y" data_type: TYPE_FP32 dims: [ 2 ] },
          { name: "grad" data_type: TYPE_BOOL dims: [ 1 ] }
        ]
        parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }
        """,
        files={"1/model.pt": save(Scale(), scratch / "scale.pt")},
    )
    write_model(
        repo,
        "tokens_pt",
        """
        platform: "pytorch_libtorch"
        max_batch_size: 0
        input [ { name: "INPUT__0" data_type: TYPE_STRING dims: [ -1 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_INT64 dims: [ -1, 1 ] } ]
        """,
        files={"1/model.pt": save(Tokens(), scratch / "tokens.pt")},
    )
    write_model(
        repo,
        "wrong_dtype_pt",
        """
        platform: "pytorch_libtorch"
        max_batch_size: 8
        input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "INPUT__1" data_type: TYPE_FP32 dims: [ 3 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_INT32 dims: [ 3 ] } ]
        """,
        files={"1/model.pt": save(AddSub(), scratch / "add_sub2.pt")},
    )
    write_model(
        repo,
        "gpu_pt",
        """
        platform: "pytorch_libtorch"
        max_batch_size: 8
        input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "INPUT__1" data_type: TYPE_FP32 dims: [ 3 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
        instance_group [ { kind: KIND_GPU } ]
        """,
        files={"1/model.pt": save(AddSub(), scratch / "add_sub3.pt")},
    )
    write_model(
        repo,
        "no_io_pt",
        'platform: "pytorch_libtorch"\n',
        files={"1/model.pt": save(AddSub(), scratch / "add_sub4.pt")},
    )
    write_model(
        repo,
        "garbage_pt",
        """
        platform: "pytorch_libtorch"
        input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
        output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
        """,
        files={"1/model.pt": b"this is not TorchScript"},
    )
    srv = Server(repo, ["--strict-readiness", "false", "--exit-on-error=false"]).start(wait_for="ready")
    yield srv
    assert srv.stop() == 0, srv.log()


def test_indexed_names_map_to_positions(server):
    client = httpclient.InferenceServerClient(server.http_url)
    a = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)
    b = np.array([[0.5, 0.5, 0.5], [1, 1, 1]], dtype=np.float32)
    inputs = [httpclient.InferInput("INPUT__0", [2, 3], "FP32"), httpclient.InferInput("INPUT__1", [2, 3], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    result = client.infer("add_sub_pt", inputs)
    # Config order lists OUTPUT__1 first; the index in the name decides what it holds.
    np.testing.assert_array_equal(result.as_numpy("OUTPUT__0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT__1"), a - b)
    assert client.get_model_metadata("add_sub_pt")["platform"] == "pytorch_libtorch"


def test_backend_only_config_reports_tritons_platform(server):
    """`backend: "pytorch"` alone: Triton fills `platform` and the model file; metadata agrees."""
    http = httpclient.InferenceServerClient(server.http_url)
    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    assert http.get_model_metadata("scale_pt")["platform"] == "pytorch_libtorch"
    assert grpc.get_model_metadata("scale_pt").platform == "pytorch_libtorch"
    config = http.get_model_config("scale_pt")
    assert (config["backend"], config["platform"], config["default_model_filename"]) == (
        "pytorch",
        "pytorch_libtorch",
        "model.pt",
    )
    assert grpc.get_model_config("scale_pt").config.platform == "pytorch_libtorch"
    # `platform` alone: the backend is filled in; the model file stays unnamed, as in Triton.
    named = http.get_model_config("add_sub_pt")
    assert (named["backend"], named["platform"], named["default_model_filename"]) == (
        "pytorch",
        "pytorch_libtorch",
        "",
    )


def test_forward_argument_names_and_inference_mode(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    x = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32)
    factor = np.array([[2], [3], [-1]], dtype=np.float32)
    inputs = [grpcclient.InferInput("x", [3, 2], "FP32"), grpcclient.InferInput("factor", [3, 1], "FP32")]
    inputs[0].set_data_from_numpy(x)
    inputs[1].set_data_from_numpy(factor)
    result = client.infer("scale_pt", inputs)
    np.testing.assert_array_equal(result.as_numpy("y"), x * factor)
    assert result.as_numpy("grad").tolist() == [[False]] * 3  # ran under torch.inference_mode()


def test_string_inputs_become_a_list_of_str(server):
    client = httpclient.InferenceServerClient(server.http_url)
    words = np.array([b"a", b"torch", b"naive"], dtype=np.object_)
    inputs = [httpclient.InferInput("INPUT__0", [3], "BYTES")]
    inputs[0].set_data_from_numpy(words)
    result = client.infer("tokens_pt", inputs)
    assert result.as_numpy("OUTPUT__0").tolist() == [[1], [5], [5]]


def test_torch_errors_are_reported_and_the_model_keeps_serving(server):
    client = httpclient.InferenceServerClient(server.http_url)
    inputs = [httpclient.InferInput("INPUT__0", [1, 3], "FP32"), httpclient.InferInput("INPUT__1", [1, 3], "FP32")]
    inputs[0].set_data_from_numpy(np.full((1, 3), -5000, np.float32))
    inputs[1].set_data_from_numpy(np.ones((1, 3), np.float32))
    with pytest.raises(InferenceServerException) as info:
        client.infer("add_sub_pt", inputs)
    assert info.value.status() == "500"
    assert "PyTorch execute failure" in info.value.message()
    assert "input below -1000" in info.value.message()
    inputs[0].set_data_from_numpy(np.ones((1, 3), np.float32))
    result = client.infer("add_sub_pt", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT__0"), np.full((1, 3), 2, np.float32))


def test_output_type_mismatch_is_an_error(server):
    client = httpclient.InferenceServerClient(server.http_url)
    inputs = [httpclient.InferInput("INPUT__0", [1, 3], "FP32"), httpclient.InferInput("INPUT__1", [1, 3], "FP32")]
    for tensor in inputs:
        tensor.set_data_from_numpy(np.ones((1, 3), np.float32))
    with pytest.raises(InferenceServerException) as info:
        client.infer("wrong_dtype_pt", inputs)
    assert "unexpected datatype TYPE_FP32 for inference output 'OUTPUT__0', expecting TYPE_INT32" in info.value.message()


def test_unloadable_models_say_why(server):
    index = {row["name"]: row for row in httpclient.InferenceServerClient(server.http_url).get_model_repository_index()}
    assert index["scale_pt"]["state"] == "READY"
    assert "must list its inputs and outputs" in index["no_io_pt"]["reason"]
    assert "failed to load model 'garbage_pt'" in index["garbage_pt"]["reason"]
    assert index["gpu_pt"]["state"] == "UNAVAILABLE"
    if not visible_gpus():
        assert "has kind KIND_GPU but no GPUs are available" in index["gpu_pt"]["reason"]
