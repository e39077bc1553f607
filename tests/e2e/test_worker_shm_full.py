"""A full /dev/shm: a tensor that does not fit fails its request with Triton's words, and the
worker lives on. The server runs in a mount namespace of its own with a 64 MiB /dev/shm."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.helpers import ROOT, Server, child_pids

SHM_MIB = 64
LAUNCHER = ["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size={SHM_MIB}m tmpfs /dev/shm && exec "$@"', "sh"]


def _namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run([*LAUNCHER, "true"], capture_output=True)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(
    not _namespaces_work(), reason="needs unprivileged user and mount namespaces (unshare -rm) for a small /dev/shm"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    shutil.copytree(ROOT / "examples" / "model_repository" / "identity_fp32", repo / "identity_fp32")
    # bodies larger than the whole /dev/shm are allowed in, to reach the worker's crossing
    running = Server(repo, args=["--http-max-input-size", str(2 * SHM_MIB << 20)], launcher=LAUNCHER).start(wait_for="ready")
    yield running
    running.stop()


def _infer(client: httpclient.InferenceServerClient, array: np.ndarray) -> np.ndarray:
    tensor = httpclient.InferInput("INPUT0", list(array.shape), "FP32")
    tensor.set_data_from_numpy(array, binary_data=True)
    result = client.infer("identity_fp32", [tensor], outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)])
    return result.as_numpy("OUTPUT0")


def test_an_answer_that_does_not_fit_fails_its_request_and_the_worker_lives_on(server):
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
    small = np.arange(16, dtype=np.float32).reshape(1, -1)
    np.testing.assert_array_equal(_infer(client, small), small)
    workers = child_pids(server.process.pid)
    # 40 MiB in and 40 MiB out, each in a file of its own (past a quarter of the ring): the
    # answer's file cannot be reserved while the request's is still mapped.
    big = np.ones((1, 40 * 1024 * 1024 // 4), np.float32)
    with pytest.raises(InferenceServerException) as error:
        _infer(client, big)
    assert "Failed to increase the shared memory pool size" in error.value.message()
    assert "41943040-byte tensor" in error.value.message()
    np.testing.assert_array_equal(_infer(client, small), small)  # same worker, still serving
    assert child_pids(server.process.pid) == workers
    medium = np.full((1, 5 * 1024 * 1024), 2.0, np.float32)  # 20 MiB each way: fits
    np.testing.assert_array_equal(_infer(client, medium), medium)


def test_a_request_that_does_not_fit_fails_before_it_reaches_the_worker_and_the_worker_serves_on(server):
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
    small = np.arange(16, dtype=np.float32).reshape(1, -1)
    np.testing.assert_array_equal(_infer(client, small), small)
    workers = child_pids(server.process.pid)
    huge = np.ones((1, (SHM_MIB + 8) * 1024 * 1024 // 4), np.float32)  # more than all of /dev/shm
    with pytest.raises(InferenceServerException) as error:
        _infer(client, huge)
    assert "Failed to increase the shared memory pool size" in error.value.message()
    for _ in range(3):
        np.testing.assert_array_equal(_infer(client, small), small)
    assert child_pids(server.process.pid) == workers
    # The failed send left nothing held: the worker, killed while idle, is not restarted as
    # one that broke an execution would be (it waits for the next request).
    os.kill(workers[0], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while child_pids(server.process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(3)
    assert child_pids(server.process.pid) == []
