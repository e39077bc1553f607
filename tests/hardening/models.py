"""Model repositories for the hardening tests: the example models plus models that misbehave.

Every model here is a Python-backend model written into a temporary repository; nothing is
downloaded. The faulty ones each do one wrong thing so a test can name what it proves.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.helpers import EXAMPLES, write_model

EXAMPLE_MODELS = ("add_sub", "identity_any", "identity_bytes", "identity_fp32", "repeat")


def copy_examples(repo: Path, names: tuple[str, ...] = EXAMPLE_MODELS) -> Path:
    """The bundled example models, copied so that nothing a test does touches the originals."""
    repo.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copytree(EXAMPLES / name, repo / name)
    return repo


ONE_FP32 = """
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""

# Works for `IN` seconds, checking is_cancelled() every 10 ms; writes what happened to a log
# in its version directory so a test can tell "cancelled" from "finished for nobody".
SLOW = '''
import os, time
import triton_python_backend_utils as pb_utils

LOG = os.path.join(os.path.dirname(__file__), "events.log")


def note(event):
    with open(LOG, "a") as f:
        f.write(event + "\\n")


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            note("start " + request.request_id())
            deadline = time.monotonic() + float(x.reshape(-1)[0])
            while time.monotonic() < deadline:
                if request.is_cancelled():
                    note("cancelled " + request.request_id())
                    break
                time.sleep(0.01)
            else:
                note("done " + request.request_id())
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
        return out
'''

# Decoupled: streams IN responses, one every 20 ms, stopping when its sender is cancelled.
STREAM = '''
import os, threading, time
import numpy as np
import triton_python_backend_utils as pb_utils

LOG = os.path.join(os.path.dirname(__file__), "events.log")


def note(event):
    with open(LOG, "a") as f:
        f.write(event + "\\n")


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            count = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
            threading.Thread(target=self.run, args=(request, count), daemon=True).start()
        return None

    def run(self, request, count):
        sender = request.get_response_sender()
        for i in range(count):
            if sender.is_cancelled():
                note("cancelled " + request.request_id() + " after " + str(i))
                return
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([i], np.float32))]))
            time.sleep(0.02)
        note("done " + request.request_id())
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''

STREAM_CONFIG = ONE_FP32 + "model_transaction_policy { decoupled: true }\n"

# One misbehaviour per value of IN; 0 answers correctly.
FAULTY = '''
import os, time
import numpy as np
import triton_python_backend_utils as pb_utils

HOARD = []


class TritonPythonModel:
    def execute(self, requests):
        x = pb_utils.get_input_tensor_by_name(requests[0], "IN").as_numpy()
        mode = int(x[0])
        if mode == 1:
            raise RuntimeError("model exploded")
        if mode == 2:
            return []  # wrong number of responses
        if mode == 3:
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1.5], np.float64))])]
        if mode == 4:
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.zeros((3, 2), np.float32))])]
        if mode == 5:
            return [pb_utils.InferenceResponse([pb_utils.Tensor("NOT_IN_CONFIG", x)])]
        if mode == 6:
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([object()], dtype=object))])]
        if mode == 7:
            return ["not a response"]
        if mode == 8:
            return None
        if mode == 9:
            time.sleep(60)  # hangs past execute_timeout_secs
        if mode == 10:
            os._exit(3)  # kills its own process
        if mode == 11:
            HOARD.append(bytearray(16 * 1024 * 1024))  # leaks 16 MiB per call
        if mode == 12:
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1 + 2j], np.complex128))])]
        if mode == 13:
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError("declined", pb_utils.TritonError.INVALID_ARG))]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]) for _ in requests]
'''

FAULTY_CONFIG = ONE_FP32 + 'parameters [ { key: "execute_timeout_secs" value: { string_value: "2" } } ]\n'

BROKEN_INIT = '''
class TritonPythonModel:
    def initialize(self, args):
        raise ValueError("cannot start: missing weights")

    def execute(self, requests):
        return []
'''


def write_slow(repo: Path, name: str = "slow", instances: int = 1, batching: bool = False) -> Path:
    config = ONE_FP32 + f"instance_group [ {{ count: {instances} kind: KIND_CPU }} ]\n"
    if batching:  # requests wait in the dynamic batcher's queue while the instance is busy
        config = config.replace("max_batch_size: 0", "max_batch_size: 4") + "dynamic_batching { }\n"
    return write_model(repo, name, config, SLOW)


def write_stream(repo: Path, name: str = "stream") -> Path:
    return write_model(repo, name, STREAM_CONFIG, STREAM)


def write_faulty(repo: Path, name: str = "faulty") -> Path:
    return write_model(repo, name, FAULTY_CONFIG, FAULTY)


def events(model_dir: Path) -> list[str]:
    log = model_dir / "1" / "events.log"
    return log.read_text().splitlines() if log.exists() else []
