"""`openinfer new-model` writes folders that a fresh server loads and whose client snippet answers."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.helpers import ROOT, Server

CASES = [  # (name, flags, the line the client prints)
    ("py_plain", ["--backend", "python"], "[0. 1. 2. 3.]"),
    ("py_stream", ["--backend", "python", "--decoupled", "--batching"], "[[3.]]"),
    ("onnx_plain", ["--backend", "onnx"], "[0. 1. 2. 3.]"),
    ("onnx_batched", ["--backend", "onnx", "--batching"], "[[0. 1. 2. 3.]]"),
    ("torch_plain", ["--backend", "pytorch"], "[0. 1. 2. 3.]"),
    ("torch_batched", ["--backend", "pytorch", "--batching"], "[[0. 1. 2. 3.]]"),
]


def _new_model(repo, name, *flags) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "openinfer", "new-model", name, *flags, "--repository", str(repo)],
                          check=False, capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    for package in ("onnx", "onnxruntime", "torch"):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed")
    repo = tmp_path_factory.mktemp("repo")
    for name, flags, _ in CASES:
        made = _new_model(repo, name, *flags)
        assert made.returncode == 0, made.stderr
        assert f"wrote {repo / name / 'config.pbtxt'}" in made.stdout
    with Server(repo, ["--log-verbose", "0"]).start(wait_for="ready") as server:
        yield repo, server


@pytest.mark.parametrize("name, flags, expected", CASES, ids=[c[0] for c in CASES])
def test_the_client_snippet_answers(served, name, flags, expected):
    repo, server = served
    url = server.grpc_url if "--decoupled" in flags else server.http_url
    out = subprocess.run([sys.executable, str(repo / name / "client.py"), url], check=False, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == expected
    if "--decoupled" in flags:
        assert lines == ["[[0.]]", "[[1.]]", "[[2.]]", "[[3.]]"]  # one response per element, streamed


def test_mistakes_are_refused(tmp_path):
    assert _new_model(tmp_path, "m", "--backend", "python").returncode == 0
    again = _new_model(tmp_path, "m", "--backend", "python")
    assert again.returncode == 2 and "already exists (--force overwrites it)" in again.stderr
    decoupled = _new_model(tmp_path, "n", "--backend", "onnx", "--decoupled")
    assert decoupled.returncode == 2 and "--decoupled needs --backend python" in decoupled.stderr
    backend = _new_model(tmp_path, "o", "--backend", "tensorflow")
    assert backend.returncode == 2 and "argument --backend: invalid choice: 'tensorflow'" in backend.stderr
