"""`--frontend-processes 2`: HTTP served by two frontend processes in front of the core process.

Inference is decoded and encoded in a frontend and run in the core; every other route (and an
infer request only the core can decode) is forwarded whole to the core's own app. What a client
sees must not change: the same answers, errors, log lines, statistics, shared memory,
repository control and cancellation as one process gives, and a frontend that dies is replaced.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import socket
import urllib.error
import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException

from tests.hardening import models
from tests.hardening.oracle import healthy_http, wait_until
from tests.helpers import Server, child_pids, free_ports


def frontend_pids(server: Server) -> set[int]:
    found = set()
    for pid in child_pids(server.process.pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"openinfer.frontends.processes.child" in f.read():
                    found.add(pid)
        except OSError:
            pass  # exited meanwhile
    return found


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = models.copy_examples(tmp_path_factory.mktemp("frontends") / "repo",
                                ("add_sub", "identity_fp32", "identity_bytes"))
    models.write_slow(repo)
    running = Server(repo, args=[
        "--frontend-processes", "2", "--log-verbose", "1", "--model-control-mode", "explicit", "--load-model", "*",
        "--allow-client-shm", "true",
    ]).start(wait_for="ready")
    yield running
    frontends = frontend_pids(running)
    assert running.stop() == 0, running.log()
    assert all(not os.path.exists(f"/proc/{pid}/cmdline") or _zombie(pid) for pid in frontends)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _post(server: Server, path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, bytes, dict]:
    request = urllib.request.Request(f"http://{server.http_url}{path}", data=body, method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read(), {k.lower(): v for k, v in answer.headers.items()}
    except urllib.error.HTTPError as error:
        return error.code, error.read(), {k.lower(): v for k, v in error.headers.items()}


def _add_sub(client: httpclient.InferenceServerClient, a: np.ndarray, b: np.ndarray, binary: bool) -> tuple:
    inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_data_from_numpy(a, binary_data=binary)
    inputs[1].set_data_from_numpy(b, binary_data=binary)
    outputs = [httpclient.InferRequestedOutput(name, binary_data=binary) for name in ("OUTPUT0", "OUTPUT1")]
    result = client.infer("add_sub", inputs, outputs=outputs)
    return result.as_numpy("OUTPUT0"), result.as_numpy("OUTPUT1")


def test_http_is_served_by_the_frontend_processes(server):
    assert len(frontend_pids(server)) == 2
    assert "Started HTTPService" in server.log()


def test_inferences_from_many_connections_are_answered_and_counted(server):
    client = httpclient.InferenceServerClient(server.http_url)
    before = client.get_inference_statistics("add_sub")["model_stats"][0]["inference_stats"]["success"]["count"]

    def calls(worker: int) -> int:
        own = httpclient.InferenceServerClient(server.http_url)  # a connection of its own
        rng = np.random.default_rng(worker)
        for i in range(25):
            a, b = rng.random(4, dtype=np.float32), rng.random(4, dtype=np.float32)
            total, difference = _add_sub(own, a, b, binary=bool(i % 2))
            np.testing.assert_array_equal(total, a + b)
            np.testing.assert_array_equal(difference, a - b)
        return 25

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answered = sum(pool.map(calls, range(8)))
    after = client.get_inference_statistics("add_sub")["model_stats"][0]["inference_stats"]["success"]["count"]
    assert answered == 200 and after - before == 200


def test_bytes_and_one_requested_output(server):
    client = httpclient.InferenceServerClient(server.http_url)
    words = np.array([[b"one", b"\x00two", b"drei"]], dtype=object)
    tensor = httpclient.InferInput("INPUT0", [1, 3], "BYTES")
    tensor.set_data_from_numpy(words)
    result = client.infer("identity_bytes", [tensor])
    assert result.as_numpy("OUTPUT0").tolist() == words.tolist()
    a, b = np.arange(4, dtype=np.float32), np.ones(4, dtype=np.float32)
    inputs = [httpclient.InferInput("INPUT0", [4], "FP32"), httpclient.InferInput("INPUT1", [4], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    result = client.infer("add_sub", inputs, outputs=[httpclient.InferRequestedOutput("OUTPUT1")])
    assert result.as_numpy("OUTPUT1").tolist() == (a - b).tolist()
    assert result.as_numpy("OUTPUT0") is None


def test_large_tensors_cross_both_ways(server):
    client = httpclient.InferenceServerClient(server.http_url)
    values = np.random.default_rng(1).random((1, 300_000), dtype=np.float32)
    for binary in (True, False):
        tensor = httpclient.InferInput("INPUT0", list(values.shape), "FP32")
        tensor.set_data_from_numpy(values, binary_data=binary)
        result = client.infer("identity_fp32", [tensor],
                              outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)])
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), values)


def test_a_raw_binary_request_is_answered_through_the_core(server):
    values = np.arange(8, dtype=np.float32)
    status, body, headers = _post(server, "/v2/models/identity_fp32/infer", values.tobytes(),
                                  {"Inference-Header-Content-Length": "0"})
    assert status == 200, body
    header_length = int(headers["inference-header-content-length"])
    doc = json.loads(body[:header_length])
    assert doc["outputs"][0]["shape"] == [1, 8]
    assert np.frombuffer(body[header_length:], np.float32).tolist() == values.tolist()


def test_refusals_are_worded_and_logged_as_one_process_does(server):
    bad_shape = {"id": "shape-1", "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3]}]}
    status, body, _ = _post(server, "/v2/models/identity_fp32/infer", json.dumps(bad_shape).encode())
    assert status == 400
    assert "shape [1, 4] holds 4 elements" in json.loads(body)["error"]
    wrong_name = {"id": "name-1", "inputs": [{"name": "NOPE", "datatype": "FP32", "shape": [1, 1], "data": [1]}]}
    status, body, _ = _post(server, "/v2/models/identity_fp32/infer", json.dumps(wrong_name).encode())
    assert status == 400, body
    status, body, _ = _post(server, "/v2/models/missing/infer", b"{not json")
    assert status == 404
    assert json.loads(body)["error"] == "Request for unknown model: 'missing' is not found"
    status, _, _ = _post(server, "/v2/nowhere", b"")
    assert status == 404
    log = wait_until(lambda: server.log() if "[request id: name-1] Infer failed" in server.log() else "")
    assert "Infer failed: Request for unknown model: 'missing' is not found" in log


def test_system_shared_memory_in_and_out(server):
    client = httpclient.InferenceServerClient(server.http_url)
    values = np.arange(16, dtype=np.float32).reshape(1, 16)
    key_in, key_out = f"/fp_in_{os.getpid()}", f"/fp_out_{os.getpid()}"
    region_in = shm.create_shared_memory_region("fp_in", key_in, values.nbytes)
    region_out = shm.create_shared_memory_region("fp_out", key_out, values.nbytes)
    try:
        shm.set_shared_memory_region(region_in, [values])
        client.register_system_shared_memory("fp_in", key_in, values.nbytes)
        client.register_system_shared_memory("fp_out", key_out, values.nbytes)
        assert {r["name"] for r in client.get_system_shared_memory_status()} >= {"fp_in", "fp_out"}
        tensor = httpclient.InferInput("INPUT0", [1, 16], "FP32")
        tensor.set_shared_memory("fp_in", values.nbytes)
        output = httpclient.InferRequestedOutput("OUTPUT0")
        output.set_shared_memory("fp_out", values.nbytes)
        result = client.infer("identity_fp32", [tensor], outputs=[output])
        assert result.get_output("OUTPUT0")["shape"] == [1, 16] and "data" not in result.get_output("OUTPUT0")
        written = shm.get_contents_as_numpy(region_out, np.float32, [1, 16])
        assert written.tolist() == values.tolist()
    finally:
        client.unregister_system_shared_memory()
        shm.destroy_shared_memory_region(region_in)
        shm.destroy_shared_memory_region(region_out)


def test_repository_control_through_a_frontend(server):
    client = httpclient.InferenceServerClient(server.http_url)
    client.unload_model("add_sub")
    wait_until(lambda: not client.is_model_ready("add_sub"))
    with pytest.raises(InferenceServerException):
        _add_sub(client, np.ones(4, np.float32), np.ones(4, np.float32), binary=True)
    client.load_model("add_sub")
    assert client.is_model_ready("add_sub")
    healthy_http(server.http_url)


def test_a_client_that_leaves_cancels_its_request_in_the_core(server):
    model_dir = server.repository / "slow"
    running = _slow_request(server.http_port, "leaving", 60)
    wait_until(lambda: "start leaving" in models.events(model_dir))
    running.close()
    wait_until(lambda: "cancelled leaving" in models.events(model_dir))
    assert "done leaving" not in models.events(model_dir)
    healthy_http(server.http_url)


def _slow_request(port: int, request_id: str, seconds: float) -> socket.socket:
    body = json.dumps({"id": request_id, "inputs": [{"name": "IN", "datatype": "FP32", "shape": [1], "data": [seconds]}]}).encode()
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"POST /v2/models/slow/infer HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode()
                 + b"\r\n\r\n" + body)
    return sock


def test_a_frontend_that_dies_is_replaced(server):
    before = frontend_pids(server)
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: len(frontend_pids(server) - before) == 1 and len(frontend_pids(server)) == 2)
    wait_until(lambda: f"HTTP frontend process {victim} exited" in server.log())
    for _ in range(10):  # new connections land on either process
        healthy_http(server.http_url)


def test_frontends_end_with_the_core_and_restrictions_hold(tmp_path):
    repo = models.copy_examples(tmp_path / "repo", ("add_sub",))
    running = Server(repo, args=["--frontend-processes", "2", "--http-restricted-api", "inference:infer-key=open"])
    running.start(wait_for="ready")
    try:
        doc = {"inputs": [{"name": f"INPUT{i}", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]} for i in (0, 1)]}
        status, body, _ = _post(running, "/v2/models/add_sub/infer", json.dumps(doc).encode())
        assert status == 403
        assert json.loads(body)["error"] == "This API is restricted, expecting header 'infer-key'"
        status, body, _ = _post(running, "/v2/models/add_sub/infer", json.dumps(doc).encode(), {"infer-key": "open"})
        assert status == 200 and json.loads(body)["outputs"][0]["data"] == [2, 4, 6, 8]
        frontends = frontend_pids(running)
        assert len(frontends) == 2
        running.process.kill()
        running.process.wait()
        wait_until(lambda: all(not os.path.exists(f"/proc/{pid}/cmdline") or _zombie(pid) for pid in frontends))
    finally:
        running.stop()


def test_an_http_port_already_taken_stops_the_server(tmp_path):
    repo = models.copy_examples(tmp_path / "repo", ("add_sub",))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        running = Server(repo, args=["--frontend-processes", "2"])
        with pytest.raises(RuntimeError, match="server exited early"):
            running.start(ports=(port, *free_ports(2)))
        assert running.process.returncode == 1
        assert f"failed to start HTTP service: Unavailable - Socket '127.0.0.1:{port}' already in use" in running.log()
