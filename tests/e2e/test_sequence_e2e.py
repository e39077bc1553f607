"""The sequence extension and the sequence batcher, end to end over HTTP and gRPC.

An accumulator model keeps its running sum in implicit state (the server carries STATE_OUT
of one request into STATE_IN of the next) and echoes the control tensors and the
correlation id / flags the Python backend reports, so every test reads what the model saw.
"""

from __future__ import annotations

import json
import queue
import time
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.helpers import Server, write_model

CONFIG = """
backend: "python"
max_batch_size: 2
input {{ name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] }}
output {{ name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }}
output {{ name: "START_SEEN" data_type: TYPE_INT32 dims: [ 1 ] }}
output {{ name: "END_SEEN" data_type: TYPE_INT32 dims: [ 1 ] }}
output {{ name: "READY_SEEN" data_type: TYPE_INT32 dims: [ 1 ] }}
output {{ name: "CORRID_SEEN" data_type: {corrid_type} dims: [ 1 ] }}
output {{ name: "FLAGS" data_type: TYPE_INT32 dims: [ 1 ] }}
output {{ name: "BATCH" data_type: TYPE_INT32 dims: [ 1 ] }}
instance_group {{ kind: KIND_CPU count: 1 }}
sequence_batching {{
  max_sequence_idle_microseconds: {idle}
  {strategy}
  control_input [
    {{ name: "START" control [ {{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "END" control [ {{ kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "READY" control [ {{ kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "CORRID" control [ {{ kind: CONTROL_SEQUENCE_CORRID data_type: {corrid_type} }} ] }}
  ]
  state [
    {{ input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ]
       initial_state: {{ data_type: TYPE_INT32 dims: [ 1 ] zero_data: true name: "zero" }} }}
  ]
}}
"""

MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


def _get(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy()


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            total = _get(request, "STATE_IN") + _get(request, "INPUT")
            corrid = _get(request, "CORRID")
            if corrid.dtype == np.object_ and request.correlation_id() != corrid.reshape(-1)[0].decode():
                raise ValueError("correlation_id() does not match the CORRID tensor")
            if corrid.dtype != np.object_ and request.correlation_id() != int(corrid.reshape(-1)[0]):
                raise ValueError("correlation_id() does not match the CORRID tensor")
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT", total),
                pb_utils.Tensor("STATE_OUT", total),
                pb_utils.Tensor("START_SEEN", _get(request, "START")),
                pb_utils.Tensor("END_SEEN", _get(request, "END")),
                pb_utils.Tensor("READY_SEEN", _get(request, "READY")),
                pb_utils.Tensor("CORRID_SEEN", corrid),
                pb_utils.Tensor("FLAGS", np.array([[request.flags()]], np.int32)),
                pb_utils.Tensor("BATCH", np.array([[len(requests)]], np.int32)),
            ]))
        return responses
