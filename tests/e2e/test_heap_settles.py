"""Loading settles the heap: what is alive once loading ends stays out of the cyclic collector's
full passes (`gc.freeze`), in the server and in each model's worker process, and what a later
load or unload leaves in reference cycles is still collected. A full pass over a server that has
loaded torch walks some 400,000 objects, and every request in flight waits for it."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from openinfer.backends.registry import BackendRegistry
from openinfer.core.memory import heap
from openinfer.core.repository.repository import ControlMode, RepositoryOptions
from openinfer.core.server import InferenceServer, ServerOptions
from openinfer.core.types import InferRequest, Tensor
from tests.helpers import write_model

# Answers how many objects its own process has frozen.
FROZEN_COUNT = '''
import gc
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        count = np.array([gc.get_freeze_count()], np.int64)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("FROZEN", count)]) for _ in requests]
'''

CONFIG = '''
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "FROZEN" data_type: TYPE_INT64 dims: [ 1 ] } ]
'''


class _Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def _thawed():
    yield
    gc.unfreeze()  # the rest of the test session collects as usual


def _frozen(obj: object) -> bool:
    """Frozen objects are in none of the collector's three generations."""
    return gc.is_tracked(obj) and not any(o is obj for o in gc.get_objects())


def test_settling_freezes_what_is_alive_and_the_next_collects_what_died_in_a_cycle():
    cycle = _Cycle()
    alive = weakref.ref(cycle)
    heap.settle()
    assert _frozen(cycle)
    del cycle
    gc.collect()  # a full pass does not look at frozen objects
    assert alive() is not None
    heap.settle()  # thaws first: the cycle is found
    assert alive() is None


async def test_the_server_and_its_workers_freeze_what_loading_left(tmp_path):
    write_model(tmp_path, "frozen", CONFIG, FROZEN_COUNT)
    options = ServerOptions([tmp_path], repository=RepositoryOptions(control_mode=ControlMode.EXPLICIT))
    server = InferenceServer(options, BackendRegistry())
    before_start = []
    await server.start()
    try:
        assert _frozen(before_start)
        before_load = []
        assert not _frozen(before_load)
        await server.load_model("frozen")
        assert _frozen(before_load)
        request = InferRequest(model_name="frozen", inputs=[Tensor("INPUT0", "FP32", (1,), np.zeros(1, np.float32))])
        response = await server.infer(request)
        assert response.error is None
        assert int(response.outputs[0].data[0]) > 1000  # the worker froze numpy, pb_utils and the model
        before_unload = []
        await server.unload_model("frozen")
        assert _frozen(before_unload)
    finally:
        await server.stop()
    assert gc.get_freeze_count() == 0  # stopped: an embedding program's heap is its own again
