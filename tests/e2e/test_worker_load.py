"""How the crossing to a worker behaves under load (`core.scheduling.overlap`): a lone request goes
at once and both sides may poll; requests in flight together are gathered into the loop's
writes, queue in the worker, and nobody polls. A real server and worker in this process, so the
crossing's state can be read, called directly and through the gRPC frontend by tritonclient."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc.aio as grpcclient

from openinfer.backends.python.wire import Execute
from openinfer.backends.registry import BackendRegistry
from openinfer.core.scheduling import overlap
from openinfer.core.server import InferenceServer, ServerOptions
from openinfer.core.types import InferRequest, Tensor
from openinfer.frontends.access import AccessPolicy
from openinfer.frontends.grpc.service import Binding, start_grpc
from tests.helpers import free_port, write_model

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "model_repository" / "identity_fp32"

# Each execute takes a while: several queued in the worker outlast the timeout together.
SLOW = '''
import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(0.3)
        return [pb_utils.InferenceResponse([pb_utils.get_input_tensor_by_name(r, "INPUT0")]) for r in requests]
'''

IDENTITY_IO = '''
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1, 16 ] } ]
output [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1, 16 ] } ]
'''
SLOW_CONFIG = IDENTITY_IO + 'parameters { key: "execute_timeout_secs" value { string_value: "1" } }\n'

# Answers only once the file its config names exists: a request held in flight as long as a test
# needs, whatever the machine's speed.
GATED = '''
import json
import os
import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.gate = json.loads(args["model_config"])["parameters"]["gate"]["string_value"]

    def execute(self, requests):
        while not os.path.exists(self.gate):
            time.sleep(0.01)
        return [pb_utils.InferenceResponse([pb_utils.get_input_tensor_by_name(r, "INPUT0")]) for r in requests]
'''


@pytest.fixture
async def server(tmp_path, monkeypatch):
    # A window longer than any run of the test, so what it checks never depends on the machine's speed.
    monkeypatch.setattr(overlap, "OVERLAP_WINDOW_NS", 600 * 10**9)
    monkeypatch.setattr(overlap.LOAD, "_overlap_until", 0)  # this test's load, not the process's so far
    shutil.copytree(EXAMPLE, tmp_path / "identity_fp32")
    write_model(tmp_path, "slow", SLOW_CONFIG, SLOW)
    gated_config = IDENTITY_IO + f'parameters {{ key: "gate" value {{ string_value: "{tmp_path / "open"}" }} }}\n'
    write_model(tmp_path, "gated", gated_config, GATED)
    running = InferenceServer(ServerOptions([tmp_path]), BackendRegistry())
    await running.start()
    yield running
    await running.stop()


async def _call(server: InferenceServer, value: float, model: str = "identity_fp32") -> None:
    data = np.full((1, 16), value, np.float32)
    request = InferRequest(model_name=model, inputs=[Tensor("INPUT0", "FP32", (1, 16), data)])
    response = await server.infer(request)
    assert response.error is None
    np.testing.assert_array_equal(response.outputs[0].data, data)


def _instance(server: InferenceServer, model: str = "identity_fp32"):
    (instance,) = server.repository.get(model).instances
    return instance


async def test_a_lone_request_goes_at_once_and_lets_the_worker_poll(server):
    await _call(server, -1.0)
    worker = _instance(server).worker
    assert not overlap.LOAD.concurrent()
    assert not worker.to_worker.told_to_sleep()
    worker.send_batch(Execute(-1, []))  # an empty batch: the worker answers it with nothing
    assert worker._outbox == []  # written, not held for the end of the turn


async def test_requests_in_flight_together_are_gathered_and_nobody_polls(server):
    await asyncio.gather(*(_call(server, float(i)) for i in range(32)))
    worker = _instance(server).worker
    assert overlap.LOAD.concurrent()
    assert worker.to_worker.told_to_sleep()
    worker.send_batch(Execute(-1, []))
    worker.send_batch(Execute(-2, []))
    assert len(worker._outbox) == 2  # both wait, to go out in one write
    # Written once a turn of the loop finds nothing else to do, or after `gather.MAX_HOLD_NS`
    # (a busy machine may make every turn look busy): either way within a few milliseconds.
    for _ in range(1_000_000):
        if not worker._outbox:
            break
        await asyncio.sleep(0)
    assert worker._outbox == []


async def test_a_lone_request_after_the_load_lets_both_sides_poll_again(server, monkeypatch):
    await asyncio.gather(*(_call(server, float(i)) for i in range(32)))
    assert _instance(server).worker.to_worker.told_to_sleep()
    monkeypatch.setattr(overlap, "OVERLAP_WINDOW_NS", 0)
    await asyncio.gather(*(_call(server, float(i)) for i in range(2)))  # the window closes at once
    await _call(server, 7.0)
    assert not _instance(server).worker.to_worker.told_to_sleep()


async def test_the_execute_timeout_counts_from_when_the_worker_starts_a_queued_batch(server):
    # Six batches of 0.3 s queue in the one worker: the last starts 1.5 s after it was sent,
    # past the 1 s timeout, and still runs to its answer.
    assert _instance(server, "slow").pipeline_depth >= 6
    await asyncio.gather(*(_call(server, float(i), "slow") for i in range(6)))
    assert not _instance(server, "slow").worker.dead


async def test_a_batch_queued_in_the_worker_counts_its_wait_as_queue_time(server):
    # Four batches of 0.3 s sent together: the worker begins each once those before it are done,
    # so together they waited at least (0 + 1 + 2 + 3) x 0.3 s, which Triton shows as queue time.
    await asyncio.gather(*(_call(server, float(i), "slow") for i in range(4)))
    (stats,) = server.statistics("slow")
    queue, infer = stats.inference.queue, stats.inference.compute_infer
    assert queue.count == 4 and queue.ns >= 6 * 300_000_000
    assert infer.count == 4 and infer.ns >= 4 * 300_000_000  # the wait is not compute time


def _grpc_inputs(value: float) -> list[grpcclient.InferInput]:
    tensor = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
    tensor.set_data_from_numpy(np.full((1, 16), value, np.float32))
    return [tensor]


@pytest.mark.parametrize("stream", [False, True], ids=["ModelInfer", "ModelStreamInfer"])
async def test_grpc_calls_from_a_real_client_are_load_like_any_other(server, stream, tmp_path):
    port = free_port()
    frontend = await start_grpc(server, Binding(f"127.0.0.1:{port}"), AccessPolicy())
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
    held = None
    try:
        await _call(server, -1.0)  # lone: both may poll
        assert not _instance(server).worker.to_worker.told_to_sleep()
        # A request held in flight throughout: every call below enters beside it.
        held = asyncio.ensure_future(_call(server, -2.0, "gated"))
        while server.inflight.count == 0:
            await asyncio.sleep(0)
        if stream:
            async def calls():
                for i in range(32):
                    yield {"model_name": "identity_fp32", "inputs": _grpc_inputs(float(i)), "request_id": str(i)}

            answers = [result async for result, error in client.stream_infer(calls()) if error is None]
        else:
            answers = await asyncio.gather(*(client.infer("identity_fp32", _grpc_inputs(float(i))) for i in range(32)))
        assert sorted(float(a.as_numpy("OUTPUT0")[0, 0]) for a in answers) == [float(i) for i in range(32)]
        assert overlap.LOAD.concurrent()
        assert _instance(server).worker.to_worker.told_to_sleep()
    finally:
        (tmp_path / "open").touch()
        if held is not None:
            await held
        await client.close()
        await frontend.stop(None)
