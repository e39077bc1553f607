"""Under concurrent load one side of the crossing to a worker polls: the server's loop for
requests it carries alone, the worker for gRPC calls (`core.load`). A real server and worker
in this process, so the crossing's state can be read, called directly and through the gRPC
frontend by tritonclient."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc.aio as grpcclient

from openinfer.backends.registry import BackendRegistry
from openinfer.core import load
from openinfer.core.protocols import Protocol
from openinfer.core.server import InferenceServer, ServerOptions
from openinfer.core.types import InferRequest, Tensor
from openinfer.frontends.access import AccessPolicy
from openinfer.frontends.grpc.service import Binding, start_grpc
from tests.helpers import free_port

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "model_repository" / "identity_fp32"


@pytest.fixture
async def server(tmp_path, monkeypatch):
    # A window longer than any run of the test, so what it checks never depends on the machine's speed.
    monkeypatch.setattr(load, "OVERLAP_WINDOW_NS", 600 * 10**9)
    for deadline in ("_overlap_until", "_threaded_until"):  # this test's load, not the process's so far
        monkeypatch.setattr(load.LOAD, deadline, 0)
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


def _grpc_inputs(value: float) -> list[grpcclient.InferInput]:
    tensor = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
    tensor.set_data_from_numpy(np.full((1, 16), value, np.float32))
    return [tensor]


@pytest.mark.parametrize("stream", [False, True], ids=["ModelInfer", "ModelStreamInfer"])
async def test_grpc_calls_from_a_real_client_keep_the_worker_polling(server, stream):
    port = free_port()
    frontend = await start_grpc(server, Binding(f"127.0.0.1:{port}"), AccessPolicy())
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
    try:
        await _call(server, -1.0, Protocol.HTTP)  # lone: both may poll
        if stream:
            async def calls():
                for i in range(32):
                    yield {"model_name": "identity_fp32", "inputs": _grpc_inputs(float(i)), "request_id": str(i)}

            answers = [result async for result, error in client.stream_infer(calls()) if error is None]
        else:
            answers = await asyncio.gather(*(client.infer("identity_fp32", _grpc_inputs(float(i))) for i in range(32)))
        assert sorted(float(a.as_numpy("OUTPUT0")[0, 0]) for a in answers) == [float(i) for i in range(32)]
        assert not _worker(server).to_worker.told_to_sleep()
        assert load.LOAD.who_polls() == (False, True)
    finally:
        await client.close()
        await frontend.stop(None)
