"""A container's 64 MiB /dev/shm: every tensor still crosses to and from the workers, through
the socket where shared memory is short, and the server says once what to do about it.

The server runs in a mount namespace of its own with a 64 MiB tmpfs on /dev/shm, as Docker and
Kubernetes give a container by default."""

from __future__ import annotations

import concurrent.futures
import shutil

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.helpers import ROOT, Server, child_pids, small_dev_shm, small_dev_shm_works

SHM_MIB = 64
LAUNCHER = small_dev_shm(f"{SHM_MIB}m")
MODELS = [f"identity_{i}" for i in range(4)]
#: 64 B to 16 MiB, doubling: what a mixed workload sends.
SIZES = [1 << bits for bits in range(6, 25)]

pytestmark = pytest.mark.skipif(
    not small_dev_shm_works(), reason="needs unprivileged user and mount namespaces (unshare -rm) for a small /dev/shm"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Four identity models of two instances each: 16 rings of 64 MiB could not all fit."""
    repo = tmp_path_factory.mktemp("repo")
    source = ROOT / "examples" / "model_repository" / "identity_fp32"
    for name in MODELS:
        shutil.copytree(source, repo / name)
        config = (repo / name / "config.pbtxt").read_text().replace('"identity_fp32"', f'"{name}"')
        (repo / name / "config.pbtxt").write_text(config + "instance_group [ { count: 2 kind: KIND_CPU } ]\n")
    # bodies larger than the whole /dev/shm are allowed in, to reach the worker's crossing
    running = Server(repo, args=["--http-max-input-size", str(2 * SHM_MIB << 20)], launcher=LAUNCHER).start(wait_for="ready")
    yield running
    running.stop()


def _values(index: int) -> np.ndarray:
    size = SIZES[index % len(SIZES)]
    return np.arange(size // 4, dtype=np.float32).reshape(1, -1) + index


def _grpc_infer(url: str, model: str, array: np.ndarray) -> np.ndarray:
    client = grpcclient.InferenceServerClient(url)
    try:
        tensor = grpcclient.InferInput("INPUT0", list(array.shape), "FP32")
        tensor.set_data_from_numpy(array)
        return client.infer(model, [tensor], client_timeout=300).as_numpy("OUTPUT0")
    finally:
        client.close()


def test_a_mixed_load_of_every_size_is_answered_in_full(server):
    """400 requests of 64 B to 16 MiB from 16 threads over gRPC: every answer is right."""
    workers = child_pids(server.process.pid)

    def one(index: int) -> bool:
        array = _values(index)
        answer = _grpc_infer(server.grpc_url, MODELS[index % len(MODELS)], array)
        return answer.shape == array.shape and bool(np.array_equal(answer, array))

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(one, range(400)))
    assert answers.count(True) == 400
    assert server.process.poll() is None
    assert sorted(child_pids(server.process.pid)) == sorted(workers)  # no worker died either


def _http_infer(client: httpclient.InferenceServerClient, array: np.ndarray) -> np.ndarray:
    tensor = httpclient.InferInput("INPUT0", list(array.shape), "FP32")
    tensor.set_data_from_numpy(array, binary_data=True)
    result = client.infer(MODELS[0], [tensor], outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)])
    return result.as_numpy("OUTPUT0")


def test_a_tensor_larger_than_all_of_dev_shm_crosses_through_the_socket(server):
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=300)
    huge = np.arange((SHM_MIB + 8) * 1024 * 1024 // 4, dtype=np.float32).reshape(1, -1)
    np.testing.assert_array_equal(_http_infer(client, huge), huge)
    small = np.arange(16, dtype=np.float32).reshape(1, -1)
    np.testing.assert_array_equal(_http_infer(client, small), small)


def test_the_shortage_is_logged_once_with_what_to_do(server):
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=300)
    big = np.ones((1, 40 * 1024 * 1024 // 4), np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(_http_infer(client, big), big)
    log = server.log()
    assert "/dev/shm is short of space" in log
    assert "--shm-size" in log
    # once for the server and its eight workers together
    assert log.count("/dev/shm is short of space") == 1


@pytest.fixture(scope="module")
def starved_server(tmp_path_factory):
    """A /dev/shm of one page: not even a ring's header fits beside the server's own files."""
    repo = tmp_path_factory.mktemp("repo")
    shutil.copytree(ROOT / "examples" / "model_repository" / "identity_fp32", repo / "identity_fp32")
    running = Server(repo, launcher=small_dev_shm("4k")).start(wait_for="ready")
    yield running
    running.stop()


def test_workers_without_any_shared_memory_answer_through_the_socket(starved_server):
    client = httpclient.InferenceServerClient(starved_server.http_url, network_timeout=300)
    for size in (16, 1 << 20):
        array = np.arange(size, dtype=np.float32).reshape(1, -1)
        tensor = httpclient.InferInput("INPUT0", list(array.shape), "FP32")
        tensor.set_data_from_numpy(array, binary_data=True)
        result = client.infer("identity_fp32", [tensor])
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), array)
    assert "/dev/shm is short of space" in starved_server.log()
    assert starved_server.process.poll() is None
