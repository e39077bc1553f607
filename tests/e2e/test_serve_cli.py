"""`openinfer serve`: addresses, control modes, version policies, start-up table, graceful shutdown."""

from __future__ import annotations

import re
import signal
import socket
import threading
import time

import numpy as np
import openai
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.helpers import EXAMPLES, Server, free_port, write_model

SLOW = '''
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(1.5)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())])
                for r in requests]
'''
VERSIONED = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.version = float(args["model_version"])

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([self.version], dtype=np.float32))])
                for r in requests]
'''
IO = """
backend: "python"
input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""


def _ipv6_available() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


def _tensor(module=httpclient, values=(1.0,)):
    tensor = module.InferInput("IN", [len(values)], "FP32")
    tensor.set_data_from_numpy(np.array(values, dtype=np.float32))
    return tensor


@pytest.mark.skipif(not _ipv6_available(), reason="this machine has no IPv6 loopback")
def test_ipv6_addresses(tmp_path):
    write_model(tmp_path, "add_sub", (EXAMPLES / "add_sub" / "config.pbtxt").read_text(),
                (EXAMPLES / "add_sub" / "1" / "model.py").read_text())
    openai_port = free_port()
    server = Server(tmp_path, args=["--http-address", "ipv6:[::1]", "--grpc-address", "[::1]",
                                    "--openai-port", str(openai_port), "--openai-address", "ipv6:[::1]"], host="[::1]")
    server.start(wait_for="ready")
    try:
        assert f"Started HTTPService at ipv6:[::1]:{server.http_port}" in server.log()
        chat = openai.OpenAI(base_url=f"http://[::1]:{openai_port}/v1", api_key="unused")
        assert [model.id for model in chat.models.list()] == ["add_sub"]
        http = httpclient.InferenceServerClient(f"[::1]:{server.http_port}")
        grpc = grpcclient.InferenceServerClient(f"[::1]:{server.grpc_port}")
        assert http.is_server_ready() and grpc.is_server_ready()
        inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
        for t in inputs:
            t.set_data_from_numpy(np.ones(4, dtype=np.float32))
        assert http.infer("add_sub", inputs).as_numpy("OUTPUT0").tolist() == [2, 2, 2, 2]
    finally:
        assert server.stop() == 0


def test_sigterm_drains_in_flight_requests_then_exits_zero(tmp_path):
    write_model(tmp_path, "slow", IO, SLOW)
    server = Server(tmp_path).start(wait_for="ready")
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=30)
    result = {}

    def call():
        result["out"] = client.infer("slow", [_tensor(values=(4.0, 5.0))]).as_numpy("OUT")

    thread = threading.Thread(target=call)
    thread.start()
    time.sleep(0.5)  # the request is inside execute()
    server.process.send_signal(signal.SIGTERM)
    thread.join(20)
    assert server.process.wait(30) == 0
    np.testing.assert_array_equal(result["out"], [4.0, 5.0])
    assert "Shutting down" in server.log()


def test_version_policies(tmp_path):
    for version in (1, 2, 3):
        write_model(tmp_path, "latest", IO, VERSIONED, version=version)
        write_model(tmp_path, "all", IO + "version_policy: { all { } }", VERSIONED, version=version)
        write_model(tmp_path, "specific", IO + "version_policy: { specific { versions: [1, 3] } }", VERSIONED, version=version)
        write_model(tmp_path, "two_latest", IO + "version_policy: { latest { num_versions: 2 } }", VERSIONED, version=version)
    with Server(tmp_path) as server:
        client = httpclient.InferenceServerClient(server.http_url)

        def served(name):
            return client.get_model_metadata(name)["versions"]

        assert served("latest") == ["3"]
        assert served("all") == ["1", "2", "3"]
        assert served("specific") == ["1", "3"]
        assert served("two_latest") == ["2", "3"]
        assert client.infer("specific", [_tensor()]).as_numpy("OUT").tolist() == [3.0]
        assert client.infer("all", [_tensor()], model_version="2").as_numpy("OUT").tolist() == [2.0]
        with pytest.raises(InferenceServerException) as err:
            client.infer("specific", [_tensor()], model_version="2")
        assert "version 2 is not found" in err.value.message()


def test_explicit_mode_and_default_filename(tmp_path):
    write_model(tmp_path, "renamed", IO + 'default_model_filename: "custom.py"', None)
    (tmp_path / "renamed" / "1" / "custom.py").write_text(VERSIONED)
    write_model(tmp_path, "other", IO, VERSIONED)
    server = Server(tmp_path, args=["--model-control-mode", "explicit", "--load-model", "renamed"])
    with server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert client.is_model_ready("renamed")
        assert not client.is_model_ready("other")
        assert {"name": "other"} in client.get_model_repository_index()
        client.load_model("other")
        assert client.infer("other", [_tensor()]).as_numpy("OUT").tolist() == [1.0]
        client.unload_model("other")
        assert not client.is_model_ready("other")
        assert client.is_server_ready()  # unloaded models do not count against readiness


def test_load_is_refused_outside_explicit_mode(example_server):
    client = httpclient.InferenceServerClient(example_server.http_url)
    with pytest.raises(InferenceServerException) as err:
        client.load_model("add_sub")
    assert err.value.status() == "503"
    assert "explicit model load / unload is not allowed if polling is enabled" in err.value.message()


@pytest.mark.parametrize("flags, words", [
    (["--load-model", "x"], "--model-control-mode=explicit"),
    (["--http-max-input-size=0"], "Error: --http-max-input-size must be greater than 0."),
    (["--grpc-restricted-protocol=health:a=b", "--grpc-restricted-protocol=health:c=d"],
     "restricted protocol 'health' can not be specified in multiple config groups"),
    (["--grpc-restricted-protocol=model-reposit:a=b"], "unknown restricted protocol 'model-reposit'"),
    (["--http-restricted-api=model-reposit:a=b"], "unknown restricted api 'model-reposit'"),
])
def test_bad_flags_fail_at_start_in_tritonservers_words(tmp_path, flags, words):
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "openinfer", "serve", "--model-repository", str(tmp_path), *flags],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode != 0 and words in result.stderr


def test_bundled_repository_serves_every_model_ready(example_server):
    """What `make serve` serves: every model of examples/model_repository READY, server ready."""
    bundled = sorted(p.name for p in EXAMPLES.iterdir() if (p / "config.pbtxt").is_file())
    assert {"add_sub", "classifier_onnx", "pipeline"} <= set(bundled)
    http = httpclient.InferenceServerClient(example_server.http_url)
    index = {row["name"]: row for row in http.get_model_repository_index()}
    assert sorted(index) == bundled
    assert {name: row.get("state") for name, row in index.items()} == dict.fromkeys(bundled, "READY")
    assert all(http.is_model_ready(name) for name in bundled)
    assert http.is_server_ready()  # GET /v2/health/ready answers 200
    assert grpcclient.InferenceServerClient(example_server.grpc_url).is_server_ready()
    table = example_server.log().split("Started GRPCInferenceService")[0]
    for name in bundled:
        assert re.search(rf"\| {name} +\| 1 +\| READY +\|", table), table


def test_make_serve_installs_what_the_bundled_backends_need():
    """`make serve` runs `make install`: it must install the extra of every bundled backend."""
    from openinfer.core import config as configs

    extras = {"onnxruntime": "onnx", "pytorch": "torch", "transformers": "llm"}
    needed = set()
    for model_dir in EXAMPLES.iterdir():
        config = configs.parse_config_text((model_dir / "config.pbtxt").read_text())
        backend = configs.resolve_backend(config, model_dir / "1")
        if backend in extras:
            needed.add(extras[backend])
    assert "onnx" in needed
    makefile = (EXAMPLES.parents[1] / "Makefile").read_text()
    install = re.search(r"^install:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert install, makefile
    installed = re.search(r"pip install .*-e '?\.\[([a-z,]+)\]", install.group(1))
    assert installed and needed <= set(installed.group(1).split(",")), install.group(1)


BROKEN_INIT = '''
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("cannot start: missing weights")
'''


def _serve_until_exit(repo, *flags: str, timeout: float = 60):
    """Run `openinfer serve` on free ports, expecting it to exit by itself; (code, output, seconds)."""
    import subprocess
    import sys

    from tests.helpers import free_ports

    ports = [str(port) for port in free_ports(3)]
    command = [
        sys.executable, "-m", "openinfer", "serve", "--model-repository", str(repo),
        "--http-address", "127.0.0.1", "--grpc-address", "127.0.0.1",
        "--http-port", ports[0], "--grpc-port", ports[1], "--metrics-port", ports[2], *flags,
    ]
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    return result.returncode, result.stdout + result.stderr, time.monotonic() - started


def test_a_model_failing_at_start_up_stops_the_server_by_default(tmp_path):
    """`--exit-on-error` defaults to true, as in Triton: the server says why and exits non-zero."""
    write_model(tmp_path, "good", IO, SLOW)
    write_model(tmp_path, "broken_init", IO, BROKEN_INIT)
    write_model(tmp_path, "bad_config", IO + "this is not a config\n", BROKEN_INIT)
    code, output, seconds = _serve_until_exit(tmp_path)
    assert code == 1, output
    assert re.search(r"\| broken_init +\| 1 +\| UNAVAILABLE: .*cannot start: missing weights", output), output
    # A configuration that does not parse fails the poll: no state of its own, its reason logged.
    assert "Poll failed for model directory 'bad_config': failed to parse model configuration" in output
    assert not re.search(r"\| bad_config +\|", output), output
    assert (
        "error: creating server: Internal - failed to load all models ('bad_config', 'broken_init'; "
        in output
    ), output
    assert "--exit-on-error=false" in output and "Started HTTPService" not in output
    assert "successfully unloaded 'good'" in output  # what did load is unloaded on the way out
    assert seconds < 45, seconds


def test_a_missing_start_up_model_stops_the_server_in_explicit_mode(tmp_path):
    write_model(tmp_path, "good", IO, SLOW)
    code, output, _ = _serve_until_exit(
        tmp_path, "--model-control-mode=explicit", "--load-model=good", "--load-model=absent"
    )
    assert code == 1, output
    assert "failed to load 'absent', failed to poll from model repository" in output
    assert "failed to load all models ('absent';" in output


def test_exit_on_error_false_serves_the_models_that_loaded(tmp_path):
    write_model(tmp_path, "good", IO, SLOW)
    write_model(tmp_path, "broken_init", IO, BROKEN_INIT)
    with Server(tmp_path, ["--exit-on-error=false"]) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        assert client.is_server_live() and client.is_model_ready("good")
        assert not client.is_server_ready()  # strict readiness: a model is UNAVAILABLE
        index = {row["name"]: row for row in client.get_model_repository_index()}
        assert index["broken_init"]["state"] == "UNAVAILABLE"
        assert "cannot start: missing weights" in index["broken_init"]["reason"]
    assert server.process.returncode == 0


def test_a_model_whose_poll_fails_leaves_the_server_ready(tmp_path):
    """Triton's strict readiness counts the models that have a state; one whose configuration
    cannot be read never gets one. Here: no config.pbtxt while auto-completion is off."""
    write_model(tmp_path, "good", IO, SLOW)
    write_model(tmp_path, "no_config", IO, SLOW)
    (tmp_path / "no_config" / "config.pbtxt").unlink()
    with Server(tmp_path, ["--exit-on-error=false", "--strict-model-config=true"]).start(wait_for="ready") as server:
        for client in (httpclient.InferenceServerClient(server.http_url),
                       grpcclient.InferenceServerClient(server.grpc_url)):
            assert client.is_server_ready() and client.is_model_ready("good")
            with pytest.raises(InferenceServerException) as info:
                client.get_model_metadata("no_config")
            assert "Request for unknown model: 'no_config' is not found" in info.value.message()
        assert {"name": "no_config"} in httpclient.InferenceServerClient(server.http_url).get_model_repository_index()
    path = tmp_path / "no_config" / "config.pbtxt"
    assert f"failed to open text file for read {path}: No such file or directory" in server.log()


def test_a_missing_repository_exits_unless_exit_on_error_is_false(tmp_path):
    """As tritonserver: with the default `--exit-on-error` the server says why and exits 1; with
    `false` it serves anyway, neither live nor ready, and still answers server metadata."""
    import subprocess
    import sys

    from tests.helpers import free_ports, http_status, stop_process

    missing = tmp_path / "nowhere"
    code, output, _ = _serve_until_exit(missing)
    assert code == 1 and f"error: creating server: Internal - failed to stat file {missing}" in output

    http, grpc, metrics = free_ports(3)
    process = subprocess.Popen(
        [sys.executable, "-m", "openinfer", "serve", "--model-repository", str(missing), "--exit-on-error=false",
         "--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while http_status(f"http://127.0.0.1:{http}/v2") != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        for client in (httpclient.InferenceServerClient(f"localhost:{http}"),
                       grpcclient.InferenceServerClient(f"localhost:{grpc}")):
            assert not client.is_server_live() and not client.is_server_ready()
            metadata = client.get_server_metadata()
            assert (metadata["name"] if isinstance(metadata, dict) else metadata.name) == "triton"
    finally:
        stop_process(process)
    assert f"failed to stat file {missing}" in process.stdout.read().decode()
