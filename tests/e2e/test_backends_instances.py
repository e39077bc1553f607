"""Instance groups and model warm-up, end to end on Python models."""

from __future__ import annotations

import json
import struct
import threading
import time

import numpy as np
import pytest
import tritonclient.http as httpclient

from openinfer.core.memory.gpus import visible_gpus
from tests.helpers import Server, write_model

# Remembers every request it executed (warm-up included) and reports it with its instance.
RECORDER = '''
import json, time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.instance = args["model_instance_name"]
        self.seen = []

    def execute(self, requests):
        out = []
        for request in requests:
            inputs = {t.name(): t.as_numpy() for t in request.inputs()}
            if "SLEEP" in inputs:
                time.sleep(float(inputs["SLEEP"].reshape(-1)[0]))
            self.seen.append({
                "id": request.request_id(),
                "shapes": {n: list(a.shape) for n, a in inputs.items()},
                "values": {n: [x.decode() if isinstance(x, bytes) else float(x) for x in a.reshape(-1)]
                           for n, a in inputs.items()},
            })
            report = json.dumps({"instance": self.instance, "seen": self.seen[:-1]}).encode()
            batch = next(iter(inputs.values())).shape[0]
            out.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("REPORT", np.array([[report]] * batch, dtype=np.object_))]))
        return out
'''

WARMED = """
name: "warmed"
backend: "python"
max_batch_size: 4
input [
  { name: "Z" data_type: TYPE_FP32 dims: [ 3 ] },
  { name: "R" data_type: TYPE_INT32 dims: [ 2 ] },
  { name: "F" data_type: TYPE_STRING dims: [ 2 ] }
]
output [ { name: "REPORT" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
model_warmup [
  {
    name: "mixed"
    batch_size: 2
    count: 2
    inputs { key: "Z" value: { data_type: TYPE_FP32 dims: [ 3 ] zero_data: true } }
    inputs { key: "R" value: { data_type: TYPE_INT32 dims: [ 2 ] random_data: true } }
    inputs { key: "F" value: { data_type: TYPE_STRING dims: [ 2 ] input_data_file: "words" } }
  }
]
"""

GROUPED = """
name: "grouped"
backend: "python"
max_batch_size: 0
input [ { name: "SLEEP" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "REPORT" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [
  { name: "pair" count: 2 kind: KIND_CPU },
  { count: 1 kind: KIND_AUTO }
]
"""

SIMPLE_IO = """
backend: "python"
max_batch_size: 0
input [ { name: "SLEEP" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "REPORT" data_type: TYPE_STRING dims: [ 1 ] } ]
"""

# Parks a request (value 1) until the test drops a `release` file; reports its process.
PARKER = '''
import json, os, time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.dir = json.loads(args["model_config"])["parameters"]["dir"]["string_value"]

    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "SLEEP").as_numpy()
            if x[0] == 1:
                open(os.path.join(self.dir, f"parked.{os.getpid()}"), "w").close()
                deadline = time.monotonic() + 60
                while not os.path.exists(os.path.join(self.dir, "release")) and time.monotonic() < deadline:
                    time.sleep(0.01)
            report = json.dumps({"instance": str(os.getpid()), "seen": []}).encode()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("REPORT", np.array([report], dtype=np.object_))]))
        return out
'''

RAISES_IN_WARMUP = '''
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        raise ValueError("not ready for that sample")
'''


# Declares no inputs; answers with what every earlier request (warm-up included) brought it.
UNDECLARED = """
name: "undeclared"
backend: "python"
max_batch_size: 0
output [ { name: "REPORT" data_type: TYPE_STRING dims: [ 1 ] } ]
model_warmup [
  {
    name: "extra"
    batch_size: 1
    inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } }
    inputs { key: "INPUT1" value: { data_type: TYPE_INT32 dims: [ 2 ] random_data: true } }
  }
]
"""

HISTORY = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.seen = []

    def execute(self, requests):
        out = []
        for request in requests:
            report = json.dumps(self.seen).encode()
            self.seen.append({"id": request.request_id(),
                              "inputs": {t.name(): [t.as_numpy().dtype.name, list(t.as_numpy().shape)]
                                         for t in request.inputs()}})
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("REPORT", np.array([report], dtype=np.object_))]))
        return out
