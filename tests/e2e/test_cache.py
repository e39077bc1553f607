"""The response cache end to end: hits, misses, keys, eviction, statistics and metrics."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.helpers import ROOT, Server, write_model

CACHE_BYTES = 1_048_576

# OUT = 2 * IN; CALLS = how many times this process has executed a request (so hits show).
COUNTED = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.calls = 0

    def execute(self, requests):
        out = []
        for request in requests:
            self.calls += 1
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            out.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", x * 2),
                pb_utils.Tensor("CALLS", np.array([self.calls], dtype=np.int64)),
            ]))
        return out
'''

CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ -1, -1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ -1, -1 ] }}, {{ name: "CALLS" data_type: TYPE_INT64 dims: [ 1 ] }} ]
{extra}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = tmp_path_factory.mktemp("cache_repo")
    write_model(repo, "counted", CONFIG.format(name="counted", extra="response_cache { enable: true }"), COUNTED)
    write_model(repo, "uncached", CONFIG.format(name="uncached", extra=""), COUNTED)
    srv = Server(repo, ["--cache-config", f"local,size={CACHE_BYTES}"]).start(wait_for="ready")
    yield srv
    assert srv.stop() == 0, srv.log()


def infer(server, model: str, values, outputs=None, protocol: str = "http"):
    data = np.atleast_2d(np.asarray(values, dtype=np.float32))
    module = httpclient if protocol == "http" else grpcclient
    url = server.http_url if protocol == "http" else server.grpc_url
    tensor = module.InferInput("IN", list(data.shape), "FP32")
    tensor.set_data_from_numpy(data)
    wanted = [module.InferRequestedOutput(name) for name in outputs] if outputs else None
    return module.InferenceServerClient(url).infer(model, [tensor], outputs=wanted)


def calls(result) -> int:
    return int(result.as_numpy("CALLS")[0])


def stats(server, model: str) -> dict:
    return httpclient.InferenceServerClient(server.http_url).get_inference_statistics(model)["model_stats"][0]


def test_identical_requests_are_answered_from_the_cache(server):
    before = stats(server, "counted")
    first = infer(server, "counted", [1, 2, 3])
    again = infer(server, "counted", [1, 2, 3])
    over_grpc = infer(server, "counted", [1, 2, 3], protocol="grpc")
    other = infer(server, "counted", [1, 2, 4])
    np.testing.assert_array_equal(again.as_numpy("OUT"), [[2, 4, 6]])
    assert calls(again) == calls(over_grpc) == calls(first)  # the model did not run again
    assert calls(other) == calls(first) + 1
    after = stats(server, "counted")
    delta = {
        key: after["inference_stats"][key]["count"] - before["inference_stats"][key]["count"]
        for key in ("success", "queue", "compute_infer", "cache_hit", "cache_miss")
    }
    # Triton's accounting: hits count as successes and in the queue, never as compute.
    assert delta == {"success": 4, "queue": 4, "compute_infer": 2, "cache_hit": 2, "cache_miss": 2}
    assert after["inference_count"] - before["inference_count"] == 2
    assert after["execution_count"] - before["execution_count"] == 2
    assert after["inference_stats"]["cache_hit"]["ns"] > 0


def test_requested_outputs_are_part_of_the_key(server):
    everything = infer(server, "counted", [7, 7])
    only_out = infer(server, "counted", [7, 7], outputs=["OUT"])
    assert only_out.as_numpy("CALLS") is None
    np.testing.assert_array_equal(only_out.as_numpy("OUT"), [[14, 14]])
    hits = stats(server, "counted")["inference_stats"]["cache_hit"]["count"]
    infer(server, "counted", [7, 7], outputs=["OUT"])
    assert stats(server, "counted")["inference_stats"]["cache_hit"]["count"] == hits + 1
    assert calls(infer(server, "counted", [7, 7])) == calls(everything)


def test_the_shape_is_part_of_the_key(server):
    row = infer(server, "counted", [[5, 5, 5, 5]])
    square = infer(server, "counted", [[5, 5], [5, 5]])  # same bytes, another shape
    assert calls(square) == calls(row) + 1
    assert square.as_numpy("OUT").shape == (2, 2)


def test_models_without_response_cache_always_run(server):
    first = calls(infer(server, "uncached", [1, 2, 3]))
    assert calls(infer(server, "uncached", [1, 2, 3])) == first + 1
    inference = stats(server, "uncached")["inference_stats"]
    assert inference["cache_hit"]["count"] == inference["cache_miss"]["count"] == 0


def test_least_recently_used_entries_are_evicted(server):
    # Each response holds 4 * 100,000 bytes: two fit in the 1 MiB cache, three do not.
    big = [np.full(100_000, value, dtype=np.float32) for value in (11, 12, 13)]
    first = calls(infer(server, "counted", big[0]))
    infer(server, "counted", big[1])
    infer(server, "counted", big[0])  # a hit: big[0] is now the most recently used
    third = calls(infer(server, "counted", big[2]))  # evicts big[1]
    assert calls(infer(server, "counted", big[0])) == first  # still cached
    assert calls(infer(server, "counted", big[2])) == third  # still cached
    assert calls(infer(server, "counted", big[1])) == third + 1  # evicted, so it ran again


def test_metrics_report_hits_and_misses_per_model(server):
    inference = stats(server, "counted")["inference_stats"]
    with urllib.request.urlopen(server.metrics_url, timeout=10) as reply:
        text = reply.read().decode()
    assert f'nv_cache_num_hits_per_model{{model="counted",version="1"}} {inference["cache_hit"]["count"]}' in text
    assert f'nv_cache_num_misses_per_model{{model="counted",version="1"}} {inference["cache_miss"]["count"]}' in text
    assert 'nv_cache_num_hits_per_model{model="uncached"' not in text


@pytest.mark.parametrize(
    "spec, message",
    [
        ("local", "expected <cache>,<key>=<value>"),
        ("redis,host=x", "unsupported cache 'redis'"),
        ("local,size=lots", "invalid 'local' cache size 'lots'"),
    ],
)
def test_bad_cache_config_stops_the_server_with_a_reason(tmp_path, spec, message):
    done = subprocess.run(
        [sys.executable, "-m", "openinfer", "serve", "--model-repository", str(tmp_path), "--cache-config", spec],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode != 0
    assert message in done.stderr
