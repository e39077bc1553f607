"""A client's system shared-memory region in a full /dev/shm: the object is sparse (a client's
`ftruncate` reserves no page), so writing an output into it would kill the server with SIGBUS.
The request fails with a 400 instead, and the server serves on.

The server runs over a 16 MiB /dev/shm of its own; the test reaches that /dev/shm through
`/proc/<pid>/root`, as a client in the same container would see it."""

from __future__ import annotations

import mmap
import os
import shutil

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.helpers import ROOT, Server, small_dev_shm, small_dev_shm_works

pytestmark = pytest.mark.skipif(
    not small_dev_shm_works(), reason="needs unprivileged user and mount namespaces (unshare -rm) for a small /dev/shm"
)
REGION_BYTES = 1 << 20


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    shutil.copytree(ROOT / "examples" / "model_repository" / "identity_fp32", repo / "identity_fp32")
    running = Server(repo, args=["--allow-client-shm", "true"], launcher=small_dev_shm("16m")).start(wait_for="ready")
    yield running
    running.stop()


def _shm(server: Server, name: str) -> str:
    return f"/proc/{server.process.pid}/root/dev/shm/{name}"


def _infer_into_region(client: httpclient.InferenceServerClient, values: np.ndarray) -> None:
    tensor = httpclient.InferInput("INPUT0", list(values.shape), "FP32")
    tensor.set_data_from_numpy(values, binary_data=True)
    output = httpclient.InferRequestedOutput("OUTPUT0", binary_data=True)
    output.set_shared_memory("out", values.nbytes)
    client.infer("identity_fp32", [tensor], outputs=[output])


def test_an_output_into_a_region_that_cannot_be_backed_fails_with_400(server):
    client = httpclient.InferenceServerClient(server.http_url)
    fd = os.open(_shm(server, "oi_out_region"), os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, REGION_BYTES)  # sparse, as tritonclient's create_shared_memory_region makes it
    client.register_system_shared_memory("out", "/oi_out_region", REGION_BYTES)
    filler = os.open(_shm(server, "filler"), os.O_CREAT | os.O_RDWR, 0o600)
    free = os.statvfs(_shm(server, "")).f_bavail * os.statvfs(_shm(server, "")).f_frsize
    os.posix_fallocate(filler, 0, free)  # /dev/shm is full now
    values = np.arange(REGION_BYTES // 4, dtype=np.float32).reshape(1, -1)
    with pytest.raises(InferenceServerException) as error:
        _infer_into_region(client, values)
    assert error.value.status() == "400"
    assert "shared memory region 'out' cannot hold" in error.value.message()
    assert server.process.poll() is None
    os.close(filler)
    os.unlink(_shm(server, "filler"))  # room again: the same request now runs
    _infer_into_region(client, values)
    with mmap.mmap(fd, REGION_BYTES) as region:
        np.testing.assert_array_equal(np.frombuffer(region, np.float32).reshape(1, -1), values)
        del region
    os.close(fd)
    client.unregister_system_shared_memory("out")
    os.unlink(_shm(server, "oi_out_region"))