'''

# Names its declared input in the wrong case: the sample lacks the input (exact names, as Triton).
WRONG_CASE = """
name: "wrong_case_sample"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "REPORT" data_type: TYPE_STRING dims: [ 1 ] } ]
model_warmup [ { name: "s" batch_size: 1 inputs { key: "input0" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]
"""

# Declares INPUT0 as FP32 and warms it up as INT32.
WRONG_TYPE = """
name: "wrong_type_sample"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "REPORT" data_type: TYPE_STRING dims: [ 1 ] } ]
model_warmup [ { name: "s" batch_size: 1 inputs { key: "INPUT0" value: { data_type: TYPE_INT32 dims: [ 4 ] zero_data: true } } } ]
"""

# A sample of batch size 0 (the field's default) is skipped: this one would fail the load.
SKIPPED = """
name: "skipped_sample"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "REPORT" data_type: TYPE_STRING dims: [ 1 ] } ]
model_warmup [ { name: "s" inputs { key: "INPUT0" value: { data_type: TYPE_INT32 dims: [ 4 ] zero_data: true } } } ]
"""


def strings(*items: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(item)) + item for item in items)


@pytest.fixture(scope="module")
def park(tmp_path_factory):
    return tmp_path_factory.mktemp("park")


@pytest.fixture(scope="module")
def server(tmp_path_factory, park):
    repo = tmp_path_factory.mktemp("instances_repo")
    write_model(
        repo,
        "parker",
        SIMPLE_IO + f'instance_group [ {{ count: 2 kind: KIND_CPU }} ]\n'
        f'parameters {{ key: "dir" value: {{ string_value: "{park}" }} }}\n',
        PARKER,
    )
    write_model(repo, "warmed", WARMED, RECORDER, files={"warmup/words": strings(b"hi", b"there", b"unused")})
    write_model(repo, "grouped", GROUPED, RECORDER)
    sample = """
    model_warmup [ {{ name: "{name}" batch_size: 1 inputs {{ key: "SLEEP" value: {{ data_type: TYPE_FP32 dims: [ 1 ] {data} }} }} }} ]
    """
    write_model(repo, "no_file", SIMPLE_IO + sample.format(name="missing", data='input_data_file: "nope"'), RECORDER)
    write_model(repo, "short_file", SIMPLE_IO + sample.format(name="short", data='input_data_file: "two"'), RECORDER,
                files={"warmup/two": b"\x00\x00"})
    write_model(repo, "raiser", SIMPLE_IO + sample.format(name="boom", data="zero_data: true"), RAISES_IN_WARMUP)
    write_model(repo, "undeclared", UNDECLARED, HISTORY)
    write_model(repo, "wrong_case_sample", WRONG_CASE, HISTORY)
    write_model(repo, "wrong_type_sample", WRONG_TYPE, HISTORY)
    write_model(repo, "skipped_sample", SKIPPED, HISTORY)
    write_model(repo, "on_gpu", SIMPLE_IO + "instance_group [ { kind: KIND_GPU } ]", RECORDER)
    srv = Server(repo, ["--strict-readiness", "false", "--exit-on-error=false"]).start(wait_for="ready")
    yield srv
    assert srv.stop() == 0, srv.log()


def report(result) -> dict:
    return json.loads(result.as_numpy("REPORT").reshape(-1)[0])


def test_warmup_samples_ran_on_every_instance_before_ready(server):
    client = httpclient.InferenceServerClient(server.http_url, concurrency=4)
    inputs = [
        httpclient.InferInput("Z", [1, 3], "FP32"),
        httpclient.InferInput("R", [1, 2], "INT32"),
        httpclient.InferInput("F", [1, 2], "BYTES"),
    ]
    inputs[0].set_data_from_numpy(np.ones((1, 3), np.float32))
    inputs[1].set_data_from_numpy(np.ones((1, 2), np.int32))
    inputs[2].set_data_from_numpy(np.array([[b"a", b"b"]], dtype=np.object_))
    # Whichever instance answers, its history starts with the warm-up samples.
    pending = [client.async_infer("warmed", inputs, request_id=f"client-{i}") for i in range(4)]
    reports = [report(p.get_result()) for p in pending]
    for seen in (r["seen"] for r in reports):
        warmups = [entry for entry in seen if entry["id"] == ""]  # warm-up requests have no id
        assert len(warmups) == 2  # count: 2
        for entry in warmups:
            assert entry["shapes"] == {"Z": [2, 3], "R": [2, 2], "F": [2, 2]}  # batch_size: 2
            assert entry["values"]["Z"] == [0.0] * 6
            assert entry["values"]["F"] == ["hi", "there", "hi", "there"]
            assert all(-128 <= v <= 127 and v == int(v) for v in entry["values"]["R"])
    stats = client.get_inference_statistics("warmed")["model_stats"][0]
    assert stats["inference_count"] == 4  # warm-up is not counted
    assert stats["inference_stats"]["success"]["count"] == 4


def test_failing_warmup_keeps_the_model_unavailable(server):
    index = {r["name"]: r for r in httpclient.InferenceServerClient(server.http_url).get_model_repository_index()}
    assert index["warmed"]["state"] == "READY"
    assert "failed to run warmup sample 'missing': unable to read warmup data file" in index["no_file"]["reason"]
    assert (
        "failed to run warmup sample 'short': warmup setting expects 4 bytes, but the data provided from two only "
        "has 2 bytes" in index["short_file"]["reason"]
    )
    assert "failed to run warmup sample 'boom'" in index["raiser"]["reason"]
    assert "not ready for that sample" in index["raiser"]["reason"]


def test_warmup_inputs_the_config_does_not_declare_reach_the_model_unchecked(server):
    client = httpclient.InferenceServerClient(server.http_url)
    seen = json.loads(client.infer("undeclared", []).as_numpy("REPORT")[0])
    assert seen == [{"id": "", "inputs": {"INPUT0": ["float32", [4]], "INPUT1": ["int32", [2]]}}]


def test_a_sample_of_batch_size_zero_is_skipped(server):
    client = httpclient.InferenceServerClient(server.http_url)
    tensor = httpclient.InferInput("INPUT0", [4], "FP32")
    tensor.set_data_from_numpy(np.zeros(4, np.float32))
    assert json.loads(client.infer("skipped_sample", [tensor]).as_numpy("REPORT")[0]) == []  # nothing ran before


def test_warmup_samples_are_checked_by_their_declared_names(server):
    index = {r["name"]: r for r in httpclient.InferenceServerClient(server.http_url).get_model_repository_index()}
    assert index["wrong_case_sample"]["state"] == "UNAVAILABLE"
    assert index["wrong_case_sample"]["reason"] == (  # a status, as Triton writes it: its code, then its message
        "Invalid argument: [request id: <id_unknown>] expected 1 inputs but got 0 inputs for model 'wrong_case_sample'. Got input(s) "
        "[], but missing required input(s) ['INPUT0']. Please provide all required input(s).")
    assert index["wrong_type_sample"]["reason"] == (
        "Invalid argument: [request id: <id_unknown>] inference input 'INPUT0' data-type is 'INT32', but model 'wrong_type_sample' "
        "expects 'FP32'")


def test_instance_groups_are_normalised_and_all_serve(server):
    client = httpclient.InferenceServerClient(server.http_url, concurrency=8)
    groups = client.get_model_config("grouped")["instance_group"]
    assert [(g["name"], g["count"], g["kind"]) for g in groups] == [
        ("pair", 2, "KIND_CPU"),
        ("grouped_1", 1, "KIND_GPU" if visible_gpus() else "KIND_CPU"),
    ]
    sleep = httpclient.InferInput("SLEEP", [1], "FP32")
    sleep.set_data_from_numpy(np.array([0.5], np.float32))
    names = {report(p.get_result())["instance"] for p in [client.async_infer("grouped", [sleep]) for _ in range(8)]}
    assert names <= {"pair_0", "pair_1", "grouped_1_0"}
    assert len(names) >= 2  # eight requests at once spread over the free instances


def test_a_busy_instance_is_passed_over_for_a_free_one(server, park):
    """With one instance parked, the next request is answered by the other one meanwhile."""
    parked: dict = {}

    def call(value: float, into: dict) -> None:
        tensor = httpclient.InferInput("SLEEP", [1], "FP32")
        tensor.set_data_from_numpy(np.array([value], np.float32))
        client = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
        into["report"] = report(client.infer("parker", [tensor]))

    thread = threading.Thread(target=call, args=(1, parked))
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not any(p.name.startswith("parked.") for p in park.iterdir()):
            assert time.monotonic() < deadline, "the parked request never started"
            time.sleep(0.01)
        parked_pid = next(p for p in park.iterdir() if p.name.startswith("parked.")).name.split(".")[1]
        free: dict = {}
        call(0, free)  # answered while the other instance is still parked
        assert free["report"]["instance"] != parked_pid
        assert thread.is_alive()
    finally:
        (park / "release").touch()
        thread.join()
    assert parked["report"]["instance"] == parked_pid


def test_gpu_groups_need_a_gpu(server):
    index = {r["name"]: r for r in httpclient.InferenceServerClient(server.http_url).get_model_repository_index()}
    if visible_gpus():
        pytest.skip("this machine has a GPU")
    assert index["on_gpu"]["state"] == "UNAVAILABLE"
    assert "instance group on_gpu_0 of model on_gpu has kind KIND_GPU but no GPUs are available" in index["on_gpu"]["reason"]