"""

MODELS = {
    "accumulate": {"corrid_type": "TYPE_UINT64", "idle": 30_000_000, "strategy": "direct { }"},
    "accumulate_str": {
        "corrid_type": "TYPE_STRING",
        "idle": 30_000_000,
        "strategy": "oldest { max_candidate_sequences: 4 }",
    },
    # Waits up to 5 s for two sequences, so two sequences in step always share each execute.
    "paired": {
        "corrid_type": "TYPE_UINT64",
        "idle": 30_000_000,
        "strategy": "oldest { max_candidate_sequences: 4 preferred_batch_size: [ 2 ] "
        "max_queue_delay_microseconds: 5000000 }",
    },
    "short_idle": {"corrid_type": "TYPE_UINT64", "idle": 300_000, "strategy": ""},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("sequence_repo")
    for name, fields in MODELS.items():
        write_model(repo, name, CONFIG.format(**fields), MODEL)
    server = Server(repo).start(wait_for="ready")
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def http(server):
    return httpclient.InferenceServerClient(server.http_url)


@pytest.fixture(scope="module")
def grpc(server):
    client = grpcclient.InferenceServerClient(server.grpc_url)
    yield client
    client.close()


def _inputs(module, value: int, rows: int = 1):
    tensor = module.InferInput("INPUT", [rows, 1], "INT32")
    tensor.set_data_from_numpy(np.full((rows, 1), value, np.int32))
    return [tensor]


def _scalar(result, name):
    return result.as_numpy(name).reshape(-1)[0]


MISSING_START = (
    "inference request for sequence {sid} to model '{model}' must specify the START flag on the "
    "first request of the sequence"
)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_sequence_keeps_state_and_sees_its_controls(http, grpc, protocol):
    client, module = (http, httpclient) if protocol == "http" else (grpc, grpcclient)
    sid = 1001 if protocol == "http" else 1002
    steps = [(3, True, False), (4, False, False), (5, False, True)]
    results = [
        client.infer("accumulate", _inputs(module, v), sequence_id=sid, sequence_start=s, sequence_end=e)
        for v, s, e in steps
    ]
    assert [_scalar(r, "OUTPUT") for r in results] == [3, 7, 12]
    assert [_scalar(r, "START_SEEN") for r in results] == [1, 0, 0]
    assert [_scalar(r, "END_SEEN") for r in results] == [0, 0, 1]
    assert [_scalar(r, "READY_SEEN") for r in results] == [1, 1, 1]
    assert [int(_scalar(r, "CORRID_SEEN")) for r in results] == [sid] * 3
    assert [_scalar(r, "FLAGS") for r in results] == [1, 0, 2]  # pb_utils flags(): START=1, END=2
    assert results[0].get_output("STATE_OUT") is None  # state stays inside the server
    # the sequence has ended; continuing it without START is Triton's INVALID_ARG
    with pytest.raises(InferenceServerException) as info:
        client.infer("accumulate", _inputs(module, 1), sequence_id=sid)
    assert info.value.message() == MISSING_START.format(sid=sid, model="accumulate")
    assert info.value.status() == ("400" if protocol == "http" else "StatusCode.INVALID_ARGUMENT")


def test_control_and_state_tensors_are_not_client_inputs(http):
    meta = http.get_model_metadata("accumulate")
    assert [t["name"] for t in meta["inputs"]] == ["INPUT"]
    assert "STATE_OUT" not in [t["name"] for t in meta["outputs"]]
    config = http.get_model_config("accumulate")
    assert config["sequence_batching"]["state"][0]["input_name"] == "STATE_IN"
    state = httpclient.InferInput("STATE_IN", [1, 1], "INT32")
    state.set_data_from_numpy(np.zeros((1, 1), np.int32))
    # beside the model's input: one input too many, which Triton counts before it reads names
    with pytest.raises(InferenceServerException, match="expected 1 inputs but got 2 inputs for model 'accumulate'"):
        http.infer("accumulate", _inputs(httpclient, 1) + [state], sequence_id=5, sequence_start=True)
    with pytest.raises(InferenceServerException, match="unexpected inference input 'STATE_IN'"):
        http.infer("accumulate", [state], sequence_id=5, sequence_start=True)


def test_grpc_stream_interleaves_sequences_in_order(grpc):
    answers: queue.Queue = queue.Queue()
    grpc.start_stream(callback=lambda result, error: answers.put(error or result))
    try:
        plan = [(2001, 1), (2002, 10), (2001, 2), (2002, 20), (2001, 3), (2002, 30)]
        seen = {2001: 0, 2002: 0}
        for index, (sid, value) in enumerate(plan):
            seen[sid] += 1
            grpc.async_stream_infer(
                "accumulate", _inputs(grpcclient, value), request_id=f"{sid}-{seen[sid]}",
                sequence_id=sid, sequence_start=seen[sid] == 1, sequence_end=seen[sid] == 3,
            )
        got = {}
        for _ in plan:
            result = answers.get(timeout=60)
            assert not isinstance(result, Exception), result
            got[result.get_response().id] = int(_scalar(result, "OUTPUT"))
    finally:
        grpc.stop_stream()
    assert got == {"2001-1": 1, "2001-2": 3, "2001-3": 6, "2002-1": 10, "2002-2": 30, "2002-3": 60}


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_string_sequence_ids(http, grpc, protocol):
    client, module = (http, httpclient) if protocol == "http" else (grpc, grpcclient)
    sid = f"user-{protocol}"
    first = client.infer("accumulate_str", _inputs(module, 2), sequence_id=sid, sequence_start=True)
    last = client.infer("accumulate_str", _inputs(module, 5), sequence_id=sid, sequence_end=True)
    assert _scalar(first, "CORRID_SEEN") == sid.encode()
    assert _scalar(last, "OUTPUT") == 7
    with pytest.raises(InferenceServerException) as info:
        client.infer("accumulate_str", _inputs(module, 1), sequence_id=sid)
    assert info.value.message() == MISSING_START.format(sid=sid, model="accumulate_str")


def test_oldest_strategy_batches_across_sequences(grpc):
    answers: queue.Queue = queue.Queue()
    grpc.start_stream(callback=lambda result, error: answers.put(error or result))
    try:
        for step in range(3):
            for sid in (3001, 3002):
                grpc.async_stream_infer(
                    "paired", _inputs(grpcclient, sid - 3000), request_id=f"{sid}-{step}",
                    sequence_id=sid, sequence_start=step == 0, sequence_end=step == 2,
                )
            for _ in range(2):
                result = answers.get(timeout=60)
                assert not isinstance(result, Exception), result
                assert _scalar(result, "BATCH") == 2  # one execute held a request of each sequence
                sid = int(result.get_response().id.split("-")[0])
                assert _scalar(result, "OUTPUT") == (sid - 3000) * (step + 1)
    finally:
        grpc.stop_stream()
    stats = grpc.get_inference_statistics("paired", as_json=True)["model_stats"][0]
    assert int(stats["execution_count"]) == 3 and int(stats["inference_count"]) == 6


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_sequence_request_errors(http, grpc, protocol):
    client, module = (http, httpclient) if protocol == "http" else (grpc, grpcclient)
    with pytest.raises(InferenceServerException) as info:
        client.infer("accumulate", _inputs(module, 1))
    assert info.value.message() == (
        "inference request to model 'accumulate' must specify a non-zero or non-empty correlation ID"
    )
    with pytest.raises(InferenceServerException) as info:
        client.infer("accumulate", _inputs(module, 1, rows=2), sequence_id=77, sequence_start=True)
    assert info.value.message() == (
        "inference request to model 'accumulate' must specify batch-size 1 due to requirements of "
        "sequence batcher"
    )
    with pytest.raises(InferenceServerException) as info:
        client.infer("accumulate", _inputs(module, 1), sequence_id="text", sequence_start=True)
    assert "expects a unsigned integer correlation ID" in info.value.message()
    # and the server still serves that model
    result = client.infer("accumulate", _inputs(module, 4), sequence_id=78, sequence_start=True, sequence_end=True)
    assert _scalar(result, "OUTPUT") == 4


def test_idle_sequence_expires(http):
    http.infer("short_idle", _inputs(httpclient, 1), sequence_id=4001, sequence_start=True)
    time.sleep(1.0)  # max_sequence_idle_microseconds is 300 ms
    with pytest.raises(InferenceServerException) as info:
        http.infer("short_idle", _inputs(httpclient, 1), sequence_id=4001)
    assert info.value.message() == MISSING_START.format(sid=4001, model="short_idle")
    restarted = http.infer("short_idle", _inputs(httpclient, 6), sequence_id=4001, sequence_start=True)
    assert _scalar(restarted, "OUTPUT") == 6  # a new sequence starts from the initial state


def _post(server: Server, model: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"http://{server.http_url}/v2/models/{model}/infer",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json; charset=utf-8"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _flink_body(rid: str, value: int, **parameters) -> dict:
    """What Flink's Java Triton provider sends: the sequence id in the top-level `id`."""
    body = {"id": rid, "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": [value]}]}
    if parameters:
        body["parameters"] = parameters
    return body


def _output(doc: dict, name: str):
    return next(o["data"][0] for o in doc["outputs"] if o["name"] == name)


@pytest.mark.parametrize("model, rid", [("accumulate", "5005"), ("accumulate_str", "flink-seq-0-1")])
def test_top_level_id_is_the_sequence_id_without_the_parameter(server, model, rid):
    status, doc = _post(server, model, _flink_body(rid, 2, sequence_start=True))
    assert status == 200, doc
    assert doc["id"] == rid
    assert _output(doc, "CORRID_SEEN") == (int(rid) if rid.isdigit() else rid)
    status, doc = _post(server, model, _flink_body(rid, 3))  # no parameters at all
    assert status == 200 and _output(doc, "OUTPUT") == 5
    status, doc = _post(server, model, _flink_body(rid, 4, sequence_end=True))
    assert status == 200 and _output(doc, "OUTPUT") == 9 and _output(doc, "END_SEEN") == 1
    status, doc = _post(server, model, _flink_body(rid, 1))
    assert status == 400
    assert doc["error"] == MISSING_START.format(sid=rid, model=model)
