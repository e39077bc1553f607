"""A worker process lives exactly as long as its server needs it, as Triton's stubs do: a
signal meant for the server's process group (Ctrl-C, a supervisor's SIGTERM) leaves the model
to be finalized, and a model stuck in `execute` does not outlive a server that died."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from openinfer.backends.python import shm_names
from tests.helpers import Server, child_pids, write_model

CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""

# Writes its pid when it starts executing; IN < 0 makes it spin forever.
MODEL = '''
import os, time
import triton_python_backend_utils as pb_utils

HERE = os.path.dirname(__file__)


class TritonPythonModel:
    def execute(self, requests):
        with open(os.path.join(HERE, "pid"), "w") as f:
            f.write(str(os.getpid()))
        out = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            while data[0] < 0:
                time.sleep(0.05)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", data)]))
        return out

    def finalize(self):
        with open(os.path.join(HERE, "finalized"), "w") as f:
            f.write("finalized")
'''


def _call(server: Server, value: float) -> np.ndarray:
    tensor = httpclient.InferInput("IN", [1], "FP32")
    tensor.set_data_from_numpy(np.array([value], np.float32))
    client = httpclient.InferenceServerClient(server.http_url, network_timeout=120)
    return client.infer("looper", [tensor]).as_numpy("OUT")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_signal_to_the_whole_process_group_still_finalizes_the_model(tmp_path):
    write_model(tmp_path, "looper", CONFIG, MODEL)
    server = Server(tmp_path, new_session=True).start(wait_for="ready")
    try:
        assert _call(server, 2.0).tolist() == [2.0]
        os.killpg(server.process.pid, signal.SIGTERM)  # what Ctrl-C or a supervisor sends
        assert server.process.wait(60) == 0, server.log()
    finally:
        server.stop()
    assert (tmp_path / "looper" / "1" / "finalized").read_text() == "finalized"


def test_a_worker_stuck_in_execute_ends_with_its_server(tmp_path):
    write_model(tmp_path, "looper", CONFIG, MODEL)
    server = Server(tmp_path).start(wait_for="ready")
    caller = threading.Thread(target=lambda: _safe_call(server), daemon=True)
    try:
        caller.start()
        pid_file = tmp_path / "looper" / "1" / "pid"
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        worker = int(pid_file.read_text())
        server.process.kill()  # the server dies while its worker spins in execute
        server.process.wait(30)
        deadline = time.monotonic() + 30
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(worker)
        assert _session_files(server) == []  # the worker took the killed server's files along
    finally:
        server.stop()


def test_idle_workers_of_a_killed_server_leave_no_shared_memory_behind(tmp_path):
    """As Triton's stubs do once their server is gone: nothing waits for the next server's
    clean-up (Triton's QA counts /dev/shm's files around a `kill -9` of the server)."""
    write_model(tmp_path, "looper", CONFIG + 'instance_group [ { count: 2 kind: KIND_CPU } ]', MODEL)
    server = Server(tmp_path).start(wait_for="ready")
    try:
        assert _call(server, 3.0).tolist() == [3.0]
        workers = child_pids(server.process.pid)
        assert len(workers) == 2 and _session_files(server)
        server.process.kill()
        server.process.wait(30)
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(pid) for pid in workers)
        assert _session_files(server) == []
    finally:
        server.stop()


def _session_files(server: Server) -> list[str]:
    """The shared-memory files of `server`'s session (named by its pid, `shm_names`)."""
    return [name for name in os.listdir(shm_names.SHM_DIR)
            if name.startswith(f"{shm_names.PREFIX}p{server.process.pid}-")]


def _safe_call(server: Server) -> None:
    try:
        _call(server, -1.0)
    except Exception:
        pass  # the server is killed under this request: it can only fail


def test_workers_are_labelled_as_tritons_stubs(tmp_path):
    """`pgrep -f triton_python_backend_stub` finds the workers, each named by its instance."""
    write_model(tmp_path, "looper", CONFIG + 'instance_group [ { count: 2 kind: KIND_CPU } ]', MODEL)
    with Server(tmp_path) as server:
        found = subprocess.run(["pgrep", "-f", "-P", str(server.process.pid), "triton_python_backend_stub"],
                               capture_output=True, text=True, check=True).stdout.split()
        names = sorted(Path(f"/proc/{pid}/cmdline").read_text().split("\0")[-2] for pid in found)
    assert names == ["looper_0_0", "looper_0_1"]
