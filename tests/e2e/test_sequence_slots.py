"""The direct sequence batcher keeps each sequence in its slot: row i of every batch an instance
runs is slot i, from START to the sequence's end, and a slot without a request before the last
one that has one is filled with a null request (READY false, CORRID 0), as Triton does. A model
that keeps per-row state (as stateful models written for Triton's direct strategy do) stays
right when sequences end and new ones take their slots."""

from __future__ import annotations

import json
import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.helpers import InProcessServer, write_model

CONFIG = """
backend: "python"
max_batch_size: 4
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "SUM" data_type: TYPE_INT32 dims: [ 1 ] },
         { name: "ROW" data_type: TYPE_INT32 dims: [ 1 ] },
         { name: "NULLS" data_type: TYPE_INT32 dims: [ 1 ] },
         { name: "NULL_CORRIDS" data_type: TYPE_INT64 dims: [ 1 ] } ]
sequence_batching {
  direct { }
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
}
"""

MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


def _value(request, name):
    return int(pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)[0])


class TritonPythonModel:
    def initialize(self, args):
        self.sums = [0, 0, 0, 0]  # one running sum per batch row: the slot's sequence

    def execute(self, requests):
        ready = [_value(r, "READY") for r in requests]
        nulls = ready.count(0)
        null_corrids = sum(_value(r, "CORRID") for r, ok in zip(requests, ready) if not ok)
        responses = []
        for row, (request, ok) in enumerate(zip(requests, ready)):
            if ok:
                if _value(request, "START"):
                    self.sums[row] = 0
                self.sums[row] += _value(request, "INPUT")
            out = lambda name, value, dtype=np.int32: pb_utils.Tensor(name, np.array([[value]], dtype=dtype))
            responses.append(pb_utils.InferenceResponse([
                out("SUM", self.sums[row]), out("ROW", row), out("NULLS", nulls),
                out("NULL_CORRIDS", null_corrids, np.int64)]))
        return responses
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    write_model(repo, "slots", CONFIG, MODEL)
    write_model(repo, "one_slot", CONFIG.replace("max_batch_size: 4", "max_batch_size: 1"), MODEL)
    with InProcessServer(repo) as running:
        yield running


def _step(client, sequence: int, value: int, start: bool = False, end: bool = False, model: str = "slots",
          **options) -> dict[str, int]:
    result = client.infer(model, [_input(value)], sequence_id=sequence, sequence_start=start, sequence_end=end, **options)
    return {name: int(result.as_numpy(name).reshape(-1)[0]) for name in ("SUM", "ROW", "NULLS", "NULL_CORRIDS")}


def test_rows_are_slots_and_empty_slots_get_null_requests(server):
    client = httpclient.InferenceServerClient(server.http_url)
    # Three sequences take slots 0, 1 and 2. Each request comes alone, so the rows before its
    # own are null requests: READY false, CORRID 0.
    assert _step(client, 101, 1, start=True) == {"SUM": 1, "ROW": 0, "NULLS": 0, "NULL_CORRIDS": 0}
    assert _step(client, 102, 10, start=True) == {"SUM": 10, "ROW": 1, "NULLS": 1, "NULL_CORRIDS": 0}
    assert _step(client, 103, 100, start=True) == {"SUM": 100, "ROW": 2, "NULLS": 2, "NULL_CORRIDS": 0}
    assert _step(client, 103, 100) == {"SUM": 200, "ROW": 2, "NULLS": 2, "NULL_CORRIDS": 0}

    # The first ends; a new sequence takes its slot, the others keep theirs and their sums.
    assert _step(client, 101, 1, end=True)["SUM"] == 2
    assert _step(client, 104, 5, start=True) == {"SUM": 5, "ROW": 0, "NULLS": 0, "NULL_CORRIDS": 0}
    assert _step(client, 102, 10) == {"SUM": 20, "ROW": 1, "NULLS": 1, "NULL_CORRIDS": 0}
    assert _step(client, 103, 100, end=True) == {"SUM": 300, "ROW": 2, "NULLS": 2, "NULL_CORRIDS": 0}


def test_null_requests_are_not_counted(server):
    """Statistics count the client's requests: the fillers are executed, never inferences."""
    client = httpclient.InferenceServerClient(server.http_url)

    def stats() -> dict:
        with urllib.request.urlopen(f"http://{server.http_url}/v2/models/slots/stats") as reply:
            return json.loads(reply.read())["model_stats"][0]

    before = stats()
    _step(client, 201, 1, start=True)
    _step(client, 202, 1, start=True)  # row 1, after one null request
    _step(client, 202, 1, end=True)
    _step(client, 201, 1, end=True)
    after = stats()
    assert after["inference_count"] - before["inference_count"] == 4
    assert after["execution_count"] - before["execution_count"] == 4
    assert after["inference_stats"]["success"]["count"] - before["inference_stats"]["success"]["count"] == 4


def test_a_sequence_whose_timeout_runs_out_in_the_backlog_is_rejected(server):
    """One slot, held by a sequence that has not ended: a new sequence waits in the backlog, and
    when the `timeout` of its requests runs out first, all of them fail together (REJECTED).
    One that gets the slot in time runs, whatever its timeout."""
    client = httpclient.InferenceServerClient(server.http_url, concurrency=4)
    assert _step(client, 301, 1, start=True, model="one_slot")["SUM"] == 1
    waiting = client.async_infer(
        "one_slot", [_input(7)], sequence_id=302, sequence_start=True, timeout=200_000)
    with pytest.raises(InferenceServerException) as info:
        waiting.get_result()
    assert info.value.message() == "timeout of the corresponding sequence has been expired"
    assert info.value.status() == "503"
    with pytest.raises(InferenceServerException, match="must specify the START flag"):
        _step(client, 302, 1, model="one_slot")  # forgotten with its requests

    in_time = client.async_infer(
        "one_slot", [_input(5)], sequence_id=303, sequence_start=True, sequence_end=True, timeout=5_000_000)
    assert _step(client, 301, 1, end=True, model="one_slot")["SUM"] == 2  # frees the slot
    assert int(in_time.get_result().as_numpy("SUM").reshape(-1)[0]) == 5


def _input(value: int) -> httpclient.InferInput:
    tensor = httpclient.InferInput("INPUT", [1, 1], "INT32")
    tensor.set_data_from_numpy(np.array([[value]], dtype=np.int32))
    return tensor
