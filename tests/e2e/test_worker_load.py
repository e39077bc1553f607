"""Under concurrent load one side of the crossing to a worker polls: the server's loop for
requests it carries alone, the worker for gRPC calls (`core.load`). A real server and worker,
called in process so the crossing's state can be read."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import numpy as np
import pytest

from openinfer.backends.registry import BackendRegistry
from openinfer.core import load
from openinfer.core.protocols import Protocol
from openinfer.core.server import InferenceServer, ServerOptions
from openinfer.core.types import InferRequest, Tensor

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "model_repository" / "identity_fp32"


@pytest.fixture
async def server(tmp_path, monkeypatch):
    # A window longer than any run of the test, so what it checks never depends on the machine's speed.
    monkeypatch.setattr(load, "OVERLAP_WINDOW_NS", 600 * 10**9)
    monkeypatch.setattr(load, "LOAD", load.Load())  # this test's load, not the process's so far
    monkeypatch.setattr("openinfer.core.server.LOAD", load.LOAD)
    monkeypatch.setattr("openinfer.backends.python.instance.LOAD", load.LOAD)
    shutil.copytree(EXAMPLE, tmp_path / "identity_fp32")
    running = InferenceServer(ServerOptions([tmp_path]), BackendRegistry())
    await running.start()
    yield running
    await running.stop()


async def _call(server: InferenceServer, value: float, protocol: Protocol | None) -> None:
    data = np.full((1, 16), value, np.float32)
    request = InferRequest(model_name="identity_fp32", inputs=[Tensor("INPUT0", "FP32", (1, 16), data)])
    response = await server.infer(request, protocol=protocol)
    assert response.error is None
    np.testing.assert_array_equal(response.outputs[0].data, data)


def _worker(server: InferenceServer):
    (instance,) = server.repository.get("identity_fp32").instances
    return instance.worker


@pytest.mark.parametrize(
    ("protocol", "worker_sleeps"), [(Protocol.HTTP, True), (None, True), (Protocol.GRPC, False)],
    ids=["http", "in-process", "grpc"],
)
async def test_concurrent_requests_decide_which_side_polls(server, protocol, worker_sleeps):
    await _call(server, -1.0, protocol)  # alone: no load, so the worker may poll
    worker = _worker(server)
    assert not worker.to_worker.told_to_sleep()
    await asyncio.gather(*(_call(server, float(i), protocol) for i in range(32)))
    assert worker.to_worker.told_to_sleep() is worker_sleeps
    assert load.LOAD.who_polls() == (worker_sleeps, not worker_sleeps)  # (the loop, the worker)


async def test_a_lone_request_after_the_load_lets_both_sides_poll_again(server, monkeypatch):
    await asyncio.gather(*(_call(server, float(i), Protocol.HTTP) for i in range(32)))
    assert _worker(server).to_worker.told_to_sleep()
    monkeypatch.setattr(load, "OVERLAP_WINDOW_NS", 0)
    await asyncio.gather(*(_call(server, float(i), Protocol.HTTP) for i in range(2)))  # the window closes at once
    await _call(server, 7.0, Protocol.HTTP)
    assert not _worker(server).to_worker.told_to_sleep()
