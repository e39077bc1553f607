"""`--model-load-retry-count`, `--model-load-gpu-limit` and the other tritonserver flags a
deployment may carry: what each does here, refused in tritonserver's words where it refuses."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import tritonclient.http as httpclient

from openinfer.core.config import parse_config_text
from openinfer.core.errors import UnavailableError
from openinfer.core.memory import gpu_limit
from tests.e2e import ext_models
from tests.helpers import ROOT, Server, free_port, write_model

#: Fails its first initialize (it leaves a mark next to itself), succeeds from the second on.
FLAKY = '''
import os
import triton_python_backend_utils as pb_utils

MARK = os.path.join(os.path.dirname(__file__), "tried")


class TritonPythonModel:
    def initialize(self, args):
        if not os.path.exists(MARK):
            open(MARK, "w").close()
            raise pb_utils.TritonModelException("not yet: the first try always fails")

    def execute(self, requests):
        return [pb_utils.InferenceResponse([]) for r in requests]
'''


def _flaky_repo(tmp_path):
    config = ext_models.IDENTITY_CONFIG.format(name="flaky", dtype="TYPE_FP32", max_batch=0)
    write_model(tmp_path, "flaky", config, FLAKY)
    return tmp_path


def _serve_until_exit(repo, *flags: str) -> tuple[int, str]:
    command = [sys.executable, "-m", "openinfer", "serve", "--model-repository", str(repo),
               "--http-port", str(free_port()), "--grpc-port", str(free_port()), "--metrics-port", str(free_port()),
               *flags]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    return result.returncode, result.stdout + result.stderr


def test_without_retries_a_failing_load_stops_the_server(tmp_path):
    code, output = _serve_until_exit(_flaky_repo(tmp_path))
    assert code == 1 and "not yet: the first try always fails" in output


def test_a_retry_loads_a_model_whose_first_try_failed(tmp_path):
    with Server(_flaky_repo(tmp_path), ["--model-load-retry-count=1"]).start(wait_for="ready") as server:
        assert httpclient.InferenceServerClient(server.http_url).is_model_ready("flaky")
        assert "failed to load 'flaky' version 1, trying again" in server.log()


@pytest.mark.parametrize("value, words", [
    ("-1:0.6", "expects device ID >= 0, got -1"),
    ("0:-0.4", "expects limit fraction to be in range [0.0, 1.0], got -0.4"),
    ("0", "requires format <first>:<second>. Found: 0"),
])
def test_a_gpu_limit_out_of_range_is_refused_in_tritons_words(tmp_path, value, words):
    code, output = _serve_until_exit(tmp_path, f"--model-load-gpu-limit={value}")
    assert code == 1 and words in output


def test_a_model_past_its_gpus_limit_is_refused():
    """The check itself, with the device's memory as NVML would report it (no GPU here)."""
    config = parse_config_text('name: "m" instance_group [ { kind: KIND_GPU gpus: [ 1 ] } ]')
    nearly_full = {1: (10, 100)}.get  # 90% used
    gpu_limit.check("m", config, {1: 0.95}, nearly_full)
    gpu_limit.check("m", config, {0: 0.5}, nearly_full)  # a limit for another device
    with pytest.raises(UnavailableError) as info:
        gpu_limit.check("m", config, {1: 0.8}, nearly_full)
    assert info.value.message == "can not create model 'm': memory limit set for GPU 1 has exceeded, " \
        "model loading is rejected."


def test_deployment_flags_tritonserver_takes_are_accepted(tmp_path):
    """A command line written for tritonserver starts; the deprecated cache flag turns the cache on."""
    config = ext_models.IDENTITY_CONFIG.format(name="identity", dtype="TYPE_FP32", max_batch=0)
    write_model(tmp_path, "identity", config + "response_cache { enable: true }\n", ext_models.IDENTITY)
    flags = ["--model-load-gpu-limit=0:0.6", "--response-cache-byte-size=1048576", "--cache-directory=/tmp",
             "--buffer-manager-thread-count=2", "--enable-peer-access=false", "--host-policy=gpu0,numa-node=0",
             "--cuda-virtual-address-size=0:1073741824", "--min-supported-compute-capability=6.0",
             "--grpc-infer-allocation-pool-size=8", "--grpc-max-response-pool-size=16"]
    with Server(tmp_path, flags).start(wait_for="ready") as server:
        client = httpclient.InferenceServerClient(server.http_url)
        tensor = httpclient.InferInput("INPUT0", [2], "FP32")
        tensor.set_data_from_numpy(np.array([1, 2], dtype=np.float32))
        for _ in range(2):
            assert client.infer("identity", [tensor]).as_numpy("OUTPUT0").tolist() == [1, 2]
        stats = client.get_inference_statistics("identity")["model_stats"][0]["inference_stats"]
        assert stats["cache_hit"]["count"] == 1
        assert "'--cache-config=local,size=1048576'" in server.log()
    code, output = _serve_until_exit(tmp_path, "--grpc-max-response-pool-size=0")
    assert code != 0 and "must be greater than 0" in output
